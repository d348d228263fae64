"""Schemathesis against the live server's own OpenAPI document: no request, valid
or not, may get a 5xx.

The run is bounded (a few examples per operation, derandomized so CI is
reproducible). Path parameters are drawn either from the generated values or from
a seeded repository's real names, so that handlers are exercised past their
not-found checks too.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import lakefs
import lakefs_sdk
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from lakefs.client import Client
from schemathesis.generation import GenerationMode

from lakefs_testing.live_server import LiveServer, live_server

REPO = "fuzz-repo"
#: examples per operation and generation mode
POSITIVE_EXAMPLES = 4
NEGATIVE_EXAMPLES = 2


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    with live_server(str(tmp_path_factory.mktemp("fuzz-server"))) as s:
        yield s


@dataclass
class Seeded:
    """Real names in the server, to aim generated requests at existing things."""

    path_values: dict[str, list[str]]
    object_paths: list[str]


@pytest.fixture(scope="module")
def seeded(srv: LiveServer) -> Seeded:
    client = Client(host=srv.endpoint, username=srv.access_key_id,
                    password=srv.secret_access_key)
    repo = lakefs.Repository(REPO, client=client).create(storage_namespace=f"local://{REPO}")
    main = repo.branch("main")
    main.object("data/a.csv").upload(b"a,b\n1,2\n", metadata={"k": "v"})
    head = main.commit("seed").get_commit().id
    repo.branch("side").create("main")
    repo.branch("side").object("data/side.txt").upload(b"side")
    repo.branch("side").commit("side change")
    repo.tag("v1").create(head)
    main.object("staged.txt").upload(b"staged")
    auth = client.sdk_client.auth_api
    auth.create_user(lakefs_sdk.UserCreation(id="fuzz-user"))
    key = auth.create_credentials("fuzz-user")
    auth.create_group(lakefs_sdk.GroupCreation(id="fuzz-group"))
    return Seeded(
        path_values={
            "repository": [REPO], "branch": ["main", "side"],
            "ref": ["main", "side", "v1", head, "main~1"],
            "leftRef": ["main", "v1"], "rightRef": ["side", "main"],
            "sourceRef": ["side", "main"], "destinationBranch": ["main", "side"],
            "tag": ["v1"], "commitId": [head], "userId": ["fuzz-user"],
            "groupId": ["fuzz-group", "Viewers"], "policyId": ["FSReadAll"],
            "accessKeyId": [key.access_key_id],
        },
        object_paths=["data/a.csv", "staged.txt", "data/"])


@dataclass
class Findings:
    calls: int = 0
    server_errors: list[dict[str, Any]] = field(default_factory=list)


def _aim(case: Any, data: st.DataObject, seeded: Seeded) -> None:
    """Swap some generated path parameters and object paths for real ones."""
    deleting_repository = case.method.upper() == "DELETE" and case.path.endswith(
        "/repositories/{repository}")
    for name in list(case.path_parameters or {}):
        known = seeded.path_values.get(name)
        if (known and not (deleting_repository and name == "repository")
                and data.draw(st.booleans(), label=f"aim {name}")):
            case.path_parameters[name] = data.draw(st.sampled_from(known))
    if case.query and "path" in case.query and data.draw(st.booleans(), label="aim path"):
        case.query["path"] = data.draw(st.sampled_from(seeded.object_paths))


def _exercise(operation: Any, mode: GenerationMode, examples: int, srv: LiveServer,
              seeded: Seeded, session: requests.Session, findings: Findings) -> None:
    @settings(max_examples=examples, deadline=None, database=None, derandomize=True,
              suppress_health_check=list(HealthCheck), print_blob=False)
    @given(case=operation.as_strategy(generation_mode=mode), data=st.data())
    def run(case: Any, data: st.DataObject) -> None:
        _aim(case, data, seeded)
        response = case.call(base_url=srv.endpoint, session=session, timeout=30)
        findings.calls += 1
        # 501 is an answer, not a failure: an API the store does not offer (lakeFS's
        # pre-signed multipart upload on the local store)
        if response.status_code >= 500 and response.status_code != 501:
            findings.server_errors.append({
                "operation": f"{case.method} {case.path}", "mode": mode.value,
                "path_parameters": case.path_parameters, "query": case.query,
                "headers": dict(case.headers or {}), "body": repr(case.body)[:300],
                "status": response.status_code, "response": response.text[:300]})

    try:
        run()
    except Unsatisfiable:
        # an operation with nothing to get wrong (no parameters, no body) has no
        # negative cases
        if mode is not GenerationMode.NEGATIVE:
            raise


def test_no_server_errors(srv: LiveServer, seeded: Seeded) -> None:
    schema = schemathesis.openapi.from_url(f"{srv.api}/openapi.json")
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) > 50  # the document covers the whole API
    findings = Findings()
    with requests.Session() as session:
        session.auth = (srv.access_key_id, srv.secret_access_key)
        for operation in operations:
            _exercise(operation, GenerationMode.POSITIVE, POSITIVE_EXAMPLES, srv, seeded,
                      session, findings)
            if len(operation.query) or len(operation.headers) or len(operation.body):
                # invalid path segments alone mostly cannot be expressed in a URL
                _exercise(operation, GenerationMode.NEGATIVE, NEGATIVE_EXAMPLES, srv, seeded,
                          session, findings)
    assert findings.calls >= len(operations)
    assert findings.server_errors == [], json.dumps(findings.server_errors, indent=1,
                                                    default=str)
