-- lakefs/catalogexport/hive: a Hive table's objects, partition by partition.
local pathlib = require("path")
local strings = require("strings")
local utils = require("lakefs/catalogexport/internal")

local DEFAULT_PAGE_SIZE = 1000

-- the partition of an object: its path up to and including the directory of the last
-- partition column ("<base>/type=cat/weight=10/"); the columns' directories come in
-- order, other directories may sit between them. "" when the table has no partition
-- columns, nil when the object is not in a partition.
local function partition_key(base, cols, rel)
  if #cols == 0 then
    return ""
  end
  local dirs = strings.split(rel, "/")
  local col, upto = 1, nil
  for i = 1, #dirs - 1 do -- the last part is the object's name
    local prefix = cols[col] .. "="
    if strings.has_prefix(dirs[i], prefix) and #dirs[i] > #prefix then
      col = col + 1
      if col > #cols then
        upto = i
        break
      end
    end
  end
  if upto == nil then
    return nil
  end
  return base .. table.concat(dirs, "/", 1, upto) .. "/"
end

-- an iterator over a table's partitions at a commit: each step gives the partition's
-- key (see partition_key) and its objects {physical_address, path, size, checksum}.
-- Hidden objects (a name or directory below base_path starting with "_") are left out.
local function extract_partition_pager(client, repo_id, commit_id, base_path,
                                       partition_cols, page_size)
  local cols = partition_cols or {}
  local base = base_path
  if base ~= "" and not strings.has_suffix(base, "/") then
    base = base .. "/"
  end
  local pages = utils.lakefs_object_pager(client, repo_id, commit_id, "", base, "",
                                          page_size or DEFAULT_PAGE_SIZE)
  local page, pos = {}, 1
  local function next_entry()
    while true do
      if page == nil then
        return nil
      end
      if pos <= #page then
        local entry = page[pos]
        pos = pos + 1
        local rel = string.sub(entry.path, #base + 1)
        if entry.path_type == "object" and not pathlib.is_hidden(rel) then
          return entry, rel
        end
      else
        page, pos = pages(), 1
      end
    end
  end
  local pending, pending_key = nil, nil
  return function()
    local key, entries = pending_key, {}
    if pending ~= nil then
      entries[1] = pending
      pending, pending_key = nil, nil
    end
    while true do
      local entry, rel = next_entry()
      if entry == nil then
        break
      end
      local k = partition_key(base, cols, rel)
      if k == nil then
        error("object " .. entry.path .. " is not in a partition of the table at " ..
              base_path .. " (partition columns: " .. table.concat(cols, ", ") .. ")")
      end
      local item = {physical_address = entry.physical_address, path = entry.path,
                    size = entry.size_bytes, checksum = entry.checksum}
      if key == nil then
        key = k
      end
      if k ~= key then
        pending, pending_key = item, k
        break
      end
      entries[#entries + 1] = item
    end
    if #entries == 0 then
      return nil
    end
    return key, entries
  end
end

return {
  extract_partition_pager = extract_partition_pager,
}
