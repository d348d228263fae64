"""Benchmark of what running a lua hook in a worker process costs, against running it
in the server process as lua hooks used to run.

Run ``python -m bench.lua_worker_bench [--runs 500] [--workers 2]``. (``bench.hooks_bench``
times whole commits with a lua hook through a server.)

Each case runs the same script many times, one after the other, and times one run
from the job handed over to the output back:

- ``in-process``: a fresh Lua state in this process, with the library modules and the
  ``action``/``args`` globals (the old path, minus reading the action file);
- ``worker``: :class:`~lakefs_core.actions.lua.pool.LuaWorkerPool` (started and warm
  before timing), the script sent to a worker and its output back.

Scripts: ``trivial`` (prints one line) and ``one lakefs call`` (one ``lakefs.
list_objects``, answered by a stub here, in-process as a Python function, from the
worker as a round trip to this process). It prints p50 and p99 per case, and the
worker's p50 over the in-process one (the overhead each hook pays).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

from lakefs_core.actions.lua.library import LAKEFS_FUNCTIONS, MODULES
from lakefs_core.actions.lua.pool import LuaJob, LuaWorkerPool
from lakefs_core.actions.lua.sandbox import LuaLimits, LuaSandbox

SCRIPTS = {
    "trivial": b'print("ok", action.repository_id)',
    "one lakefs call": b'local code, page = require("lakefs").list_objects('
                       b'action.repository_id, "main")\nprint(code, #page.results)',
}
GLOBALS: dict[str, Any] = {
    "action": {"action_name": "bench", "hook_id": "h", "run_id": "r",
               "event_type": "pre-commit", "repository_id": "repo", "branch_id": "main",
               "commit": {"message": "m", "committer": "c", "metadata": {"k": "v"}}},
    "args": {"threshold": 3},
}
_PAGE = [200, {"pagination": {"has_more": False}, "results": [{"path": "a"}, {"path": "b"}]}]


def _stub(name: str, args: list[Any]) -> list[Any]:
    return _PAGE


def in_process(limits: LuaLimits, script: bytes) -> Callable[[], None]:
    def lakefs(_sb: LuaSandbox) -> dict[str, Any]:
        return {name: (lambda *a, _n=name: tuple(_stub(_n, list(a))))
                for name in LAKEFS_FUNCTIONS}

    def run() -> None:
        sandbox = LuaSandbox(limits, {**MODULES, "lakefs": lakefs})
        for name, value in GLOBALS.items():
            sandbox.set_global(name, value)
        sandbox.run(script)
        assert sandbox.output
    return run


def in_worker(pool: LuaWorkerPool, script: bytes) -> Callable[[], None]:
    job = LuaJob(script, "lua", GLOBALS)

    def run() -> None:
        result = pool.run(job, _stub)
        assert result.output and not result.error, result
    return run


def timings(run: Callable[[], None], runs: int) -> list[float]:
    for _ in range(min(20, runs)):  # warm up
        run()
    out = []
    for _ in range(runs):
        start = time.perf_counter()
        run()
        out.append(time.perf_counter() - start)
    return out


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:7.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=500)
    parser.add_argument("--workers", type=int, default=2)
    opts = parser.parse_args()
    limits = LuaLimits(timeout=30)
    pool = LuaWorkerPool(limits, opts.workers)
    try:
        print(f"{opts.runs} runs per case, {opts.workers} workers")
        print(f"{'script':18} {'path':11} {'p50':>10} {'p99':>10}")
        for name, script in SCRIPTS.items():
            p50s = {}
            for path, run in (("in-process", in_process(limits, script)),
                              ("worker", in_worker(pool, script))):
                t = sorted(timings(run, opts.runs))
                p50s[path] = statistics.median(t)
                p99 = t[min(len(t) - 1, int(len(t) * 0.99))]
                print(f"{name:18} {path:11} {_ms(p50s[path]):>10} {_ms(p99):>10}")
            print(f"{name:18} {'added':11} {_ms(p50s['worker'] - p50s['in-process']):>10}")
    finally:
        pool.close()


if __name__ == "__main__":
    main()
