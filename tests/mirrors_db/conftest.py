"""Fixtures of the mirrors table suite: one behaviour suite over three backends.

``mirrors_config`` is parametrized over SQLite (a file in tmp_path), PostgreSQL (a
fresh database on the session's real server) and DynamoDB (a fresh table on a moto
server). It is a plain mapping in the YAML shape, so that subprocesses can open the
same table.

DynamoDB guarantees that a conditional write is atomic. moto evaluates the
condition and applies the write in separate steps, and its threaded server runs
requests in parallel, so two racing conditional writes can both succeed there (a
probe of 150 eight-thread rounds saw one double win). The race tests would then
fail on moto's account, so this suite runs its own moto server that serves one
request at a time: the same moto, with DynamoDB's per-request atomicity, and
whose cancelled transactions leave no records in the stream (see
_keep_stream_shards_on_rollback).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from lakefs_testing.servers import free_port
from mirrors_db import MirrorSpec, MirrorsTable, open_mirrors_table

BACKENDS = ["sqlite", "postgres", "dynamodb"]
ORG = "acme"


_serving = threading.local()  # set while this suite's moto server handles a request


class _OneRequestAtATime:
    """WSGI middleware: handle requests one after another (bodies included)."""

    def __init__(self, app: Callable[..., Iterable[bytes]]) -> None:
        self._app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> list[bytes]:
        with self._lock:
            _serving.active = True
            try:
                return list(self._app(environ, start_response))
            finally:
                _serving.active = False


def _keep_stream_shards_on_rollback() -> None:
    """Make moto's cancelled transactions leave the stream as DynamoDB does.

    moto undoes a cancelled TransactWriteItems by swapping in a copy of the table
    taken before it. Stream iterators keep pointing at the discarded table's shard,
    which holds records of the transaction's partial writes (DynamoDB never
    publishes those), and the copy hands out their sequence numbers again. For
    requests of this suite's server only, put the live shard back, cut to where it
    stood before the transaction.
    """
    from moto.dynamodb.models import DynamoDBBackend

    original = DynamoDBBackend.transact_write_items
    if getattr(original, "keeps_stream_shards", False):
        return

    def transact_write_items(self: Any, transact_items: list[dict[str, Any]]) -> None:
        if not getattr(_serving, "active", False):
            return original(self, transact_items)
        before = {name: (t.stream_shard, len(t.stream_shard.items))
                  for name, t in self.tables.items() if t.stream_shard is not None}
        try:
            return original(self, transact_items)
        except Exception:
            for name, (shard, length) in before.items():
                table = self.tables.get(name)
                if table is not None and table.stream_shard is not shard:
                    del shard.items[length:]
                    shard.table = table
                    table.stream_shard = shard
            raise

    transact_write_items.keeps_stream_shards = True  # type: ignore[attr-defined]
    DynamoDBBackend.transact_write_items = transact_write_items  # type: ignore[method-assign]


@pytest.fixture(scope="session")
def dynamodb_endpoint() -> Iterator[str]:
    """A moto server (DynamoDB and Streams) on loopback that serializes requests."""
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )
    from werkzeug.serving import make_server

    _keep_stream_shards_on_rollback()
    app = _OneRequestAtATime(DomainDispatcherApplication(create_backend_app))
    server = make_server("127.0.0.1", free_port(), app, threaded=True,
                         request_handler=MotoRequestHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    thread.join(timeout=10)


class ManualClock:
    """The real UTC time plus an offset that tests can advance (lease expiry)."""

    def __init__(self) -> None:
        self.offset = timedelta(0)

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def advance(self, seconds: float) -> None:
        self.offset += timedelta(seconds=seconds)


def config_for(backend: str, request: pytest.FixtureRequest, tmp_path: Any,
               unique_name: str) -> dict[str, Any]:
    """The ``mirrors_database`` mapping of a fresh, empty table on ``backend``."""
    if backend == "sqlite":
        return {"type": "sqlite", "sqlite": {"path": str(tmp_path / "mirrors.db")}}
    if backend == "postgres":
        url = request.getfixturevalue("pg_url")
        return {"type": "postgres", "postgres": {"connection_string": url}}
    endpoint = request.getfixturevalue("dynamodb_endpoint")
    return {"type": "dynamodb", "dynamodb": {"table_name": f"mirrors-{unique_name}",
                                             "aws_region": "us-east-1",
                                             "endpoint_url": endpoint}}


@pytest.fixture(params=BACKENDS)
def mirrors_config(request: pytest.FixtureRequest, tmp_path: Any, unique_name: str
                   ) -> dict[str, Any]:
    return config_for(request.param, request, tmp_path, unique_name)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def table(mirrors_config: dict[str, Any], clock: ManualClock) -> Iterator[MirrorsTable]:
    with open_mirrors_table(mirrors_config, clock=clock) as opened:
        yield opened


_spec_counter = iter(range(10**9))


def spec(org: str = ORG, **fields: str) -> MirrorSpec:
    """A valid mirror spec with unique name and namespace unless overridden."""
    n = next(_spec_counter)
    values = {
        "organization_id": org,
        "name": f"mirror-{n}",
        "source_region": "us-east-1",
        "source_repository": "source-repo",
        "destination_region": "us-west-2",
        "storage_namespace": f"s3://dest-bucket/mirror-{n}",
        **fields,
    }
    return MirrorSpec(**values)
