"""A Lua worker process: runs hook scripts for the server, one at a time, under hard
limits. Started by :class:`~lakefs_core.actions.lua.pool.LuaWorkerPool` as
``python -m lakefs_core.actions.lua.worker '<limits as JSON>'``.

The process has none of the server's environment (no secret key, no database URL),
imports no part of the engine, and runs under ``RLIMIT_AS`` (its size once started,
plus the scripts' memory limit, plus room for the library's imports) and, during each
run, ``RLIMIT_CPU`` (the run's timeout and a second); it may not connect to link-local
addresses. The server kills it at a run's deadline: a script stuck in Python code, a C
pattern function or a ``__gc`` finalizer cannot hold the server.

Messages (:mod:`lakefs_core.actions.lua.wire`), on stdin and stdout:

- worker: ``{"op": "ready"}`` once started;
- server: ``{"op": "run", "script": bytes, "chunk": name, "globals": {...}}``;
- worker: ``{"op": "call", "fn": name, "args": [...]}`` for a ``lakefs.<name>`` call,
  answered ``{"op": "reply", "values": [...]}`` or ``{"op": "reply", "error": text}``;
- worker: ``{"op": "done", "output": [lines], "error": text}`` (``error`` "" when the
  script passed), after the script's Lua state is gone (its finalizers have run).
"""

from __future__ import annotations

import gc
import json
import os
import re
import resource
import sys
from typing import Any

from lupa import lua52

from lakefs_core.actions.lua.egress import guard_connections
from lakefs_core.actions.lua.library import HOOK_FAILURE, LAKEFS_FUNCTIONS, MODULES, net_http
from lakefs_core.actions.lua.sandbox import (
    LuaLimits,
    LuaSandbox,
    LuaTimeoutError,
    Module,
    from_lua,
)
from lakefs_core.actions.lua.wire import WireError, read_frame, write_frame

#: address space past the scripts' memory limit: the interpreter's own growth and the
#: lazily imported libraries (pyarrow alone maps about 300 MiB)
HEADROOM = 512 << 20
#: the longest message the server sends (a ``lakefs`` reply is bounded by the
#: scripts' memory limit, a script by the server's request size)
_SERVER_FRAME_LIMIT = 1 << 31


class _Channel:
    """The worker's end of the pipes."""

    def __init__(self, fd_in: int, fd_out: int) -> None:
        self.fd_in, self.fd_out = fd_in, fd_out

    def send(self, message: dict[str, Any]) -> None:
        write_frame(self.fd_out, message)

    def receive(self) -> dict[str, Any]:
        return read_frame(self.fd_in, limit=_SERVER_FRAME_LIMIT)


def _plain(sb: LuaSandbox, value: Any) -> Any:
    """A Lua argument as a message value (strings stay bytes)."""
    if isinstance(value, bytes):
        return value
    return from_lua(sb, value)


def lakefs_proxy(channel: _Channel) -> Module:
    """The ``lakefs`` module: each call asks the server and waits for its answer."""
    def build(sb: LuaSandbox) -> dict[str, Any]:
        def function(name: str) -> Any:
            def call(*args: Any) -> tuple[Any, ...]:
                channel.send({"op": "call", "fn": name,
                              "args": [_plain(sb, a) for a in args]})
                reply = channel.receive()
                if reply.get("op") != "reply":
                    raise WireError(f"expected a reply, got {reply.get('op')!r}")
                if "error" in reply:
                    raise OSError(f"lakefs.{name}: {reply['error']}")
                return tuple(reply.get("values") or ())
            return call
        return {name: function(name) for name in LAKEFS_FUNCTIONS}
    return build


def failure_message(exc: BaseException, limits: LuaLimits) -> str:
    """What a hook whose script raised ``exc`` fails with (lakeFS's texts)."""
    if isinstance(exc, LuaTimeoutError):
        return str(exc)
    if isinstance(exc, (lua52.LuaMemoryError, MemoryError)):
        return limits.out_of_memory()
    if isinstance(exc, lua52.LuaError):
        failure = HOOK_FAILURE.search(str(exc))
        # hook.fail(message): the hook fails with that message as it is
        return failure.group(1) if failure else \
            f"lua error: {exc}".split("\nstack traceback:")[0]
    return f"lua hook failed: {exc}"


def run_job(job: dict[str, Any], limits: LuaLimits, channel: _Channel) -> dict[str, Any]:
    """Run one script; the ``done`` message."""
    used = resource.getrusage(resource.RUSAGE_SELF)
    _lower(resource.RLIMIT_CPU, int(used.ru_utime + used.ru_stime + limits.timeout) + 2,
           keep_hard=True)
    modules: dict[str, Module] = {**MODULES, "lakefs": lakefs_proxy(channel)}
    if limits.net_http:
        modules["net/http"] = net_http
    output: list[str] = []
    error = ""
    sandbox: LuaSandbox | None = None
    try:
        sandbox = LuaSandbox(limits, modules)
        output = sandbox.output
        for name, value in (job.get("globals") or {}).items():
            sandbox.set_global(name, value)
        sandbox.run(job["script"], chunk_name=str(job.get("chunk") or "lua"))
    except WireError:
        raise
    except BaseException as exc:  # noqa: BLE001 - every failure is the hook's
        error = failure_message(exc, limits)
    # the state goes now, its finalizers (__gc) with it: still within the deadline
    sandbox = None
    gc.collect()
    return {"op": "done", "output": output, "error": error}


def _address_space() -> int:
    with open("/proc/self/status") as status:
        m = re.search(r"VmSize:\s+(\d+) kB", status.read())
    return int(m.group(1)) << 10 if m else 0


def _lower(limit: int, value: int, *, keep_hard: bool = False) -> None:
    """Set a resource limit to ``value`` (never above the hard limit inherited);
    ``keep_hard``: only the soft one, so that a later run may move it again."""
    _, hard = resource.getrlimit(limit)
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(limit, (value, hard if keep_hard else value))


def confine(limits: LuaLimits) -> None:
    """Hard limits on this process, before it takes any script."""
    _lower(resource.RLIMIT_CORE, 0)
    size = _address_space()
    if size:
        _lower(resource.RLIMIT_AS, size + limits.max_memory + HEADROOM)
    guard_connections(limits.refused_networks, limits.deny_private)


def main(argv: list[str]) -> int:
    """Serve runs until the server closes the pipe."""
    given = json.loads(argv[1])
    limits = LuaLimits(**{**given, "refused_networks": tuple(given["refused_networks"])})
    # the protocol gets its own descriptor: nothing a library prints can corrupt it
    channel = _Channel(0, os.dup(1))
    os.dup2(2, 1)
    confine(limits)
    # what is loaded now stays: each run's collection then looks at its own objects only
    gc.freeze()
    try:
        channel.send({"op": "ready"})
        while True:
            job = channel.receive()
            channel.send(run_job(job, limits, channel))
    except WireError:
        return 0  # the server is gone or closed the pipe


if __name__ == "__main__":
    sys.exit(main(sys.argv))
