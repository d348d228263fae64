"""Fixtures of the client compatibility suite: one live server for the suite, a fresh
repository per test, and the clients run as their own processes against the gateway
with their default settings (the options a test passes say why)."""

from __future__ import annotations

import logging
import os
import random
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

from lakefs_testing.live_server import LiveServer, live_server

REGION = "us-east-1"
MIB = 1 << 20
#: the interpreter of the Python clients that install with the project (DuckDB, pyarrow,
#: polars)
PYTHON = sys.executable
#: the files of the local directory every sync client uploads: an empty file and one
#: large enough for a multipart upload among them
TREE = {
    "a.txt": b"alpha\n" * 100,
    "empty": b"",
    "sub/b.csv": b"id,name\n1,one\n2,two\n",
    "sub/deeper/c.json": b'{"c": 3}\n',
    "big.bin": random.Random(7).randbytes(20 * MIB),
}
#: the Python interpreter that has s3fs (aiobotocore pins a botocore older than the
#: project's boto3, so s3fs lives in its own virtualenv: `make compat-clients`)
S3FS_PYTHON = Path(os.environ.get(
    "LAKEFS_S3FS_PYTHON", Path(__file__).parents[2] / ".venv" / "s3fs-client" / "bin" / "python"))
#: the Python interpreter that has Airflow 2 and Treeverse's lakeFS provider (Airflow's
#: dependencies pin their own versions: `make compat-airflow`)
AIRFLOW_PYTHON = Path(os.environ.get(
    "LAKEFS_AIRFLOW_PYTHON",
    Path(__file__).parents[2] / ".venv" / "airflow-client" / "bin" / "python"))


@pytest.fixture(scope="session")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One server for the whole suite (each test has its own repository)."""
    with live_server(str(tmp_path_factory.mktemp("compat") / "server")) as server:
        yield server


@dataclass
class Target:
    """A repository on the live server, and a scratch directory for one client."""

    server: LiveServer
    repo: str
    home: Path

    @property
    def endpoint(self) -> str:
        return self.server.endpoint

    def env(self, **extra: str) -> dict[str, str]:
        """The environment of a client process: its own HOME, the admin's keys."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("AWS_", "RCLONE_", "LAKEFS_"))}
        env.update({"HOME": str(self.home), "AWS_ACCESS_KEY_ID": self.server.access_key_id,
                    "AWS_SECRET_ACCESS_KEY": self.server.secret_access_key,
                    "AWS_DEFAULT_REGION": REGION, "AWS_REGION": REGION,
                    "AWS_CONFIG_FILE": str(self.home / "aws-config"),
                    "AWS_SHARED_CREDENTIALS_FILE": str(self.home / "aws-credentials")})
        env.update(extra)
        return env

    def tree(self) -> Path:
        """A local directory holding :data:`TREE`."""
        root = self.home / "tree"
        for name, data in TREE.items():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_bytes(data)
        return root

    def read(self, ref: str, path: str) -> bytes:
        return self.server.services.catalog.read(self.repo, ref, path)

    def paths(self, ref: str, prefix: str = "") -> list[str]:
        """The object paths below ``prefix`` on ``ref``, read through the engine."""
        items, _ = self.server.services.graveler.list_entries(self.repo, ref, prefix=prefix,
                                                              amount=10_000)
        return [item.path for item in items if item.entry is not None]

    def commit(self, message: str = "compat") -> str:
        return self.server.services.graveler.commit(self.repo, "main", message, "admin").id


@pytest.fixture
def target(gateway: LiveServer, tmp_path: Path, unique_name: str,
           caplog: pytest.LogCaptureFixture) -> Iterator[Target]:
    """A new repository; the test fails if the gateway logged an error meanwhile."""
    caplog.set_level(logging.WARNING, logger="lakefs_core.gateway")
    name = f"compat-{unique_name}".lower()
    gateway.services.graveler.create_repository(name, f"local://{name}")
    home = tmp_path / "home"
    home.mkdir()
    yield Target(gateway, name, home)
    errors = [r.getMessage() for r in caplog.records
              if r.name.startswith("lakefs_core") and r.levelno >= logging.ERROR]
    assert errors == [], errors


def run(args: Sequence[str | Path], env: dict[str, str], *, timeout: float = 120,
        check: bool = True, cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """Run one client command; a failure shows its output."""
    done = subprocess.run([str(a) for a in args], env=env, capture_output=True,
                          timeout=timeout, cwd=cwd, check=False)
    if check and done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {done.returncode}\n"
                    f"stdout: {done.stdout.decode(errors='replace')[-3000:]}\n"
                    f"stderr: {done.stderr.decode(errors='replace')[-3000:]}")
    return done


def python_client(interpreter: Path | str, script: str, target: Target,
                  *args: str, timeout: float = 120) -> str:
    """Run ``clients/<script>`` with ``interpreter``: endpoint, keys and repository as
    arguments; its standard output."""
    path = Path(__file__).parent / "clients" / script
    done = run([interpreter, path, target.endpoint, target.server.access_key_id,
                target.server.secret_access_key, target.repo, *args],
               target.env(), timeout=timeout)
    return done.stdout.decode()

