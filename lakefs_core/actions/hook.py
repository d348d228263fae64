"""What every hook type shares: the context a hook runs in and how it fails.

A hook type is built from an action file's hook (``from_hook``, which checks its
properties and raises :class:`~lakefs_core.actions.action.InvalidActionError`) and
then run with a :class:`HookContext`; it returns its output or raises
:class:`HookFailedError` with the output it has so far.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import httpx

from lakefs_core.actions.action import Action, ActionHook, InvalidActionError
from lakefs_core.actions.destinations import HookDestinations
from lakefs_core.graveler.hooks import HookRecord

if TYPE_CHECKING:
    from lakefs_core.graveler.graveler import Graveler

_DURATION_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")
_ENV = re.compile(r"^\s*\{\{\s*ENV\.(\w+)\s*\}\}\s*$")
_UNIT = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


class HookFailedError(Exception):
    """A hook did not pass; its message says why, ``output`` is what it logged."""

    def __init__(self, message: str, output: str = "") -> None:
        super().__init__(message)
        self.output = output


@dataclass(frozen=True, slots=True)
class HookContext:
    """One hook's run: the event, where it comes from, and what it may use."""

    record: HookRecord
    run_id: str
    action: Action
    hook: ActionHook
    client: httpx.Client
    graveler: Graveler
    #: the hook's run within the action run (``0000_0001``)
    hook_run_id: str = ""
    #: what of the server's environment the hook's properties may read
    env: HookEnvironment = field(default_factory=lambda: HookEnvironment())
    #: where the hook may send requests
    destinations: HookDestinations = field(default_factory=lambda: HookDestinations())


class Hook(Protocol):
    def run(self, ctx: HookContext) -> str:
        """Run the hook; its output. Raises HookFailedError (output attached)."""


#: lakeFS's default ``actions.env.prefix``
DEFAULT_ENV_PREFIX = "LAKEFSACTION_"


@dataclass(frozen=True, slots=True)
class HookEnvironment:
    """What of the server's environment ``{{ ENV.NAME }}`` may read (``actions.env``).

    As in lakeFS, only variables whose names start with ``prefix`` are visible, and
    none when ``enabled`` is false: the server's own settings (database URL, keys, the
    secret that encrypts stored credentials) live in the same environment, and anyone
    who may write an action file could otherwise send them anywhere.
    """

    enabled: bool = True
    prefix: str = DEFAULT_ENV_PREFIX

    def value(self, name: str) -> str:
        """The variable's value. Raises HookFailedError when it is not visible."""
        if not self.enabled:
            raise HookFailedError(
                f"env var {name}: environment variables are not available to hooks "
                "(actions.env.enabled is false)")
        if not name.startswith(self.prefix):
            raise HookFailedError(
                f"env var {name} is not available to hooks: only variables whose names "
                f"start with {self.prefix} are (actions.env.prefix)")
        value = os.environ.get(name)
        if value is None:
            raise HookFailedError(f"missing env var {name}")
        return value


@dataclass(frozen=True, slots=True)
class Secret:
    """A property value, maybe taken from the environment (then never shown)."""

    value: str
    from_env: bool

    def __str__(self) -> str:
        return "*****" if self.from_env else self.value


def secret(text: str, env: HookEnvironment) -> Secret:
    """A property value; ``{{ ENV.NAME }}`` reads the variables ``env`` lets it see.

    Raises:
        HookFailedError: the variable is missing or not visible to hooks.
    """
    m = _ENV.match(text)
    if m is None:
        return Secret(text, False)
    return Secret(env.value(m.group(1)), True)


def parse_duration(text: str) -> float:
    """Seconds of a Go duration (``30s``, ``1m30s``, ``500ms``). Raises ValueError."""
    pos, total = 0, 0.0
    for m in _DURATION_PART.finditer(text):
        if m.start() != pos:
            break
        total += float(m.group(1)) * _UNIT[m.group(2)]
        pos = m.end()
    if not text or pos != len(text):
        raise ValueError(f"invalid duration {text!r}")
    return total


def property_error(path: str, hook: ActionHook, what: str) -> InvalidActionError:
    """An invalid property of a hook, naming the action file and the property."""
    return InvalidActionError(f"invalid action file {path}: hook '{hook.id}' properties.{what}")


def duration_property(path: str, hook: ActionHook, name: str, default: float) -> float:
    """A Go-duration property (``30s``), or ``default`` when it is not given."""
    raw = hook.properties.get(name)
    if raw is None or raw == "":
        return default
    if not isinstance(raw, str):
        raise property_error(path, hook, f"{name}: expected a duration such as '30s'")
    try:
        return parse_duration(raw)
    except ValueError as exc:
        raise property_error(path, hook, f"{name}: {exc}") from None
