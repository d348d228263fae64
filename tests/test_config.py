"""Settings of the server (lakefs_core.config) and the sidecar (replication.config)."""

from __future__ import annotations

import os
import stat
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy
import yaml
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from lakefs_core.actions import build_hook, parse_action
from lakefs_core.auth.store import AuthStore
from lakefs_core.block import BlockStores
from lakefs_core.config import (
    DEFAULT_DATA_DIR,
    INSECURE_SECRET_KEY,
    QUICKSTART_ACCESS_KEY_ID,
    SECRET_KEY_FILE,
    ConfigError,
    ServerConfig,
    field_paths,
    format_duration,
    load_server_config,
    parse_duration,
)
from lakefs_core.errors import SecretDecryptionError, ValidationError
from lakefs_core.graveler.refstores import dynamodb_options
from lakefs_core.services import build_services
from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY, AzuriteServer
from mirrors_db.config import MirrorsDatabaseConfig
from replication.config import (
    SECRET_ENV_VARS,
    ReplicationConfig,
    load_replication_config,
)

REPO_ROOT = Path(__file__).resolve().parent.parent
CONFIG_DIR = REPO_ROOT / "config"
SEED_SECRET_ENV = {
    "source_lakefs_access_key_id": "AKIAREPLICATOR",
    "source_lakefs_secret_access_key": "replicator-secret",
}


def write_yaml(path: Path, data: Any) -> str:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return str(path)


def minimal_replication(**overrides: Any) -> dict[str, Any]:
    """The required fields of the replication service's reference, nothing else."""
    data: dict[str, Any] = {
        "region": "us-east-1",
        "organization_id": "my-org",
        "regional_endpoint": "http://lakefs.default.svc.cluster.local:80",
        "dst_endpoints": {"us-west-2": "https://lakefs-west.example.com"},
        "mirrors_database": {
            "type": "dynamodb",
            "dynamodb": {"table_name": "lakefs-replication-table", "aws_region": "us-east-1"},
        },
        "blockstore": {"type": "s3", "s3": {"region": "us-east-1"}},
        "auth": {"encrypt": {"secret_key": "shared-secret"}},
    }
    data.update(overrides)
    return data


def unknown_keys(given: Any, parsed: Any, path: str = "") -> list[str]:
    """Keys of ``given`` that the parsed settings do not hold (silently dropped)."""
    missing: list[str] = []
    if isinstance(given, dict):
        if not isinstance(parsed, dict):
            return [path or "(top level)"]
        for key, value in given.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in parsed:
                missing.append(where)
            else:
                missing += unknown_keys(value, parsed[key], where)
    elif isinstance(given, list) and isinstance(parsed, list):
        for i, (g, p) in enumerate(zip(given, parsed, strict=False)):
            missing += unknown_keys(g, p, f"{path}[{i}]")
    return missing


# --- durations ------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20s", 20),
        ("1m", 60),
        ("1h30m", 5400),
        ("500ms", 0.5),
        ("1.5h", 5400),
        ("2h45m30.5s", 9930.5),
        ("250us", 0.00025),
        ("0", 0),
        ("30", 30),
        (30, 30),
        (2.5, 2.5),
        (timedelta(minutes=2), 120),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["", "abc", "5x", "1m-", "m", "1h 30m", "-1s", True, None, -3])
def test_parse_duration_rejects(text: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(text)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(20, "20s"), (60, "1m"), (5400, "1h30m"), (0.5, "500ms"), (0, "0s"), (3661.5, "1h1m1.5s")],
)
def test_format_duration(seconds: float, text: str) -> None:
    assert format_duration(timedelta(seconds=seconds)) == text


@given(st.integers(min_value=0, max_value=10**12))
def test_duration_round_trip(micros: int) -> None:
    value = timedelta(microseconds=micros)
    assert parse_duration(format_duration(value)) == value


# --- server: defaults and environment ----------------------------------------------------
def test_server_defaults_are_the_embedded_mode(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    cfg = load_server_config(None, env={})
    data_dir = os.path.expanduser(DEFAULT_DATA_DIR)
    assert cfg.data_dir == data_dir == str(tmp_path / ".local/share/lakefs-mirror")
    assert cfg.listen_address == "127.0.0.1:8000"
    assert cfg.database.type == "local"
    assert cfg.database.local.path == os.path.join(data_dir, "metadata.db")
    assert cfg.database.sqlalchemy_url() == "sqlite:///" + os.path.join(data_dir, "metadata.db")
    assert cfg.blockstores is None
    assert cfg.blockstore is not None
    assert cfg.blockstore.type == "local"
    assert cfg.blockstore.local is not None
    assert cfg.blockstore.local.path == os.path.join(data_dir, "blockstore")
    assert cfg.replication.endpoint == "http://127.0.0.1:8008"
    assert cfg.auth.api.endpoint is None
    assert cfg.storage_config.default_namespace_prefix is None
    assert cfg.storage_config.link_address_expiry == timedelta(hours=6)
    assert cfg.is_embedded


def test_embedded_mode_generates_a_secret_key(tmp_path: Path) -> None:
    cfg = load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path)})
    encrypt = cfg.auth.encrypt
    assert encrypt.generated and encrypt.key_file == str(tmp_path / SECRET_KEY_FILE)
    assert encrypt.secret_key is not None
    key = encrypt.secret_key.get_secret_value()
    assert key != INSECURE_SECRET_KEY and len(key) >= 32
    assert key not in repr(cfg)
    kept = tmp_path / SECRET_KEY_FILE
    assert kept.read_text().strip() == key
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    # the next start reads the same key; another data directory gets another
    again = load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path)}).auth.encrypt
    assert not again.generated and again.secret_key is not None
    assert again.secret_key.get_secret_value() == key
    other = load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path / "b")}).auth.encrypt
    assert other.secret_key is not None and other.secret_key.get_secret_value() != key

    configured = load_server_config(
        None, env={"LAKEFS_DATA_DIR": str(tmp_path / "c"),
                   "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "s3cr3t"}
    )
    assert not configured.auth.encrypt.generated and not configured.auth.encrypt.key_file
    assert configured.to_dict()["auth"]["encrypt"]["secret_key"] == "s3cr3t"
    assert not (tmp_path / "c" / SECRET_KEY_FILE).exists()


def test_a_generated_key_takes_over_the_secrets_of_the_old_default(tmp_path: Path) -> None:
    """Embedded installations of earlier versions used a public default key: at the
    first start with a generated key, their stored secrets are re-encrypted with it."""
    db = tmp_path / "metadata.db"
    old = AuthStore(f"sqlite:///{db}", INSECURE_SECRET_KEY)
    cred = old.setup_admin("admin", "AKIAOLDINSTALLATION1",
                           "an-old-secret-of-40-characters-long-xx")
    old.close()
    cfg = load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path)})
    assert cfg.auth.encrypt.generated
    services = build_services(cfg)
    try:
        assert services.auth.authenticate(cred.access_key_id, cred.secret).username == "admin"
    finally:
        services.close()
    with pytest.raises(SecretDecryptionError):  # the public key opens nothing any more
        AuthStore(f"sqlite:///{db}", INSECURE_SECRET_KEY).get_credentials(cred.access_key_id)


def test_postgres_needs_a_real_secret_key(tmp_path: Path) -> None:
    env = {
        "LAKEFS_DATABASE_TYPE": "postgres",
        "LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING": "postgres://u:p@127.0.0.1:5432/db",
    }
    with pytest.raises(ConfigError) as err:
        load_server_config(None, env=env)
    assert err.value.fields == ["auth.encrypt.secret_key"]
    assert "auth.encrypt.secret_key" in str(err.value)


@pytest.mark.parametrize(
    ("var", "value", "path", "expected"),
    [
        ("LAKEFS_LISTEN_ADDRESS", "0.0.0.0:9000", ("listen_address",), "0.0.0.0:9000"),
        ("LAKEFS_DATABASE_TYPE", "local", ("database", "type"), "local"),
        (
            "LAKEFS_DATABASE_LOCAL_PATH",
            "/srv/meta.db",
            ("database", "local", "path"),
            "/srv/meta.db",
        ),
        (
            "LAKEFS_BLOCKSTORE_LOCAL_PATH",
            "/srv/blocks",
            ("blockstore", "local", "path"),
            "/srv/blocks",
        ),
        ("LAKEFS_AUTH_ENCRYPT_SECRET_KEY", "k3y", ("auth", "encrypt", "secret_key"), "k3y"),
        (
            "LAKEFS_AUTH_API_ENDPOINT",
            "http://auth:8000/api/v1",
            ("auth", "api", "endpoint"),
            "http://auth:8000/api/v1",
        ),
        ("LAKEFS_AUTH_CACHE_TTL", "1m30s", ("auth", "cache", "ttl"), timedelta(seconds=90)),
        (
            "LAKEFS_REPLICATION_ENDPOINT",
            "http://sidecar:8008/",
            ("replication", "endpoint"),
            "http://sidecar:8008",
        ),
        (
            "LAKEFS_STORAGE_CONFIG_DEFAULT_NAMESPACE_PREFIX",
            "s3://bucket/repos",
            ("storage_config", "default_namespace_prefix"),
            "s3://bucket/repos",
        ),
        (
            "LAKEFS_STORAGE_CONFIG_LINK_ADDRESS_EXPIRY",
            "30m",
            ("storage_config", "link_address_expiry"),
            timedelta(minutes=30),
        ),
        ("LAKEFS_INSTALLATION_USER_NAME", "admin", ("installation", "user_name"), "admin"),
        ("LAKEFS_LOGGING_LEVEL", "debug", ("logging", "level"), "DEBUG"),
        ("lakefs_logging_format", "json", ("logging", "format"), "json"),
    ],
)
def test_server_env_var_sets_its_field(
    tmp_path: Path, var: str, value: str, path: tuple[str, ...], expected: object
) -> None:
    cfg = load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path), var: value})
    got: Any = cfg
    for part in path:
        got = getattr(got, part)
    if hasattr(got, "get_secret_value"):
        got = got.get_secret_value()
    assert got == expected


def test_server_env_s3_blockstore_with_underscored_keys(tmp_path: Path) -> None:
    env = {
        "LAKEFS_DATA_DIR": str(tmp_path),
        "LAKEFS_BLOCKSTORE_TYPE": "s3",
        "LAKEFS_BLOCKSTORE_S3_REGION": "eu-west-1",
        "LAKEFS_BLOCKSTORE_S3_ENDPOINT": "http://127.0.0.1:9000",
        "LAKEFS_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
        "LAKEFS_BLOCKSTORE_S3_DISCOVER_BUCKET_REGION": "false",
        "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_ACCESS_KEY_ID": "AKIA",
        "LAKEFS_BLOCKSTORE_S3_CREDENTIALS_SECRET_ACCESS_KEY": "SECRET",
        "LAKEFS_ACCESS_KEY_ID": "a lakectl variable, not a server setting",
    }
    cfg = load_server_config(None, env=env)
    assert cfg.blockstore is not None
    s3 = cfg.blockstore.s3
    assert s3 is not None
    assert cfg.blockstore.type == "s3"
    assert (s3.region, s3.endpoint, s3.force_path_style, s3.discover_bucket_region) == (
        "eu-west-1",
        "http://127.0.0.1:9000",
        True,
        False,
    )
    assert s3.credentials is not None
    assert (s3.credentials.access_key_id, s3.credentials.secret_access_key) == ("AKIA", "SECRET")


def test_env_overrides_yaml_and_yaml_overrides_defaults(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "lakefs.yaml",
        {
            "listen_address": "127.0.0.1:7000",
            "data_dir": str(tmp_path / "data"),
            "database": {"type": "local", "local": {"path": str(tmp_path / "from-file.db")}},
            "logging": {"level": "WARN"},
        },
    )
    cfg = load_server_config(path, env={"LAKEFS_LISTEN_ADDRESS": "127.0.0.1:7001"})
    assert cfg.listen_address == "127.0.0.1:7001"
    assert cfg.database.local.path == str(tmp_path / "from-file.db")
    assert cfg.logging.level == "WARN"
    assert cfg.logging.format == "text"
    assert cfg.blockstore is not None and cfg.blockstore.local is not None
    assert cfg.blockstore.local.path == str(tmp_path / "data" / "blockstore")


def test_config_file_from_env_var(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "c.yaml", {"data_dir": str(tmp_path), "listen_address": ":8100"})
    cfg = load_server_config(None, env={"LAKEFS_CONFIG_FILE": path})
    assert cfg.listen_address == ":8100"


def test_server_config_reads_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LAKEFS_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("LAKEFS_LISTEN_ADDRESS", "127.0.0.1:8123")
    assert ServerConfig().listen_address == "127.0.0.1:8123"
    assert load_server_config().listen_address == "127.0.0.1:8123"


def test_quickstart_fills_the_first_admin(tmp_path: Path) -> None:
    cfg = load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path)}, quickstart=True)
    assert cfg.installation.user_name == "quickstart"
    assert cfg.installation.access_key_id is not None
    assert cfg.installation.access_key_id.get_secret_value() == QUICKSTART_ACCESS_KEY_ID
    plain = load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path)})
    assert plain.installation.user_name is None


def test_multi_store_blockstores_from_env_json(tmp_path: Path) -> None:
    stores = (
        '[{"id": "a", "type": "local", "backward_compatible": true},'
        ' {"id": "b", "type": "local", "local": {"path": "' + str(tmp_path / "b") + '"}}]'
    )
    env = {
        "LAKEFS_DATA_DIR": str(tmp_path),
        "LAKEFS_BLOCKSTORES_SIGNING_SECRET_KEY": "sign",
        "LAKEFS_BLOCKSTORES_STORES": stores,
    }
    cfg = load_server_config(None, env=env)
    assert cfg.blockstore is None
    assert cfg.blockstores is not None
    local_paths = [s.local.path for s in cfg.blockstores.stores if s.local is not None]
    assert local_paths == [str(tmp_path / "blockstore"), str(tmp_path / "b")]
    # the registry of lakefs_core.block takes these sections as they are
    opened = BlockStores.from_config(cfg.blockstore, cfg.blockstores)
    try:
        assert opened.ids() == ["a", "b"]
        assert opened.for_storage_id("") is opened.for_storage_id("a")
    finally:
        opened.close()


def test_single_store_opens_through_the_registry(tmp_path: Path) -> None:
    cfg = load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path)})
    opened = BlockStores.from_config(cfg.blockstore, cfg.blockstores)
    try:
        store = opened.default()
        store.put("local://repo/x", b"hello")
        assert (tmp_path / "blockstore" / "repo" / "x").read_bytes() == b"hello"
    finally:
        opened.close()


def test_gcs_example_and_environment(tmp_path: Path) -> None:
    """The Cloud Storage example, and the same store named by lakeFS's variables."""
    cfg = load_server_config(CONFIG_DIR / "gcs" / "lakefs.yaml",
                             env={"LAKEFS_DATA_DIR": str(tmp_path)})
    assert cfg.blockstore is not None and cfg.blockstore.type == "gs"
    gs = cfg.blockstore.gs
    assert gs is not None and gs.credentials_file == "/etc/lakefs/gcs-key.json"
    assert gs.pre_signed_expiry == timedelta(minutes=15)
    assert gs.upload_chunk_size == 16 << 20 and gs.disable_pre_signed_ui
    assert gs.endpoint is None and not gs.anonymous

    cfg = load_server_config(None, env={
        "LAKEFS_DATA_DIR": str(tmp_path), "LAKEFS_BLOCKSTORE_TYPE": "gs",
        "LAKEFS_BLOCKSTORE_GS_CREDENTIALS_JSON": '{"type": "service_account"}',
        "LAKEFS_BLOCKSTORE_GS_PRE_SIGNED_EXPIRY": "1h"})
    assert cfg.blockstore is not None and cfg.blockstore.gs is not None
    gs = cfg.blockstore.gs
    assert gs.credentials_json is not None
    assert gs.credentials_json.get_secret_value() == '{"type": "service_account"}'
    assert gs.pre_signed_expiry == timedelta(hours=1)


def test_postgres_connection_string_becomes_a_working_sqlalchemy_url(
    postgres_server: Any,
) -> None:
    cfg = load_server_config(
        None,
        env={
            "LAKEFS_DATABASE_TYPE": "postgres",
            "LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING": postgres_server.dsn,
            "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "k",
        },
    )
    url = cfg.database.sqlalchemy_url()
    assert url.startswith("postgresql+psycopg://")
    engine = sqlalchemy.create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sqlalchemy.text("select 1")).scalar() == 1
    finally:
        engine.dispose()
    assert postgres_server.dsn.split("@")[0] not in repr(cfg)  # the DSN is a secret


# --- server: errors name the field -----------------------------------------------------------
def test_bad_env_value_names_field_and_variable(tmp_path: Path) -> None:
    env = {
        "LAKEFS_DATA_DIR": str(tmp_path),
        "LAKEFS_DATABASE_TYPE": "mysql",
        "LAKEFS_LISTEN_ADDRESS": "no-port",
        "LAKEFS_AUTH_CACHE_TTL": "soon",
    }
    with pytest.raises(ConfigError) as err:
        load_server_config(None, env=env)
    assert sorted(err.value.fields) == ["auth.cache.ttl", "database.type", "listen_address"]
    text = str(err.value)
    for var in env:
        if var != "LAKEFS_DATA_DIR":
            assert var in text
    assert "'mysql'" in text
    assert isinstance(err.value, ValidationError)
    assert isinstance(err.value, ValueError)


def test_bad_yaml_value_names_field_and_file(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "lakefs.yaml",
        {"data_dir": str(tmp_path), "blockstore": {"type": "gcs"}, "databse": {"type": "local"}},
    )
    with pytest.raises(ConfigError) as err:
        load_server_config(path, env={})
    assert sorted(err.value.fields) == ["blockstore.type", "databse"]
    assert all(e.source == path for e in err.value.errors)


def test_blockstore_and_blockstores_are_exclusive(tmp_path: Path) -> None:
    path = write_yaml(
        tmp_path / "lakefs.yaml",
        {
            "data_dir": str(tmp_path),
            "blockstore": {"type": "local"},
            "blockstores": {"stores": [{"id": "a", "type": "local"}]},
        },
    )
    with pytest.raises(ConfigError) as err:
        load_server_config(path, env={})
    assert err.value.fields == ["blockstores"]
    assert "mutually exclusive" in str(err.value)


@pytest.mark.parametrize(
    ("stores", "problem"),
    [
        ([{"id": "a", "type": "local"}, {"id": "a", "type": "local"}], "duplicate"),
        (
            [
                {"id": "a", "type": "local", "backward_compatible": True},
                {"id": "b", "type": "local", "backward_compatible": True},
            ],
            "backward_compatible",
        ),
        ([{"id": "", "type": "local"}], "id"),
        ([], "store"),
    ],
)
def test_bad_multi_store_config(tmp_path: Path, stores: list[Any], problem: str) -> None:
    path = write_yaml(tmp_path / "lakefs.yaml", {"blockstores": {"stores": stores}})
    with pytest.raises(ConfigError) as err:
        load_server_config(path, env={"LAKEFS_DATA_DIR": str(tmp_path)})
    assert err.value.fields and all(f.startswith("blockstores") for f in err.value.fields)
    assert problem in str(err.value)


@pytest.mark.parametrize(
    ("content", "problem"),
    [("a: [unclosed", "not valid YAML"), ("- a\n- b\n", "mapping"), (None, "cannot read")],
)
def test_unreadable_config_file(tmp_path: Path, content: str | None, problem: str) -> None:
    path = tmp_path / "lakefs.yaml"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=problem):
        load_server_config(path, env={})


def test_empty_config_file_is_all_defaults(tmp_path: Path) -> None:
    path = tmp_path / "lakefs.yaml"
    path.write_text("", encoding="utf-8")
    cfg = load_server_config(path, env={"LAKEFS_DATA_DIR": str(tmp_path)})
    assert cfg.database.type == "local"


@pytest.mark.parametrize("model", [ServerConfig, ReplicationConfig])
def test_every_field_path_has_its_own_env_name(model: type[BaseModel]) -> None:
    names = ["_".join(path).upper() for path, _ in field_paths(model)]
    assert len(names) == len(set(names))


# --- replication: its configuration reference ------------------------------------------------
def test_replication_defaults_match_the_seed(tmp_path: Path) -> None:
    cfg = load_replication_config(
        write_yaml(tmp_path / "r.yaml", minimal_replication()), env=SEED_SECRET_ENV
    )
    assert cfg.organization_name is None
    # the seed says 0.0.0.0:8008; loopback on purpose (docs/REPLICATION_CONFIG.md): the
    # mirrors API and /metrics reach no other host unless the deployment says so
    assert cfg.listen_address == "127.0.0.1:8008"
    assert cfg.refstore_database is None
    assert cfg.list_mirrors_page_size == 1000
    assert cfg.list_repositories_page_size == 1000
    assert (cfg.logging.level, cfg.logging.format) == ("INFO", "text")
    sensor = cfg.commit_sensor
    assert sensor.process_branches_duration == timedelta(minutes=1)
    assert sensor.branches_scanner_concurrency_limit == 10
    assert sensor.list_branch_page_size == 1000
    assert sensor.log_commit_page_size == 1000
    assert cfg.mirrors_manager.process_mirrors_interval_duration == timedelta(seconds=20)
    validator = cfg.validator
    assert validator.run_interval == timedelta(minutes=1)
    assert validator.num_workers == 3
    assert validator.cooldown_on_missing == timedelta(minutes=1)
    assert validator.cooldown_on_error == timedelta(minutes=1)
    assert cfg.auth.api.endpoint is None
    assert cfg.auth.cache.enabled is False
    assert cfg.object_replication.mode == "native"
    assert cfg.source_lakefs.access_key_id.get_secret_value() == "AKIAREPLICATOR"
    assert cfg.source_lakefs.secret_access_key.get_secret_value() == "replicator-secret"
    assert cfg.endpoint_for("us-east-1") == "http://lakefs.default.svc.cluster.local:80"
    assert cfg.endpoint_for("us-west-2") == "https://lakefs-west.example.com"
    with pytest.raises(ConfigError, match="eu-central-1"):
        cfg.endpoint_for("eu-central-1")


def test_replication_entirely_from_env() -> None:
    env = {
        "REPLICATION_REGION": "us-east-1",
        "REPLICATION_ORGANIZATION_ID": "my-org",
        "REPLICATION_REGIONAL_ENDPOINT": "http://lakefs:80",
        "REPLICATION_DST_ENDPOINTS": '{"us-west-2": "http://lakefs-west:80"}',
        "REPLICATION_MIRRORS_DATABASE_TYPE": "dynamodb",
        "REPLICATION_MIRRORS_DATABASE_DYNAMODB_TABLE_NAME": "mirrors",
        "REPLICATION_MIRRORS_DATABASE_DYNAMODB_AWS_REGION": "us-east-1",
        "REPLICATION_BLOCKSTORE_TYPE": "s3",
        "REPLICATION_BLOCKSTORE_S3_FORCE_PATH_STYLE": "true",
        "REPLICATION_LISTEN_ADDRESS": "127.0.0.1:18008",
        "REPLICATION_COMMIT_SENSOR_PROCESS_BRANCHES_DURATION": "1h30m",
        "REPLICATION_COMMIT_SENSOR_BRANCHES_SCANNER_CONCURRENCY_LIMIT": "4",
        "REPLICATION_MIRRORS_MANAGER_PROCESS_MIRRORS_INTERVAL_DURATION": "5s",
        "REPLICATION_VALIDATOR_COOLDOWN_ON_MISSING": "500ms",
        "REPLICATION_LIST_MIRRORS_PAGE_SIZE": "50",
        "REPLICATION_OBJECT_REPLICATION_MODE": "builtin",
        "REPLICATION_OBJECT_REPLICATION_BUILTIN_CONCURRENCY": "32",
        "REPLICATION_AUTH_CACHE_ENABLED": "true",
        "auth_encrypt_secret_key": "from-the-secret",
        **SEED_SECRET_ENV,
    }
    cfg = load_replication_config(None, env=env)
    assert cfg.region == "us-east-1"
    assert cfg.dst_endpoints == {"us-west-2": "http://lakefs-west:80"}
    mirrors = cfg.mirrors_database.to_dict()
    assert mirrors["type"] == "dynamodb"
    assert mirrors["dynamodb"] == {"table_name": "mirrors", "aws_region": "us-east-1"}
    assert cfg.blockstore is not None and cfg.blockstore.s3 is not None
    assert cfg.blockstore.s3.force_path_style is True
    assert cfg.listen_address == "127.0.0.1:18008"
    assert cfg.commit_sensor.process_branches_duration == timedelta(hours=1, minutes=30)
    assert cfg.commit_sensor.branches_scanner_concurrency_limit == 4
    assert cfg.mirrors_manager.process_mirrors_interval_duration == timedelta(seconds=5)
    assert cfg.validator.cooldown_on_missing == timedelta(milliseconds=500)
    assert cfg.list_mirrors_page_size == 50
    assert cfg.object_replication.mode == "builtin"
    assert cfg.object_replication.builtin.concurrency == 32
    assert cfg.auth.cache.enabled is True
    assert cfg.auth.encrypt.secret_key.get_secret_value() == "from-the-secret"


def test_replication_config_reads_process_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_yaml(tmp_path / "r.yaml", minimal_replication(region="eu-west-1"))
    monkeypatch.setenv("REPLICATION_CONFIG_FILE", path)
    for name, value in SEED_SECRET_ENV.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("REPLICATION_VALIDATOR_NUM_WORKERS", "7")
    cfg = load_replication_config()
    assert (cfg.region, cfg.validator.num_workers) == ("eu-west-1", 7)
    # the pydantic-settings entry point reads the same variables (but no file)
    direct = ReplicationConfig(**minimal_replication())
    assert direct.validator.num_workers == 7
    assert direct.source_lakefs.access_key_id.get_secret_value() == "AKIAREPLICATOR"


def test_secret_env_names_override_file_and_prefixed_names_win(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "r.yaml", minimal_replication())
    from_secret = load_replication_config(
        path, env={**SEED_SECRET_ENV, "auth_encrypt_secret_key": "from-secret"}
    )
    assert from_secret.auth.encrypt.secret_key.get_secret_value() == "from-secret"
    both = load_replication_config(
        path,
        env={
            **SEED_SECRET_ENV,
            "auth_encrypt_secret_key": "from-secret",
            "REPLICATION_AUTH_ENCRYPT_SECRET_KEY": "prefixed",
        },
    )
    assert both.auth.encrypt.secret_key.get_secret_value() == "prefixed"
    assert set(SECRET_ENV_VARS) == {
        "source_lakefs_access_key_id",
        "source_lakefs_secret_access_key",
        "auth_encrypt_secret_key",
    }


def test_missing_credentials_say_which_variables_to_set(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "r.yaml", minimal_replication())
    with pytest.raises(ConfigError) as err:
        load_replication_config(path, env={})
    assert err.value.fields == ["source_lakefs"]
    assert "source_lakefs_access_key_id" in str(err.value)
    assert "source_lakefs_secret_access_key" in str(err.value)


def test_empty_replication_config_names_every_required_field(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "r.yaml", {})
    with pytest.raises(ConfigError) as err:
        load_replication_config(path, env={})
    assert set(err.value.fields) == {
        "region",
        "organization_id",
        "dst_endpoints",
        "mirrors_database",
        "auth",
        "source_lakefs",
    }


@pytest.mark.parametrize(
    ("overrides", "field", "problem"),
    [
        ({"dst_endpoints": {"us-east-1": "http://x:80"}}, "dst_endpoints", "own region"),
        ({"dst_endpoints": {"us-west-2": "lakefs-west"}}, "dst_endpoints.us-west-2", "http"),
        ({"dst_endpoints": {"": "http://x:80"}}, "dst_endpoints[''] (key)", "at least 1"),
        ({"regional_endpoint": "ftp://x"}, "regional_endpoint", "http"),
        ({"regional_endpoint": None}, "regional_endpoint", "required"),
        ({"blockstore": None}, "blockstore", "required"),
        ({"mirrors_database": {"type": "mongodb"}}, "mirrors_database.type", "'mongodb'"),
        ({"mirrors_database": {"type": "dynamodb"}}, "mirrors_database", "dynamodb section"),
        (
            {"mirrors_database": {"type": "postgres", "postgres": {}}},
            "mirrors_database.postgres.connection_string",
            "required",
        ),
        ({"validator": {"num_workers": 0}}, "validator.num_workers", "greater than or equal"),
        ({"validator": {"run_interval": "0s"}}, "validator.run_interval", "greater than zero"),
        ({"list_mirrors_page_size": 10_001}, "list_mirrors_page_size", "less than or equal"),
        (
            {"mirrors_database": {"type": "sqlite", "list_mirrors_page_size": 5}},
            "mirrors_database.list_mirrors_page_size",
            "set list_mirrors_page_size at the top level only",
        ),
        (
            {"commit_sensor": {"process_branches_duration": "often"}},
            "commit_sensor.process_branches_duration",
            "invalid duration",
        ),
        ({"object_replication": {"mode": "rsync"}}, "object_replication.mode", "'rsync'"),
        ({"logging": {"level": "LOUD"}}, "logging.level", "'LOUD'"),
        ({"listen_address": "8008"}, "listen_address", "host:port"),
        ({"validator": {"num_workerz": 3}}, "validator.num_workerz", "not permitted"),
    ],
)
def test_bad_replication_value_names_the_field(
    tmp_path: Path, overrides: dict[str, Any], field: str, problem: str
) -> None:
    data = minimal_replication(**overrides)
    data = {k: v for k, v in data.items() if v is not None}
    path = write_yaml(tmp_path / "r.yaml", data)
    with pytest.raises(ConfigError) as err:
        load_replication_config(path, env=SEED_SECRET_ENV)
    assert err.value.fields == [field]
    assert problem in str(err.value)


def test_mirrors_database_shapes(tmp_path: Path) -> None:
    sqlite = load_replication_config(
        write_yaml(
            tmp_path / "a.yaml",
            minimal_replication(mirrors_database={"type": "local", "sqlite": {"path": "/m.db"}}),
        ),
        env=SEED_SECRET_ENV,
    )
    assert sqlite.mirrors_database.type == "sqlite"
    assert sqlite.mirrors_database.to_dict()["sqlite"] == {"path": "/m.db"}
    dsn = "postgresql://replication:pw@mirrors-db:26257/mirrors"
    pg = load_replication_config(
        write_yaml(
            tmp_path / "b.yaml",
            minimal_replication(
                mirrors_database={"type": "postgres", "postgres": {"connection_string": dsn}}
            ),
        ),
        env=SEED_SECRET_ENV,
    )
    as_dict = pg.mirrors_database.to_dict()
    assert as_dict["type"] == "postgres"
    assert as_dict["postgres"]["connection_string"] == dsn
    assert "pw" not in repr(pg.mirrors_database)


@pytest.mark.parametrize(
    "section",
    [
        {"type": "dynamodb", "dynamodb": {"table_name": "mirrors", "endpoint": "http://x:1"}},
        {"type": "postgres", "postgres": {"connection_string": "postgresql://u:p@h/db"}},
        {"type": "sqlite", "sqlite": {"path": "/var/lib/mirrors.db"}},
    ],
)
def test_mirrors_database_is_what_mirrors_db_accepts(tmp_path: Path, section: dict) -> None:
    cfg = load_replication_config(
        write_yaml(tmp_path / "r.yaml", minimal_replication(mirrors_database=section)),
        env=SEED_SECRET_ENV,
    )
    assert isinstance(cfg.mirrors_database, MirrorsDatabaseConfig)
    reparsed = MirrorsDatabaseConfig.from_mapping(cfg.mirrors_database.to_dict())
    assert reparsed.model_dump() == cfg.mirrors_database.model_dump()


def test_regional_endpoint_from_organization_name(tmp_path: Path) -> None:
    data = minimal_replication(organization_name="acme")
    del data["regional_endpoint"]
    cfg = load_replication_config(write_yaml(tmp_path / "r.yaml", data), env=SEED_SECRET_ENV)
    assert cfg.regional_endpoint == "https://acme.us-east-1.lakefscloud.io"


def test_replication_to_dict_round_trips(tmp_path: Path) -> None:
    data = minimal_replication(
        validator={"run_interval": "30s"},
        object_replication={
            "mode": "builtin",
            "builtin": {"source_blockstores": {"us-west-2": {"type": "s3"}}},
        },
    )
    cfg = load_replication_config(write_yaml(tmp_path / "r.yaml", data), env=SEED_SECRET_ENV)
    assert ReplicationConfig.model_validate(cfg.to_dict()) == cfg
    dumped = cfg.model_dump(mode="json")
    assert dumped["validator"]["run_interval"] == "30s"
    assert dumped["mirrors_manager"]["process_mirrors_interval_duration"] == "20s"
    assert dumped["auth"]["encrypt"]["secret_key"] != "shared-secret"  # masked
    source = cfg.object_replication.builtin.source_blockstores["us-west-2"]
    assert source.s3 is not None and source.s3.region == "us-east-1"


def test_dynamodb_example_and_environment(tmp_path: Path) -> None:
    """The DynamoDB metadata example, and the same table named by lakeFS's variables."""
    cfg = load_server_config(CONFIG_DIR / "dynamodb" / "lakefs.yaml",
                             env={"LAKEFS_DATA_DIR": str(tmp_path)})
    assert cfg.database.type == "dynamodb" and not cfg.is_embedded
    ddb = cfg.database.dynamodb
    assert (ddb.table_name, ddb.aws_region, ddb.scan_limit) == ("lakefs-metadata",
                                                                "us-east-1", 1024)
    assert ddb.read_capacity_units is None and ddb.write_capacity_units is None  # on-demand

    cfg = load_server_config(None, env={
        "LAKEFS_DATA_DIR": str(tmp_path), "LAKEFS_DATABASE_TYPE": "dynamodb",
        "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "k",
        "LAKEFS_DATABASE_DYNAMODB_ENDPOINT": "http://127.0.0.1:4566",
        "LAKEFS_DATABASE_DYNAMODB_AWS_SECRET_ACCESS_KEY": "s",
        "LAKEFS_DATABASE_DYNAMODB_READ_CAPACITY_UNITS": "10",
        "LAKEFS_DATABASE_DYNAMODB_WRITE_CAPACITY_UNITS": "5"})
    assert dynamodb_options(cfg.database.dynamodb) == {
        "table_name": "kvstore", "endpoint": "http://127.0.0.1:4566", "region": None,
        "profile": None, "access_key_id": None, "secret_access_key": "s",
        "read_capacity_units": 10, "write_capacity_units": 5, "scan_limit": 1024}
    with pytest.raises(ConfigError, match="read_capacity_units"):
        load_server_config(None, env={
            "LAKEFS_DATA_DIR": str(tmp_path), "LAKEFS_DATABASE_TYPE": "dynamodb",
            "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": "k",
            "LAKEFS_DATABASE_DYNAMODB_READ_CAPACITY_UNITS": "10"})
    with pytest.raises(ConfigError, match="secret_key"):  # only local generates a key
        load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path),
                                      "LAKEFS_DATABASE_TYPE": "dynamodb"})


# --- every example in config/ -------------------------------------------------------------------
def example_files() -> list[Path]:
    return sorted(p for p in CONFIG_DIR.rglob("*") if p.suffix in (".yaml", ".yml"))


def test_config_dir_has_every_kind_of_example() -> None:
    names = {p.relative_to(CONFIG_DIR).as_posix() for p in example_files()}
    assert "local/lakefs.yaml" in names
    assert "multi-store/lakefs.yaml" in names
    assert "azure/lakefs.yaml" in names
    assert "gcs/lakefs.yaml" in names
    assert "dynamodb/lakefs.yaml" in names
    for region in ("us-east-1", "us-west-2"):
        assert f"aws/{region}/replication-dynamodb.yaml" in names
        assert f"aws/{region}/replication-postgres.yaml" in names
    assert any(n.startswith("onprem-minio/") and "replication" in n for n in names)


@pytest.mark.parametrize(
    "path", example_files(), ids=lambda p: p.relative_to(CONFIG_DIR).as_posix()
)
def test_example_config_parses(path: Path, tmp_path: Path) -> None:
    given = yaml.safe_load(path.read_text(encoding="utf-8"))
    name = path.name
    if path.parent.name == "_lakefs_tables":
        # a table descriptor of an action example (read by its Lua hook)
        assert {"name", "type", "path"} <= set(given)
        return
    if path.parent.name in ("actions", "lakefs-docs"):
        # lakeFS action files (config/actions/README.md): every hook's properties valid
        action = parse_action(f"_lakefs_actions/{name}", path.read_bytes())
        assert action.hooks
        for hook in action.hooks:
            build_hook(action, hook)
        return
    if name.startswith("lakefs"):
        server = load_server_config(path, env={"LAKEFS_DATA_DIR": str(tmp_path)})
        parsed: dict[str, Any] = server.to_dict()
    elif name.startswith("replication"):
        replication = load_replication_config(path, env=SEED_SECRET_ENV)
        parsed = replication.to_dict()
        assert replication.region not in replication.dst_endpoints
    elif path.parent.name == "helm" and name.startswith("values-"):
        # rendered and parsed by tests/helm; here only the sidecar part is checked
        rep = given["replication"]["config"]
        replication = ReplicationConfig.model_validate(
            {**rep, "source_lakefs": {"access_key_id": "a", "secret_access_key": "s"}}
        )
        parsed = {"replication": {**given["replication"], "config": replication.to_dict()}}
        given = {"replication": {"config": rep}}
    else:
        pytest.fail(f"{path} is neither a server, a replication nor a Helm values example")
    # a key the models do not know (a renamed field) must not be dropped silently
    assert unknown_keys(given, parsed) == []


def test_example_pairs_agree(tmp_path: Path) -> None:
    """Both sides of each pair share organization, secret and mirrors database."""
    pairs = [
        ("aws/us-east-1/replication-dynamodb.yaml", "aws/us-west-2/replication-dynamodb.yaml"),
        ("aws/us-east-1/replication-postgres.yaml", "aws/us-west-2/replication-postgres.yaml"),
        ("onprem-minio/dc-a/replication.yaml", "onprem-minio/dc-b/replication.yaml"),
        ("local-pair/east/replication.yaml", "local-pair/west/replication.yaml"),
    ]
    for left_name, right_name in pairs:
        left = load_replication_config(CONFIG_DIR / left_name, env=SEED_SECRET_ENV)
        right = load_replication_config(CONFIG_DIR / right_name, env=SEED_SECRET_ENV)
        assert left.organization_id == right.organization_id
        assert left.auth.encrypt.secret_key == right.auth.encrypt.secret_key
        assert set(left.dst_endpoints) == {right.region}
        assert set(right.dst_endpoints) == {left.region}
        assert left.mirrors_database.type == right.mirrors_database.type
        if left.mirrors_database.type == "dynamodb":
            assert left.mirrors_database.dynamodb is not None
            assert right.mirrors_database.dynamodb is not None
            assert left.mirrors_database.dynamodb.table_name == (
                right.mirrors_database.dynamodb.table_name
            )
        else:
            assert left.mirrors_database.to_dict() == right.mirrors_database.to_dict()


def test_every_replication_example_names_its_refstore_database() -> None:
    """The sidecar reads and writes its region's lakeFS database: every example says which."""
    from replication.sidecar import refstore_database

    replication_files = [p for p in example_files()
                         if p.name.startswith("replication") and "helm" not in p.parts]
    assert replication_files
    for path in replication_files:
        config = load_replication_config(path, env=SEED_SECRET_ENV)
        assert refstore_database(config).type in ("local", "postgres", "dynamodb"), path


def test_replication_takes_a_dynamodb_lakefs_database(tmp_path: Path) -> None:
    """A lakeFS on DynamoDB: the replication service takes the server's table (its
    refstore and auth store) from the server's settings."""
    from replication.sidecar import refstore_database

    path = write_yaml(tmp_path / "r.yaml", minimal_replication())
    cfg = load_replication_config(path, env={
        **SEED_SECRET_ENV, "LAKEFS_DATABASE_TYPE": "dynamodb",
        "LAKEFS_DATABASE_DYNAMODB_TABLE_NAME": "lakefs-meta",
        "LAKEFS_DATABASE_DYNAMODB_ENDPOINT": "http://127.0.0.1:4566"})
    db = refstore_database(cfg)
    assert (db.type, db.dynamodb.table_name, db.dynamodb.endpoint) == (
        "dynamodb", "lakefs-meta", "http://127.0.0.1:4566")


def test_replication_needs_only_the_table_of_a_dynamodb_block(tmp_path: Path) -> None:
    """A DynamoDB block needs no SQLite file: the refstore and the auth store are both
    in the server's table; a local block without its file is refused naming the field."""
    from replication.sidecar import refstore_database

    block = {"type": "dynamodb", "dynamodb": {"table_name": "lakefs-meta"}}
    path = write_yaml(tmp_path / "r.yaml", minimal_replication(refstore_database=block))
    cfg = load_replication_config(path, env=SEED_SECRET_ENV)
    assert refstore_database(cfg).dynamodb.table_name == "lakefs-meta"
    assert not refstore_database(cfg).local.path
    local = minimal_replication(refstore_database={"type": "local"})
    cfg = load_replication_config(write_yaml(tmp_path / "local.yaml", local),
                                  env=SEED_SECRET_ENV)
    with pytest.raises(ValidationError, match=r"refstore_database\.local\.path: required"):
        refstore_database(cfg)


def test_refstore_database_defaults_to_the_lakefs_database(tmp_path: Path) -> None:
    """Beside the server, with the server's settings in the environment, the
    replication service finds the lakeFS database by itself (not only under Helm)."""
    path = write_yaml(tmp_path / "r.yaml", minimal_replication())
    db = str(tmp_path / "lakefs" / "metadata.db")
    env = {**SEED_SECRET_ENV, "LAKEFS_DATABASE_TYPE": "local",
           "LAKEFS_DATABASE_LOCAL_PATH": db}
    cfg = load_replication_config(path, env=env)
    assert cfg.refstore_database is not None
    assert cfg.refstore_database.type == "local" and cfg.refstore_database.local.path == db
    assert not (tmp_path / "lakefs" / "secret_key").exists()  # nothing written for it
    pg = {**SEED_SECRET_ENV, "LAKEFS_DATABASE_TYPE": "postgres",
          "LAKEFS_DATABASE_POSTGRES_CONNECTION_STRING": "postgres://u:p@db:5432/lakefs"}
    cfg = load_replication_config(path, env=pg)
    assert cfg.refstore_database is not None and cfg.refstore_database.type == "postgres"
    # nothing of lakeFS's in the environment: still unset (the sidecar says it is required)
    assert load_replication_config(path, env=SEED_SECRET_ENV).refstore_database is None


# --- the Azure example ----------------------------------------------------------------------
AZURE_EXAMPLE = CONFIG_DIR / "azure" / "lakefs.yaml"


def test_azure_example_config(tmp_path: Path) -> None:
    config = load_server_config(AZURE_EXAMPLE, env={"LAKEFS_DATA_DIR": str(tmp_path)})
    assert config.blockstore is not None and config.blockstore.azure is not None
    azure = config.blockstore.azure
    assert (azure.storage_account, azure.domain, azure.test_endpoint_url) == (
        "lakefsdata", "blob.core.windows.net", None)
    assert azure.pre_signed_expiry == timedelta(minutes=15)
    assert azure.try_timeout == timedelta(minutes=10)
    stores = BlockStores.from_config(config.blockstore)
    try:
        store = stores.default()
        assert store.type == "azure"
        assert store.base == "https://lakefsdata.blob.core.windows.net/"  # type: ignore[attr-defined]
        assert store.presign_support().pre_sign_support
        assert not store.presign_support().pre_sign_support_ui
    finally:
        stores.close()


def test_azure_example_serves_a_repository_on_azurite(tmp_path: Path,
                                                      azurite_server: AzuriteServer) -> None:
    from azure.storage.blob import BlobServiceClient

    from lakefs_testing.live_server import live_server

    service = BlobServiceClient(azurite_server.account_url, credential={
        "account_name": AZURITE_ACCOUNT, "account_key": AZURITE_KEY})
    service.create_container("example")
    service.close()
    env = {"LAKEFS_CONFIG_FILE": str(AZURE_EXAMPLE),
           "LAKEFS_BLOCKSTORE_AZURE_STORAGE_ACCOUNT": AZURITE_ACCOUNT,
           "LAKEFS_BLOCKSTORE_AZURE_STORAGE_ACCESS_KEY": AZURITE_KEY,
           "LAKEFS_BLOCKSTORE_AZURE_TEST_ENDPOINT_URL": azurite_server.endpoint}
    namespace = f"{azurite_server.account_url}/example/repo"
    with live_server(str(tmp_path / "data"), env) as srv, srv.client() as http:
        storage = http.get("/config/storage").json()
        assert storage["blockstore_type"] == "azure"
        created = http.post("/repositories", json={"name": "on-azure",
                                                   "storage_namespace": namespace})
        assert created.status_code == 201, created.text
        put = http.post("/repositories/on-azure/branches/main/objects",
                        params={"path": "a.txt"}, content=b"in the example's store")
        assert put.status_code == 201, put.text
        assert http.post("/repositories/on-azure/branches/main/commits",
                         json={"message": "first"}).status_code == 201
        got = http.get("/repositories/on-azure/refs/main/objects", params={"path": "a.txt"})
        assert got.content == b"in the example's store"
        stat = http.get("/repositories/on-azure/refs/main/objects/stat",
                        params={"path": "a.txt"}).json()
        assert stat["physical_address"].startswith(namespace + "/")


def test_the_range_cache_bound_is_lakefs_sstable_memory_setting(tmp_path: Path) -> None:
    """``committed.sstable.memory.cache_size_bytes`` (lakeFS's key) bounds the memory of
    the server's parsed ranges; too small a bound is refused with the key named."""
    cfg = load_server_config(None, env={
        "LAKEFS_DATA_DIR": str(tmp_path),
        "LAKEFS_COMMITTED_SSTABLE_MEMORY_CACHE_SIZE_BYTES": "5000000"})
    assert cfg.committed.sstable.memory.cache_size_bytes == 5_000_000
    services = build_services(cfg)
    try:
        assert services.graveler._range_cache._cache.maxsize == 5_000_000
    finally:
        services.close()
    assert load_server_config(None, env={"LAKEFS_DATA_DIR": str(tmp_path)}).committed.sstable \
        .memory.cache_size_bytes == 200_000_000
    with pytest.raises(ValidationError, match="committed.sstable.memory.cache_size_bytes"):
        load_server_config(None, env={
            "LAKEFS_DATA_DIR": str(tmp_path),
            "LAKEFS_COMMITTED_SSTABLE_MEMORY_CACHE_SIZE_BYTES": "10"})
