"""Lua worker processes, kept ready, one hook run at a time each.

Scripts run in :mod:`lakefs_core.actions.lua.worker` processes, where the server can
stop them: a run that passes its deadline (the timeout and :data:`GRACE`), sends a
message past the memory limit, or breaks the protocol has its worker killed and
replaced, and its hook fails with the usual texts ("lua hook timed out after 30s",
"lua hook ran out of memory (limit 128 MiB)"). A worker that finished its run cleanly
takes the next one (at most :data:`MAX_RUNS`, then it is replaced).

The pool starts its workers on its first run, in the background; a run waits for a
free worker when all are busy.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lakefs_core.actions.lua.sandbox import LuaLimits
from lakefs_core.actions.lua.wire import (
    FrameTooLargeError,
    WireError,
    WireTimeoutError,
    encode,
    read_frame,
    write_encoded,
    write_frame,
)

log = logging.getLogger("lakefs_core.actions.lua")

#: how long past its timeout a run may go before its worker is killed (the script's
#: own time check normally ends it first, with its output kept)
GRACE = 1.0
#: how long a new worker may take to start
START_TIMEOUT = 60.0
#: runs a worker takes before it is replaced (bounds what a long-lived one leaks)
MAX_RUNS = 500
#: what a message may carry past the scripts' memory limit
_FRAME_SLACK = 1 << 20
#: the directory holding the ``lakefs_core`` package, for the worker's imports
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])

#: a ``lakefs.<name>(*args)`` call of a script: the values it returns
LakeFSCalls = Callable[[str, list[Any]], list[Any]]


class LuaWorkerError(Exception):
    """No worker could run the script (one failed to start, or the pool is closed)."""


@dataclass(frozen=True, slots=True)
class LuaJob:
    """One script to run, with the globals it sees (plain values)."""

    script: bytes
    chunk_name: str = "lua"
    globals: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class LuaResult:
    """What a run printed, and why it failed ("" when it passed)."""

    output: list[str]
    error: str = ""


#: the server's settings a worker gets: where the AWS SDK's clients go (documented
#: exporters make theirs without an endpoint), proxies and CA certificates; never
#: credentials, keys or database settings
PASSED_ENVIRONMENT = (
    "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_GLUE", "AWS_REGION",
    "AWS_DEFAULT_REGION", "AWS_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "http_proxy", "https_proxy", "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR", "TZ")


def worker_environment() -> dict[str, str]:
    """The worker's whole environment: none of the server's but
    :data:`PASSED_ENVIRONMENT` (no secret reaches it)."""
    return {**{k: v for k, v in os.environ.items() if k in PASSED_ENVIRONMENT},
            "PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONPATH": _PACKAGE_ROOT,
            "PYTHONDONTWRITEBYTECODE": "1",
            # the aws module's clients: the script's credentials only, no instance
            # metadata, no shared files
            "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull,
            "AWS_SHARED_CREDENTIALS_FILE": os.devnull}


class LuaWorker:
    """One worker process (see module doc)."""

    def __init__(self, limits: LuaLimits) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-s", "-m", "lakefs_core.actions.lua.worker",
             json.dumps(dataclasses.asdict(limits))],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=worker_environment(),
            cwd="/", bufsize=0, close_fds=True, start_new_session=True)
        assert self.process.stdin is not None and self.process.stdout is not None
        self.fd_in, self.fd_out = self.process.stdout.fileno(), self.process.stdin.fileno()
        self.runs = 0
        try:
            ready = read_frame(self.fd_in, limit=1024,
                               deadline=time.monotonic() + START_TIMEOUT)
            if ready.get("op") != "ready":
                raise WireError(f"unexpected {ready.get('op')!r}")
        except WireError as exc:
            self.kill()
            raise LuaWorkerError(f"a lua worker failed to start: {exc}") from None

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """End the process and reap it."""
        if self.process.poll() is None:
            self.process.kill()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:  # pragma: no cover - a process SIGKILL missed
            log.error("lua worker %d did not exit", self.process.pid)
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()


class LuaWorkerPool:
    """Up to ``size`` worker processes for scripts with ``limits`` (see module doc)."""

    def __init__(self, limits: LuaLimits, size: int = 2) -> None:
        self.limits = limits
        self.size = size
        self._frame_limit = limits.max_memory + _FRAME_SLACK
        self._cond = threading.Condition()
        self._idle: list[LuaWorker] = []
        self._live = 0  # workers started or starting, idle or busy
        self._started = False
        self._closed = False

    @property
    def pids(self) -> list[int]:
        """The process ids of the idle workers."""
        with self._cond:
            return [w.pid for w in self._idle]

    # -- running -------------------------------------------------------------------------
    def run(self, job: LuaJob, calls: LakeFSCalls) -> LuaResult:
        """Run ``job`` in a worker, answering its ``lakefs`` calls with ``calls``.

        Raises:
            LuaWorkerError: no worker could be started, or the pool is closed.
        """
        worker = self._acquire()
        worker.runs += 1
        deadline = time.monotonic() + self.limits.timeout + GRACE
        try:
            write_frame(worker.fd_out, {"op": "run", "script": job.script,
                                        "chunk": job.chunk_name, "globals": job.globals})
            while True:
                message = read_frame(worker.fd_in, limit=self._frame_limit,
                                     deadline=deadline)
                if message.get("op") == "call":
                    self._answer(worker, message, calls)
                    continue
                if message.get("op") != "done":
                    raise WireError(f"unexpected message {message.get('op')!r}")
                result = LuaResult([str(line) for line in message.get("output") or []],
                                   str(message.get("error") or ""))
                # a worker that ran out of memory may not be whole: replace it
                self._release(worker, reusable=result.error != self.limits.out_of_memory())
                return result
        except WireTimeoutError:
            error = self.limits.timed_out()
        except FrameTooLargeError:
            error = self.limits.out_of_memory()
        except WireError as exc:
            error = self._lost(worker, exc)
        except BaseException:
            self._release(worker, reusable=False)
            raise
        self._release(worker, reusable=False)
        return LuaResult([], error)

    def _answer(self, worker: LuaWorker, message: dict[str, Any], calls: LakeFSCalls) -> None:
        name, args = str(message.get("fn")), message.get("args")
        try:
            reply = encode({"op": "reply", "values": calls(name, list(args or []))})
        except Exception as exc:  # noqa: BLE001 - a failed call is a Lua error in the script
            reply = encode({"op": "reply", "error": str(exc) or type(exc).__name__})
        if len(reply) > self._frame_limit:
            reply = encode({"op": "reply",
                            "error": "the result is larger than the script's memory limit"})
        write_encoded(worker.fd_out, reply)

    def _lost(self, worker: LuaWorker, exc: WireError) -> str:
        """Why a run whose worker broke off failed."""
        try:
            code = worker.process.wait(timeout=1)
        except subprocess.TimeoutExpired:
            return f"lua hook failed: {exc}"
        if code == -signal.SIGXCPU:  # its CPU limit
            return self.limits.timed_out()
        return f"lua hook failed: its worker exited with status {code}"

    # -- the workers ---------------------------------------------------------------------
    def _acquire(self) -> LuaWorker:
        with self._cond:
            if not self._started:
                self._started = True
                for _ in range(self.size - 1):
                    self._start_in_background()
            while True:
                if self._closed:
                    raise LuaWorkerError("lua hooks are shut down")
                if self._idle:
                    return self._idle.pop()
                if self._live < self.size:
                    self._live += 1
                    break
                self._cond.wait()
        try:
            return LuaWorker(self.limits)
        except BaseException:
            with self._cond:
                self._live -= 1
                self._cond.notify()
            raise

    def _release(self, worker: LuaWorker, *, reusable: bool) -> None:
        with self._cond:
            if reusable and worker.runs < MAX_RUNS and not self._closed:
                self._idle.append(worker)
                self._cond.notify()
                return
        worker.kill()
        with self._cond:
            self._live -= 1
            self._cond.notify()
            if not self._closed:
                self._start_in_background()

    def _start_in_background(self) -> None:
        """Start one more worker (when there is room) without waiting for it.

        Called with the condition held."""
        if self._live >= self.size:
            return
        self._live += 1

        def start() -> None:
            try:
                worker = LuaWorker(self.limits)
            except LuaWorkerError as exc:
                log.warning("%s", exc)
                with self._cond:
                    self._live -= 1
                    self._cond.notify()
                return
            with self._cond:
                if self._closed:
                    self._live -= 1
                else:
                    self._idle.append(worker)
                    self._cond.notify()
                    return
            worker.kill()

        threading.Thread(target=start, name="lua-worker-start", daemon=True).start()

    def close(self) -> None:
        """Kill the idle workers; busy ones are killed as their runs end."""
        with self._cond:
            self._closed = True
            idle, self._idle = self._idle, []
            self._live -= len(idle)
            self._cond.notify_all()
        for worker in idle:
            worker.kill()
