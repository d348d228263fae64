"""Progress bars of transfers, on stderr (so stdout stays the data or the summary).

On a terminal they redraw as bytes move; elsewhere (a log, a pipe) each bar is
printed once, when the transfer ends. ``--no-progress`` turns them off.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)


class Transfers:
    """A set of byte-counting progress bars (none at all when not ``enabled``)."""

    def __init__(self, enabled: bool) -> None:
        console = Console(file=sys.stderr, soft_wrap=False)
        self._progress = Progress(
            TextColumn("{task.description}"), BarColumn(), DownloadColumn(),
            TransferSpeedColumn(), TimeRemainingColumn(), console=console,
            disable=not enabled)

    def __enter__(self) -> Transfers:
        self._progress.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._progress.stop()

    def bar(self, description: str, total: int | None) -> TaskID:
        return self._progress.add_task(description, total=total)

    def advance(self, task: TaskID, n: int) -> None:
        self._progress.advance(task, n)

    def finish(self, task: TaskID) -> None:
        """The transfer is done: a bar of unknown size shows its final count as total."""
        for t in self._progress.tasks:
            if t.id == task and t.total is None:
                self._progress.update(task, total=t.completed)

    def counted(self, chunks: Iterable[bytes], *tasks: TaskID) -> Iterator[bytes]:
        """``chunks``, advancing ``tasks`` by each chunk's size as it goes."""
        for chunk in chunks:
            for task in tasks:
                self._progress.advance(task, len(chunk))
            yield chunk


__all__ = ["Transfers"]
