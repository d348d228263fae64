"""The throughput bench runs end to end: requests/s beside the ceiling, and the CPU that
the servers and the clients spent per request."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from bench import workers_bench


def test_the_bench_prints_throughput_and_cpu_per_request(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    workers_bench.main(["--seconds", "2", "--workers", "1", "--clients", "2",
                        "--client-processes", "1", "--data-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert f"data under {tmp_path}" in out
    probe = next(line for line in out.splitlines() if line.startswith("writing a 4 KiB"))
    assert float(probe.split("costs ")[1].split()[0]) > 0
    rows = {line.split()[2]: line.split() for line in out.splitlines()
            if line.split()[:2] == ["1", "1"]}
    assert set(rows) == {"ceiling", "lakefs"}
    for target, cells in rows.items():
        assert float(cells[3]) > 0  # requests/s
        errors_at = 7 if target == "lakefs" else 6  # the ceiling has no fraction
        assert cells[errors_at] == "0"
        server_cpu, client_cpu = float(cells[errors_at + 1]), float(cells[errors_at + 2])
        assert server_cpu > 0 and client_cpu > 0
    assert 0 < float(rows["lakefs"][6]) < 10  # of the ceiling


def test_tree_cpu_counts_a_process_and_its_children() -> None:
    import subprocess
    import sys
    import time

    busy = ("import time\nt = time.process_time()\n"
            "while time.process_time() - t < 0.3: pass\ntime.sleep(20)\n")
    parent = subprocess.Popen([sys.executable, "-c",
                               "import subprocess, sys, time\n"
                               f"subprocess.Popen([sys.executable, '-c', {busy!r}])\n"
                               "time.sleep(20)\n"], start_new_session=True)
    try:
        deadline = time.monotonic() + 20
        while workers_bench.tree_cpu(parent.pid) < 0.3:  # the child's 0.3 s, then some
            assert time.monotonic() < deadline, "the child's CPU was not counted"
            time.sleep(0.1)
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # the parent and its child
        parent.wait()
    assert workers_bench.tree_cpu(os.getpid()) > 0
