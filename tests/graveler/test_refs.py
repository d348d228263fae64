"""Reading ref expressions: a plain name takes a shortcut that must agree with the
reading character by character."""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from lakefs_core.errors import InvalidRefError
from lakefs_core.graveler.refs import RefExpression, _parse_expression, parse_ref


def _read(reader: object, ref: str) -> RefExpression | str:
    try:
        return reader(ref)  # type: ignore[operator, no-any-return]
    except InvalidRefError as e:
        return f"refused: {e}"


@settings(max_examples=1000, deadline=None)
@given(st.lists(st.sampled_from(["main", "a", "~", "^", "@", "2", " ", "\t", "\u00a0",
                                 "\x1c", "v1.0", "-", "/", "é"]), max_size=8).map("".join))
@example("x" * 1024)
@example("x" * 1025)
@example("")
def test_a_plain_name_reads_as_character_by_character(ref: str) -> None:
    assert _read(parse_ref, ref) == _read(_parse_expression, ref)


@pytest.mark.parametrize("ref, expected", [
    ("main", RefExpression("main")),
    ("main@", RefExpression("main", committed_only=True)),
    ("v1~2", RefExpression("v1", (("~", 2),))),
])
def test_expressions(ref: str, expected: RefExpression) -> None:
    assert parse_ref(ref) == expected
