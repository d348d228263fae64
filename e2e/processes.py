"""Child processes of an end-to-end run: start, wait until ready, kill -9, restart.

Every child gets its own session (so a Ctrl-C in the terminal reaches only us, and we
stop the children in order) and, on Linux, a parent-death signal: if this process
dies without cleaning up, the kernel kills the children too. The death signal is
tied to the *thread* that spawned the child, so children are spawned from the
thread that owns the run (never from short-lived worker threads).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import FrameType

import httpx

from lakefs_core.errors import LakeFSError

_PR_SET_PDEATHSIG = 1


class ProcessError(LakeFSError):
    """A child process did not start, or died when it should be running."""


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ManagedProcess:
    """One child process with a log file and a readiness URL.

    Args:
        name: label used in messages (``east-server``, ``west-sidecar-1``).
        argv: the command; ``python`` as the first item means this interpreter.
        log_path: stdout and stderr go here (appended across restarts).
        ready_url: polled until it answers with any HTTP status below 500.
        env: extra environment variables on top of ours.
        cwd: working directory.
    """

    def __init__(self, name: str, argv: Sequence[str], log_path: Path, *,
                 ready_url: str | None = None, env: Mapping[str, str] | None = None,
                 cwd: Path | None = None) -> None:
        self.name = name
        self.argv = [sys.executable if a == "python" else a for a in argv]
        self.log_path = log_path
        self.ready_url = ready_url
        self.env = dict(env or {})
        self.cwd = cwd
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    # ----------------------------------------------------------------- state
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, lines: int = 30) -> str:
        """The last lines of the log (for error messages)."""
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    # ------------------------------------------------------------- lifecycle
    def spawn(self) -> None:
        """Start the process (without waiting for it to be ready)."""
        if self.alive:
            raise ProcessError(f"{self.name} is already running (pid {self.pid})")
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.env, "PYTHONUNBUFFERED": "1"}
        with open(self.log_path, "ab") as log:
            log.write(f"--- start #{self.starts + 1}: {' '.join(self.argv)}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                env=env, cwd=self.cwd, start_new_session=True,
                preexec_fn=_die_with_parent if sys.platform == "linux" else None)
        self.starts += 1

    def wait_ready(self, timeout: float = 90.0) -> None:
        """Wait until ``ready_url`` answers (or just that the process lives, without one).

        Raises:
            ProcessError: the process exited, or did not answer within ``timeout``.
        """
        deadline = time.monotonic() + timeout
        with httpx.Client(timeout=2.0) as client:
            while True:
                if not self.alive:
                    code = self.proc.returncode if self.proc is not None else None
                    raise ProcessError(f"{self.name} exited with code {code}; log tail:\n"
                                       f"{self.log_tail()}")
                if self.ready_url is None:
                    return
                with contextlib.suppress(httpx.HTTPError):
                    if client.get(self.ready_url).status_code < 500:
                        return
                if time.monotonic() > deadline:
                    raise ProcessError(f"{self.name} not ready after {timeout:.0f}s at "
                                       f"{self.ready_url}; log tail:\n{self.log_tail()}")
                time.sleep(0.05)

    def start(self, timeout: float = 90.0) -> None:
        """Spawn and wait until ready."""
        self.spawn()
        self.wait_ready(timeout)

    def kill(self) -> None:
        """``kill -9``: no cleanup of any kind in the child."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it does not exit within ``timeout``."""
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()

    def restart(self, timeout: float = 90.0) -> None:
        """Kill -9 (if running) and start again."""
        self.kill()
        self.start(timeout)

    def __repr__(self) -> str:
        return f"ManagedProcess({self.name!r}, pid={self.pid}, alive={self.alive})"


@contextlib.contextmanager
def terminate_as_exit() -> Iterator[None]:
    """SIGTERM (like Ctrl-C) unwinds the stack, so every child is stopped (and a
    PostgreSQL started for the run, which outlives us otherwise)."""
    def handler(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def start_all(processes: Sequence[ManagedProcess], timeout: float = 90.0) -> None:
    """Spawn every process at once, then wait for each (boots overlap)."""
    for p in processes:
        p.spawn()
    for p in processes:
        p.wait_ready(timeout)


def stop_all(processes: Sequence[ManagedProcess], timeout: float = 10.0) -> None:
    """SIGTERM every running process, then SIGKILL those still running after ``timeout``."""
    running = [p for p in processes if p.alive]
    for p in running:
        with contextlib.suppress(ProcessLookupError):
            assert p.proc is not None
            p.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for p in running:
        assert p.proc is not None
        try:
            p.proc.wait(timeout=max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            p.kill()
