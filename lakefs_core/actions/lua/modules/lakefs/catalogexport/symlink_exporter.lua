-- lakefs/catalogexport/symlink_exporter: a Hive table as SymlinkTextInputFormat files.
--
-- For the event's commit, one symlink.txt per partition (the physical addresses of its
-- objects, one a line) under
--   <storage namespace or options.export_base_uri>/_lakefs/exported/<ref>/<commit, 6>/
--     <table name>/<partition dirs>/symlink.txt
-- (<table name>/symlink.txt for a table without partition columns).
local extractor = require("lakefs/catalogexport/table_extractor")
local hive = require("lakefs/catalogexport/hive")
local utils = require("lakefs/catalogexport/internal")
local pathlib = require("path")
local lakefs = require("lakefs")

-- each step: {key_suffix = "<table>/<partition>/symlink.txt", data = "<addresses>\n"}
local function symlinks(repo_id, commit_id, table_src_path, opts)
  local descriptor = extractor.get_table_descriptor(lakefs, repo_id, commit_id,
                                                    table_src_path)
  if descriptor.type ~= "hive" then
    error("table " .. tostring(descriptor.type) .. " in path " .. table_src_path ..
          " not supported")
  end
  if descriptor.name == nil or descriptor.path == nil then
    error("table descriptor " .. table_src_path .. ": name and path are required")
  end
  if opts.debug then
    print(string.format("%s table `lakefs://%s/%s/%s`", descriptor.type, repo_id,
                        utils.short_digest(commit_id), descriptor.path))
  end
  local base = descriptor.path
  if base ~= "" and string.sub(base, -1) ~= "/" then
    base = base .. "/"
  end
  local pager = hive.extract_partition_pager(lakefs, repo_id, commit_id, descriptor.path,
                                             descriptor.partition_columns)
  return function()
    local key, entries = pager()
    if key == nil then
      return nil
    end
    local lines = {}
    for i, entry in ipairs(entries) do
      lines[i] = entry.physical_address
    end
    local suffix
    if key == "" then
      suffix = pathlib.join("/", descriptor.name, "symlink.txt")
    else
      local partition = string.sub(key, #base + 1)
      suffix = pathlib.join("/", descriptor.name, partition, "symlink.txt")
    end
    return {key_suffix = suffix, data = table.concat(lines, "\n") .. "\n"}
  end
end

--[[
  export_s3(s3_client, table_src_path, action_info [, options]): write the symlink
  files of the table described at table_src_path (_lakefs_tables/<table>.yaml) for
  action_info's commit. options: debug (print what is written), export_base_uri
  (s3://bucket/prefix/ instead of the storage namespace), writer (a
  function(bucket, key, data) used instead of s3_client.put_object).
  Returns {location = {protocol, bucket, key}} of the commit's export prefix.
]]
local function export_s3(s3_client, table_src_path, action_info, options)
  local opts = options or {}
  local repo_id, commit_id = action_info.repository_id, action_info.commit_id
  if commit_id == nil then
    error("symlink export needs an event with a commit (post-commit, post-merge, ...)")
  end
  local base_uri = opts.export_base_uri or action_info.storage_namespace
  local location = utils.parse_storage_uri(
    utils.get_storage_uri_prefix(base_uri, commit_id, action_info))
  if location.bucket == nil or location.bucket == "" then
    error("cannot export to " .. tostring(base_uri) .. ": a bucket is required")
  end
  local put_object = opts.writer
  if put_object == nil then
    if location.protocol ~= "s3" then
      error("cannot export to " .. tostring(base_uri) .. ": only s3:// is supported")
    end
    put_object = s3_client.put_object
  end
  for symlink in symlinks(repo_id, commit_id, table_src_path, opts) do
    local key = pathlib.join("/", location.key, symlink.key_suffix)
    if opts.debug then
      print("S3 writing bucket: " .. location.bucket .. " key: " .. key)
    end
    put_object(location.bucket, key, symlink.data)
  end
  return {location = location}
end

return {
  export_s3 = export_s3,
}
