"""Session-wide real servers: one PostgreSQL cluster and one moto server.

Tests that need PostgreSQL ask for ``pg_url`` (a fresh database each time);
tests that need S3 or DynamoDB ask for ``moto_endpoint`` and create uniquely named
buckets/tables. Neither ever skips: a missing binary is a test error.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator

import pytest

from tests.servers import MOTO_ENV, MotoServer, PostgresServer, start_moto, start_postgres

for _k, _v in MOTO_ENV.items():
    os.environ.setdefault(_k, _v)

_counter = itertools.count()


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    yield server
    server.stop()


@pytest.fixture
def pg_url(postgres_server: PostgresServer) -> str:
    """A SQLAlchemy URL of a new, empty PostgreSQL database."""
    return postgres_server.create_database(f"t{os.getpid()}_{next(_counter)}")


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    server = start_moto()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def moto_endpoint(moto_server: MotoServer) -> str:
    return moto_server.endpoint


@pytest.fixture
def unique_name() -> str:
    """A name unique within the test session (for buckets, tables, repositories)."""
    return f"t{os.getpid()}-{next(_counter)}"
