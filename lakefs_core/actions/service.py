"""Running a repository's actions at the engine's hook points, and recording the runs.

The action files are read from the event's source ref; those matching the event and
branch run in parallel, the hooks of one action in order (the first failure ends the
action). A failed pre-event refuses the operation with a
:class:`~lakefs_core.errors.PreconditionFailedError`; every run with a matched action
is recorded in the refstore, hooks' output included.
"""

from __future__ import annotations

import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx

from lakefs_core.actions.action import (
    ACTIONS_PREFIX,
    Action,
    ActionHook,
    InvalidActionError,
    is_action_file,
    parse_action,
)
from lakefs_core.actions.airflow import AirflowHook
from lakefs_core.actions.alerting import HookAlerts, HookFailure
from lakefs_core.actions.destinations import HookDestinations
from lakefs_core.actions.hook import Hook, HookContext, HookEnvironment, HookFailedError
from lakefs_core.actions.lua.engine import HookAuthorizer
from lakefs_core.actions.lua.hook import LuaHook, LuaRunner
from lakefs_core.actions.lua.pool import LuaWorkerPool
from lakefs_core.actions.lua.sandbox import LuaLimits
from lakefs_core.actions.webhook import Webhook
from lakefs_core.block.base import join_address
from lakefs_core.errors import PreconditionFailedError
from lakefs_core.graveler.graveler import Graveler
from lakefs_core.graveler.hooks import HookRecord
from lakefs_core.graveler.model import ActionRun, AddressType, HookRun

log = logging.getLogger("lakefs_core.actions")

COMPLETED = "completed"
FAILED = "failed"
#: how many actions of one event run at once
MAX_PARALLEL_ACTIONS = 8
_MAX_RUN_KEY = 1 << 64


def new_run_id() -> str:
    """A run id that sorts before every earlier one (listings are newest first)."""
    return f"{_MAX_RUN_KEY - time.time_ns():020d}{os.urandom(4).hex()}"


@dataclass(frozen=True, slots=True)
class _Outcome:
    runs: list[HookRun]
    error: str  # "" when every hook passed


def build_hook(action: Action, hook: ActionHook, lua: LuaRunner | None = None) -> Hook:
    """The runnable hook (a lua one runs on ``lua``; without it, it is only checked).

    Raises InvalidActionError for malformed properties."""
    if hook.type == "lua":
        return LuaHook.from_hook(action.name, action.path, hook, lua)
    if hook.type == "airflow":
        return AirflowHook.from_hook(action.name, action.path, hook)
    return Webhook.from_hook(action.name, action.path, hook)


class ActionsService:
    """The server's hook handler: runs the repository's actions (see module doc).

    Args:
        graveler: the engine.
        lua_limits: the bounds of a lua hook's run.
        lua_workers: how many lua hooks run at once, each in its own worker process
            (started on the first lua hook).
        authorizer: the users' policies, which a lua hook's ``lakefs`` calls need
            (those of the user who made the event); None refuses every such call.
        alerts: where failed hooks are reported.
    """

    def __init__(self, graveler: Graveler, *, lua_limits: LuaLimits | None = None,
                 lua_workers: int = 2, authorizer: HookAuthorizer | None = None,
                 alerts: HookAlerts | None = None, env: HookEnvironment | None = None,
                 destinations: HookDestinations | None = None) -> None:
        self.graveler = graveler
        self.client = httpx.Client()
        self.env = env or HookEnvironment()
        self.destinations = destinations or HookDestinations()
        self.lua_limits = lua_limits or LuaLimits()
        self.lua = LuaRunner(LuaWorkerPool(self.lua_limits, lua_workers), authorizer)
        self.alerts = alerts or HookAlerts()

    def hook_of(self, action: Action, hook: ActionHook) -> Hook:
        return build_hook(action, hook, self.lua)

    def close(self) -> None:
        self.client.close()
        self.lua.pool.close()
        self.alerts.close()

    # -- HookHandler -------------------------------------------------------------
    def pre(self, record: HookRecord) -> str:
        try:
            actions = self._matched(record)
        except InvalidActionError as exc:
            raise PreconditionFailedError(
                f"{record.event_type} hook aborted: {exc}") from None
        if not actions:
            return ""
        run_id, error = self._run(record, actions)
        if error:
            raise PreconditionFailedError(
                f"{record.event_type} hook aborted, run id '{run_id}': {error}")
        return run_id

    def post(self, record: HookRecord, pre_run_id: str = "") -> None:
        if pre_run_id and record.commit_id:
            self.graveler.refstore.set_action_run_commit(
                record.repository.id, pre_run_id, record.commit_id)
        try:
            actions = self._matched(record)
            if actions:
                run_id, error = self._run(record, actions)
                if error:
                    log.warning("post hook failed", extra={
                        "repository": record.repository.id, "run_id": run_id,
                        "event_type": str(record.event_type), "error": error})
        except Exception:  # noqa: BLE001 - a post-event never undoes its operation
            log.exception("post hooks of %s failed", record.event_type)

    # -- loading -----------------------------------------------------------------
    def load_actions(self, record: HookRecord) -> list[Action]:
        """Every action file of the event's source ref. Raises InvalidActionError."""
        g, repo = self.graveler, record.repository
        items, more = g.list_entries(repo.id, record.source_ref, prefix=ACTIONS_PREFIX,
                                     delimiter="/", amount=1000)
        actions: list[Action] = []
        store = g.store_for(repo.storage_id)
        for item in items:
            if item.entry is None or not is_action_file(item.path):
                continue
            e = item.entry
            address = (e.address if e.address_type is AddressType.FULL
                       else join_address(repo.storage_namespace, e.address))
            action = parse_action(item.path, store.get(address))
            if any(a.name == action.name for a in actions):
                raise InvalidActionError(
                    f"invalid action file {item.path}: action name '{action.name}' "
                    "already loaded")
            actions.append(action)
        if more:
            log.warning("more than 1000 entries under %s: the rest are not read",
                        ACTIONS_PREFIX)
        return actions

    def _matched(self, record: HookRecord) -> list[Action]:
        if record.repository.read_only:
            return []  # a mirror runs no hooks: its source ran them
        marking = self.graveler.mirror_marking(record.repository.id)
        if marking is not None and not marking.detached:
            return []  # still following its source
        actions = [a for a in self.load_actions(record)
                   if a.matches(record.event_type, record.branch_id)]
        # hook properties are checked before anything runs
        for a in actions:
            for h in a.hooks:
                self.hook_of(a, h)
        return actions

    # -- running -----------------------------------------------------------------
    def _run(self, record: HookRecord, actions: list[Action]) -> tuple[str, str]:
        run_id = new_run_id()
        start = time.time()
        workers = min(len(actions), MAX_PARALLEL_ACTIONS)
        with ThreadPoolExecutor(workers, thread_name_prefix="action") as pool:
            outcomes = list(pool.map(
                lambda ia: self._run_action(record, run_id, ia[0], ia[1]),
                enumerate(actions)))
        errors = [o.error for o in outcomes if o.error]
        run = ActionRun(run_id=run_id, event_type=record.event_type.value,
                        branch=record.branch_id, source_ref=record.source_ref,
                        commit_id=record.commit_id, start_time=start, end_time=time.time(),
                        status=FAILED if errors else COMPLETED)
        self.graveler.refstore.put_action_run(
            record.repository.id, run, [r for o in outcomes for r in o.runs])
        return run_id, "; ".join(errors)

    def _run_action(self, record: HookRecord, run_id: str, index: int,
                    action: Action) -> _Outcome:
        runs: list[HookRun] = []
        for j, hook in enumerate(action.hooks):
            hook_run_id = f"{index:04d}_{j:04d}"
            start = time.time()
            ctx = HookContext(record, run_id, action, hook, self.client, self.graveler,
                              hook_run_id, self.env, self.destinations)
            try:
                output = self.hook_of(action, hook).run(ctx)
            except HookFailedError as exc:
                self.alerts.hook_failed(HookFailure(record, run_id, hook_run_id, action.name,
                                                    hook.id, hook.type, str(exc)))
                runs.append(HookRun(hook_run_id, action.name, hook.id, start, time.time(),
                                    FAILED, exc.output))
                return _Outcome(runs, f"hook run id '{hook_run_id}' failed on action "
                                      f"'{action.name}' hook '{hook.id}': {exc}"
                                      f"{_response_tail(exc.output)}")
            runs.append(HookRun(hook_run_id, action.name, hook.id, start, time.time(),
                                COMPLETED, output))
        return _Outcome(runs, "")


def _response_tail(output: str, limit: int = 1000) -> str:
    """The body a failing hook answered, for the refused operation's message."""
    _, sep, rest = output.partition("\nResponse:\n")
    if not sep:
        return ""
    _, _, body = rest.partition("\n\n")
    body = body.strip()
    return f": {body[:limit]}" if body else ""
