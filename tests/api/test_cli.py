"""The command line: ``run --quickstart`` and ``setup``, as separate processes on loopback."""

from __future__ import annotations

import contextlib
import io
import json
import logging
import os
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import lakefs
import pyarrow.parquet as pq
import pytest

from lakefs_core.__main__ import main
from lakefs_core.config import load_server_config
from lakefs_core.services import build_services
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.servers import child_server, free_port


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("LAKEFS_")}


@dataclass
class CliResult:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> Callable[..., CliResult]:
    """Run the command line's ``main`` in this process (``run`` gets a child process)."""
    for name in list(os.environ):
        if name.startswith("LAKEFS_"):
            monkeypatch.delenv(name)
    # the command sets up logging: give the process its own back afterwards
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)

    def invoke(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return invoke


@contextlib.contextmanager
def _running(data_dir: Path, *extra: str,
             env: dict[str, str] | None = None) -> Iterator[tuple[str, Path]]:
    """``run`` in a child process; yields its endpoint and the file holding its stdout."""
    port = free_port()
    out = data_dir.parent / f"run-{port}.out"
    endpoint = f"http://127.0.0.1:{port}"
    with child_server([sys.executable, "-m", "lakefs_core", "run", "--listen",
                       f"127.0.0.1:{port}", "--data-dir", str(data_dir), *extra],
                      f"{endpoint}/_health", out, env={**_env(), **(env or {})}, timeout=60):
        yield endpoint, out


def test_quickstart_end_to_end(tmp_path: Path) -> None:
    data_dir = tmp_path / "quickstart"
    with _running(data_dir, "--quickstart") as (endpoint, out):
        printed = out.read_text()
        assert f"access key id:     {ADMIN_KEY}" in printed
        assert f"secret access key: {ADMIN_SECRET}" in printed
        auth = (ADMIN_KEY, ADMIN_SECRET)
        api = f"{endpoint}/api/v1"
        assert httpx.get(f"{api}/setup_lakefs").json()["state"] == "initialized"
        config = httpx.get(f"{api}/config", auth=auth).json()
        assert config["storage_config"]["default_namespace_prefix"] == "local://"
        assert config["storage_config"]["pre_sign_support"] is False
        resp = httpx.post(f"{api}/repositories", auth=auth,
                          json={"name": "quickstart", "sample_data": True})
        assert resp.status_code == 201, resp.text
        assert resp.json()["storage_namespace"] == "local://quickstart"

        client = lakefs.Client(host=endpoint, username=ADMIN_KEY, password=ADMIN_SECRET)
        repo = lakefs.Repository("quickstart", client=client)
        assert [c.message for c in repo.branch("main").log()] == [
            "Add sample data", "Repository created"]
        data = repo.branch("main").object("lakes.parquet").reader(mode="rb").read()
        assert pq.read_table(io.BytesIO(data)).num_rows > 0
        dev = repo.branch("dev").create("main")
        dev.object("notes.txt").upload(b"kept across restarts")
        dev.commit("notes")
        # data lives in the data directory
        assert (data_dir / "blockstore").is_dir()

    # a second start over the same directory keeps the data and the same key
    with _running(data_dir, "--quickstart") as (endpoint, out):
        assert ADMIN_KEY in out.read_text()
        client = lakefs.Client(host=endpoint, username=ADMIN_KEY, password=ADMIN_SECRET)
        dev = lakefs.Repository("quickstart", client=client).branch("dev")
        assert dev.object("notes.txt").reader(mode="rb").read() == b"kept across restarts"
        assert dev.get_commit().message == "notes"


def test_setup_is_idempotent(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    data_dir = str(tmp_path / "installed")
    first = cli("setup", "--user-name", "ops", "--data-dir", data_dir)
    assert first.returncode == 0, first.stderr
    key = re.search(r"access_key_id: (\S+)", first.stdout)
    secret = re.search(r"secret_access_key: (\S+)", first.stdout)
    assert key and secret
    again = cli("setup", "--user-name", "ops", "--data-dir", data_dir)
    assert again.returncode == 0, again.stderr
    assert "already initialized" in again.stdout and secret.group(1) not in again.stdout
    other = cli("setup", "--user-name", "someone-else", "--data-dir", data_dir)
    assert other.returncode == 0 and "already initialized" in other.stdout
    same_key = cli("setup", "--user-name", "ops", "--data-dir", data_dir,
                    "--access-key-id", key.group(1), "--secret-access-key", secret.group(1))
    assert same_key.returncode == 0, same_key.stderr
    assert f"access_key_id: {key.group(1)}" in same_key.stdout
    wrong = cli("setup", "--user-name", "ops", "--data-dir", data_dir,
                 "--access-key-id", key.group(1), "--secret-access-key", "not-the-secret-0000")
    assert wrong.returncode == 2 and "error:" in wrong.stderr

    with _running(Path(data_dir)) as (endpoint, _out):
        api = f"{endpoint}/api/v1"
        creds = (key.group(1), secret.group(1))
        assert httpx.get(f"{api}/user", auth=creds).json()["user"]["id"] == "ops"
        # without --quickstart there is no default namespace prefix
        resp = httpx.post(f"{api}/repositories", json={"name": "needs-ns"}, auth=creds)
        assert resp.status_code == 400
        assert "storage_namespace" in resp.json()["message"]
        assert httpx.post(f"{api}/setup_lakefs", json={"username": "late"}).status_code == 409
    services = build_services(load_server_config(None, {"LAKEFS_DATA_DIR": data_dir}))
    try:
        assert [u.username for u in services.auth.list_users()] == ["ops"]
    finally:
        services.close()


def test_setup_with_given_key_twice(tmp_path: Path, cli: Callable[..., CliResult]) -> None:
    data_dir = str(tmp_path / "keyed")
    args = ("setup", "--user-name", "admin", "--data-dir", data_dir,
            "--access-key-id", "AKIAIOSFODNN7GIVEN00", "--secret-access-key", "g" * 40)
    outputs = [cli(*args) for _ in range(2)]
    assert [o.returncode for o in outputs] == [0, 0], outputs[1].stderr
    assert outputs[0].stdout == outputs[1].stdout
    assert "AKIAIOSFODNN7GIVEN00" in outputs[0].stdout and "g" * 40 in outputs[0].stdout


def test_server_logs_are_json_when_configured(tmp_path: Path) -> None:
    data_dir = tmp_path / "json-logs"
    with _running(data_dir, env={"LAKEFS_LOGGING_FORMAT": "json"}) as (endpoint, out):
        assert httpx.get(f"{endpoint}/_health").status_code == 204
    lines = [line for line in out.read_text().splitlines()
             if line.strip() and not line.startswith("lakefs-core listening on")]
    records = [json.loads(line) for line in lines]  # every log line is one JSON object
    assert records and all({"time", "level", "logger", "msg"} <= set(r) for r in records)
    assert any(r["logger"].startswith("uvicorn") for r in records)
