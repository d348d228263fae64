-- lakefs/catalogexport/table_extractor: the table descriptors under _lakefs_tables/.
local pathlib = require("path")
local strings = require("strings")
local yaml = require("encoding/yaml")
local utils = require("lakefs/catalogexport/internal")

local TABLES_BASE = "_lakefs_tables/"

-- {physical_address, path} of every YAML descriptor under _lakefs_tables/ (hidden
-- files and directories, those starting with "_", left out)
local function list_table_descriptor_entries(client, repo_id, commit_id)
  local found = {}
  for page in utils.lakefs_object_pager(client, repo_id, commit_id, "", TABLES_BASE, "") do
    for _, entry in ipairs(page) do
      local rel = string.sub(entry.path, #TABLES_BASE + 1)
      if entry.path_type == "object" and strings.has_suffix(rel, ".yaml")
          and not pathlib.is_hidden(rel) then
        found[#found + 1] = {physical_address = entry.physical_address, path = entry.path}
      end
    end
  end
  return found
end

-- the descriptor at logical_path as a table; partition_columns is {} when not given
local function get_table_descriptor(client, repo_id, commit_id, logical_path)
  local code, content = client.get_object(repo_id, commit_id, logical_path)
  if code ~= 200 then
    error("could not fetch table descriptor " .. logical_path .. ": HTTP " .. tostring(code))
  end
  local descriptor = yaml.unmarshal(content)
  if type(descriptor) ~= "table" then
    error("table descriptor " .. logical_path .. " is not a YAML mapping")
  end
  descriptor.partition_columns = descriptor.partition_columns or {}
  return descriptor
end

return {
  list_table_descriptor_entries = list_table_descriptor_entries,
  get_table_descriptor = get_table_descriptor,
}
