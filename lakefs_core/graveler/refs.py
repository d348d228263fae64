"""Names and ref expressions, validated the way lakeFS validates them.

A ref expression is a base (branch, tag, full or short commit id) followed by any
number of modifiers: ``~N`` (N-th first-parent ancestor), ``^N`` (N-th parent) and a
trailing ``@`` on a branch (its committed state only, ignoring staged changes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

from lakefs_core.errors import InvalidRefError, ValidationError

_REPO_ID = re.compile(r"^[a-z0-9][a-z0-9-]{2,62}\Z")
_BRANCH = re.compile(r"^\w[-\w]*\Z", re.ASCII)
_COMMIT_ID = re.compile(r"^[a-f0-9]{64}\Z")
_HEX = re.compile(r"^[a-f0-9]+\Z")
_TAG_FORBIDDEN = re.compile(r"[\s~^:?*\[\\@]|\.\.|^[-/]|/$|\.lock$")
MAX_NAME = 256
MIN_SHORT_COMMIT = 6


def validate_repository_id(repo_id: str) -> str:
    if not isinstance(repo_id, str) or not _REPO_ID.match(repo_id):
        raise ValidationError(
            f"repository id {repo_id!r} is invalid: use 3-63 characters of lowercase letters, "
            "digits and '-', starting with a letter or digit"
        )
    return repo_id


def validate_branch_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME or not _BRANCH.match(name):
        raise ValidationError(
            f"branch name {name!r} is invalid: use letters, digits, '_' and '-', "
            "not starting with '-'"
        )
    return name


def validate_tag_name(name: str) -> str:
    if not isinstance(name, str) or not name or len(name) > MAX_NAME or _TAG_FORBIDDEN.search(name):
        raise ValidationError(f"tag name {name!r} is invalid")
    return name


def validate_path(path: str) -> str:
    if not isinstance(path, str) or not path:
        raise ValidationError("path must not be empty")
    if "\x00" in path:
        raise ValidationError("path must not contain NUL characters")
    return path


def is_commit_id(ref: str) -> bool:
    return bool(_COMMIT_ID.match(ref))


def could_be_short_commit_id(ref: str) -> bool:
    return len(ref) >= MIN_SHORT_COMMIT and bool(_HEX.match(ref))


class ModifierType(StrEnum):
    ANCESTOR = "~"  # first-parent ancestor, N generations back
    PARENT = "^"  # N-th parent (1-based)


@dataclass(frozen=True, slots=True)
class RefExpression:
    base: str
    modifiers: tuple[tuple[ModifierType, int], ...] = ()
    committed_only: bool = False


_MODIFIER = re.compile(r"([~^])(\d*)")
#: a ref that is a name alone (most are): no modifier, no ``@``, no space, not too long
_PLAIN_REF = re.compile(r"[^~^@\s]{1,1024}")


def parse_ref(ref: str) -> RefExpression:
    """Parse ``main``, ``main@``, ``v1~2``, ``abc123^2~1``.

    Raises:
        InvalidRefError: the expression is malformed.
    """
    if isinstance(ref, str) and _PLAIN_REF.fullmatch(ref):
        return RefExpression(ref)
    return _parse_expression(ref)


def _parse_expression(ref: str) -> RefExpression:
    """:func:`parse_ref`, character by character."""
    if not isinstance(ref, str) or not ref:
        raise InvalidRefError("ref must not be empty")
    if len(ref) > 1024 or any(c.isspace() for c in ref):
        raise InvalidRefError(f"invalid ref {ref!r}")
    i = 0
    while i < len(ref) and ref[i] not in "~^@":
        i += 1
    base = ref[:i]
    if not base:
        raise InvalidRefError(f"invalid ref {ref!r}: missing base")
    rest = ref[i:]
    committed_only = False
    if "@" in rest:
        if not rest.startswith("@"):
            raise InvalidRefError(f"invalid ref {ref!r}: '@' must follow the branch name")
        committed_only = True
        rest = rest[1:]
    modifiers: list[tuple[ModifierType, int]] = []
    pos = 0
    while pos < len(rest):
        m = _MODIFIER.match(rest, pos)
        if not m:
            raise InvalidRefError(f"invalid ref {ref!r}")
        n = int(m.group(2)) if m.group(2) else 1
        modifiers.append((ModifierType(m.group(1)), n))
        pos = m.end()
    return RefExpression(base=base, modifiers=tuple(modifiers), committed_only=committed_only)
