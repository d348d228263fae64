"""One way to open a SQL database: URLs and the SQLAlchemy engine factory.

The refstore, the auth tables and the SQL mirrors tables all open their engines
here, so a SQLite file shared by several of them is used with the same pragmas by
each: WAL journal, ``synchronous=NORMAL``, foreign keys on, a busy timeout, and
transactions begun by us rather than by the driver (a writer takes the write lock up
front with ``BEGIN IMMEDIATE`` instead of failing to upgrade a read lock halfway).
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import sqlite3
import threading
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, TypeVar

import sqlalchemy as sa
import sqlalchemy.exc as sa_exc
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, make_url
from sqlalchemy.pool import StaticPool

from lakefs_core.errors import DatabaseError, ValidationError

#: the file created inside a ``database.local.path`` that is a directory
SQLITE_FILE_NAME = "refstore.db"

T = TypeVar("T")

#: execution option of a connection whose transaction will write (SQLite: BEGIN IMMEDIATE)
WRITE_OPTION = "lakefs_write"
#: writes made without waiting (:func:`without_waiting`) between two checkpoints of
#: the write-ahead log, which those writes leave to a thread of their own
CHECKPOINT_EVERY = 200
#: how long such a checkpoint waits for another process's writer or a reader
CHECKPOINT_WAIT = 0.2

_log = logging.getLogger(__name__)
_PATIENT: ContextVar[bool] = ContextVar("lakefs_sqlite_patient", default=True)


class WouldWait(Exception):
    """A SQLite write made :func:`without_waiting` found the write lock taken (by a
    writer of this process or another): nothing was written. Run it again where
    waiting is allowed."""


@contextlib.contextmanager
def without_waiting() -> Iterator[None]:
    """SQLite writes through :class:`ThreadConnections` in this block, in this
    context, raise :class:`WouldWait` instead of waiting for the write lock, and
    leave the write-ahead log's checkpoints to a thread of their own: for writes made
    on an event loop, which must not block for long."""
    token = _PATIENT.set(False)
    try:
        yield
    finally:
        _PATIENT.reset(token)


def postgres_url(connection_string: str) -> str:
    """A SQLAlchemy URL (psycopg 3 driver) for a PostgreSQL connection string.

    Accepts ``postgres://``, ``postgresql://`` and ``postgresql+psycopg://`` URLs.

    Raises:
        ValidationError: the string is not a PostgreSQL URL.
    """
    scheme, sep, rest = connection_string.partition("://")
    if not sep or scheme not in ("postgres", "postgresql", "postgresql+psycopg"):
        raise ValidationError(
            "database.postgres.connection_string must be a URL like "
            "postgres://user:password@host:5432/dbname")
    return f"postgresql+psycopg://{rest}"


def local_database_url(sqlite_path: str) -> str:
    """The SQLAlchemy URL of the SQLite file for lakeFS's ``database.local.path``.

    ``~`` is expanded; a path that is an existing directory holds ``refstore.db``.
    """
    path = os.path.expanduser(sqlite_path)
    if os.path.isdir(path):
        path = os.path.join(path, SQLITE_FILE_NAME)
    return f"sqlite:///{os.path.abspath(path)}"


def parse_url(url: str | URL, what: str = "database") -> URL:
    """Parse a SQLAlchemy URL. Raises ValidationError naming ``what`` when malformed."""
    try:
        return make_url(url)
    except sa_exc.ArgumentError as exc:
        raise ValidationError(f"invalid {what} URL: {exc}") from exc


def create_engine(url: str | URL, *, what: str = "database", pool_size: int = 10,
                  max_overflow: int = 40, busy_timeout: float = 30.0,
                  connect_timeout: int = 10, begin_listener: bool = True,
                  allow_memory: bool = False) -> Engine:
    """An engine for SQLite or PostgreSQL, set up the same way for every user.

    Args:
        url: ``sqlite:///path/to/file.db`` or ``postgresql+psycopg://...``.
        what: what the database is, for error messages.
        pool_size, max_overflow: the connection pool (PostgreSQL and SQLite files).
        busy_timeout: SQLite: seconds a statement waits for another writer's lock.
        connect_timeout: PostgreSQL: seconds to wait for a connection, unless the URL
            says.
        begin_listener: SQLite: begin each transaction from an engine event, ``BEGIN
            IMMEDIATE`` when the connection has the :data:`WRITE_OPTION` execution
            option. Without it the caller begins transactions itself
            (:func:`sqlite_begin`).
        allow_memory: SQLite: accept ``sqlite://`` (an in-memory database on one
            shared connection), for tests.

    Raises:
        ValidationError: an unsupported or malformed URL.
        DatabaseError: the directory of a SQLite file cannot be created.
    """
    parsed = parse_url(url, what)
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed, what, pool_size, max_overflow, busy_timeout,
                              begin_listener, allow_memory)
    if backend == "postgresql":
        connect_args: dict[str, Any] = {}
        if "connect_timeout" not in parsed.query:
            connect_args["connect_timeout"] = connect_timeout
        return sa.create_engine(parsed, pool_size=pool_size, max_overflow=max_overflow,
                                pool_pre_ping=True, connect_args=connect_args)
    raise ValidationError(f"unsupported {what}: {backend!r} (use sqlite or postgresql)")


def _sqlite_engine(url: URL, what: str, pool_size: int, max_overflow: int,
                   busy_timeout: float, begin_listener: bool, allow_memory: bool) -> Engine:
    path = url.database
    in_memory = not path or path == ":memory:"
    if (in_memory and not allow_memory) or (path and path.startswith("file:")):
        raise ValidationError(f"the SQLite {what} needs a file path (sqlite:///path/to/file.db)")
    if in_memory:
        engine = sa.create_engine(url, poolclass=StaticPool,
                                  connect_args={"check_same_thread": False})
    else:
        assert path is not None
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        except OSError as exc:
            raise DatabaseError(
                f"cannot create the directory of SQLite {what} {path!r}: {exc}") from exc
        engine = sa.create_engine(url, pool_size=pool_size, max_overflow=max_overflow,
                                  connect_args={"check_same_thread": False})
    busy_ms = int(busy_timeout * 1000)

    @sa.event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn: Any, _record: Any) -> None:
        # transactions are begun by us (the begin listener, or sqlite_begin), never by
        # the driver
        dbapi_conn.isolation_level = None
        cursor = dbapi_conn.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_ms}")
            cursor.execute("PRAGMA foreign_keys = ON")
            cursor.execute("PRAGMA journal_mode = WAL")
            cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    if begin_listener:
        @sa.event.listens_for(engine, "begin")
        def _on_begin(conn: Connection) -> None:
            write = conn.get_execution_options().get(WRITE_OPTION, False)
            conn.exec_driver_sql("BEGIN IMMEDIATE" if write else "BEGIN")

    return engine


def sqlite_begin(conn: Connection, write: bool) -> None:
    """Start the SQLite transaction that SQLAlchemy leaves to the driver.

    For an engine made with ``begin_listener=False``. A writer takes the write lock
    up front. Called on the driver's connection, it costs less than an engine
    ``begin`` listener, which makes SQLAlchemy dispatch events around every
    statement. Driver errors are wrapped as SQLAlchemy wraps them, so that a lock is
    retried.
    """
    statement = "BEGIN IMMEDIATE" if write else "BEGIN"
    driver: Any = conn.connection.driver_connection  # a sqlite3.Connection
    try:
        driver.execute(statement)
    except sqlite3.Error as exc:
        raise sa_exc.DBAPIError.instance(statement, None, exc, sqlite3.Error) from exc


class WriterGate:
    """The writers of one SQLite file in this process, one at a time, in turn.

    SQLite lets one writer in at a time; the others poll for the lock, sleeping 1, 2,
    5, 10 ... 100 ms between tries, so under contention a short write waits far longer
    than the writes ahead of it took. Writers in one process instead queue on this gate
    and enter as soon as the one before them leaves; SQLite's lock (with its busy
    timeout) still orders them against other processes. A thread already holding the
    gate passes through. A writer that waits longer than ``timeout`` fails as SQLite
    would fail it, "database is locked", which callers retry.
    """

    _gates: dict[str, WriterGate] = {}
    _gates_lock = threading.Lock()

    def __init__(self, timeout: float) -> None:
        self._lock = threading.Lock()
        self._held = threading.local()
        self.timeout = timeout

    @classmethod
    def of(cls, path: str, timeout: float) -> WriterGate:
        """The gate of the SQLite file at ``path`` in this process; its timeout is the
        longest asked."""
        key = os.path.realpath(path)
        with cls._gates_lock:
            gate = cls._gates.get(key)
            if gate is None:
                gate = cls._gates[key] = cls(timeout)
            gate.timeout = max(gate.timeout, timeout)  # the most patient user's
            return gate

    @contextlib.contextmanager
    def held(self, *, wait: bool = True) -> Iterator[None]:
        """Hold the gate; ``wait=False``: raise :class:`WouldWait` at once where this
        would wait for another writer."""
        if getattr(self._held, "depth", 0):
            self._held.depth += 1
            try:
                yield
            finally:
                self._held.depth -= 1
            return
        if not (self._lock.acquire(timeout=self.timeout) if wait
                else self._lock.acquire(blocking=False)):
            if not wait:
                raise WouldWait("another writer of this process holds the write lock")
            raise sa_exc.OperationalError("BEGIN IMMEDIATE", None,
                                          sqlite3.OperationalError("database is locked"))
        self._held.depth = 1
        try:
            yield
        finally:
            self._held.depth = 0
            self._lock.release()


class _Held:
    """A thread's connection, in the thread's locals."""

    __slots__ = ("conn", "__weakref__")

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


class ThreadConnections:
    """The driver's own connections to one SQLite file, one per thread.

    For the statements that every request runs (a stat's repository, branch and
    staged record; the auth tables' change count; an upload's staged record): on
    these, SQLAlchemy's pool checkout, statement dispatch and result wrapping cost more
    than the query. A thread keeps its connection for its life, and it is closed when
    the thread ends; all are closed by :meth:`close`. Readers are ``query_only``:
    nothing can write through them. In WAL mode a read never waits for a writer.
    Writers are set up as the engines of
    :func:`create_engine` set theirs up, and take the write lock up front.

    Args:
        path: the SQLite file.
        busy_timeout: seconds a statement waits for a lock.
        writable: connections that write (else ``query_only``).
    """

    def __init__(self, path: str, busy_timeout: float, *, writable: bool = False) -> None:
        self._path = path
        self._busy_ms = int(busy_timeout * 1000)
        self._writable = writable
        self._gate = WriterGate.of(path, busy_timeout) if writable else None
        self._local = threading.local()
        #: every living thread's connection, by key (a thread's ends with the thread)
        self._opened: dict[int, sqlite3.Connection] = {}
        self._keys = itertools.count()
        self._lock = threading.Lock()
        self._closed = False
        #: writes made without waiting since the last checkpoint asked for
        self._unchecked = 0
        self._checkpointer: threading.Thread | None = None
        self._checkpoint_wanted = threading.Event()
        #: passive checkpoints the checkpoint thread ran
        self.checkpoints = 0

    @classmethod
    def of(cls, engine: Engine, busy_timeout: float = 30.0, *,
           writable: bool = False) -> ThreadConnections | None:
        """Connections to the file of ``engine``'s SQLite database; None for another
        database, or SQLite in memory."""
        url = engine.url
        if url.get_backend_name() != "sqlite" or not url.database or url.database == ":memory:":
            return None
        return cls(url.database, busy_timeout, writable=writable)

    @property
    def gate(self) -> WriterGate | None:
        """The gate the writers take turns at (None for readers)."""
        return self._gate

    def connection(self, *, impatient: bool = False) -> sqlite3.Connection:
        """This thread's connection, opened on first use and closed when the thread
        ends (thread pools end idle threads and start new ones). ``impatient``: the
        thread's other connection, for writes made :func:`without_waiting` (no busy
        timeout, no automatic checkpoint)."""
        slot = "impatient" if impatient else "held"
        held: _Held | None = getattr(self._local, slot, None)
        if held is not None:
            return held.conn
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False,
                               cached_statements=64)
        try:
            conn.execute(f"PRAGMA busy_timeout = {0 if impatient else self._busy_ms}")
            if self._writable:
                conn.execute("PRAGMA foreign_keys = ON")
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute("PRAGMA synchronous = NORMAL")
                if impatient:
                    conn.execute("PRAGMA wal_autocheckpoint = 0")
            else:
                conn.execute("PRAGMA query_only = ON")
        except BaseException:
            conn.close()
            raise
        held = _Held(conn)
        with self._lock:
            if self._closed:
                conn.close()
                raise sqlite3.ProgrammingError("the connections are closed")
            key = next(self._keys)
            self._opened[key] = conn
        # the thread's locals go when it ends, and with them the last reference to held
        weakref.finalize(held, self._release, key)
        setattr(self._local, slot, held)
        return conn

    def _release(self, key: int) -> None:
        with self._lock:
            conn = self._opened.pop(key, None)
        if conn is not None:
            conn.close()

    def read(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one read transaction (one snapshot) on this thread's
        connection. The driver's errors are raised as SQLAlchemy wraps them, so that
        callers handle them as they handle their engine's."""
        try:
            conn = self.connection()
            conn.execute("BEGIN")
            try:
                return work(conn)
            finally:
                conn.execute("COMMIT")
        except sqlite3.Error as exc:
            raise sa_exc.DBAPIError.instance("", None, exc, sqlite3.Error) from exc

    def write(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``work`` in one write transaction (``BEGIN IMMEDIATE``), committed if it
        returns, rolled back if it raises; errors as :meth:`read` raises them."""
        if self._gate is None:
            raise sqlite3.ProgrammingError("these connections do not write")
        if not _PATIENT.get():
            return self._write_now(work)
        try:
            with self._gate.held():
                conn = self.connection()
                conn.execute("BEGIN IMMEDIATE")
                return _commit_after(conn, work)
        except sqlite3.Error as exc:
            raise sa_exc.DBAPIError.instance("", None, exc, sqlite3.Error) from exc

    def _write_now(self, work: Callable[[sqlite3.Connection], T]) -> T:
        """:meth:`write` without waiting for the write lock (:func:`without_waiting`)."""
        assert self._gate is not None
        try:
            with self._gate.held(wait=False):
                conn = self.connection(impatient=True)
                try:
                    conn.execute("BEGIN IMMEDIATE")
                except sqlite3.OperationalError as exc:
                    if exc.sqlite_errorcode & 0xFF == sqlite3.SQLITE_BUSY:
                        raise WouldWait("another process holds the write lock") from exc
                    raise
                result = _commit_after(conn, work)
        except sqlite3.Error as exc:
            raise sa_exc.DBAPIError.instance("", None, exc, sqlite3.Error) from exc
        self._count_unchecked()
        return result

    def _count_unchecked(self) -> None:
        """Count a write made without waiting; every :data:`CHECKPOINT_EVERY`, wake the
        checkpoint thread, while the writer goes on."""
        with self._lock:
            self._unchecked += 1
            if self._unchecked < CHECKPOINT_EVERY or self._closed:
                return
            self._unchecked = 0
            if self._checkpointer is None:
                self._checkpointer = threading.Thread(target=self._checkpoints, daemon=True,
                                                      name="sqlite-checkpoints")
                self._checkpointer.start()
        self._checkpoint_wanted.set()

    def _checkpoints(self) -> None:
        """The checkpoint thread: moves the write-ahead log into the database file and
        has the next writer start the log again from its beginning (``RESTART``). It
        goes in turn with this process's writers (the gate) and keeps those of other
        processes out for as long as it runs; it waits at most
        :data:`CHECKPOINT_WAIT` for another process's writer or a reader to finish, and
        otherwise leaves the rest to the next checkpoint."""
        assert self._gate is not None
        conn = sqlite3.connect(self._path, isolation_level=None, check_same_thread=False)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(CHECKPOINT_WAIT * 1000)}")
            while True:
                self._checkpoint_wanted.wait()
                self._checkpoint_wanted.clear()
                if self._closed:
                    return
                try:
                    with self._gate.held():
                        conn.execute("PRAGMA wal_checkpoint(RESTART)").fetchall()
                    self.checkpoints += 1
                except (sqlite3.Error, sa_exc.OperationalError) as exc:
                    _log.debug("checkpoint of %s: %s", self._path, exc)
        finally:
            conn.close()

    def first(self, sql: str, params: Any) -> Any:
        """The first row of one statement (its own snapshot), or None; errors as
        :meth:`read` raises them."""
        try:
            cursor = self.connection().execute(sql, params)
            try:
                return cursor.fetchone()
            finally:
                cursor.close()  # the statement ends now: the snapshot is let go
        except sqlite3.Error as exc:
            raise sa_exc.DBAPIError.instance(sql, None, exc, sqlite3.Error) from exc

    def close(self) -> None:
        """Close every thread's connection; later statements fail."""
        with self._lock:
            self._closed = True
            opened, self._opened = self._opened, {}
        self._checkpoint_wanted.set()  # the checkpoint thread ends
        for conn in opened.values():
            conn.close()


def _commit_after(conn: sqlite3.Connection, work: Callable[[sqlite3.Connection], T]) -> T:
    """Run ``work`` in the transaction just begun on ``conn``: committed if it returns,
    rolled back if it raises."""
    try:
        result = work(conn)
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
    return result


_NAMED_SQLITE = sqlite.dialect(paramstyle="named")
_SQL_TEXT: dict[Any, str] = {}


def sqlite_text(statement: Any, columns: tuple[str, ...] = ()) -> str:
    """A SQLAlchemy statement built once (module level, bound parameters by name) as
    SQLite's SQL text with ``:name`` parameters, compiled on first use. ``columns``:
    the columns an INSERT gives values for (by default, all)."""
    key = (statement, columns)
    text = _SQL_TEXT.get(key)
    if text is None:
        compiled = statement.compile(dialect=_NAMED_SQLITE, column_keys=list(columns) or None)
        text = _SQL_TEXT[key] = str(compiled)
    return text


#: runs a statement built once (with its parameters) and gives its first row or None
First = Callable[[Any, Any], Any]


def first_on(conn: Connection) -> First:
    """:data:`First` on a SQLAlchemy connection."""
    return lambda statement, params: conn.execute(statement, params).first()


def first_on_driver(conn: sqlite3.Connection) -> First:
    """:data:`First` on a driver's SQLite connection (:class:`ThreadConnections`)."""
    return lambda statement, params: conn.execute(sqlite_text(statement), params).fetchone()
