"""Real servers for tests, benchmarks and e2e runs: PostgreSQL and moto, on loopback,
and any HTTP server run as a command (:func:`child_server`).

PostgreSQL is started from the installed server binaries (never assumed running).
initdb refuses to run as root, so as root the cluster is run as the ``postgres``
system user.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import random
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import httpx

#: ports this process handed out: the kernel may offer a port again as soon as the probe
#: socket is closed, before whoever asked has bound it
_handed_out: set[int] = set()
_handed_out_lock = threading.Lock()


#: ports below the kernel's ephemeral range (32768 and up on Linux), shared out among
#: the test workers of a parallel run so that two never hand out the same one
_WORKER_PORTS = range(12_000, 32_000)
_pick = random.Random(os.getpid() ^ time.monotonic_ns())


def _worker_ports() -> range | None:
    """This test worker's share of :data:`_WORKER_PORTS` in a parallel run (pytest-xdist
    names the worker ``gw<n>``, its child processes inherit it); None otherwise."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0") or 0)
    if not worker.startswith("gw") or count < 2:
        return None
    n = int(worker[2:]) % count
    size = len(_WORKER_PORTS) // count
    return range(_WORKER_PORTS.start + n * size, _WORKER_PORTS.start + (n + 1) * size)


def _probe(port: int) -> int | None:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return None
        return int(s.getsockname()[1])


def free_port() -> int:
    """A TCP port free on 127.0.0.1 now, and not handed out before by this process; in
    a parallel test run, one of this worker's own share."""
    share = _worker_ports()
    with _handed_out_lock:
        for _ in range(1000):
            port = _probe(_pick.choice(share) if share is not None else 0)
            if port is not None and port not in _handed_out:
                _handed_out.add(port)
                return port
    raise RuntimeError("no free TCP port on 127.0.0.1 that was not handed out already")


def send_long_header(port: int, header_bytes: int, path: str = "/_health") -> bytes:
    """GET ``path`` on 127.0.0.1 with one header ``header_bytes`` long; the raw answer
    (empty if the server closed the connection without a word)."""
    with socket.create_connection(("127.0.0.1", port), timeout=20) as sock:
        sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nX-Long: ".encode())
        chunk = b"a" * 4096
        try:
            for _ in range(header_bytes // len(chunk)):
                sock.sendall(chunk)
            sock.sendall(b"\r\nConnection: close\r\n\r\n")
        except OSError:  # refused while still sending
            pass
        answer = b""
        with contextlib.suppress(OSError):
            while data := sock.recv(65536):
                answer += data
        return answer


def _pg_bindir() -> str:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for path in candidates:
        if os.path.exists(os.path.join(path, "initdb")):
            return path
    found = shutil.which("initdb")
    if found:
        return os.path.dirname(found)
    raise RuntimeError(
        "PostgreSQL server binaries not found (looked in /usr/lib/postgresql/*/bin and PATH); "
        "install the postgresql package"
    )


@dataclass
class PostgresServer:
    """A throwaway PostgreSQL cluster listening on 127.0.0.1."""

    port: int
    datadir: str
    bindir: str
    user: str = "postgres"

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/postgres"

    @property
    def dsn(self) -> str:
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/postgres"

    def create_database(self, name: str) -> str:
        """Create a fresh database and return its SQLAlchemy URL."""
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as admin:
            admin.execute(f'CREATE DATABASE "{name}"')
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{name}"

    def _run(self, cmd: list[str]) -> None:
        if os.geteuid() == 0:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        subprocess.run(cmd, check=True, capture_output=True, timeout=120)

    def stop(self) -> None:
        """Stop the server; its files are removed by a process of their own, not waited
        for (a test session's hundreds of databases are some 90,000 files, which took
        13 s to remove)."""
        with contextlib.suppress(Exception):
            self._run([os.path.join(self.bindir, "pg_ctl"), "-D", self.datadir, "-m", "immediate",
                       "-w", "stop"])
        subprocess.run(["sh", "-c", 'rm -rf -- "$1" </dev/null >/dev/null 2>&1 &', "sh",
                        os.path.dirname(self.datadir)], check=False, timeout=30)


def start_postgres() -> PostgresServer:
    bindir = _pg_bindir()
    root = tempfile.mkdtemp(prefix="lakefs-pg-")
    datadir = os.path.join(root, "data")
    sockdir = os.path.join(root, "sock")
    os.makedirs(sockdir)
    if os.geteuid() == 0:
        pw = pwd.getpwnam("postgres")
        for path in (root, sockdir):
            os.chown(path, pw.pw_uid, pw.pw_gid)
        os.chmod(root, 0o755)
        user = "postgres"
    else:
        user = pwd.getpwuid(os.geteuid()).pw_name
    port = free_port()
    server = PostgresServer(port=port, datadir=datadir, bindir=bindir, user=user)
    server._run([os.path.join(bindir, "initdb"), "-D", datadir, "-U", user, "-A", "trust",
                 "-E", "UTF8", "--no-sync"])
    opts = (f"-c listen_addresses=127.0.0.1 -c port={port} -k {sockdir} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=200")
    server._run([os.path.join(bindir, "pg_ctl"), "-D", datadir, "-o", opts, "-l",
                 os.path.join(root, "log"), "-w", "-t", "60", "start"])
    return server


@contextlib.contextmanager
def postgres() -> Iterator[PostgresServer]:
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@dataclass
class MotoServer:
    """moto in server mode (S3, DynamoDB, DynamoDB Streams) on 127.0.0.1."""

    port: int
    _server: object

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self._server.stop()  # type: ignore[attr-defined]


def start_moto() -> MotoServer:
    """moto in a thread of this process, its DynamoDB requests one at a time (see
    :mod:`lakefs_testing.moto_server`)."""
    from lakefs_testing.moto_server import MotoThread

    port = free_port()
    server = MotoThread("127.0.0.1", port)
    server.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            break
        time.sleep(0.05)
    return MotoServer(port=port, _server=server)


@contextlib.contextmanager
def moto() -> Iterator[MotoServer]:
    server = start_moto()
    try:
        yield server
    finally:
        server.stop()


#: credentials moto accepts (any will do); tests set them in the environment
MOTO_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


@contextlib.contextmanager
def child_server(command: list[str], url: str, output: Path, *,
                 env: Mapping[str, str] | None = None,
                 timeout: float = 120) -> Iterator[subprocess.Popen[bytes]]:
    """Run an HTTP server command in a child process while the block runs.

    Its stdout and stderr go to ``output``. Yields once ``url`` answers (any status
    below 500); stops it afterwards (SIGTERM, then SIGKILL after 30 s).

    Raises:
        RuntimeError: the command exited, or did not answer within ``timeout``
            seconds (the message holds its output).
    """
    with output.open("wb") as sink:
        proc = subprocess.Popen(command, env=None if env is None else dict(env),
                                stdout=sink, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"{command[0]} exited: {output.read_text()}")
            with contextlib.suppress(httpx.TransportError):
                if httpx.get(url, timeout=2).status_code < 500:
                    break
            if time.monotonic() > deadline:
                raise RuntimeError(f"{command[0]} did not answer: {output.read_text()}")
            time.sleep(0.1)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
