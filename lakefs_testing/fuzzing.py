"""Property-based fuzzing of the REST API and the replication API, against live servers.

Two regions run (:func:`lakefs_testing.regions.two_regions`): servers and replication
sidecars on loopback, over SQLite or PostgreSQL. Schemathesis generates requests from
the server's own OpenAPI document (``/api/v1``) and the replication service's
(``/service/replication/v1``, reached through the server's proxy), valid and invalid
ones, sent as the admin or as a read-only user (member of ``Viewers``). Generated
names are often swapped for seeded ones (an existing repository, branch, commit, tag,
object, user, group, policy, access key, mirror) so that requests reach past the
not-found checks; the seeds are restored every :data:`RESEED_EVERY` requests, as
requests delete and rewrite them.

Every response is checked (no 5xx; status code, content type and body as the document
says; a read-only user changes nothing), and afterwards
:func:`lakefs_testing.consistency.check_consistency` looks for half-changed state in
both regions.
"""

from __future__ import annotations

import contextlib
import random
import sys
import time
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.core.failures import FailureGroup
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from lakefs_core.auth.model import Policy
from lakefs_core.errors import LakeFSError
from lakefs_testing.consistency import check_consistency
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET
from lakefs_testing.regions import MIRRORS, Region, postgres_database, two_regions
from lakefs_testing.servers import postgres

REPO = "fuzz-repo"
SCRATCH = "fuzz-scratch"
USER, GROUP, POLICY = "fuzz-user", "fuzz-group", "fuzz-policy"
VIEWER = "fuzz-viewer"
VIEWER_KEY, VIEWER_SECRET = "AKIAFUZZVIEWER000001", "fuzz-viewer-secret-0123456789abcdef"
MIRROR = "fuzz-repo-mirror"
OBJECTS = ("data/a.csv", "data/b/c.txt", "staged.txt")
#: requests between two restorations of the seeds
RESEED_EVERY = 250
#: share of requests sent as the read-only user
VIEWER_SHARE = 0.25

CHECKS: dict[str, Callable[..., Any]] = {
    "not_a_server_error": not_a_server_error,
    "status_code_conformance": status_code_conformance,
    "content_type_conformance": content_type_conformance,
    "response_schema_conformance": response_schema_conformance,
}
#: changing requests a read-only user may get a 2xx for: its own credentials, and
#: deleting objects (lakeFS answers 200 with an error per path it may not delete)
VIEWER_MAY = ("/api/v1/auth/login", f"/api/v1/auth/users/{VIEWER}/credentials")
VIEWER_MAY_END = ("/objects/delete",)
#: share of JSON bodies that get a string with a lone surrogate (``\ud800``): valid
#: JSON, but no valid text, which Hypothesis never generates by itself
SURROGATE_SHARE = 0.2


@contextlib.contextmanager
def fuzz_regions(root: Path, database: str) -> Iterator[tuple[Region, Region]]:
    """Regions east and west (servers, sidecars) over ``database``: sqlite or postgres."""
    with contextlib.ExitStack() as stack:
        databases = None
        mirrors: dict[str, Any] = {"type": "sqlite", "sqlite": {"path": str(root / "mirrors.db")}}
        if database == "postgres":
            pg = stack.enter_context(postgres())
            databases = {n: postgres_database(pg.create_database(f"fuzz_{n}"))
                         for n in ("east", "west")}
            mirrors = {"type": "postgres",
                       "postgres": {"connection_string": pg.create_database("fuzz_mirrors")}}
        elif database != "sqlite":
            raise ValueError(f"database {database!r}: sqlite or postgres")
        yield stack.enter_context(two_regions(root, mirrors, interval="1s",
                                              databases=databases))


@dataclass
class FuzzReport:
    """What a run did and found."""

    requests: int = 0
    #: requests whose JSON body got a string with a lone surrogate
    surrogates: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    #: requests answered with a 5xx or a dropped connection
    server_errors: list[str] = field(default_factory=list)
    #: failed checks by name, with the first few examples
    failures: Counter[str] = field(default_factory=Counter)
    examples: dict[str, list[str]] = field(default_factory=dict)
    #: consistency findings, by region
    findings: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0

    def fail(self, check: str, what: str) -> None:
        self.failures[check] += 1
        shown = self.examples.setdefault(check, [])
        if len(shown) < 5:
            shown.append(what)

    def summary(self) -> str:
        lines = [f"requests: {self.requests} ({self.surrogates} with a lone surrogate)",
                 "statuses: " + ", ".join(f"{s}: {n}" for s, n in sorted(self.statuses.items())),
                 f"5xx (and dropped connections): {len(self.server_errors)}"]
        lines += [f"  {e}" for e in self.server_errors[:20]]
        lines.append("failed checks: " + (", ".join(
            f"{c}: {n}" for c, n in sorted(self.failures.items())) or "none"))
        for check, shown in sorted(self.examples.items()):
            lines += [f"  {check}: {e}" for e in shown]
        for region, found in sorted(self.findings.items()):
            lines.append(f"consistency findings in {region}: {len(found)}")
            lines += [f"  {f}" for f in found]
        lines.append(f"time: {self.seconds:.1f} s")
        return "\n".join(lines)


class Fuzzer:
    """Sends generated requests to ``east`` (whose mirrors go to ``west``)."""

    def __init__(self, east: Region, west: Region, *, seed: int = 0,
                 trace: Callable[[str], None] | None = None) -> None:
        self.east, self.west = east, west
        self.seed = seed
        self.trace = trace
        self.report = FuzzReport()
        self.base = east.server.endpoint
        self.admin = _session(ADMIN_KEY, ADMIN_SECRET)
        self.viewer = _session(VIEWER_KEY, VIEWER_SECRET)
        self.names: dict[str, list[str]] = {}
        self.created_repositories: list[str] = []
        self._counter = 0
        self._limit = 0

    # --- seeds --------------------------------------------------------------------------
    def reseed(self) -> None:
        """Create whatever of the seeds requests deleted, and refresh the known names."""
        auth = self.east.server.services.auth
        with contextlib.suppress(LakeFSError):
            auth.create_user(VIEWER)
        with contextlib.suppress(LakeFSError):
            auth.create_credentials(VIEWER, VIEWER_KEY, VIEWER_SECRET)
        with contextlib.suppress(LakeFSError):
            auth.add_user_to_group(VIEWER, "Viewers")
        with contextlib.suppress(LakeFSError):
            auth.create_user(USER)
        if not auth.list_credentials(USER):
            auth.create_credentials(USER)
        with contextlib.suppress(LakeFSError):
            auth.create_group(GROUP)
        with contextlib.suppress(LakeFSError):
            auth.create_policy(Policy.from_dict({"id": POLICY, "statement": [
                {"action": ["fs:Read*"], "effect": "allow", "resource": "*"}]}))
        api = f"{self.base}/api/v1"
        a = self.admin
        for repo in (REPO, SCRATCH):
            a.post(f"{api}/repositories", json={"name": repo,
                                                "storage_namespace": f"local://{repo}"})
        objects = f"{api}/repositories/{REPO}/branches/main/objects"
        for path in OBJECTS:
            if a.head(f"{api}/repositories/{REPO}/refs/main/objects",
                      params={"path": path}).status_code != 200:
                a.post(objects, params={"path": path}, data=b"a,b\n1,2\n",
                       headers={"x-lakefs-meta-k": "v"})
        a.post(f"{api}/repositories/{REPO}/branches/main/commits", json={"message": "seed"})
        a.post(f"{api}/repositories/{REPO}/branches", json={"name": "side", "source": "main"})
        a.post(f"{api}/repositories/{REPO}/tags", json={"id": "v1", "ref": "main"})
        a.post(objects, params={"path": "staged.txt"}, data=b"staged")
        a.post(f"{self.base}{MIRRORS}/{REPO}/mirrors", json={
            "name": MIRROR, "region": "west", "storage_namespace": f"local://{MIRROR}"})
        log = a.get(f"{api}/repositories/{REPO}/refs/main/commits",
                    params={"amount": 5}).json().get("results", [])
        commits = [c["id"] for c in log]
        keys = [c.access_key_id for c in auth.list_credentials(USER)]
        mirrors = a.get(f"{self.base}{MIRRORS}/{REPO}/mirrors").json().get("results", [])
        refs = ["main", "side", "v1", "main~1", "side@", *commits[:2]]
        self.names = {
            "repository": [REPO], "branch": ["main", "side"], "ref": refs,
            "leftRef": refs, "rightRef": refs, "sourceRef": ["side", "main", "v1"],
            "destinationBranch": ["main", "side"], "tag": ["v1"], "commitId": commits,
            "userId": [USER, VIEWER, "admin"], "groupId": [GROUP, "Viewers", "Admins"],
            "policyId": [POLICY, "FSReadAll"], "accessKeyId": keys,
            "mirror_id": [m["id"] for m in mirrors] or ["none"],
            "path": list(OBJECTS) + ["data/", ""],
        }

    def _writable_names(self, name: str, case: Any) -> list[str] | None:
        """Seeds a changing request may aim at: never the admin, built-ins or the viewer,
        and only scratch repositories are deleted (the main seed keeps its history and
        its mirror)."""
        if name == "repository":
            scratch = [SCRATCH, *self.created_repositories[-3:]]
            deleting = case.method.upper() == "DELETE" and case.path.endswith("{repository}")
            return scratch if deleting else [REPO, SCRATCH]
        return {"userId": [USER], "groupId": [GROUP], "policyId": [POLICY]}.get(
            name, self.names.get(name))

    # --- requests -----------------------------------------------------------------------
    def run(self, requests_wanted: int) -> FuzzReport:
        """Send about ``requests_wanted`` requests, then check both regions' state."""
        started = time.monotonic()
        self._limit = requests_wanted
        self.reseed()
        operations = self._operations()
        slots = [(op, mode) for op in operations for mode in GenerationMode
                 if mode is GenerationMode.POSITIVE or _negatable(op)]
        per_slot = max(2, requests_wanted // len(slots))
        rng = random.Random(self.seed)
        for round_ in range(1000):
            if self.report.requests >= self._limit:
                break
            rng.shuffle(slots)
            for op, mode in slots:
                if self.report.requests >= self._limit:
                    break
                self._exercise(op, mode, per_slot, f"{self.seed}:{round_}")
        self.wait_for_mirrors()
        self.report.findings = {r.name: check_consistency(r.server.services)
                                for r in (self.east, self.west)}
        self.report.seconds = time.monotonic() - started
        return self.report

    def wait_for_mirrors(self, timeout: float = 30) -> None:
        """Let the sidecars settle the mirrors that requests created or deleted."""
        deadline = time.monotonic() + timeout
        busy = ("creating", "deleting")
        while time.monotonic() < deadline:
            page = self.admin.get(f"{self.base}{MIRRORS}/{REPO}/mirrors",
                                  params={"amount": 1000}).json()
            if not any(m["state"] in busy for m in page.get("results", [])):
                return
            time.sleep(0.5)

    def _operations(self) -> list[Any]:
        schemas = [schemathesis.openapi.from_url(f"{self.base}/api/v1/openapi.json"),
                   schemathesis.openapi.from_url(f"{self.base}/service/replication/v1/openapi.json",
                                                 headers={"authorization": _basic()})]
        operations = [r.ok() for s in schemas for r in s.get_all_operations()]  # type: ignore[union-attr]
        return sorted(operations, key=lambda op: f"{op.path} {op.method}")

    def _exercise(self, operation: Any, mode: GenerationMode, examples: int, seed: str) -> None:
        slot = f"{seed} {operation.method} {operation.path} {mode.value}"

        @hypothesis_seed(zlib.crc32(slot.encode()))
        @settings(max_examples=examples, deadline=None, database=None,
                  phases=[Phase.generate], suppress_health_check=list(HealthCheck),
                  print_blob=False)
        # the aiming draws from its own generator, seeded by one draw: how much it draws
        # depends on the seeds of the moment, which Hypothesis must not see vary
        @given(case=operation.as_strategy(generation_mode=mode),
               aim_seed=st.integers(0, 2**64 - 1))
        def run(case: Any, aim_seed: int) -> None:
            if self.report.requests >= self._limit:
                return
            if self.report.requests % RESEED_EVERY == 0 and self.report.requests:
                self.reseed()
            self._send(case, mode, random.Random(aim_seed))

        try:
            run()
        except Unsatisfiable:
            pass  # nothing to generate (no invalid form of a parameterless operation)

    def _send(self, case: Any, mode: GenerationMode, rnd: random.Random) -> None:
        as_viewer = rnd.random() < VIEWER_SHARE
        self._aim(case, rnd)
        session = self.viewer if as_viewer else self.admin
        who = "viewer" if as_viewer else "admin"
        self.report.requests += 1
        what = (f"{who} {mode.value} {case.method} {case.formatted_path} "
                f"query={case.query!r} body={_short(case.body)}")
        try:
            response = case.call(base_url=self.base, session=session, timeout=60)
        except requests.ConnectionError as e:
            self.report.statuses["dropped"] += 1
            self.report.server_errors.append(f"{what} -> connection dropped: {e}")
            return
        except requests.Timeout:
            self.report.statuses["timeout"] += 1
            self.report.server_errors.append(f"{what} -> no answer within 60 s")
            return
        except UnicodeEncodeError:  # a lone surrogate in a form field: no request to send
            self.report.requests -= 1
            return
        status = response.status_code
        self.report.statuses[str(status)] += 1
        if self.trace:
            self.trace(f"{status} {what}")
        # 501 is an answer, not a failure: an API the store does not offer (lakeFS's
        # pre-signed multipart upload on the local store answers it too)
        if status >= 500 and status != 501:
            self.report.server_errors.append(f"{what} -> {status} {response.text[:200]}")
        for name, check in CHECKS.items():
            try:
                case.validate_response(response, checks=[check])
            except FailureGroup as e:
                titles = "; ".join(sorted({getattr(x, "title", type(x).__name__)
                                           for x in e.exceptions}))
                self.report.fail(name, f"{what} -> {status}: {titles}")
        if (as_viewer and case.method.upper() not in ("GET", "HEAD") and status < 300
                and not case.formatted_path.startswith(VIEWER_MAY)
                and not case.formatted_path.endswith(VIEWER_MAY_END)):
            self.report.fail("viewer_changes_nothing", f"{what} -> {status}")

    def _aim(self, case: Any, rnd: random.Random) -> None:
        """Swap some generated names for seeded ones."""
        changing = case.method.upper() not in ("GET", "HEAD")
        for name in list(case.path_parameters or {}):
            known = self._writable_names(name, case) if changing else self.names.get(name)
            if known and rnd.random() < 0.75:
                case.path_parameters[name] = rnd.choice(known)
        if case.query and "path" in case.query and rnd.random() < 0.5:
            case.query["path"] = rnd.choice(self.names["path"])
        body = case.body
        if isinstance(body, dict) and rnd.random() < 0.5:
            self._aim_body(case, body, rnd)
        texts = sorted(k for k, v in body.items() if isinstance(v, str)) if isinstance(
            body, dict) else []
        if (texts and "json" in (case.media_type or "")
                and rnd.random() < SURROGATE_SHARE):
            body[rnd.choice(texts)] += "\ud800"
            self.report.surrogates += 1

    def _aim_body(self, case: Any, body: dict[str, Any], rnd: random.Random) -> None:
        self._counter += 1
        fresh = f"fuzz-new-{self.seed}-{self._counter}"
        if case.path.endswith("/repositories") and "storage_namespace" in body:
            body["name"], body["storage_namespace"] = fresh, f"local://{fresh}"
            self.created_repositories.append(fresh)
        elif case.path.endswith("/mirrors"):
            body.update(name=fresh, region="west", storage_namespace=f"local://{fresh}")
        for key, values in (("source", self.names["ref"]), ("ref", self.names["ref"])):
            if isinstance(body.get(key), str):
                body[key] = rnd.choice(values)
        if isinstance(body.get("paths"), list):
            body["paths"] = rnd.sample(self.names["path"], rnd.randint(0, 3))


def _negatable(operation: Any) -> bool:
    """Whether an operation has anything a request can get wrong beyond its path."""
    return bool(len(operation.query) or len(operation.headers) or len(operation.body))


def _session(key: str, secret: str) -> requests.Session:
    session = requests.Session()
    session.auth = (key, secret)
    return session


def _basic() -> str:
    import base64

    return "Basic " + base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode()


def _short(body: Any) -> str:
    text = repr(body)
    return text if len(text) <= 200 else text[:200] + "..."


def print_trace(line: str) -> None:
    print(line, file=sys.stderr)
