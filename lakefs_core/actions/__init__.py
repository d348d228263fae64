"""Actions and hooks: lakeFS's action files, run at the engine's hook points.

Above the engine (it reads the action files through it and records runs in its
refstore) and below the front doors, which serve the runs.
"""

from lakefs_core.actions.action import (
    ACTIONS_PREFIX,
    Action,
    ActionHook,
    InvalidActionError,
    parse_action,
)
from lakefs_core.actions.alerting import HookAlerts
from lakefs_core.actions.destinations import HookDestinations, networks
from lakefs_core.actions.hook import HookEnvironment
from lakefs_core.actions.lua import LuaLimits
from lakefs_core.actions.service import ActionsService, build_hook

__all__ = [
    "ACTIONS_PREFIX",
    "Action",
    "ActionHook",
    "ActionsService",
    "HookAlerts",
    "HookDestinations",
    "HookEnvironment",
    "InvalidActionError",
    "build_hook",
    "LuaLimits",
    "networks",
    "parse_action",
]
