-- lakefs/catalogexport/internal: helpers the catalog exporters share.
local url = require("net/url")
local pathlib = require("path")

local SHORT_DIGEST_LEN = 6

-- the first `len` (6) characters of a commit id
local function short_digest(digest, len)
  return string.sub(digest, 1, len or SHORT_DIGEST_LEN)
end

-- an iterator over the pages of a paginated lakeFS call: api_call(after) returns
-- (status code, response with pagination and results); each step yields results
local function lakefs_paginiated_api(api_call, after)
  local offset, more = after or "", true
  return function()
    if not more then
      return nil
    end
    local code, resp = api_call(offset)
    if code < 200 or code >= 300 then
      local message = type(resp) == "table" and resp.message or tostring(resp)
      error("lakeFS: api returned " .. tostring(code) .. ": " .. tostring(message))
    end
    more = resp.pagination.has_more
    offset = resp.pagination.next_offset
    return resp.results
  end
end

-- pages of objects of a ref
local function lakefs_object_pager(client, repo_id, ref, after, prefix, delimiter, page_size)
  return lakefs_paginiated_api(function(offset)
    return client.list_objects(repo_id, ref, offset, prefix or "", delimiter or "",
                               page_size or 1000)
  end, after)
end

-- the branch (or, on tag events, the tag) the event is about
local function ref_from_branch_or_tag(action_info)
  local event = action_info.event_type or ""
  local ref
  if event == "pre-create-tag" or event == "post-create-tag" then
    ref = action_info.tag_id
  else
    ref = action_info.branch_id
  end
  if ref == nil then
    error("unsupported event type: " .. event)
  end
  return ref
end

-- "s3://bucket/a/b" -> {protocol = "s3", bucket = "bucket", key = "a/b"}
local function parse_storage_uri(uri)
  local u = url.parse(uri)
  local key = u.path
  if string.sub(key, 1, 1) == "/" then
    key = string.sub(key, 2)
  end
  return {protocol = u.scheme, bucket = u.host, key = key}
end

-- where a commit's exports go:
-- <base_uri>/_lakefs/exported/<branch or tag>/<commit id, 6 chars>/
local function get_storage_uri_prefix(base_uri, commit_id, action_info)
  local ref = ref_from_branch_or_tag(action_info)
  return pathlib.join("/", base_uri, string.format("_lakefs/exported/%s/%s/", ref,
                                                   short_digest(commit_id)))
end

local function deepcopy(value)
  if type(value) ~= "table" then
    return value
  end
  local copy = {}
  for k, v in pairs(value) do
    copy[deepcopy(k)] = deepcopy(v)
  end
  return setmetatable(copy, getmetatable(value))
end

return {
  short_digest = short_digest,
  lakefs_paginiated_api = lakefs_paginiated_api,
  lakefs_object_pager = lakefs_object_pager,
  ref_from_branch_or_tag = ref_from_branch_or_tag,
  parse_storage_uri = parse_storage_uri,
  get_storage_uri_prefix = get_storage_uri_prefix,
  deepcopy = deepcopy,
}
