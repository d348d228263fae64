"""The README's run command, end to end: ``python -m e2e.demo`` (``make run``)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from e2e.demo import MIRROR, REPO, SPEC
from lakefs_core.auth import rbac
from lakefs_core.auth.model import Policy

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parents[2]


def _pids(output: str) -> set[int]:
    return {int(p) for group in re.findall(r"pids ([\d, ]+)\)", output)
            for p in group.split(", ")}


def _data_dir(output: str) -> Path:
    match = re.search(r"data, configs and logs in (\S+)", output)
    assert match, output
    return Path(match.group(1))


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie is gone for our purpose (its parent, the demo, has exited)
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split(") ")[-1].startswith("Z")


def _interruptible() -> None:
    # a test run started in the background (no job control) ignores SIGINT, and a child
    # inherits that: Python would then install no KeyboardInterrupt handler at all
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _demo(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "e2e.demo", "--port", "0", *args],
                            cwd=ROOT, text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, preexec_fn=_interruptible)


def test_demo_runs_end_to_end_and_leaves_nothing_behind() -> None:
    proc = _demo()
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, out
    for expected in ("[1/6]", "mirror active", "1 commit pending", "validated yes",
                     "all 25 objects identical", "east: unreachable",
                     "identical to what east wrote", "writes are refused (403",
                     "Next steps", "--keep-running", "access key id", "web UI"):
        assert expected in out, (expected, out)
    pids = _pids(out)
    assert len(pids) == 4 and all(_gone(p) for p in pids)
    assert not _data_dir(out).exists()


def test_keep_running_until_ctrl_c(tmp_path: Path) -> None:
    """--keep-running restarts the source and waits; Ctrl-C stops every process."""
    data = tmp_path / "demo-data"
    with _demo("--keep-running", "--data-dir", str(data)) as proc:
        try:
            _keep_running_then_interrupt(proc, data)
        finally:  # on a failure too: no demo left running, no pipe left open
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=60)


def _keep_running_then_interrupt(proc: subprocess.Popen[str], data: Path) -> None:
    assert proc.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "press Ctrl-C" in line:
            break
    out = "".join(lines)
    assert "press Ctrl-C" in out and "east restarted" in out, out
    pids = _pids(out)
    assert len(pids) == 6 and sum(not _gone(p) for p in pids) == 4  # two replaced
    # the web UI addresses it prints answer (with the login page, before signing in)
    ui = re.findall(r"^\s+(?:east|west)\s+(http://\S+/ui/\S+)$", out, re.MULTILINE)
    assert len(ui) == 2, out
    for address in ui:
        page = httpx.get(address, follow_redirects=True, timeout=30)
        assert page.status_code == 200 and "Sign in" in page.text, (address, page.text)
    proc.send_signal(signal.SIGINT)
    rest, _ = proc.communicate(timeout=180)
    assert proc.returncode == 130, rest
    assert "interrupted: stopped every process" in rest
    assert all(_gone(p) for p in pids)
    # --data-dir is kept, with the logs, and a second run reuses it
    assert (data / "east" / "server.log").exists() and (data / "secret_key").exists()
    with _demo("--data-dir", str(data)) as again:
        out2, _ = again.communicate(timeout=300)
    assert again.returncode == 0, out2
    assert "exists already" in out2 and "all 25 objects identical" in out2


def test_cluster_configs_are_private(tmp_path: Path) -> None:
    """The configs hold the secret key and credentials: readable by their owner only."""
    import stat

    from e2e.cluster import _write_yaml

    path = _write_yaml(tmp_path / "region" / "lakefs.yaml", {"auth": {"encrypt": {
        "secret_key": "k"}}})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    _write_yaml(path, {"again": True})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_demo_replication_user_may_list_the_sources_tags() -> None:
    """Tags are mirrored in the demo: its user's policy lets it list them, so the mirrors
    page has no notice to show about tags."""
    user = SPEC.replication_user(f"local://{MIRROR}")
    assert user is not None
    policies = [Policy.from_dict(p) for p in user.policies]
    for action in (rbac.LIST_TAGS, rbac.LIST_BRANCHES, rbac.READ_COMMIT):
        assert rbac.authorize(policies, rbac.Permission(action, rbac.repository_arn(REPO)))
