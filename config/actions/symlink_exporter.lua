--[[
  Hive symlink exporter, for a post-commit or post-merge lua hook.

  For the event's commit, writes one symlink.txt per partition of a table: the
  physical addresses of the table's objects, one a line, which Athena, Trino or Hive
  read as a "SymlinkTextInputFormat" table. The files go to

    <export base>/_lakefs/exported/<branch or tag>/<commit id, 6 chars>/<table>/<partition>/symlink.txt

  (no <partition> level for an unpartitioned table), where <export base> is
  args.export_base_uri or else the repository's storage namespace (s3:// only).

  args:
    table_source     the table descriptor in the repository, e.g.
                     _lakefs_tables/animals.yaml with
                       name: animals
                       type: hive
                       path: tables/animals
                       partition_columns: [type]
    export_base_uri  (optional) s3://bucket/prefix to write under
    aws              access_key_id, secret_access_key, region, endpoint (optional)
]]

local lakefs = require("lakefs")
local aws = require("aws")
local yaml = require("encoding/yaml")
local pathlib = require("path")
local strings = require("strings")

local repo = action.repository_id
local commit_id = action.commit_id
if commit_id == nil then
  error("the symlink exporter runs on events with a commit (post-commit, post-merge)")
end

local function read_descriptor(source)
  local code, body = lakefs.get_object(repo, commit_id, source)
  if code ~= 200 then
    error("table descriptor " .. source .. ": status " .. code .. " " .. body)
  end
  local d = yaml.unmarshal(body)
  if d.type ~= "hive" then
    error("table " .. tostring(d.name) .. ": type " .. tostring(d.type) .. " is not exported")
  end
  if d.name == nil or d.path == nil then
    error("table descriptor " .. source .. ": name and path are required")
  end
  d.partition_columns = d.partition_columns or {}
  return d
end

-- "s3://bucket/some/prefix" -> "bucket", "some/prefix"
local function parse_s3_uri(uri)
  local bucket, key = string.match(uri, "^s3://([^/]+)/?(.*)$")
  if bucket == nil then
    error("cannot export to " .. uri .. ": an s3:// location is required")
  end
  return bucket, key
end

-- the partition of an object: its first directories below the table's path, which
-- must be "<column>=<value>" for each partition column in order
local function partition_of(descriptor, rel_path)
  local parts = strings.split(rel_path, "/")
  local cols = descriptor.partition_columns
  local key = {}
  for i, col in ipairs(cols) do
    local part = parts[i]
    if part == nil or i == #parts or not strings.has_prefix(part, col .. "=") then
      error("object " .. rel_path .. " of table " .. descriptor.name ..
            " is not in a partition " .. col .. "=<value>")
    end
    key[i] = part
  end
  return table.concat(key, "/")
end

local function export(descriptor)
  local ref = action.branch_id or action.tag_id or commit_id
  local base = args.export_base_uri or action.storage_namespace
  local bucket, base_key = parse_s3_uri(base)
  local creds = args.aws or {}
  local s3 = aws.s3_client(creds.access_key_id or "", creds.secret_access_key or "",
                           creds.region or "us-east-1", creds.endpoint)
  local export_key = pathlib.join("/", base_key, "_lakefs/exported", ref,
                                  string.sub(commit_id, 1, 6), descriptor.name)
  local table_prefix = descriptor.path
  if not strings.has_suffix(table_prefix, "/") then table_prefix = table_prefix .. "/" end

  local written = 0
  local current, lines = nil, {}
  local function flush()
    if current == nil or #lines == 0 then return end
    local key = pathlib.join("/", export_key, current, "symlink.txt")
    if current == "" then key = pathlib.join("/", export_key, "symlink.txt") end
    s3.put_object(bucket, key, table.concat(lines, "\n") .. "\n")
    print("wrote s3://" .. bucket .. "/" .. key .. " (" .. #lines .. " objects)")
    written = written + 1
  end

  local after = ""
  repeat
    local code, page = lakefs.list_objects(repo, commit_id, after, table_prefix, "", 1000)
    if code ~= 200 then error("listing " .. table_prefix .. ": status " .. code) end
    for _, obj in ipairs(page.results) do
      local rel = string.sub(obj.path, #table_prefix + 1)
      if not pathlib.is_hidden(rel) then
        local part = partition_of(descriptor, rel)
        if part ~= current then
          flush()
          current, lines = part, {}
        end
        lines[#lines + 1] = obj.physical_address
      end
      after = obj.path
    end
  until not page.pagination.has_more
  flush()
  return written
end

local descriptor = read_descriptor(args.table_source)
local n = export(descriptor)
print("exported table " .. descriptor.name .. " of commit " .. commit_id .. ": " .. n ..
      " symlink files")
