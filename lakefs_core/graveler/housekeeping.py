"""Ephemeral branches: deleting the branches whose expiry has passed.

A branch may be created with an expiry (this server's extension of lakeFS's
create-branch). :func:`delete_expired_branches` deletes the expired ones through the
engine's ordinary delete, so the repository's pre/post-delete-branch hooks run: a
failing pre-delete hook keeps the branch (its run recorded) and the next round tries
again. A default branch, a protected branch and the branches of a read-only repository
(a mirror that still follows its source) are never deleted. Several server processes
may run rounds at once over one database: a branch another one deleted first is gone,
which is no error.

:class:`BranchHousekeeper` runs rounds in a background thread.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from lakefs_core.errors import (
    BranchNotFoundError,
    CannotDeleteDefaultBranchError,
    ForbiddenError,
    LakeFSError,
    PreconditionFailedError,
    RepositoryNotFoundError,
)

if TYPE_CHECKING:
    from lakefs_core.graveler.graveler import Graveler

log = logging.getLogger(__name__)

#: how many expired branches one round looks at (the rest wait for the next round)
ROUND_SIZE = 1000


class Outcome(StrEnum):
    """What a round did with one expired branch."""

    DELETED = "deleted"
    #: never deleted: a default or protected branch, or a read-only repository's
    KEPT = "kept"
    #: a pre-delete-branch hook refused: kept, and tried again next round
    REFUSED = "refused"
    #: already deleted by another process
    GONE = "gone"
    #: any other error, logged; tried again next round
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class ExpiredBranch:
    repository: str
    branch: str
    outcome: Outcome
    detail: str = ""


def delete_expired_branches(graveler: Graveler, now: float | None = None) -> list[ExpiredBranch]:
    """Delete the branches expired at ``now`` (unix seconds; the clock by default)."""
    at = int(time.time() if now is None else now)
    done: list[ExpiredBranch] = []
    for repo_id, name in graveler.refstore.list_expired_branches(at, amount=ROUND_SIZE):
        outcome, detail = Outcome.DELETED, ""
        try:
            graveler.delete_branch(repo_id, name)
        except (BranchNotFoundError, RepositoryNotFoundError):
            outcome = Outcome.GONE
        except (CannotDeleteDefaultBranchError, ForbiddenError) as e:
            outcome, detail = Outcome.KEPT, str(e)
        except PreconditionFailedError as e:
            outcome, detail = Outcome.REFUSED, str(e)
        except LakeFSError as e:
            outcome, detail = Outcome.FAILED, f"{type(e).__name__}: {e}"
        extra = {"repository": repo_id, "branch": name, "outcome": str(outcome)}
        if outcome is Outcome.DELETED:
            log.info("deleted expired branch %s@%s", repo_id, name, extra=extra)
        elif outcome is Outcome.KEPT:  # every round, as long as it is protected: quietly
            log.debug("expired branch %s@%s kept: %s", repo_id, name, detail, extra=extra)
        elif outcome is not Outcome.GONE:
            log.warning("expired branch %s@%s %s: %s", repo_id, name, outcome, detail,
                        extra=extra)
        done.append(ExpiredBranch(repo_id, name, outcome, detail))
    return done


class BranchHousekeeper:
    """Runs :func:`delete_expired_branches` every ``interval`` seconds in a thread.

    Use :meth:`start` and :meth:`close` (or as a context manager).
    """

    def __init__(self, graveler: Graveler, interval: float) -> None:
        if interval <= 0:
            raise ValueError("the housekeeping interval must be positive")
        self.graveler = graveler
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="branch-housekeeping",
                                        daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                delete_expired_branches(self.graveler)
            except Exception:  # a database outage must not end the loop
                log.exception("branch housekeeping round failed")

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    def __enter__(self) -> BranchHousekeeper:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
