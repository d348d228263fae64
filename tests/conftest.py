"""Session-wide real servers: one PostgreSQL cluster, one moto server, one Azurite.

Tests that need PostgreSQL ask for ``pg_url`` (a fresh database each time) or
``pg_schema_url`` (a fresh schema); tests that need S3 or DynamoDB ask for
``moto_endpoint`` and create uniquely named buckets/tables; tests that need Azure Blob
Storage ask for ``azurite_server`` (or ``azure_blockstore``) and create uniquely named
containers. None ever skips: a missing binary is a test error.
"""

from __future__ import annotations

import gc
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lakefs_testing.azurite import AZURITE_ACCOUNT, AZURITE_KEY, AzuriteServer, start_azurite
from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.servers import MOTO_ENV, MotoServer, PostgresServer, start_moto, start_postgres

if TYPE_CHECKING:
    from lakefs_core.block.azure import AzureBlobStore
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


def _share_botocore_data_loader() -> None:
    """Every boto3 session loads and parses the JSON models of the services it makes
    clients for (some 0.2 s of CPU for DynamoDB), and the stores and servers under test
    make a session each. The sessions of the test process share one data loader, as
    the clients of one session do, so that each model is parsed once."""
    import functools

    import botocore.loaders
    import botocore.session

    botocore.session.create_loader = functools.cache(botocore.loaders.create_loader)


_share_botocore_data_loader()

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
def _pg_schemas_database(postgres_server: PostgresServer) -> str:
    """The name of this process's database of ``pg_schema_url``."""
    name = f"schemas{os.getpid()}"
    postgres_server.create_database(name)
    return name


@pytest.fixture
def pg_schema_url(postgres_server: PostgresServer, _pg_schemas_database: str) -> str:
    """A SQLAlchemy URL whose search path is a new, empty schema of this process's
    PostgreSQL database: for stores that keep to their schema, cheaper than a database
    of their own (CREATE DATABASE copies a whole template)."""
    import psycopg

    schema = f"s{next(_counter)}"
    with psycopg.connect(postgres_server.dsn, dbname=_pg_schemas_database,
                         autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
    database = postgres_server.url.rpartition("/")[0] + "/" + _pg_schemas_database
    return f"{database}?options=-csearch_path%3D{schema}"


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
def azurite_server() -> Iterator[AzuriteServer]:
    """Azurite's blob service for the session (a missing Azurite fails, never skips)."""
    server = start_azurite()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def azure_blockstore(azurite_server: AzuriteServer) -> Iterator[AzureBlobStore]:
    """One AzureBlobStore on the session's Azurite (stores are container-agnostic)."""
    from lakefs_core.block.azure import AzureBlobStore
    from lakefs_core.block.config import AzureConfig

    store = AzureBlobStore(AzureConfig(
        storage_account=AZURITE_ACCOUNT, storage_access_key=AZURITE_KEY,
        test_endpoint_url=azurite_server.endpoint))
    yield store
    store.close()


@pytest.fixture
def local_namespace(tmp_path: Path, unique_name: str) -> tuple[BlockStore, str]:
    """A LocalBlockStore over ``tmp_path`` and ``local://ns-<unique>``."""
    from lakefs_core.block.local import LocalBlockStore

    return LocalBlockStore(str(tmp_path / "blockstore")), f"local://ns-{unique_name}"


@pytest.fixture
def s3_namespace(s3_blockstore: S3BlockStore, unique_name: str) -> tuple[BlockStore, str]:
    """The moto-backed S3BlockStore, a fresh bucket and ``s3://<bucket>/ns``."""
    bucket = f"bs-{unique_name}"
    s3_blockstore.client.create_bucket(Bucket=bucket)
    return s3_blockstore, f"s3://{bucket}/ns"


@pytest.fixture
def azure_namespace(azure_blockstore: AzureBlobStore,
                    unique_name: str) -> tuple[BlockStore, str]:
    """The Azurite-backed AzureBlobStore, a fresh container and ``<account url>/<container>/ns``."""
    container = f"bs-{unique_name}"
    azure_blockstore.service.create_container(container)
    return azure_blockstore, f"{azure_blockstore.base}{container}/ns"


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


@pytest.fixture
def gs_namespace(gs_blockstore: GSBlockStore, unique_name: str) -> tuple[BlockStore, str]:
    """The emulator-backed GSBlockStore, a fresh bucket and ``gs://<bucket>/ns``."""
    gs_blockstore.client.create_bucket(f"bs-{unique_name}")
    return gs_blockstore, f"gs://bs-{unique_name}/ns"


#: every blockstore the shared suites run on, as the fixture giving a store and an empty
#: namespace on it: a new store is one more line here
BLOCKSTORE_NAMESPACES = [
    "local_namespace",
    "s3_namespace",
    "azure_namespace",
    "gs_namespace",
]


@pytest.fixture(params=BLOCKSTORE_NAMESPACES, ids=lambda name: name.removesuffix("_namespace"))
def blockstore_namespace(request: pytest.FixtureRequest) -> tuple[BlockStore, str]:
    """A blockstore and an empty storage namespace on it, for each backend."""
    store_namespace: tuple[BlockStore, str] = request.getfixturevalue(request.param)
    return store_namespace


@pytest.fixture
def server(tmp_path: Path) -> Iterator[LiveServer]:
    """A real server on loopback: SQLite and local storage in ``tmp_path``, admin set up."""
    with live_server(str(tmp_path / "server")) as srv:
        yield srv


@pytest.fixture(autouse=True, scope="module")
def _collect_garbage_after_each_module() -> Iterator[None]:
    """A socket or file a module's tests leave to the garbage collector shows here, in
    that module's teardown, instead of in whichever later test a collection falls on.

    What outlives the collection is frozen (``gc.freeze``): the session's servers,
    caches and imports. The next module's collection looks only at what was made since,
    not at the whole heap again (which took over a second a module late in the suite).
    """
    yield
    gc.collect()
    gc.freeze()


#: seconds each test file took in a recent run (``python -m lakefs_testing.durations``
#: writes it from a JUnit report); a file not in it counts a quarter second a test
FILE_DURATIONS = Path(__file__).with_name("file_durations.json")
_UNKNOWN_TEST_SECONDS = 0.25


#: directories whose test files one worker runs together, for a session fixture they
#: share that costs much to start (Spark's JVM: about 20 s of CPU each time)
SHARED_UNITS = ("tests/spark/",)


def work_unit(path: str) -> str:
    """The unit of work a test file belongs to: the file, or its shared directory."""
    return next((unit for unit in SHARED_UNITS if path.startswith(unit)), path)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Run the longest units of work first. The workers take whole files, or a shared
    directory's files together (:func:`work_unit`), in this order
    (``--no-loadscope-reorder``), so the run ends on short files and no worker idles
    long at the end. A file's tests keep their order."""
    known: dict[str, float] = (json.loads(FILE_DURATIONS.read_text())
                               if FILE_DURATIONS.exists() else {})
    by_file: dict[str, list[pytest.Item]] = {}
    for item in items:
        by_file.setdefault(item.nodeid.partition("::")[0], []).append(item)
    unit_seconds: dict[str, float] = {}
    for path, tests in by_file.items():
        unit = work_unit(path)
        unit_seconds[unit] = unit_seconds.get(unit, 0.0) + known.get(
            path, _UNKNOWN_TEST_SECONDS * len(tests))

    def order(path: str) -> tuple[float, str, str]:
        unit = work_unit(path)
        return -unit_seconds[unit], unit, path

    items[:] = [item for path in sorted(by_file, key=order) for item in by_file[path]]


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """With ``--dist loadfile``, a worker takes a whole unit of work (:func:`work_unit`)."""
    if config.getoption("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class UnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(super()._split_scope(nodeid))

    return UnitScheduling(config, log)
