-- lakefs/catalogexport/glue_exporter: a Hive table of a commit as an AWS Glue table
-- whose location is the table's symlink export (see symlink_exporter).
local pathlib = require("path")
local json = require("encoding/json")
local lakefs = require("lakefs")
local extractor = require("lakefs/catalogexport/table_extractor")
local utils = require("lakefs/catalogexport/internal")

-- <table>_<repository>_<branch or tag>_<commit id, 6 chars>
local function get_full_table_name(descriptor, action_info)
  return string.format("%s_%s_%s_%s", descriptor.name, action_info.repository_id,
                       utils.ref_from_branch_or_tag(action_info),
                       utils.short_digest(action_info.commit_id))
end

-- Hive type names Glue spells differently
local GLUE_TYPES = {integer = "int"}

local function glue_column(field)
  local comment = field.comment
  if comment == nil and type(field.metadata) == "table" then
    comment = field.metadata.comment
  end
  return {Name = field.name, Type = GLUE_TYPES[field.type] or field.type,
          Comment = comment, Parameters = field.parameters}
end

local function schema_fields(descriptor)
  if type(descriptor.schema) ~= "table" or type(descriptor.schema.fields) ~= "table" then
    return {}
  end
  return descriptor.schema.fields
end

-- the partition keys, in the descriptor's partition order, and the other columns
local function glue_columns(descriptor)
  local by_name, is_partition = {}, {}
  for _, field in ipairs(schema_fields(descriptor)) do
    by_name[field.name] = field
  end
  local partitions = {}
  for _, name in ipairs(descriptor.partition_columns) do
    local field = by_name[name]
    if field == nil then
      error(string.format("partition name `%s` not found in table `%s`", name,
                          tostring(descriptor.name)))
    end
    partitions[#partitions + 1] = glue_column(field)
    is_partition[name] = true
  end
  local columns = {}
  for _, field in ipairs(schema_fields(descriptor)) do
    if not is_partition[field.name] then
      columns[#columns + 1] = glue_column(field)
    end
  end
  return columns, partitions
end

--[[
  export_glue(glue, db, table_src_path, create_table_input, action_info [, options]):
  create a Glue table for the Hive table described at table_src_path, located at the
  commit's symlink export. create_table_input is the AWS TableInput describing the data
  format (StorageDescriptor's InputFormat, OutputFormat, SerdeInfo, Parameters); the
  exporter sets Name, PartitionKeys, TableType, StorageDescriptor.Columns and Location.
  options: table_name (instead of get_full_table_name), debug, export_base_uri (where
  the symlinks were exported), create_db_input (create the database if missing).
  Returns {table_input = the input the table was created with}.
]]
local function export_glue(glue, db, table_src_path, create_table_input, action_info,
                           options)
  local opts = options or {}
  if action_info.commit_id == nil then
    error("glue export needs an event with a commit (post-commit, post-merge, ...)")
  end
  local descriptor = extractor.get_table_descriptor(lakefs, action_info.repository_id,
                                                    action_info.commit_id, table_src_path)
  if descriptor.type ~= "hive" then
    error("table " .. tostring(descriptor.type) .. " in path " .. table_src_path ..
          " not supported")
  end
  local base_uri = opts.export_base_uri or action_info.storage_namespace
  local location = pathlib.join("/", utils.get_storage_uri_prefix(
    base_uri, action_info.commit_id, action_info), descriptor.name)
  local columns, partitions = glue_columns(descriptor)

  if opts.create_db_input ~= nil then
    glue.create_database(db, {error_on_already_exists = false,
                              create_db_input = opts.create_db_input})
    if opts.debug then
      print("success creating / verifying glue database")
    end
  end

  local input = utils.deepcopy(create_table_input or {})
  input.Name = opts.table_name or get_full_table_name(descriptor, action_info)
  input.PartitionKeys = array(partitions)
  input.TableType = "EXTERNAL_TABLE"
  input.StorageDescriptor = input.StorageDescriptor or {}
  input.StorageDescriptor.Columns = array(columns)
  input.StorageDescriptor.Location = location
  local json_input = json.marshal(input)
  if opts.debug then
    print("Creating Glue Table - input:", json_input)
  end
  glue.create_table(db, json_input)
  return {table_input = input}
end

return {
  get_full_table_name = get_full_table_name,
  export_glue = export_glue,
}
