"""Session-wide real servers: one PostgreSQL cluster and one moto server.

Tests that need PostgreSQL ask for ``pg_url`` (a fresh database each time);
tests that need S3 or DynamoDB ask for ``moto_endpoint`` and create uniquely named
buckets/tables. Neither ever skips: a missing binary is a test error.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.servers import MOTO_ENV, MotoServer, PostgresServer, start_moto, start_postgres

if TYPE_CHECKING:
    from lakefs_core.block.base import BlockStore
    from lakefs_core.block.gs import GSBlockStore
    from lakefs_core.block.s3 import S3BlockStore
    from lakefs_testing.gcs import GCSEmulator

for _k, _v in MOTO_ENV.items():
    os.environ.setdefault(_k, _v)


def _own_storage_configs() -> None:
    """The lakefs SDK keeps the storage configuration of every server it met in one dict
    shared by all its clients (a class attribute of ``ServerConfiguration``): with
    servers on different stores in one test process, a client of a local server would
    take an S3 server's ``pre_sign_support``. Each configuration gets a dict of its own.
    """
    from lakefs.client import ServerConfiguration

    shared_init = ServerConfiguration.__init__

    def init(self: ServerConfiguration, client: object) -> None:
        self._storage_conf = {}
        shared_init(self, client)  # type: ignore[arg-type]

    ServerConfiguration.__init__ = init  # type: ignore[method-assign]


_own_storage_configs()


def _quiet_unsupported_field_attribute_warning() -> None:
    """FastAPI silences pydantic's UnsupportedFieldAttributeWarning (about its own
    parameter fields) with ``warnings.catch_warnings()``, which swaps the process-wide
    filter list and so is not thread-safe: with servers building routes in one thread
    while another enters or leaves such a block, the filters in force can be a list
    without the ignore, and pytest's ``error`` turns the warning into a failure of
    whichever test is running. The warning is dropped where pydantic emits it."""
    import types
    import warnings

    from pydantic._internal import _generate_schema
    from pydantic.warnings import UnsupportedFieldAttributeWarning

    def warn(message: Any, category: Any = None, stacklevel: int = 1,
             source: Any = None) -> None:
        if category is UnsupportedFieldAttributeWarning:
            return
        warnings.warn(message, category, stacklevel + 1, source)

    shim = types.SimpleNamespace(**{k: getattr(warnings, k) for k in dir(warnings)
                                    if not k.startswith("__")})
    shim.warn = warn
    _generate_schema.warnings = shim  # type: ignore[attr-defined]


_quiet_unsupported_field_attribute_warning()

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


# --- blockstores ------------------------------------------------------------------
@pytest.fixture(scope="session")
def s3_blockstore(moto_endpoint: str) -> Iterator[S3BlockStore]:
    """One S3BlockStore on the session's moto server (stores are bucket-agnostic)."""
    from lakefs_core.block.config import S3Config, S3Credentials
    from lakefs_core.block.s3 import S3BlockStore

    store = S3BlockStore(S3Config(
        region=MOTO_ENV["AWS_DEFAULT_REGION"], endpoint=moto_endpoint, force_path_style=True,
        credentials=S3Credentials(access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
                                  secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"]),
    ))
    yield store
    store.close()


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[GCSEmulator]:
    """The Cloud Storage emulator; a failure to start fails the test, never skips it."""
    from lakefs_testing.gcs import start_gcs_emulator

    emulator = start_gcs_emulator()
    yield emulator
    emulator.stop()


@pytest.fixture(scope="session")
def gs_blockstore(gcs_emulator: GCSEmulator) -> Iterator[GSBlockStore]:
    """One GSBlockStore on the session's emulator (stores are bucket-agnostic)."""
    from lakefs_core.block.config import GSConfig
    from lakefs_core.block.gs import GSBlockStore

    store = GSBlockStore(GSConfig(endpoint=gcs_emulator.endpoint, anonymous=True))
    yield store
    store.close()


@pytest.fixture(params=["local", "s3", "gs"])
def blockstore_namespace(
    request: pytest.FixtureRequest, tmp_path: Path, unique_name: str
) -> tuple[BlockStore, str]:
    """A blockstore and an empty storage namespace on it, for each backend.

    local: a LocalBlockStore over ``tmp_path`` and ``local://ns-<unique>``;
    s3: the moto-backed S3BlockStore, a fresh bucket and ``s3://<bucket>/ns``;
    gs: the emulator-backed GSBlockStore, a fresh bucket and ``gs://<bucket>/ns``.
    """
    if request.param == "local":
        from lakefs_core.block.local import LocalBlockStore

        return LocalBlockStore(str(tmp_path / "blockstore")), f"local://ns-{unique_name}"
    if request.param == "gs":
        gs: GSBlockStore = request.getfixturevalue("gs_blockstore")
        gs.client.create_bucket(f"bs-{unique_name}")
        return gs, f"gs://bs-{unique_name}/ns"
    store: S3BlockStore = request.getfixturevalue("s3_blockstore")
    bucket = f"bs-{unique_name}"
    store.client.create_bucket(Bucket=bucket)
    return store, f"s3://{bucket}/ns"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    """A real server on loopback: SQLite and local storage in ``tmp_path``, admin set up."""
    with live_server(str(tmp_path / "server")) as srv:
        yield srv
