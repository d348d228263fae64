"""Zero-copy import: objects already in the object store become entries of a branch.

An import lists its sources (prefixes and single objects) in the repository's
blockstore and streams the listing, sorted by destination path, into range files: the
entries keep the objects' absolute addresses (address type ``full``) and no byte is
copied. Nothing is held in memory but the listing's current page and the range being
written. The imported entries form a metarange of their own; one commit then puts
them on the branch (:meth:`CommitEngine.commit_import`): each imported prefix's
destination is replaced by what was imported there.

An import runs in a thread of the process that started it. Its row in the refstore
(:class:`ImportState`) carries its progress (written every ``progress_interval``)
and its outcome, so any server process answers its status and any can cancel it:
the running import sees the cancellation at its next progress write and stops, its
branch unchanged.
"""

from __future__ import annotations

import heapq
import logging
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

from lakefs_core.block.base import BlockStore, ObjectStat
from lakefs_core.errors import (
    DirtyBranchError,
    ImportNotFoundError,
    LakeFSError,
    ValidationError,
)
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.model import (
    AddressType,
    Entry,
    EntryRecord,
    ImportState,
    Repository,
)

log = logging.getLogger("lakefs_core.import")

#: the error of a canceled import (lakeFS's text)
CANCELED = "Canceled"
#: the error of an import stopped by its server's shutdown
INTERRUPTED = "import interrupted: the server shut down"
DEFAULT_CONTENT_TYPE = "application/octet-stream"


class ImportPathType(StrEnum):
    COMMON_PREFIX = "common_prefix"
    OBJECT = "object"


@dataclass(frozen=True, slots=True)
class ImportPath:
    """One source of an import and where it lands on the branch.

    A prefix's objects land at ``destination`` + the rest of their address after
    ``path``; an object lands at ``destination`` itself.
    """

    path: str
    destination: str
    type: ImportPathType


class _Stopped(Exception):
    """The import was canceled (or its server is shutting down)."""


def check_import_paths(store: BlockStore, paths: Sequence[ImportPath]) -> None:
    """Refuse, before anything runs, sources that cannot be imported into ``store``.

    No paths at all is an import of nothing, which lakeFS commits as an empty commit
    with the import's message and metadata.

    Raises:
        ValidationError: a path of another store or malformed, an object without a
            destination, a store with import disabled, or a source the store refuses
            (:meth:`BlockStore.check_import_source`).
        ForbiddenError: a local path outside the allowed external prefixes.
    """
    if not paths:
        return
    if not store.import_enabled:
        raise ValidationError(
            f"import is not enabled for the {store.type} blockstore "
            f"(blockstore.{store.type}.import_enabled)")
    scheme = f"{store.scheme}://"
    for p in paths:
        if not p.path.startswith(scheme):
            raise ValidationError(
                f"import path {p.path!r} does not fit the {store.type} blockstore: "
                f"expected {scheme}...")
        if any(ord(c) < 0x20 for c in p.path + p.destination):
            raise ValidationError(f"import path {p.path!r}: control characters")
        if store.scheme != "local" and not p.path[len(scheme):].split("/", 1)[0]:
            raise ValidationError(f"import path {p.path!r}: no bucket")
        store.check_import_source(p.path)
        if p.type is ImportPathType.OBJECT:
            if not p.destination:
                raise ValidationError(f"import of object {p.path!r}: empty destination")
            if p.path.endswith("/"):
                raise ValidationError(f"import of object {p.path!r}: not an object path")


def check_outside_namespaces(repositories: Iterable[Repository], storage_id: str,
                             paths: Sequence[ImportPath]) -> None:
    """Refuse sources that reach into a repository's storage namespace on the same
    store: its objects and ``_lakefs`` files are that repository's, read only through
    it and its permissions.

    Raises:
        ValidationError: a source inside a namespace, or a prefix holding one.
    """
    sources = [(p.path, p.type is ImportPathType.COMMON_PREFIX) for p in paths]
    for repo in repositories:
        if repo.storage_id != storage_id:
            continue
        namespace = repo.storage_namespace.rstrip("/") + "/"
        for path, is_prefix in sources:
            if path.startswith(namespace) or (is_prefix and namespace.startswith(path)):
                raise ValidationError(
                    f"import path {path!r} reaches into {repo.storage_namespace!r}, the "
                    f"storage namespace of repository {repo.id!r}")


def _entry(stat: ObjectStat) -> Entry:
    return Entry(address=stat.address, size=stat.size, etag=stat.etag, mtime=stat.mtime,
                 address_type=AddressType.FULL, content_type=DEFAULT_CONTENT_TYPE)


def _source_records(store: BlockStore, source: ImportPath) -> Iterator[EntryRecord]:
    """The records of one source, sorted by destination path (as the store lists)."""
    if source.type is ImportPathType.OBJECT:
        store.check_import_source(source.path)  # again: the path may have changed
        yield EntryRecord(source.destination, _entry(store.stat(source.path)))
        return
    prefix = source.path
    if prefix.count("/") == 2:  # a bucket (or name) alone: its keys start after the "/"
        prefix += "/"
    found = False
    for stat in store.list(prefix):
        found = True
        store.check_import_source(stat.address)  # a link may lead anywhere
        yield EntryRecord(source.destination + stat.address[len(prefix):], _entry(stat))
    if not found:
        raise ValidationError(f"import path not found: no objects under {source.path}")


def import_records(store: BlockStore, paths: Sequence[ImportPath]) -> Iterator[EntryRecord]:
    """Every source's records merged by destination path; a path imported by several
    sources takes the last source's object."""
    def keyed(rank: int, source: ImportPath) -> Iterator[tuple[str, int, EntryRecord]]:
        for rec in _source_records(store, source):
            yield rec.path, -rank, rec

    streams = [keyed(i, p) for i, p in enumerate(paths)]
    last: str | None = None
    for path, _, rec in heapq.merge(*streams, key=lambda t: (t[0], t[1])):
        if path != last:
            last = path
            yield rec


@dataclass
class _Run:
    repo_id: str
    state: ImportState
    stop: threading.Event
    thread: threading.Thread | None = None


class Importer:
    """Starts imports in background threads and answers their status and cancellation.

    Args:
        graveler: the engine (its refstore holds the imports' rows).
        progress_interval: seconds between writes of a running import's progress
            (which is also when it notices a cancellation from another process).
    """

    def __init__(self, graveler: Graveler, *, progress_interval: float = 1.0) -> None:
        self.graveler = graveler
        self.progress_interval = progress_interval
        self._runs: dict[str, _Run] = {}
        self._lock = threading.Lock()
        self._closed = False

    def start(self, repo_id: str, branch: str, paths: Sequence[ImportPath], *,
              message: str, committer: str, metadata: Mapping[str, str] | None = None
              ) -> str:
        """Check the request and start the import; its id.

        Raises:
            RepositoryNotFoundError / BranchNotFoundError: no such repository or branch.
            ReadOnlyRepositoryError / ProtectedBranchError: the branch is not writable.
            ValidationError / ForbiddenError: see :func:`check_import_paths`.
        """
        repo, _ = self.graveler.check_direct_write(repo_id, branch)
        store = self.graveler.store_for(repo.storage_id)
        check_import_paths(store, paths)
        check_outside_namespaces(self.graveler.all_repositories(), repo.storage_id, paths)
        state = ImportState(id=uuid.uuid4().hex, branch=branch,
                            updated_at=self.graveler.clock())
        self.graveler.refstore.create_import(repo_id, state)
        run = _Run(repo_id, state, threading.Event())
        run.thread = threading.Thread(
            target=self._run, args=(run, store, list(paths), message, committer,
                                    dict(metadata or {})),
            name=f"import-{state.id}", daemon=True)
        with self._lock:
            if self._closed:
                raise ValidationError("the server is shutting down")
            self._runs[state.id] = run
        run.thread.start()
        return state.id

    def status(self, repo_id: str, branch: str, import_id: str) -> ImportState:
        """An import of the branch. Raises ImportNotFoundError."""
        state = self.graveler.refstore.get_import(repo_id, import_id)
        if state.branch != branch:
            raise ImportNotFoundError()
        return state

    def cancel(self, repo_id: str, branch: str, import_id: str) -> None:
        """Cancel a running import: it stops and leaves its branch unchanged.

        Raises:
            ImportNotFoundError: no such import of the branch.
            ConflictError: it completed, failed, was canceled or is committing.
        """
        self.status(repo_id, branch, import_id)
        self.graveler.refstore.cancel_import(repo_id, import_id, CANCELED)
        with self._lock:
            run = self._runs.get(import_id)
        if run is not None:
            run.stop.set()

    def running(self) -> list[str]:
        """Ids of the imports running in this process."""
        with self._lock:
            return list(self._runs)

    def close(self, timeout: float = 10.0) -> None:
        """Stop the running imports (they end with an error) and wait for them."""
        with self._lock:
            self._closed = True
            runs = list(self._runs.values())
        for run in runs:
            run.stop.set()
        for run in runs:
            if run.thread is not None:
                run.thread.join(timeout)

    # ------------------------------------------------------------------ running
    def _save(self, run: _Run, **changes: object) -> None:
        """Write the run's row; stop if it is no longer live (canceled elsewhere)."""
        state = replace(run.state, updated_at=self.graveler.clock(), **changes)  # type: ignore[arg-type]
        if not self.graveler.refstore.update_import(run.repo_id, state):
            raise _Stopped
        run.state = state

    def _progress(self, run: _Run, records: Iterator[EntryRecord]) -> Iterator[EntryRecord]:
        count = 0
        next_write = time.monotonic() + self.progress_interval
        for rec in records:
            count += 1
            if count % 256 == 0:
                if run.stop.is_set():
                    raise _Stopped
                if time.monotonic() >= next_write:
                    self._save(run, ingested=count)
                    next_write = time.monotonic() + self.progress_interval
            yield rec
        run.state = replace(run.state, ingested=count)

    def _run(self, run: _Run, store: BlockStore, paths: list[ImportPath], message: str,
             committer: str, metadata: dict[str, str]) -> None:
        repo_id, branch = run.repo_id, run.state.branch
        fields = {"repository": repo_id, "branch": branch, "import_id": run.state.id}
        try:
            graveler = self.graveler
            repo = graveler.refstore.get_repository(repo_id)
            # fail early on a dirty branch (the commit checks again)
            if graveler.has_uncommitted(repo_id, graveler.refstore.get_branch(repo_id, branch)):
                raise DirtyBranchError()
            ranges = graveler.ranges_for(repo)
            records = self._progress(run, import_records(store, paths))
            imported = ranges.apply(ranges.empty_metarange(), records)
            if run.stop.is_set():
                raise _Stopped
            self._save(run, metarange_id=imported.metarange_id)
            prefixes = [p.destination for p in paths if p.type is ImportPathType.COMMON_PREFIX]

            def claim() -> None:
                if run.stop.is_set():
                    raise _Stopped
                self._save(run, committing=True)

            rec = graveler.commit_import(repo_id, branch, imported.metarange_id, prefixes,
                                         message, committer, metadata=metadata,
                                         before_commit=claim)
            self._finish(run, commit_id=rec.id, completed=True)
            log.info("import completed", extra={**fields, "commit": rec.id,
                                                "objects": run.state.ingested})
        except _Stopped:
            if run.state.live:  # a shutdown (a cancellation already ended the row)
                self._finish(run, error=INTERRUPTED)
            log.info("import stopped", extra=fields)
        except LakeFSError as e:
            self._finish(run, error=str(e) or type(e).__name__)
            log.info("import failed: %s", e, extra=fields)
        except Exception as e:  # noqa: BLE001 - any failure ends the import, reported
            self._finish(run, error=f"{type(e).__name__}: {e}")
            log.exception("import failed", extra=fields)
        finally:
            with self._lock:
                self._runs.pop(run.state.id, None)

    def _finish(self, run: _Run, **changes: object) -> None:
        """Write the final row; nothing if the import was canceled meanwhile."""
        try:
            self._save(run, committing=False, **changes)
        except _Stopped:
            pass
        except Exception:  # noqa: BLE001 - the row stays as last written
            log.exception("could not record the end of import %s", run.state.id)

