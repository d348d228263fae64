"""Action files: lakeFS's YAML under ``_lakefs_actions/``, parsed and validated.

An action names the events it runs on (``on:``, each with optional ``branches:``
glob patterns) and the hooks it runs, in order. Validation follows lakeFS's rules;
an invalid file is an :class:`InvalidActionError` naming the file and the field.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

import yaml

from lakefs_core.errors import ValidationError
from lakefs_core.events import EventType

#: where a repository keeps its action files (lakeFS's prefix)
ACTIONS_PREFIX = "_lakefs_actions/"
#: the hook types this server runs
HOOK_TYPES = frozenset({"webhook", "lua", "airflow"})

_NAME = re.compile(r"^\w[\w\-. ]+$")
_HOOK_ID = re.compile(r"^[_a-zA-Z][\-_a-zA-Z0-9]{1,255}$")


class InvalidActionError(ValidationError):
    """An action file that cannot be run."""


@dataclass(frozen=True, slots=True)
class ActionHook:
    id: str
    type: str
    description: str = ""
    properties: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Action:
    """One action file."""

    path: str
    name: str
    description: str
    #: event -> branch patterns (empty: every branch)
    on: Mapping[EventType, tuple[str, ...]]
    hooks: tuple[ActionHook, ...]

    def matches(self, event: EventType, branch: str) -> bool:
        """Whether the action runs on ``event`` for ``branch`` (lakeFS: path globs)."""
        if event not in self.on:
            return False
        patterns = self.on[event]
        return not patterns or any(_glob(p, branch) for p in patterns)


def _glob(pattern: str, name: str) -> bool:
    # lakeFS matches with Go's path.Match: a ``*`` never crosses a ``/``
    p_parts, n_parts = pattern.split("/"), name.split("/")
    return len(p_parts) == len(n_parts) and all(
        fnmatchcase(n, p) for p, n in zip(p_parts, n_parts, strict=True))


def parse_action(path: str, data: bytes) -> Action:
    """Parse and validate one action file.

    Raises:
        InvalidActionError: the message names ``path`` and the offending field.
    """
    def bad(what: str) -> InvalidActionError:
        return InvalidActionError(f"invalid action file {path}: {what}")

    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise bad(f"not YAML: {exc}") from None
    if not isinstance(doc, dict):
        raise bad("expected a mapping with 'name', 'on' and 'hooks'")
    name = doc.get("name")
    if not name:
        raise bad("'name' is required")
    if not isinstance(name, str) or not _NAME.match(name):
        raise bad("'name' is invalid")
    description = doc.get("description") or ""
    if not isinstance(description, str):
        raise bad("'description' must be a string")
    # YAML 1.1 reads a bare ``on`` key as the boolean true
    raw_on = doc.get("on", doc.get(True))
    if not raw_on or not isinstance(raw_on, dict):
        raise bad("'on' is required")
    on: dict[EventType, tuple[str, ...]] = {}
    for key, spec in raw_on.items():
        try:
            event = EventType(key)
        except ValueError:
            raise bad(f"'on': event '{key}' is not supported") from None
        patterns: tuple[str, ...] = ()
        if spec is not None:
            if not isinstance(spec, dict) or set(spec) - {"branches"}:
                raise bad(f"'on.{key}': only 'branches' may be given")
            branches = spec.get("branches")
            if branches is not None:
                if "tag" in event.value:
                    raise bad(f"'on.{key}.branches' is not supported in tag event types")
                if not isinstance(branches, list) or not all(
                        isinstance(b, str) for b in branches):
                    raise bad(f"'on.{key}.branches' must be a list of strings")
                patterns = tuple(branches)
        on[event] = patterns
    raw_hooks = doc.get("hooks")
    if raw_hooks is None:
        raw_hooks = []
    if not isinstance(raw_hooks, list):
        raise bad("'hooks' must be a list")
    hooks: list[ActionHook] = []
    for i, h in enumerate(raw_hooks):
        if not isinstance(h, dict):
            raise bad(f"hook[{i}] must be a mapping")
        hook_id = h.get("id")
        if not isinstance(hook_id, str) or not _HOOK_ID.match(hook_id):
            raise bad(f"hook[{i}] missing ID")
        if any(x.id == hook_id for x in hooks):
            raise bad(f"hook[{i}] duplicate ID '{hook_id}'")
        hook_type = h.get("type")
        if hook_type not in HOOK_TYPES:
            raise bad(f"hook[{i}] type '{hook_type}' unknown")
        props = h.get("properties") or {}
        if not isinstance(props, dict):
            raise bad(f"hook[{i}] 'properties' must be a mapping")
        hooks.append(ActionHook(hook_id, hook_type, str(h.get("description") or ""),
                                props))
    return Action(path=path, name=name, description=description, on=on,
                  hooks=tuple(hooks))


def is_action_file(path: str) -> bool:
    """Files directly under the prefix ending in ``.yaml`` or ``.yml`` are actions."""
    return posixpath.splitext(path)[1] in (".yaml", ".yml")
