"""Names follow lakeFS's rules to the last character: ASCII, and no trailing newline."""

from __future__ import annotations

import pytest

from lakefs_core.auth.model import validate_entity_id
from lakefs_core.errors import ValidationError
from lakefs_core.graveler.refs import (
    is_commit_id,
    validate_branch_name,
    validate_repository_id,
)
from lakefs_core.protocol.http import header_value_safe, metadata_headers


@pytest.mark.parametrize("name", ["main\n", "brånch", "ветка", "a\n", "main\r"])
def test_branch_names_are_ascii_and_whole(name: str) -> None:
    with pytest.raises(ValidationError):
        validate_branch_name(name)


def test_other_names_are_whole() -> None:
    for bad, check in (("repo\n", validate_repository_id),
                       ("bob\n", lambda n: validate_entity_id("user", n))):
        with pytest.raises(ValidationError):
            check(bad)
    assert not is_commit_id("a" * 64 + "\n")
    assert validate_branch_name("feature-1_x") == "feature-1_x"


def test_header_rules_see_a_trailing_newline() -> None:
    assert not header_value_safe("value\n")
    assert list(metadata_headers({"name\n": "v", "ok": "v\n", "fine": "v"})) == [("fine", "v")]
