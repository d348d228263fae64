"""Route modules of the REST API (each defines ``router``), and what they share.

Listings follow lakeFS: ``prefix``/``after``/``amount`` in, and a ``Pagination``
object out (``has_more``, ``next_offset``, ``results``, ``max_per_page``). An
``amount`` of 0 or -1 means the default page size; more than 1000 is refused.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, TypeVar

from fastapi import Query
from pydantic import BaseModel, Field

DEFAULT_AMOUNT = 100
MAX_AMOUNT = 1000

#: the ``amount`` query parameter of every listing
AmountQuery = Annotated[int, Query(ge=-1, le=MAX_AMOUNT, description="how many items to return")]
#: the ``after`` query parameter of every listing
AfterQuery = Annotated[str, Query(description="return items after this value")]
#: the ``prefix`` query parameter of every listing
PrefixQuery = Annotated[str, Query(description="return items prefixed with this value")]


class Pagination(BaseModel):
    """lakeFS's page descriptor."""

    has_more: bool = Field(description="next page is available")
    next_offset: str = Field(description="token for the next page (the last item's key)")
    results: int = Field(ge=0, description="number of values in the results")
    max_per_page: int = Field(ge=0, description="maximal number of entries per page")


def page_size(amount: int) -> int:
    """The effective page size of an ``amount`` query parameter."""
    return DEFAULT_AMOUNT if amount <= 0 else min(amount, MAX_AMOUNT)


def pagination(results: int, has_more: bool, last_key: str, max_per_page: int) -> Pagination:
    """A Pagination object; ``next_offset`` is the last key when there is a next page."""
    return Pagination(has_more=has_more, next_offset=last_key if has_more else "",
                      results=results, max_per_page=max_per_page)


_T = TypeVar("_T")


def filtered_page(fetch: Callable[[str, int], list[_T]], key: Callable[[_T], str],
                  keep: Callable[[_T], bool], after: str, amount: int,
                  batch: int = MAX_AMOUNT) -> tuple[list[_T], bool]:
    """Up to ``amount`` items that ``keep`` accepts, and whether more follow.

    Args:
        fetch: ``fetch(after, k)`` returns up to ``k`` items sorted by ``key``, after
            the key ``after``.
        key: the sort key of an item (``next_offset`` of a page).
        keep: which items to return.
    """
    found: list[_T] = []
    cursor = after
    while True:
        page = fetch(cursor, batch)
        found.extend(item for item in page if keep(item))
        if len(found) > amount or len(page) < batch:
            return found[:amount], len(found) > amount
        cursor = key(page[-1])


__all__ = [
    "DEFAULT_AMOUNT",
    "MAX_AMOUNT",
    "AfterQuery",
    "AmountQuery",
    "Pagination",
    "PrefixQuery",
    "filtered_page",
    "page_size",
    "pagination",
]
