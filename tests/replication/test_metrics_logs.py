"""What operators see: /metrics while a commit waits and after its promotion, JSON
logs, and clear startup errors for a bad configuration."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from lakefs_core.graveler.ranges import DEFAULT_RANGE_CACHE_BYTES
from lakefs_core.logs import JsonFormatter, configure_logging
from lakefs_testing.regions import (
    Region,
    commit,
    create_mirror,
    create_source,
    mirror_head,
    two_regions,
    upload,
)
from lakefs_testing.replicator import FaultyReplicator
from lakefs_testing.servers import free_port
from lakefs_testing.waiting import wait_for
from replication.__main__ import main as replication_main
from tests.replication.invariants import MirrorChecker

REPO_ROOT = Path(__file__).resolve().parents[2]


def scrape(region: Region) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """The destination sidecar's /metrics: (sample name, sorted labels) -> value."""
    r = httpx.get(region.sidecars[0].url + "/metrics", timeout=10)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain")
    out = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def branch_metric(metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
                  mirror: str, branch: str = "main") -> float | None:
    return metrics.get((name, (("branch", branch), ("mirror", mirror))))


def mirror_metric(metrics: dict[tuple[str, tuple[tuple[str, str], ...]], float], name: str,
                  mirror: str) -> float | None:
    return metrics.get((name, (("mirror", mirror),)))


def test_metrics_while_waiting_and_after_promotion(
        tmp_path: Path, sqlite_mirrors: dict[str, Any]) -> None:
    with two_regions(tmp_path, sqlite_mirrors, mode="native", interval="1s") as (east, west):
        create_source(east)
        for i in range(4):
            upload(east, "src", "main", f"part-{i}.bin", bytes([i]) * (50 + i))
        c1 = commit(east, "src", "main", "four objects")
        held = east.graveler.get_entry("src", c1, "part-2.bin").address
        hold = {"on": True}
        crr = FaultyReplicator(east.blockstore_root / "src", west.blockstore_root / "src-mirror",
                               seed=3, hold=lambda rel: hold["on"] and rel.endswith(held))
        crr.start()
        try:
            # everything but the held object is there before the mirror's first
            # validation, which therefore finds exactly one object missing (a copy the
            # replicator put off would stay counted until the next validation)
            wait_for(lambda: [rel for rel in crr.pending() if not rel.endswith(held)] == [],
                     30, what="every copy but the held one")
            create_mirror(east)
            checker = MirrorChecker(east.graveler, "src", west.graveler, "src-mirror")
            # waiting: one commit pending, one object missing, lag growing
            def waiting() -> bool:
                m = scrape(west)
                return (branch_metric(m, "replication_mirror_branch_missing_objects",
                                      "src-mirror") == 1
                        and (branch_metric(m, "replication_mirror_branch_pending_commits",
                                           "src-mirror") or 0) >= 1
                        and (branch_metric(m, "replication_mirror_branch_lag_seconds",
                                           "src-mirror") or 0) > 0)

            wait_for(waiting, 30, what="metrics of a waiting commit", check=checker.check)
            before = scrape(west)
            # the ranges the validation read are kept, under their bound
            cached = before[("replication_range_cache_bytes", ())]
            bound = before[("replication_range_cache_max_bytes", ())]
            assert 0 < cached < bound == DEFAULT_RANGE_CACHE_BYTES
            assert (mirror_metric(before, "replication_promotions_total", "src-mirror")
                    or 0) == 0
            assert mirror_metric(before, "replication_validation_requests_total",
                                 "src-mirror")
            assert mirror_head(west, "src-mirror", "main") is None

            hold["on"] = False
            wait_for(lambda: mirror_head(west, "src-mirror", "main") == c1, 30,
                     what="promotion", check=checker.check)

            def caught_up() -> dict[tuple[str, tuple[tuple[str, str], ...]], float] | None:
                m = scrape(west)
                done = all(branch_metric(m, name, "src-mirror") == 0 for name in (
                    "replication_mirror_branch_missing_objects",
                    "replication_mirror_branch_pending_commits"))
                # the honest lag: the time since the source was last read and found
                # equal to the mirror, seconds at most while the sidecar reads it
                lag = branch_metric(m, "replication_mirror_branch_lag_seconds", "src-mirror")
                done = done and lag is not None and lag < 5
                done = done and mirror_metric(m, "replication_mirror_source_unreadable",
                                              "src-mirror") == 0
                # a caught-up mirror drops the ranges it kept
                done = done and m[("replication_range_cache_bytes", ())] == 0
                return m if done else None

            after = wait_for(caught_up, 30, what="metrics caught up", check=checker.check)
            assert (mirror_metric(after, "replication_promotions_total", "src-mirror")
                    or 0) >= 1
            requests_after = mirror_metric(after, "replication_validation_requests_total",
                                           "src-mirror")
            requests_before = mirror_metric(before, "replication_validation_requests_total",
                                            "src-mirror")
            assert requests_after is not None and requests_before is not None
            assert requests_after > requests_before
        finally:
            crr.stop()


# ------------------------------------------------------------------------ logs
@pytest.fixture
def root_logging() -> Iterator[logging.Logger]:
    """The root logger, restored after the test (configure_logging replaces it)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_log_lines(root_logging: logging.Logger,
                        capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("debug", "json")
    assert root_logging.level == logging.DEBUG
    log = logging.getLogger("replication.mirroring")
    log.info("promoted", extra={"mirror": "m1", "repository": "src-mirror", "ref": "main",
                                "commit": "c" * 64})
    try:
        raise ValueError("boom")
    except ValueError:
        log.exception("mirror %s failed", "m1", extra={"mirror": "m1"})
    lines = [json.loads(line) for line in capsys.readouterr().err.splitlines()]
    assert len(lines) == 2
    first, second = lines
    assert first["level"] == "INFO" and first["logger"] == "replication.mirroring"
    assert first["msg"] == "promoted"
    assert (first["mirror"], first["repository"], first["ref"], first["commit"]) == (
        "m1", "src-mirror", "main", "c" * 64)
    assert first["time"].endswith("+00:00")
    assert second["level"] == "ERROR" and second["msg"] == "mirror m1 failed"
    assert "ValueError: boom" in second["error"]


def test_text_logs_by_default(root_logging: logging.Logger,
                              capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging("WARN")
    assert root_logging.level == logging.WARNING
    logging.getLogger("replication").info("hidden")
    logging.getLogger("replication").warning("shown %d", 1)
    err = capsys.readouterr().err
    assert "hidden" not in err and "WARNING replication shown 1" in err
    with pytest.raises(json.JSONDecodeError):
        json.loads(err.splitlines()[0])
    # a record object in any format can always be rendered as JSON (odd extra values)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "m", None, None)
    record.when = Path("/p")
    assert json.loads(JsonFormatter().format(record))["when"] == "/p"


def sidecar_config(tmp_path: Path, **changes: Any) -> dict[str, Any]:
    config: dict[str, Any] = {
        "region": "west",
        "organization_id": "org",
        "regional_endpoint": "http://127.0.0.1:9",
        "dst_endpoints": {"east": "http://127.0.0.1:9"},
        "listen_address": f"127.0.0.1:{free_port()}",
        "mirrors_database": {"type": "sqlite", "sqlite": {"path": str(tmp_path / "m.db")}},
        "refstore_database": {"type": "local",
                              "local": {"path": str(tmp_path / "metadata.db")}},
        "blockstore": {"type": "local", "local": {"path": str(tmp_path / "store")}},
        "auth": {"encrypt": {"secret_key": "secret"}},
        "source_lakefs": {"access_key_id": "AKIAEXAMPLE", "secret_access_key": "secret"},
    }
    for key, value in changes.items():
        if value is None:
            config.pop(key)
        else:
            config[key] = value
    return config


def test_sidecar_process_logs_json(tmp_path: Path) -> None:
    """``python -m replication run`` with ``logging.format: json``: every line is JSON."""
    config = sidecar_config(tmp_path, logging={"format": "json", "level": "info"})
    path = tmp_path / "replication.yaml"
    path.write_text(yaml.safe_dump(config))
    env = {k: v for k, v in os.environ.items() if not k.startswith("REPLICATION_")}
    proc = subprocess.Popen([sys.executable, "-m", "replication", "run", "--config", str(path)],
                            cwd=REPO_ROOT, env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    try:
        url = f"http://{config['listen_address']}/_health"
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, "the sidecar exited"
            try:
                if httpx.get(url, timeout=2).status_code == 204:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the sidecar did not start"
            time.sleep(0.1)
    finally:
        proc.terminate()
        _out, err = proc.communicate(timeout=30)
    lines = [line for line in err.splitlines() if line.strip()]
    records = [json.loads(line) for line in lines]  # every line parses
    started = [r for r in records if r["msg"] == "replication service listening"]
    assert len(started) == 1
    assert started[0]["listen_address"] == config["listen_address"]
    assert started[0]["region"] == "west" and started[0]["level"] == "INFO"


@pytest.mark.parametrize(("changes", "field", "words"), [
    ({"mirrors_database": {"type": "mongodb"}}, "mirrors_database.type", "mongodb"),
    ({"mirrors_database": {"type": "dynamodb", "dynamodb": {}}},
     "mirrors_database.dynamodb.table_name", "required"),
    ({"refstore_database": None}, "refstore_database", "required"),
    ({"refstore_database": {"type": "postgres", "postgres": {}}},
     "refstore_database.postgres.connection_string", "required"),
])
def test_startup_config_errors_name_the_field(
        tmp_path: Path, root_logging: logging.Logger, capsys: pytest.CaptureFixture[str],
        changes: dict[str, Any], field: str, words: str) -> None:
    path = tmp_path / "replication.yaml"
    path.write_text(yaml.safe_dump(sidecar_config(tmp_path, **changes)))
    assert replication_main(["run", "--config", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ")
    assert f"{field}:" in err and words in err, err
    assert "Traceback" not in err
    # nothing was opened or created
    assert not (tmp_path / "m.db").exists() and not (tmp_path / "metadata.db").exists()
