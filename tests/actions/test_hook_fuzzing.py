"""A bounded slice of ``bench.fuzz_bench``'s hook rounds: generated action files and Lua
scripts, hostile ones among them, committed to a live server, may get no answer but
201 or 412, never stall ``/_health``, never leak a server secret and never reach a
denied address (see :mod:`lakefs_testing.hook_fuzzing`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefs_testing.hook_fuzzing import HookFuzzer, hook_fuzz_server

ROUNDS = 40
SEED = 1
HOSTILE = {"endless_loop", "endless_pcall", "gc_loop", "lua_pattern", "regexp_bomb",
           "lua_memory", "library_memory", "split_memory", "json_dag", "string_bomb"}


@pytest.mark.timeout(300)
def test_generated_hooks_cannot_break_the_server(tmp_path: Path) -> None:
    with hook_fuzz_server(tmp_path) as (server, receiver, denied):
        report = HookFuzzer(server, receiver, denied, seed=SEED).run(ROUNDS)
    assert report.rounds == ROUNDS
    # the slice reaches the hostile kinds and every hook type, and some commits pass
    assert len(HOSTILE & set(report.fragments)) >= 6, report.summary()
    assert {"lua", "webhook", "airflow"} <= set(report.hook_types), report.summary()
    assert report.statuses["201"] and report.statuses["412"], report.summary()
    assert report.violations == 0, report.summary()
