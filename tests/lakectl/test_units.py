"""lakectl's addresses and configuration, without a server."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakectl import uri
from lakectl.config import DEFAULT_ENDPOINT, ConfigError, load_config


@pytest.mark.parametrize(("text", "kind", "expected"), [
    ("lakefs://repo1", "repository", ("repo1", "", None)),
    ("lakefs://repo1/main", "branch", ("repo1", "main", None)),
    ("lakefs://repo1/main~2", "ref", ("repo1", "main~2", None)),
    ("lakefs://repo1/main/", "path", ("repo1", "main", "")),
    ("lakefs://repo1/main/a/b.csv", "path", ("repo1", "main", "a/b.csv")),
])
def test_addresses(text: str, kind: str, expected: tuple[str, str, str | None]) -> None:
    u = getattr(uri, kind)(text)
    assert (u.repository, u.ref, u.path) == expected
    assert str(u) == text


@pytest.mark.parametrize(("text", "kind", "message"), [
    ("repo1", "repository", "parsing repo1: malformed lakefs uri"),
    ("s3://bucket/x", "path", "parsing s3://bucket/x: malformed lakefs uri"),
    ("lakefs://repo1/main", "repository", "not a valid repo uri"),
    ("lakefs://repo1", "branch", "not a valid branch uri"),
    ("lakefs://repo1/main~1", "branch", "not a valid branch uri"),
    ("lakefs://repo1/main", "path", "not a valid path uri"),
    ("lakefs://Bad_Repo/main/x", "path", "not a valid path uri"),
])
def test_bad_addresses(text: str, kind: str, message: str) -> None:
    with pytest.raises(uri.URIError) as e:
        getattr(uri, kind)(text)
    assert str(e.value) == message


def test_base_uri_makes_relative_addresses() -> None:
    assert str(uri.path("data/x.csv", "lakefs://repo1/main/")) == "lakefs://repo1/main/data/x.csv"
    # a full address ignores the base
    assert uri.branch("lakefs://other/dev", "lakefs://repo1/").repository == "other"


def test_config_file_then_environment(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".lakectl.yaml").write_text(
        "credentials:\n  access_key_id: AKFILE\n  secret_access_key: secret-file\n"
        "server:\n  endpoint_url: http://files.example:8000/api/v1\n"
        "  retries:\n    enabled: false\n")
    env = {"HOME": str(home)}
    cfg = load_config(None, env)
    assert (cfg.access_key_id, cfg.secret_access_key) == ("AKFILE", "secret-file")
    assert cfg.server == "http://files.example:8000"  # with or without /api/v1
    assert cfg.retries_enabled is False and cfg.file == home / ".lakectl.yaml"

    env["LAKECTL_CREDENTIALS_ACCESS_KEY_ID"] = "AKENV"
    env["LAKECTL_SERVER_RETRIES_MAX_ATTEMPTS"] = "7"
    cfg = load_config(None, env)
    assert cfg.access_key_id == "AKENV" and cfg.secret_access_key == "secret-file"
    assert cfg.max_attempts == 7

    other = tmp_path / "other.yaml"
    other.write_text("server:\n  endpoint_url: http://other:9000\n")
    cfg = load_config(str(other), {"HOME": str(home)})
    assert cfg.server == "http://other:9000" and cfg.access_key_id == ""


def test_config_defaults_and_errors(tmp_path: Path) -> None:
    cfg = load_config(None, {"HOME": str(tmp_path)})  # no file at all: lakectl's defaults
    assert cfg.endpoint_url == DEFAULT_ENDPOINT and cfg.file is None
    with pytest.raises(ConfigError, match="no such file"):
        load_config(str(tmp_path / "missing.yaml"), {"HOME": str(tmp_path)})
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="not a YAML mapping"):
        load_config(str(bad), {})
    bad.write_text("server:\n  retries:\n    max_attempts: many\n")
    with pytest.raises(ConfigError, match="not an integer"):
        load_config(str(bad), {})
