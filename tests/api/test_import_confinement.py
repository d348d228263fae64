"""What a local import may read: only files under the allowed external prefixes, as
written and once symbolic links are followed; never the blockstore's own storage,
where every repository keeps its objects and ``_lakefs`` files."""

from __future__ import annotations

import itertools
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import lakefs_sdk
import pytest

from lakefs_core.errors import ValidationError
from lakefs_core.graveler.importing import ImportPath, ImportPathType, check_outside_namespaces
from lakefs_core.graveler.model import Repository
from lakefs_testing.live_server import LiveServer, live_server
from tests.api.sdk_support import sdk_client

_names = itertools.count()


def _name(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


@pytest.fixture(scope="module")
def external(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The one directory imports are allowed to read."""
    return tmp_path_factory.mktemp("allowed")


@pytest.fixture(scope="module")
def secret(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory outside the allowed prefix, with a file no import may reach."""
    directory = tmp_path_factory.mktemp("secret")
    (directory / "passwd").write_bytes(b"operator:secret-hash:0:0")
    return directory


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory, external: Path) -> Iterator[LiveServer]:
    env = {"LAKEFS_BLOCKSTORE_LOCAL_IMPORT_ENABLED": "true",
           "LAKEFS_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES": json.dumps([str(external)])}
    with live_server(str(tmp_path_factory.mktemp("confinement")), env) as s:
        s.services.imports.progress_interval = 0.0
        yield s


def _repo(http: httpx.Client) -> str:
    name = _name("repo")
    r = http.post("/repositories", json={"name": name, "storage_namespace": f"local://{name}"})
    assert r.status_code == 201, r.text
    return name


def _start(http: httpx.Client, repo: str, path: str, kind: str = "common_prefix",
           destination: str = "in/") -> httpx.Response:
    return http.post(f"/repositories/{repo}/branches/main/import", json={
        "paths": [{"type": kind, "path": path, "destination": destination}],
        "commit": {"message": "import"}})


def _wait(http: httpx.Client, repo: str, import_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        status: dict[str, Any] = http.get(f"/repositories/{repo}/branches/main/import",
                                          params={"id": import_id}).json()
        if status["completed"] or "error" in status:
            return status
        assert time.monotonic() < deadline, status
        time.sleep(0.02)


def _importer(srv: LiveServer, repo: str) -> httpx.Client:
    """A user who may do anything in ``repo`` and import from any storage, and nothing
    in other repositories."""
    admin = sdk_client(srv).sdk_client
    policy = _name("own-repo")
    admin.auth_api.create_policy(lakefs_sdk.Policy(id=policy, statement=[
        lakefs_sdk.Statement(effect="allow", action=["fs:*"], resource=(
            f"arn:lakefs:fs:::repository/{repo}")),
        lakefs_sdk.Statement(effect="allow", action=["fs:*"], resource=(
            f"arn:lakefs:fs:::repository/{repo}/*")),
        lakefs_sdk.Statement(effect="allow", action=["fs:ImportFromStorage"],
                             resource="arn:lakefs:fs:::namespace/*")]))
    user = _name("importer")
    admin.auth_api.create_user(lakefs_sdk.UserCreation(id=user))
    admin.auth_api.attach_policy_to_user(user, policy)
    key = admin.auth_api.create_credentials(user)
    return srv.client(key.access_key_id, key.secret_access_key)


def test_another_repositorys_storage_is_not_imported(srv: LiveServer) -> None:
    with srv.client() as admin:
        victim = _repo(admin)
        r = admin.post(f"/repositories/{victim}/branches/main/objects",
                       params={"path": "private.csv"}, content=b"salaries")
        assert r.status_code == 201
        assert admin.post(f"/repositories/{victim}/branches/main/commits",
                          json={"message": "private"}).status_code == 201
        mine = _repo(admin)
    root = srv.services.blockstores.default().root  # type: ignore[attr-defined]
    with _importer(srv, mine) as importer:
        assert importer.get(f"/repositories/{victim}/refs/main/objects",
                            params={"path": "private.csv"}).status_code == 403
        for source, kind in [(f"local://{root}/{victim}/", "common_prefix"),
                             (f"local://{root}/{victim}/_lakefs/", "common_prefix"),
                             (f"local://{root}/", "common_prefix"),
                             (f"local://{root}/{mine}/", "common_prefix"),
                             (f"local://{root}/{victim}/data", "common_prefix")]:
            refused = _start(importer, mine, source, kind)
            assert refused.status_code == 400, (source, refused.text)
            assert "blockstore.local.path" in refused.json()["message"]
        assert importer.get(f"/repositories/{mine}/refs/main/objects/ls").json()["results"] == []


def test_the_blockstore_is_not_imported_through_an_allowed_prefix_holding_it(
        tmp_path: Path) -> None:
    allowed = tmp_path / "data"
    env = {"LAKEFS_BLOCKSTORE_LOCAL_IMPORT_ENABLED": "true",
           "LAKEFS_BLOCKSTORE_LOCAL_PATH": str(allowed / "blockstore"),
           "LAKEFS_BLOCKSTORE_LOCAL_ALLOWED_EXTERNAL_PREFIXES": json.dumps([str(allowed)])}
    with live_server(str(tmp_path / "server"), env) as s, s.client() as http:
        repo = _repo(http)
        refused = _start(http, repo, f"local://{allowed}/")
        assert refused.status_code == 400 and "blockstore.local.path" in refused.text
        # a name prefix that lists the blockstore's files fails on the first of them
        started = _start(http, repo, f"local://{allowed}/block")
        assert started.status_code == 202, started.text
        status = _wait(http, repo, started.json()["id"])
        assert not status["completed"]
        assert "blockstore.local.path" in status["error"]["message"]


def test_a_symbolic_link_out_of_the_allowed_prefix_is_not_followed(
        srv: LiveServer, external: Path, secret: Path) -> None:
    src = external / _name("links")
    (src / "data").mkdir(parents=True)
    (src / "data" / "ok.csv").write_bytes(b"fine")
    os.symlink("/etc", src / "etclink")
    os.symlink(secret, src / "data" / "deep")
    with srv.client() as http:
        repo = _repo(http)
        head = http.get(f"/repositories/{repo}/branches/main").json()["commit_id"]
        for source, kind in [(f"local://{src}/etclink/passwd", "object"),
                             (f"local://{src}/etclink/", "common_prefix"),
                             (f"local://{src}/data/deep/", "common_prefix")]:
            refused = _start(http, repo, source, kind, destination="x" if kind == "object"
                             else "in/")
            assert refused.status_code == 400, (source, refused.text)
            assert "symbolic link" in refused.json()["message"]
        # a link deeper in an allowed source fails the import while it walks
        started = _start(http, repo, f"local://{src}/data/")
        assert started.status_code == 202, started.text
        status = _wait(http, repo, started.json()["id"])
        assert not status["completed"] and "symbolic link" in status["error"]["message"]
        assert http.get(f"/repositories/{repo}/branches/main").json()["commit_id"] == head


def test_a_link_repointed_after_the_import_is_not_read_through(
        srv: LiveServer, external: Path, secret: Path) -> None:
    src = external / _name("swap")
    (src / "real").mkdir(parents=True)
    (src / "real" / "passwd").write_bytes(b"public")
    (src / "tables").mkdir()
    os.symlink(src / "real", src / "tables" / "current")  # a link within the prefix: fine
    with srv.client() as http:
        repo = _repo(http)
        started = _start(http, repo, f"local://{src}/tables/")
        assert started.status_code == 202, started.text
        assert _wait(http, repo, started.json()["id"])["completed"]
        url = f"/repositories/{repo}/refs/main/objects"
        assert http.get(url, params={"path": "in/current/passwd"}).content == b"public"
        os.unlink(src / "tables" / "current")
        os.symlink(secret, src / "tables" / "current")
        read = http.get(url, params={"path": "in/current/passwd"})
        assert read.status_code == 403 and b"secret-hash" not in read.content


def test_object_store_sources_stay_out_of_every_repositorys_namespace() -> None:
    repos = [Repository("sales", "s3://bucket/repos/sales", "main", 0),
             Repository("other", "s3://bucket/repos/sales", "main", 0, storage_id="west")]

    def check(path: str, kind: ImportPathType = ImportPathType.COMMON_PREFIX) -> None:
        check_outside_namespaces(repos, "", [ImportPath(path, "in/", kind)])

    for inside in ["s3://bucket/repos/sales/", "s3://bucket/repos/sales/_lakefs/",
                   "s3://bucket/repos/", "s3://bucket/repos/sa", "s3://bucket/"]:
        with pytest.raises(ValidationError, match="storage namespace of repository 'sales'"):
            check(inside)
    with pytest.raises(ValidationError):
        check("s3://bucket/repos/sales/data/x", ImportPathType.OBJECT)
    check("s3://bucket/raw/")  # beside the namespace
    check("s3://bucket/repos/sales-raw/")
    check("s3://bucket/repos/sa", ImportPathType.OBJECT)  # an object is no prefix
