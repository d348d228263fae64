"""Installation routes: health check, first-admin setup, config and the current user."""

from __future__ import annotations

from pathlib import Path

import httpx
import lakefs
import lakefs_sdk
import yaml

from lakefs_core.auth.model import CommPrefs
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, LiveServer, live_server
from tests.api.sdk_support import sdk_client, viewer_client


def test_healthcheck_needs_no_credentials(server: LiveServer) -> None:
    resp = httpx.get(f"{server.api}/healthcheck")
    assert resp.status_code == 204
    assert resp.content == b""


def test_setup_runs_once(tmp_path: Path) -> None:
    with live_server(str(tmp_path / "fresh"), setup_admin=False) as srv:
        api = srv.api
        assert httpx.get(f"{api}/setup_lakefs").json()["state"] == "not_initialized"
        assert httpx.get(f"{api}/user", auth=("AKIAIOSFOLQUICKSTART", "x")).status_code == 401
        resp = httpx.post(f"{api}/setup_lakefs", json={"username": ""})
        assert resp.status_code == 400
        assert httpx.get(f"{api}/setup_lakefs").json()["state"] == "not_initialized"

        resp = httpx.post(f"{api}/setup_lakefs", json={
            "username": "first-admin", "email": "ignored@example.com",
            "key": {"access_key_id": "AKIAIOSFODNN7FIRST00", "secret_access_key": "s" * 40}})
        assert resp.status_code == 200, resp.text
        cred = resp.json()
        assert cred["access_key_id"] == "AKIAIOSFODNN7FIRST00"
        assert cred["secret_access_key"] == "s" * 40
        assert isinstance(cred["creation_date"], int)
        assert httpx.get(f"{api}/setup_lakefs").json()["state"] == "initialized"

        again = httpx.post(f"{api}/setup_lakefs", json={"username": "second"})
        assert again.status_code == 409
        assert again.json()["message"] == "lakeFS already initialized"

        user = httpx.get(f"{api}/user", auth=(cred["access_key_id"], cred["secret_access_key"]))
        assert user.json()["user"]["id"] == "first-admin"
        # the first admin can do anything
        resp = httpx.post(f"{api}/repositories", json={"name": "by-admin"},
                          auth=(cred["access_key_id"], cred["secret_access_key"]))
        assert resp.status_code == 201


def test_setup_generates_a_key_when_none_is_given(tmp_path: Path) -> None:
    with live_server(str(tmp_path / "fresh"), setup_admin=False) as srv:
        cred = httpx.post(f"{srv.api}/setup_lakefs", json={"username": "owner"}).json()
        assert cred["access_key_id"] and cred["secret_access_key"]
        client = lakefs.Client(host=srv.endpoint, username=cred["access_key_id"],
                               password=cred["secret_access_key"])
        current = client.sdk_client.auth_api.get_current_user()
        assert current.user.id == "owner"


def test_config_with_sdk(server: LiveServer) -> None:
    client = sdk_client(server)
    assert tuple(int(p) for p in client.version.split(".")) >= (1, 3, 1)
    storage = client.storage_config
    assert storage.blockstore_type == "local"
    assert storage.pre_sign_support is False and storage.pre_sign_support_ui is False
    assert storage.default_namespace_prefix == "local://"
    assert storage.blockstore_namespace_example.startswith("local://")
    assert storage.blockstore_namespace_validity_regex == "^local://"

    sdk = client.sdk_client
    config = sdk.config_api.get_config()
    assert config.storage_config is not None and config.storage_config_list is not None
    assert [s.blockstore_type for s in config.storage_config_list] == ["local"]
    assert sdk.internal_api.get_setup_state().state == "initialized"
    with server.client() as http:  # the SDK marks these two deprecated
        assert http.get("/config/storage").json()["blockstore_type"] == "local"
        assert http.get("/config/version").json()["version"] == client.version


def test_config_and_user_need_credentials(server: LiveServer) -> None:
    for path in ("/config", "/config/storage", "/config/version", "/user"):
        resp = httpx.get(f"{server.api}{path}")
        assert resp.status_code == 401, path
        assert resp.headers["www-authenticate"].lower().startswith("basic")
    with server.client() as http:
        assert http.get("/user").json()["user"]["id"] == "admin"


def test_multi_store_config(tmp_path: Path) -> None:
    config_file = tmp_path / "lakefs.yaml"
    config_file.write_text(yaml.safe_dump({"blockstores": {"stores": [
        {"id": "primary", "type": "local", "description": "first disk",
         "backward_compatible": True, "local": {"path": str(tmp_path / "disk1")}},
        {"id": "archive", "type": "local", "description": "second disk",
         "local": {"path": str(tmp_path / "disk2")}},
    ]}}))
    with live_server(str(tmp_path / "data"), {"LAKEFS_CONFIG_FILE": str(config_file)}) as srv:
        client = sdk_client(srv)
        config: lakefs_sdk.Config = client.sdk_client.config_api.get_config()
        assert config.storage_config_list is not None
        assert [(s.blockstore_id, s.blockstore_description)
                for s in config.storage_config_list] == [
            ("primary", "first disk"), ("archive", "second disk")]
        assert config.storage_config is not None
        assert config.storage_config.blockstore_id == "primary"

        archived = lakefs.Repository("archived", client=client).create(
            storage_namespace="local://archived", storage_id="archive")
        assert archived.properties.storage_id == "archive"
        archived.branch("main").object("f").upload(b"on the second disk")
        assert (archived.branch("main").object("f").reader(mode="rb").read()
                == b"on the second disk")
        assert any(p.is_file() for p in (tmp_path / "disk2").rglob("*"))
        assert not any(p.is_file() for p in (tmp_path / "disk1").rglob("*"))
        with srv.client() as http:
            resp = http.post("/repositories", json={"name": "lost", "storage_id": "missing"})
            assert resp.status_code == 400
            assert "missing" in resp.json()["message"]
            default = http.post("/repositories", json={"name": "on-default"}).json()
            assert default["storage_id"] == ""


def test_comm_prefs_before_and_after_setup(tmp_path: Path) -> None:
    with live_server(str(tmp_path / "fresh"), setup_admin=False) as srv:
        api = srv.api
        state = httpx.get(f"{api}/setup_lakefs").json()
        assert state == {"state": "not_initialized", "comm_prefs_missing": True}
        prefs = {"email": "ops@example.com", "featureUpdates": True, "securityUpdates": False}
        assert httpx.post(f"{api}/setup_comm_prefs",
                          json={**prefs, "email": "not-an-email"}).status_code == 400
        assert httpx.post(f"{api}/setup_comm_prefs",
                          json={"email": "ops@example.com"}).status_code == 400
        srv.services.auth.setup_admin("admin", ADMIN_KEY, ADMIN_SECRET)
        # lakeFS's SDK sends no credentials: the first answer needs none, even after setup
        sdk = sdk_client(srv).sdk_client
        sdk.internal_api.setup_comm_prefs(lakefs_sdk.CommPrefsInput(
            email="ops@example.com", feature_updates=True, security_updates=False))
        assert httpx.get(f"{api}/setup_lakefs").json()["comm_prefs_missing"] is False
        assert srv.services.auth.get_comm_prefs() == CommPrefs("ops@example.com", True)
        # ... changing them does
        assert httpx.post(f"{api}/setup_comm_prefs", json=prefs).status_code == 401
        with srv.client() as http:
            resp = http.post("/setup_comm_prefs", json={**prefs, "email": "",
                                                        "featureUpdates": False})
            assert resp.status_code == 200
        assert srv.services.auth.get_comm_prefs() == CommPrefs(None, False)


def test_statistics_and_usage_report(server: LiveServer) -> None:
    internal = sdk_client(server).sdk_client.internal_api
    internal.post_stats_events(lakefs_sdk.StatsEventsList(events=[
        lakefs_sdk.StatsEvent(var_class="ui-event", name="page_view", count=2)]))
    with server.client() as http:
        assert http.post("/statistics", json={"events": [{"name": "x"}]}).status_code == 400
    assert httpx.post(f"{server.api}/statistics", json={"events": []}).status_code == 401

    report = internal.get_usage_report_summary()
    assert report.reports == []
    assert len(report.installation_id) == 36  # a UUID, the same at every call
    assert internal.get_usage_report_summary().installation_id == report.installation_id
    with viewer_client(server, "usage-viewer") as viewer:  # fs:ReadConfig
        assert viewer.get("/usage-report/summary").json()["installation_id"] == (
            report.installation_id)
