"""Lua hooks, as lakeFS runs them, in worker processes the server can stop.

- :mod:`~lakefs_core.actions.lua.hook`: the ``lua`` hook type (:class:`LuaHook`);
- :mod:`~lakefs_core.actions.lua.pool` and :mod:`~lakefs_core.actions.lua.worker`: the
  worker processes that run the scripts under hard CPU and memory limits, and the
  messages between them and the server (:mod:`~lakefs_core.actions.lua.wire`);
- :mod:`~lakefs_core.actions.lua.sandbox` and :mod:`~lakefs_core.actions.lua.library`:
  the Lua state a script runs in, and the modules it may ``require``;
- :mod:`~lakefs_core.actions.lua.engine`: the ``lakefs`` module, answered by the
  server with the permissions of the user who made the event;
- :mod:`~lakefs_core.actions.lua.egress`: the addresses no hook may connect to.

This package imports nothing itself: a worker process loads only what it runs, never
the engine.
"""
