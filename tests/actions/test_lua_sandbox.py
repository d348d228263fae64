"""The Lua sandbox and its pure library modules (no server needed)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from lupa import lua52

from lakefs_core.actions.lua.library import MODULES, path_join
from lakefs_core.actions.lua.sandbox import LuaLimits, LuaSandbox, LuaTimeoutError


def _sandbox(timeout: float = 5.0, max_memory: int = 32 << 20) -> LuaSandbox:
    return LuaSandbox(LuaLimits(timeout=timeout, max_memory=max_memory), MODULES)


def test_modules_and_values_cross_as_lakefs_gives_them() -> None:
    sb = _sandbox()
    sb.set_global("args", {"table": "animals", "columns": ["a", "b"]})
    sb.run(rb"""
local json = require("encoding/json")
local path = require("path")
local strings = require("strings")
local sha256 = require("crypto/sha256")
local hex = require("encoding/hex")
local base64 = require("encoding/base64")
local regexp = require("regexp")
print(path.join("/", "s3://bucket/ns", "_lakefs/exported/", "/main/", "t", "symlink.txt"))
local parsed = path.parse("tables/animals/p=1/a.parquet")
print(parsed.parent, parsed.base_name, path.is_hidden("a/_b/c"), path.is_hidden("a/b"))
print(#strings.split("a,b,c", ","), strings.replace("xxx", "x", "y", 2),
      strings.has_prefix("abc", "ab"), strings.trim("  t  "))
print(hex.encode(sha256.digest("abc")):sub(1, 8), base64.encode("hi"))
print(regexp.match("^[0-9]+$", "123"), regexp.compile("a(.)").find_submatch("xab")[2])
print(json.marshal({name = args.table, cols = args.columns, n = 3, empty = array({})}))
local back = json.unmarshal('{"x": [1, 2, {"y": true}]}')
print(back.x[3].y, #back.x)
""")
    assert sb.output[0] == "s3://bucket/ns/_lakefs/exported/main/t/symlink.txt"
    assert sb.output[1] == "tables/animals/p=1/\ta.parquet\ttrue\tfalse"
    assert sb.output[2] == "3\tyyx\ttrue\tt"
    assert sb.output[3] == "ba7816bf\taGk="
    assert sb.output[4] == "true\tb"
    assert json.loads(sb.output[5]) == {"name": "animals", "cols": ["a", "b"], "n": 3,
                                        "empty": []}
    assert sb.output[6] == "true\t3"
    assert path_join("/", "a", "b/") == "a/b/"


@pytest.mark.parametrize("script", [
    b"io.open('/etc/passwd')",
    b"os.execute('true')",
    b"require('os')",
    b"debug.sethook()",
    b"load('return 1')()",
    b"dofile('/etc/passwd')",
    b"string.dump(print)",
    b"python.eval('1')",
    b"local m = require('strings'); return m.split.__globals__",
])
def test_nothing_outside_the_sandbox_is_reachable(script: bytes) -> None:
    with pytest.raises(lua52.LuaError):
        _sandbox().run(script)


def test_bytecode_is_refused() -> None:
    with pytest.raises(lua52.LuaError, match="binary chunks"):
        _sandbox().run(b"\x1bLuaR\x00")


def test_time_bound_holds_even_through_pcall() -> None:
    sb = _sandbox(timeout=0.2)
    with pytest.raises(LuaTimeoutError, match="timed out after 0.2s"):
        sb.run(b"while true do pcall(function() while true do end end) end")


def test_memory_bound() -> None:
    with pytest.raises(lua52.LuaMemoryError):
        _sandbox(max_memory=8 << 20).run(
            b"local t = {} for i = 1, 1e7 do t[i] = string.rep('x', 64) .. i end")


def test_library_errors_are_lua_errors_at_the_callers_line() -> None:
    sb = _sandbox()
    sb.run(b"""
local ok, err = pcall(function() return require("encoding/base64").decode("%%%") end)
print(ok, type(err))
""")
    assert sb.output == ["false\tstring"]
    with pytest.raises(lua52.LuaError, match="module 'nope' not found"):
        sb.run(b"require('nope')")


def _fake_lakefs(objects: dict[str, str]) -> Any:
    """A stand-in for the ``lakefs`` module over a dict of path -> physical address
    (pages of two, to exercise the pagination)."""
    def list_objects(_repo: bytes, _ref: bytes, after: bytes = b"", prefix: bytes = b"",
                     _delimiter: bytes = b"", amount: int = 1000) -> tuple[int, Any]:
        paths = sorted(p for p in objects if p.startswith(prefix.decode())
                       and p > after.decode())
        page = paths[:2]
        return 200, {"pagination": {"has_more": len(paths) > 2,
                                    "next_offset": page[-1] if page else ""},
                     "results": [{"path": p, "path_type": "object", "size_bytes": 1,
                                  "checksum": "c", "physical_address": objects[p]}
                                 for p in page]}

    def get_object(_repo: bytes, _ref: bytes, path: bytes) -> tuple[int, str]:
        return (200, objects[path.decode()]) if path.decode() in objects else (404, "")

    return lambda _sb: {"list_objects": list_objects, "get_object": get_object}


def test_symlink_exporter_library_writes_one_file_per_partition() -> None:
    objects = {
        "_lakefs_tables/animals.yaml": "name: animals\ntype: hive\npath: t/animals\n"
                                       "partition_columns: [type, weight]\n",
        "_lakefs_tables/flat.yaml": "name: flat\ntype: hive\npath: t/flat\n",
        "_lakefs_tables/_hidden.yaml": "", "_lakefs_tables/notes.txt": "",
        "t/animals/type=cat/weight=1/a": "s3://b/ns/1", "t/animals/type=cat/weight=1/b":
        "s3://b/ns/2", "t/animals/type=cat/weight=1/_tmp": "s3://b/ns/x",
        "t/animals/_SUCCESS": "s3://b/ns/y",
        "t/animals/data.parquet/type=dog/weight=3/c": "s3://b/ns/3",
        "t/animals_v2/type=cat/weight=1/d": "s3://b/ns/4",
        "t/flat/a": "s3://b/ns/5", "t/flat/b": "s3://b/ns/6",
    }
    sb = LuaSandbox(LuaLimits(timeout=5), {**MODULES, "lakefs": _fake_lakefs(objects)})
    sb.set_global("action", {"repository_id": "r", "commit_id": "abcdef123456",
                             "branch_id": "main", "event_type": "post-commit",
                             "storage_namespace": "s3://b/ns"})
    sb.run(rb"""
local exporter = require("lakefs/catalogexport/symlink_exporter")
local extractor = require("lakefs/catalogexport/table_extractor")
for _, e in ipairs(extractor.list_table_descriptor_entries(require("lakefs"), "r", "c")) do
  print("table", e.path)
end
local function writer(bucket, key, data) print(bucket, key, data) end
local res = exporter.export_s3(nil, "_lakefs_tables/animals.yaml", action, {writer = writer})
print(res.location.protocol, res.location.bucket, res.location.key)
exporter.export_s3(nil, "_lakefs_tables/flat.yaml", action,
                   {writer = writer, export_base_uri = "s3://other/x/"})
""")
    assert sb.output == [
        "table\t_lakefs_tables/animals.yaml", "table\t_lakefs_tables/flat.yaml",
        "b\tns/_lakefs/exported/main/abcdef/animals/data.parquet/type=dog/weight=3/"
        "symlink.txt\ts3://b/ns/3\n",
        "b\tns/_lakefs/exported/main/abcdef/animals/type=cat/weight=1/symlink.txt\t"
        "s3://b/ns/1\ns3://b/ns/2\n",
        "s3\tb\tns/_lakefs/exported/main/abcdef/",
        "other\tx/_lakefs/exported/main/abcdef/flat/symlink.txt\ts3://b/ns/5\ns3://b/ns/6\n",
    ]

    objects["t/animals/loose.csv"] = "s3://b/ns/7"
    with pytest.raises(lua52.LuaError, match="t/animals/loose.csv is not in a partition"):
        sb.run(b'require("lakefs/catalogexport/symlink_exporter").export_s3('
               b'nil, "_lakefs_tables/animals.yaml", action, {writer = print})')


@pytest.fixture
def http_echo() -> Any:
    """A loopback HTTP server answering each request with what it received."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Echo(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            if self.path == "/slow":
                time.sleep(1.5)
            length = int(self.headers.get("Content-Length") or 0)
            body = json.dumps({"method": self.command, "path": self.path,
                               "type": self.headers.get("Content-Type"),
                               "body": self.rfile.read(length).decode()}).encode()
            self.send_response(201 if self.command == "POST" else 200)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("X-Many", "a")
            self.send_header("X-Many", "b")
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PUT = _answer  # noqa: N815

        def log_message(self, *args: Any) -> None:
            pass

    class Quiet(ThreadingHTTPServer):
        def handle_error(self, *args: Any) -> None:
            pass  # the client that gave up on /slow is gone

    httpd = Quiet(("127.0.0.1", 0), Echo)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def test_net_http_requests_as_lakefs_documents_them(http_echo: str) -> None:
    from lakefs_core.actions.lua.library import net_http

    sb = LuaSandbox(LuaLimits(timeout=5), {**MODULES, "net/http": net_http})
    sb.set_global("base", http_echo)
    sb.run(rb"""
local http = require("net/http")
local json = require("encoding/json")
local code, body, headers, status = http.request(base .. "/get?x=1")
print(code, status, json.unmarshal(body).method, json.unmarshal(body).path, #headers["X-Many"])
code, body = http.request(base .. "/form", "a=1")
print(code, json.unmarshal(body).method, json.unmarshal(body).body)
code, body = http.request{url = base .. "/put", method = "PUT", body = "custname=tester",
                          headers = {["Content-Type"] = "application/x-www-form-urlencoded"}}
local got = json.unmarshal(body)
print(code, got.method, got.type, got.body)
print(pcall(http.request, "file:///etc/passwd"))
print(pcall(http.request, "http://127.0.0.1:1/refused"))
""")
    assert sb.output[0] == "200\t200 OK\tGET\t/get?x=1\t2"
    assert sb.output[1] == "201\tPOST\ta=1"
    assert sb.output[2] == "200\tPUT\tapplication/x-www-form-urlencoded\tcustname=tester"
    assert sb.output[3].startswith("false\t") and "only http and https" in sb.output[3]
    assert sb.output[4].startswith("false\t") and "request: " in sb.output[4]
    # a request never outlives the script's deadline
    slow = LuaSandbox(LuaLimits(timeout=0.3), {**MODULES, "net/http": net_http})
    slow.set_global("base", http_echo)
    with pytest.raises(lua52.LuaError, match="timed out"):
        slow.run(b'require("net/http").request(base .. "/slow")')
    # not there unless the server's config enables it
    with pytest.raises(lua52.LuaError, match="module 'net/http' not found"):
        _sandbox().run(b'require("net/http")')


def test_time_functions_take_go_layouts() -> None:
    sb = _sandbox(timeout=0.5)
    sb.run(rb"""
local time = require("time")
local t = time.parse("2006-01-02 15:04:05.000 -0700", "2023-11-14 14:13:20.123 -0800")
print(string.format("%.0f", t))
print(time.format(t, "Mon Jan _2 15:04:05 MST 2006", "UTC"))
print(time.format_iso(t, "America/Los_Angeles"), time.formatISO(t, "UTC"))
print(string.format("%.0f", time.add(t, {hour = 1, second = 5}) - t))
print(string.format("%.0f", time.parse_iso("2023-11-14T22:13:20+00:00")),
      string.format("%.0f", time.parse_iso("2023-11-14T22:13:20Z")))
print(pcall(time.parse, "2006-01-02", "14/11/2023"))
print(pcall(time.format, t, "15:04", "Mars/Olympus"))
""")
    assert sb.output[0] == "1700000000123000064"  # a float64 of nanoseconds, as in lakeFS
    assert sb.output[1] == "Tue Nov 14 22:13:20 UTC 2023"
    assert sb.output[2] == "2023-11-14T14:13:20-08:00\t2023-11-14T22:13:20+00:00"
    assert sb.output[3] == "3605000000000"
    assert sb.output[4] == "1700000000000000000\t1700000000000000000"
    assert sb.output[5].endswith('parsing time "14/11/2023" as "2006-01-02": cannot parse')
    assert sb.output[6].endswith("unknown time zone Mars/Olympus")
    # sleeping never outlasts the script's time
    with pytest.raises(LuaTimeoutError):
        sb.run(b'require("time").sleep(60 * 1e9) while true do end')


def test_aes_cbc_round_trip() -> None:
    sb = _sandbox()
    sb.run(rb"""
local aes = require("crypto/aes")
local key = "0123456789abcdef0123456789abcdef"
local c1, c2 = aes.encryptCBC(key, "secret"), aes.encryptCBC(key, "secret")
print(#c1, c1 ~= c2, aes.decryptCBC(key, c1))
print(pcall(aes.decryptCBC, key, string.sub(c1, 1, 20)))
print(pcall(aes.encryptCBC, "short", "x"))
""")
    assert sb.output[0] == "32\ttrue\tsecret"  # IV + one block
    assert sb.output[1].startswith("false\t") and "not a whole number of blocks" in sb.output[1]
    assert sb.output[2].startswith("false\t") and "invalid key size 5" in sb.output[2]
