"""A Lua 5.2 state (lakeFS's hooks run on a Lua 5.2 VM) that a hook's script cannot
leave, time-bounded and memory-bounded.

These bounds hold while Lua code runs; a library call (Python), a C pattern function
(``string.find``) or a ``__gc`` finalizer runs outside them. The server therefore runs
every sandbox in a worker process with hard limits (:mod:`lakefs_core.actions.lua.
worker`), which it kills at the deadline; in-process use is for tests and benchmarks.

Modules are Python functions building a table, or Lua source (``bytes``, run as text in
the script's globals the first time it is required).

The script sees Lua's base functions, ``string``, ``table`` and ``math``, ``print``
(captured as the hook's output), ``array`` and a ``require`` that only knows the
modules it is given: no ``io``, ``os``, ``debug``, ``package``, ``coroutine``, no
loading of other chunks, files or bytecode, and no way into the Python objects behind
the modules (every attribute is refused). A count hook ends a script that runs past
its deadline, even one that catches errors with ``pcall``; the state's allocator
refuses memory past ``max_memory``.

Values cross the boundary as Lua values only: :meth:`LuaSandbox.to_lua` turns Python
values into Lua ones (``str`` as UTF-8 strings, dicts and lists as tables),
:func:`from_lua` does the reverse (tables as dicts, or lists when their keys are
``1..n`` or they are marked with ``array``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from lupa import lua52

#: the first value a library function returns to raise a Lua error with the second
_ERROR = b"\x00lua-error\x00"
#: the Lua error of a library result too large for the state's memory
_OUT_OF_MEMORY = "<OutOfMemory>"
_BYTECODE = b"\x1bLua"

_SETUP = rb"""
local expired, out, raw_modules, ERR = ...
local TIMEOUT = "lua hook timed out"
local timed_out = false
local sethook, pack, unpack, concat = debug.sethook, table.pack, table.unpack, table.concat
local real_load, type = load, type
local real_pcall, real_xpcall, real_error, tostring, select = pcall, xpcall, error, tostring, select

local function check()
  if timed_out or expired() then
    timed_out = true
    real_error(TIMEOUT, 0)
  end
end
-- an error caught by pcall does not stop a script that ran out of time
local function after(ok, ...)
  if timed_out then real_error(TIMEOUT, 0) end
  return ok, ...
end
pcall = function(...) return after(real_pcall(...)) end
xpcall = function(...) return after(real_xpcall(...)) end

print = function(...)
  local parts = {}
  for i = 1, select("#", ...) do parts[i] = tostring((select(i, ...))) end
  out(concat(parts, "\t"))
end

-- library functions are Python callables: wrap them so that their failures are
-- Lua errors (a string, at the caller's line) and nothing of Python is reachable
local function raise_or_return(r)
  if r.n > 0 and r[1] == ERR then real_error(r[2], 3) end
  return unpack(r, 1, r.n)
end
local function wrap(f)
  return function(...) return raise_or_return(pack(f(...))) end
end
local loaded = {}
require = function(name)
  local m = loaded[name]
  if m ~= nil then return m end
  local loader = raw_modules[name]
  if loader == nil then real_error("module '" .. tostring(name) .. "' not found", 2) end
  if type(loader) == "string" then
    -- a module written in Lua: run as text (never bytecode) in the script's globals
    local chunk, err = real_load(loader, "=" .. name, "t")
    if chunk == nil then real_error(err, 2) end
    m = chunk()
  else
    m = loader()
  end
  loaded[name] = m
  return m
end

array = function(t) return setmetatable(t, {_is_array = true}) end

io, os, debug, package, coroutine, module = nil, nil, nil, nil, nil, nil
dofile, loadfile, load, loadstring, collectgarbage, python = nil, nil, nil, nil, nil, nil
string.dump = nil
sethook(check, "", 1000)
return wrap
"""


#: a module: a function building its table, or its Lua source
Module = Callable[["LuaSandbox"], Mapping[str, Any]] | bytes


class LuaTimeoutError(Exception):
    """The script ran past its deadline."""


class _ResultTooLargeError(Exception):
    """A library result larger than the memory the state has left."""


@dataclass(frozen=True, slots=True)
class LuaLimits:
    """How long a script may run (seconds) and how much memory its state may hold."""

    timeout: float = 60.0
    max_memory: int = 128 << 20
    #: whether scripts may ``require("net/http")`` (off unless the config turns it on)
    net_http: bool = False
    #: address ranges (CIDR) no connection of a script reaches (``actions.webhook.
    #: denied_networks``: by default the link-local ranges of instance metadata)
    refused_networks: tuple[str, ...] = ("169.254.0.0/16", "fe80::/10", "fd00:ec2::/32")
    #: also refuse loopback, private and reserved addresses (``actions.webhook.
    #: deny_private``)
    deny_private: bool = False

    def timed_out(self) -> str:
        """The failure of a script that ran past its deadline."""
        return f"lua hook timed out after {self.timeout:g}s"

    def out_of_memory(self) -> str:
        """The failure of a script that ran out of memory."""
        return f"lua hook ran out of memory (limit {self.max_memory >> 20} MiB)"


def _refuse_attributes(obj: object, name: object, is_setting: bool) -> object:
    raise AttributeError("not accessible from a Lua hook")


def lua_error(message: str) -> tuple[bytes, bytes]:
    """What a library function returns to raise ``message`` as a Lua error."""
    return _ERROR, message.encode()


def text(value: object, what: str = "argument") -> str:
    """A Lua string argument as text (invalid UTF-8 replaced)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return _number_text(value)
    raise TypeError(f"{what}: string expected")


def _number_text(value: int | float) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def integer(value: object, what: str = "argument") -> int:
    if isinstance(value, (int, float)) and not isinstance(value, bool) and float(
            value).is_integer():
        return int(value)
    raise TypeError(f"{what}: integer expected")


class LuaSandbox:
    """One Lua state for one hook run (see module doc)."""

    def __init__(self, limits: LuaLimits, modules: Mapping[str, Module]) -> None:
        self.limits = limits
        self.output: list[str] = []
        self.lua = lua52.LuaRuntime(
            register_eval=False, register_builtins=False, unpack_returned_tuples=True,
            encoding=None, attribute_filter=_refuse_attributes,
            max_memory=limits.max_memory)
        self._deadline = time.monotonic() + limits.timeout
        self._getmetatable = self.lua.eval("getmetatable")
        raw = {name.encode(): build if isinstance(build, bytes) else self._loader(build)
               for name, build in modules.items()}
        self._wrap = self.lua.execute(_SETUP, self._expired, self._print,
                                      self.lua.table_from(raw), _ERROR)

    def _expired(self) -> bool:
        return time.monotonic() > self._deadline

    def remaining(self) -> float:
        """Seconds left before the script's deadline (0 once it has passed)."""
        return max(0.0, self._deadline - time.monotonic())

    def _print(self, line: bytes) -> None:
        self.output.append(text(line))

    def _loader(self, build: Callable[[LuaSandbox], Mapping[str, Any]]) -> Callable[[], Any]:
        return lambda: self.to_lua(build(self))

    # -- values ------------------------------------------------------------------
    def to_lua(self, value: Any) -> Any:
        """A Python value as a Lua value; a callable becomes a Lua function."""
        if isinstance(value, str):
            value = value.encode()
        if isinstance(value, bytes):
            # lupa cannot fail an allocation of a result cleanly: refuse it first
            if len(value) > self.lua.get_max_memory() - self.lua.get_memory_used():
                raise _ResultTooLargeError
            return value
        if isinstance(value, Mapping):
            return self.lua.table_from({self.to_lua(k): self.to_lua(v)
                                        for k, v in value.items() if v is not None})
        if isinstance(value, (list, tuple)):
            return self.lua.table_from([self.to_lua(v) for v in value])
        if callable(value):
            # a Lua function around it: its failures are Lua errors at the caller's line
            return self._wrap(self._function(value))
        return value

    def _function(self, f: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any) -> Any:
            try:
                result = f(*args)
            except (TypeError, ValueError, LookupError, OSError) as exc:
                return lua_error(str(exc))
            try:
                if isinstance(result, tuple):
                    return tuple(self.to_lua(r) for r in result)
                return self.to_lua(result)
            except _ResultTooLargeError:
                return lua_error(_OUT_OF_MEMORY)
        return call

    def set_global(self, name: str, value: Any) -> None:
        self.lua.globals()[name.encode()] = self.to_lua(value)

    # -- running -----------------------------------------------------------------
    def run(self, script: bytes, chunk_name: str = "lua") -> None:
        """Run the script. Raises LuaTimeoutError, lupa.LuaError, lupa.LuaMemoryError
        (also for a library result larger than the memory the state has left)."""
        if script.startswith(_BYTECODE):
            raise lua52.LuaError("binary chunks are not accepted")
        self._deadline = time.monotonic() + self.limits.timeout
        try:
            self.lua.execute(script, name=chunk_name)
        except lua52.LuaError as exc:
            if "lua hook timed out" in str(exc):
                raise LuaTimeoutError(self.limits.timed_out()) from None
            if _OUT_OF_MEMORY in str(exc):
                raise lua52.LuaMemoryError(self.limits.out_of_memory()) from None
            raise


def from_lua(sandbox: LuaSandbox, value: Any) -> Any:
    """A Lua value as plain Python (see module doc); strings as text."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if lua52.lua_type(value) == "table":
        items = list(value.items())
        meta = sandbox._getmetatable(value)
        marked = meta is not None and bool(meta[b"_is_array"])
        keys = [k for k, _ in items]
        if marked or (items and keys == list(range(1, len(items) + 1))):
            return [from_lua(sandbox, v) for _, v in sorted(items, key=lambda kv: kv[0])]
        return {text(k, "key") if isinstance(k, bytes) else _number_text(k):
                from_lua(sandbox, v) for k, v in items}
    if lua52.lua_type(value) is not None:
        return None  # functions and userdata have no plain value
    return value
