"""The generated configuration references match the settings models."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lakefs_core.config import ServerConfig, load_server_config
from lakefs_core.settings.reference import model_rows, render_reference
from lakefs_testing.config_reference import PAGES, ROOT, stale_pages


def test_the_committed_references_are_those_the_models_give() -> None:
    assert stale_pages() == [], (
        "run `python -m lakefs_testing.config_reference` and commit docs/")


def test_the_check_fails_when_a_page_drifts(tmp_path: Path) -> None:
    for name, render in PAGES.items():
        (tmp_path / name).write_text(render(), encoding="utf-8")
    check = [sys.executable, "-m", "lakefs_testing.config_reference", "--check",
             "--docs", str(tmp_path)]
    assert subprocess.run(check, cwd=ROOT, capture_output=True).returncode == 0
    page = tmp_path / "CONFIG_SERVER.md"
    page.write_text(page.read_text().replace("`LAKEFS_LISTEN_ADDRESS`", "`LAKEFS_LISTEN`"))
    drift = subprocess.run(check, cwd=ROOT, capture_output=True, text=True)
    assert drift.returncode == 1
    assert "CONFIG_SERVER.md is out of date" in drift.stderr


def test_a_variable_the_reference_names_sets_its_key(tmp_path: Path) -> None:
    page = render_reference(ServerConfig, title="t", intro="i")
    for key, env, value, expected in [
        ("logging.format", "LAKEFS_LOGGING_FORMAT", "json", "json"),
        ("auth.cache.ttl", "LAKEFS_AUTH_CACHE_TTL", "7s", "0:00:07"),
        ("blockstore.s3.list_page_size", "LAKEFS_BLOCKSTORE_S3_LIST_PAGE_SIZE", "9", "9"),
    ]:
        assert f"| `{key}` |" in page and f"| `{env}` |" in page
        config = load_server_config(None, {env: value, "LAKEFS_BLOCKSTORE_TYPE": "s3",
                                           "LAKEFS_DATA_DIR": str(tmp_path)})
        node: object = config
        for part in key.split("."):
            node = getattr(node, part)
        assert str(node) == expected


def test_rows_give_type_default_and_description() -> None:
    rows = {r.key: r for r in model_rows(ServerConfig, {})}
    assert rows["auth.cache.ttl"][1:3] == ("duration", "20s")
    assert rows["listen_address"][1:3] == ("host:port", "127.0.0.1:8000")
    assert rows["database.type"].type == '"local" | "postgres" | "dynamodb"'
    assert "pre-signed URL" in rows["blockstore.s3.pre_signed_expiry"].description
