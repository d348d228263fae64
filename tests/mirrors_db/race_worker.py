"""Entry point of the processes that race on one row (spawned by test_races)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mirrors_db import VersionConflictError, open_mirrors_table


def race_on_branch_progress(
    config: dict[str, Any], organization_id: str, mirror_id: str, rounds: int, worker: str,
    barrier: Any, results: Any,
) -> None:
    """Each round: read the row, wait until the other process has read it too, then
    try a compare-and-swap write; report (round, worker, won) to ``results``."""
    with open_mirrors_table(config) as table:
        for round_no in range(rounds):
            barrier.wait(timeout=120)
            current = table.get_branch_progress(organization_id, mirror_id, "main")
            barrier.wait(timeout=120)  # both hold the same version now
            try:
                table.put_branch_progress(replace(current, pending_commit=f"{worker}-{round_no}"))
                results.put((round_no, worker, True))
            except VersionConflictError:
                results.put((round_no, worker, False))
