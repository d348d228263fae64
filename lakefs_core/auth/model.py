"""Values of the auth model: users, credentials, groups and policies.

Policies follow lakeFS's shape: a named list of statements, each allowing or denying a
list of actions (``fs:ReadObject``, ``auth:*``) on a resource pattern
(``arn:lakefs:fs:::repository/my-repo/*``). Values validate themselves on
construction, so an invalid policy never reaches the store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from lakefs_core.errors import ValidationError

#: services an action may name (``<service>:<Action>``), as in lakeFS
SERVICES = frozenset({"fs", "auth", "ci", "retention", "branches", "pr"})

_ACTION_RE = re.compile(r"^[A-Za-z*?]+:[A-Za-z*?]+\Z")
_NAME_FORBIDDEN_RE = re.compile(r"[\x00-\x1f\x7f]")
MAX_NAME_LENGTH = 256


def validate_name(kind: str, name: str) -> str:
    """Check a user, group or policy name and return it.

    Args:
        kind: What is named ("user", "group", "policy"), for the error message.
        name: The name to check: 1 to 256 characters, no control characters, no
            leading or trailing white space.

    Raises:
        ValidationError: The name is not acceptable.
    """
    if not isinstance(name, str) or not name:
        raise ValidationError(f"{kind} name must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise ValidationError(f"{kind} name longer than {MAX_NAME_LENGTH} characters")
    if _NAME_FORBIDDEN_RE.search(name) or name != name.strip():
        raise ValidationError(f"invalid {kind} name: {name!r}")
    return name


#: the ids lakeFS accepts for new users, groups and policies
ENTITY_ID_RE = re.compile(r"^[\w+=.,@-]{1,127}\Z", re.ASCII)


def validate_entity_id(kind: str, name: str) -> str:
    """Check the id of a new user, group or policy as lakeFS does, and return it.

    Letters, digits and ``_+=.,@-``, 1 to 127 of them: no wildcards (``*``, ``?``), no
    ``/`` or ``:`` that would change what an ARN or a ``${user}`` pattern means.

    Raises:
        ValidationError: The id is not acceptable.
    """
    if not isinstance(name, str) or not ENTITY_ID_RE.match(name):
        raise ValidationError(
            f"invalid {kind} id {name!r}: use 1 to 127 letters, digits and _+=.,@-")
    return name


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class User:
    """A principal that authenticates with access keys.

    Attributes:
        username: Unique id of the user (lakeFS's ``id``).
        creation_date: When the user was created (UTC).
        email: Optional e-mail address.
        friendly_name: Optional display name.
    """

    username: str
    creation_date: datetime = field(default_factory=_now)
    email: str | None = None
    friendly_name: str | None = None

    def __post_init__(self) -> None:
        validate_name("user", self.username)


@dataclass(frozen=True)
class CredentialSummary:
    """An access key without its secret, as listings return it."""

    access_key_id: str
    user: str
    creation_date: datetime


@dataclass(frozen=True)
class Credential:
    """An access key with its plain secret.

    The secret exists in plain text only in memory: the store keeps it encrypted.

    Attributes:
        access_key_id: Public id of the key (``AKIAJ...Q`` when generated).
        secret: The secret access key, in plain text.
        user: Username of the key's owner.
        creation_date: When the key was created (UTC).
    """

    access_key_id: str
    secret: str = field(repr=False)
    user: str
    creation_date: datetime = field(default_factory=_now)

    @property
    def summary(self) -> CredentialSummary:
        """The key without its secret."""
        return CredentialSummary(self.access_key_id, self.user, self.creation_date)


@dataclass(frozen=True)
class Group:
    """A named set of users; policies attached to a group apply to every member."""

    name: str
    creation_date: datetime = field(default_factory=_now)
    description: str | None = None

    def __post_init__(self) -> None:
        validate_name("group", self.name)


class Effect(StrEnum):
    """What a matching statement does."""

    ALLOW = "allow"
    DENY = "deny"


@dataclass(frozen=True)
class Statement:
    """One rule of a policy: ``effect`` the ``action`` patterns on ``resource``.

    Attributes:
        effect: ``allow`` or ``deny`` (case-insensitive on input).
        action: Action patterns such as ``fs:Read*`` or ``*``; ``*`` and ``?`` are
            wildcards.
        resource: A resource pattern: ``*``, an ARN pattern such as
            ``arn:lakefs:fs:::repository/repo1/*``, or (as lakeFS allows) a JSON list
            of those, e.g. ``["arn:lakefs:fs:::repository/a", "arn:...:b"]``. The
            variable ``${user}`` stands for the requesting user's name.
    """

    effect: Effect
    action: Sequence[str]
    resource: str

    def __post_init__(self) -> None:
        effect = str(self.effect).lower()
        if effect not in (Effect.ALLOW, Effect.DENY):
            raise ValidationError(f"invalid statement effect: {self.effect!r}")
        object.__setattr__(self, "effect", Effect(effect))
        if isinstance(self.action, str) or not self.action:
            raise ValidationError("statement action must be a non-empty list")
        for action in self.action:
            _validate_action(action)
        object.__setattr__(self, "action", tuple(self.action))
        if not isinstance(self.resource, str) or not self.resource:
            raise ValidationError("statement resource must not be empty")
        self.resources()  # validates a JSON-list resource

    def resources(self) -> tuple[str, ...]:
        """The resource patterns of this statement (one, or several from a JSON list)."""
        if not self.resource.startswith("["):
            return (self.resource,)
        try:
            parsed = json.loads(self.resource)
        except json.JSONDecodeError as exc:
            raise ValidationError(f"invalid resource list: {self.resource!r}") from exc
        if (not isinstance(parsed, list) or not parsed
                or not all(isinstance(r, str) and r for r in parsed)):
            raise ValidationError(f"invalid resource list: {self.resource!r}")
        return tuple(parsed)

    def to_dict(self) -> dict[str, Any]:
        """The statement as lakeFS's API spells it."""
        return {"effect": str(self.effect), "action": list(self.action),
                "resource": self.resource}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Statement:
        """Build a statement from lakeFS's JSON shape (keys in any letter case).

        Raises:
            ValidationError: A field is missing or invalid.
        """
        lowered = {str(k).lower(): v for k, v in data.items()}
        try:
            return cls(effect=lowered["effect"], action=lowered["action"],
                       resource=lowered["resource"])
        except KeyError as exc:
            raise ValidationError(f"statement is missing {exc.args[0]!r}") from exc


def _validate_action(action: object) -> None:
    if not isinstance(action, str) or not action:
        raise ValidationError(f"invalid action: {action!r}")
    if action == "*":
        return
    if not _ACTION_RE.match(action):
        raise ValidationError(f"invalid action: {action!r}")
    service = action.split(":", 1)[0]
    if service != "*" and service not in SERVICES:
        raise ValidationError(f"invalid service name in action: {action!r}")


@dataclass(frozen=True)
class Policy:
    """A named list of statements.

    Attributes:
        name: Unique id of the policy (lakeFS's ``id``).
        statements: The policy's rules; at least one.
        creation_date: When the policy was created (UTC).
    """

    name: str
    statements: Sequence[Statement]
    creation_date: datetime = field(default_factory=_now)

    def __post_init__(self) -> None:
        validate_name("policy", self.name)
        if isinstance(self.statements, str | bytes) or not self.statements:
            raise ValidationError("policy must have at least one statement")
        for st in self.statements:
            if not isinstance(st, Statement):
                raise ValidationError(f"not a statement: {st!r}")
        object.__setattr__(self, "statements", tuple(self.statements))

    def to_dict(self) -> dict[str, Any]:
        """The policy as lakeFS's API spells it (``creation_date`` in epoch seconds)."""
        return {
            "id": self.name,
            "creation_date": int(self.creation_date.timestamp()),
            "statement": [st.to_dict() for st in self.statements],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Policy:
        """Build a policy from lakeFS's JSON shape (``id``, ``statement``).

        ``creation_date`` in the input is ignored; the store sets its own.

        Raises:
            ValidationError: A field is missing or invalid.
        """
        name = data.get("id", data.get("name"))
        statements = data.get("statement", data.get("statements"))
        if not isinstance(statements, list):
            raise ValidationError("policy statement must be a list")
        if not isinstance(name, str):
            raise ValidationError("policy id must be a string")
        parsed = []
        for st in statements:
            if not isinstance(st, Mapping):
                raise ValidationError(f"invalid statement: {st!r}")
            parsed.append(Statement.from_dict(st))
        return cls(name=name, statements=parsed)


@dataclass(frozen=True)
class CommPrefs:
    """What the first admin said about being contacted (lakeFS's communication
    preferences, asked at setup)."""

    email: str | None = None
    feature_updates: bool = False
