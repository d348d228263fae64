"""The two-region demo: ``python -m e2e.demo`` (``make run``).

On the embedded default, with no external service: two servers and two replication
services on this machine (SQLite metadata and mirrors table, local storage, the
``builtin`` object copier). Through the REST API it creates a repository in
``east`` and its mirror in ``west``, writes a small dataset and commits it, shows
the mirror catching up, reads the same commit id in both regions and compares the
bytes, then stops the source region and shows the destination still serving the
last consistent commit.

Everything runs under a temporary directory removed at the end (``--data-dir``
keeps it); Ctrl-C at any moment stops every process it started.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import secrets
import socket
import sys
import time
from pathlib import Path

from e2e.api import ApiError, RegionClient, read_metrics
from e2e.cluster import (
    ACCESS_KEY_ID,
    SECRET_ACCESS_KEY,
    Cluster,
    ClusterSpec,
    free_port,
    scratch_dir,
    start_cluster,
)
from e2e.processes import terminate_as_exit
from lakefs_core.config import SECRET_KEY_FILE, load_or_create_secret_key
from lakefs_core.errors import LakeFSError

REPO, MIRROR = "demo", "demo-west"
SPEC = ClusterSpec(mirrors_db="sqlite", refstore="local", storage="local",
                   replication="builtin", interval="2s", log_level="WARN", policy="narrow",
                   source_repository=REPO, mirror_repository=MIRROR)


class DemoError(Exception):
    """The demo cannot go on (the message says why and what to do)."""


# ----------------------------------------------------------------------- output
def say(text: str = "") -> None:
    print(text, flush=True)


def step(n: int, text: str) -> None:
    say(f"\n[{n}/6] {text}")


def short(commit_id: str | None) -> str:
    return commit_id[:12] if commit_id else "-"


# ------------------------------------------------------------------------ ports
def _port_free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def choose_ports(base: int) -> tuple[dict[str, tuple[int, list[int]]], str]:
    """Servers on ``base`` and ``base+1``, replication on ``base+8`` and ``base+9``;
    free ports instead when ``base`` is 0 or any of those is taken."""
    wanted = {"east": (base, [base + 8]), "west": (base + 1, [base + 9])}
    if base and all(_port_free(p) for server, sidecars in wanted.values()
                    for p in (server, *sidecars)):
        return wanted, ""
    note = f"ports {base}-{base + 9} are taken: using free ports" if base else ""
    return {k: (free_port(), [free_port()]) for k in wanted}, note


# ---------------------------------------------------------------------- dataset
def dataset(run_id: str) -> dict[str, bytes]:
    """A small dataset: daily sales per store as CSV files, plus a manifest."""
    files: dict[str, bytes] = {}
    for region in ("north", "south", "east", "west"):
        for month in range(1, 7):
            rows = ["date,store,units,revenue"]
            for day in range(1, 11):
                units = (day * 7 + month * 13 + len(region)) % 50 + 5
                rows.append(f"2024-{month:02d}-{day:02d},{region}-{day % 3},{units},"
                            f"{units * 4.5:.2f}")
            files[f"sales/region={region}/2024-{month:02d}.csv"] = \
                ("\n".join(rows) + "\n").encode()
    manifest = {"dataset": "daily sales", "files": sorted(files), "run": run_id}
    files["_manifest.json"] = json.dumps(manifest, indent=2).encode()
    return files


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------ demo
class Demo:
    """The demo's steps 2 to 6 against a running cluster, printing as they go.

    Args:
        cluster: the two regions.
        east: client of the source region.
        west: client of the destination region.
    """

    def __init__(self, cluster: Cluster, east: RegionClient, west: RegionClient) -> None:
        self.cluster = cluster
        self.east = east
        self.west = west
        self.mirror_id = ""

    def create(self) -> None:
        """Create the repository and its mirror (or reuse them), wait until it is active."""
        step(2, f'creating repository "{REPO}" in east and its mirror "{MIRROR}" in west '
                "(REST API)")
        try:
            self.east.create_repository(REPO, self.cluster.east.namespace(REPO))
            say(f"      POST /api/v1/repositories  ->  201 ({self.cluster.east.namespace(REPO)})")
        except ApiError as e:
            if e.status != 409:
                raise
            say(f'      repository "{REPO}" exists already (reusing --data-dir)')
        existing = [m for m in self.east.list_mirrors(REPO) if m["name"] == MIRROR
                    and m["state"] in ("creating", "active")]
        if existing:
            mirror = existing[0]
            say(f"      mirror {mirror['id']} exists already ({mirror['state']})")
        else:
            try:
                mirror = self.east.create_mirror(REPO, MIRROR, "west",
                                                 self.cluster.west.namespace(MIRROR))
            except ApiError as e:
                raise DemoError(f"could not create the mirror: {e.message}; start over with "
                                "another --data-dir") from e
            say(f"      POST /service/replication/v1/repositories/{REPO}/mirrors  ->  201 "
                f"(id {mirror['id']}, state {mirror['state']})")
        self.mirror_id = str(mirror["id"])
        started = time.monotonic()
        while mirror["state"] != "active":
            if mirror["state"] not in ("creating", "active"):
                raise DemoError(f"the mirror is {mirror['state']}: {mirror['error']}")
            if time.monotonic() - started > 60:
                raise DemoError("the mirror stayed in state creating for a minute")
            time.sleep(0.1)
            mirror = self.east.get_mirror(REPO, self.mirror_id)
        say(f"      the west replication service created the read-only repository {MIRROR}: "
            "mirror active")

    def write(self) -> tuple[str, dict[str, str]]:
        """Upload the dataset and commit; returns the commit id and each object's SHA-256."""
        step(3, "writing a small dataset to east and committing it")
        files = dataset(secrets.token_hex(4))
        for path, data in files.items():
            self.east.upload(REPO, "main", path, data)
        total = sum(len(d) for d in files.values())
        say(f"      {len(files)} objects, {total / 1024:.1f} KiB: "
            f"{', '.join(sorted(files)[:2])}, ...")
        commit_id = self.east.commit(REPO, "main", "daily sales snapshot")
        say(f'      commit {commit_id}  "daily sales snapshot"')
        return commit_id, {p: sha(d) for p, d in files.items()}

    def follow(self, commit_id: str, timeout: float) -> None:
        """Print the mirror's progress until ``commit_id`` is promoted."""
        step(4, "the mirror catches up: the west replication service copies what is "
                "missing, validates\n      every range and object of the commit, then "
                "promotes the mirror branch")
        started = time.monotonic()
        try:
            before = self.west.branches(MIRROR).get("main")
        except ApiError:
            before = None
        say(f"        0.0s  source main at {short(commit_id)}, mirror main at {short(before)}: "
            "1 commit pending")
        last = ""
        promoted_at: float | None = None
        while True:
            line = self._progress(commit_id)
            if line != last:
                say(f"      {time.monotonic() - started:5.1f}s  {line}")
                last = line
            if "validated yes" in line:
                return
            if promoted_at is None and self._promoted(commit_id):
                promoted_at = time.monotonic()
            if promoted_at is not None and time.monotonic() - promoted_at > 5:
                return  # promoted; the status row is only late
            if time.monotonic() - started > timeout:
                raise DemoError(f"the mirror did not catch up within {timeout:.0f}s; see the "
                                f"logs in {self.cluster.root}")
            time.sleep(0.1)

    def _progress(self, commit_id: str) -> str:
        try:
            status = self.east.mirror_status(REPO, self.mirror_id)
        except ApiError as e:
            return f"status unavailable ({e.status})"
        state = status["mirror"]["state"]
        rows = {b["branch"]: b for b in status["branches"]}
        row = rows.get("main")
        if state != "active" or row is None:
            return f"mirror {state}"
        metrics = read_metrics(self.cluster.west.sidecar_endpoint())
        copied = int(metrics.get("replication_builtin_copied_total", 0))
        if row["mirror_head"] == commit_id:
            validated = "yes"
        elif row["pending_commit"] == commit_id and (row["missing_ranges"]
                                                     or row["missing_objects"]):
            validated = (f"no, missing {row['missing_ranges']} range(s) and "
                         f"{row['missing_objects']} object(s)")
        elif row["pending_commit"] == commit_id:
            validated = "in progress"
        else:
            validated = "-"
        return (f"pending {short(row['pending_commit'])}  validated {validated}  "
                f"copied {copied}  promoted {short(row['mirror_head'])}  "
                f"lag {row['lag_seconds']:.1f}s")

    def _promoted(self, commit_id: str) -> bool:
        try:
            return self.west.branches(MIRROR).get("main") == commit_id
        except ApiError:
            return False

    def compare(self, commit_id: str, hashes: dict[str, str]) -> None:
        """Read every object of the commit in both regions and compare the bytes."""
        step(5, f"reading commit {short(commit_id)} in both regions")
        say(f"      {'path':<34} {'east sha256':<14} {'west sha256':<14}")
        same = 0
        for stat in self.west.list_objects(MIRROR, commit_id):
            path = stat["path"]
            a = sha(self.east.read_object(REPO, commit_id, path))
            b = sha(self.west.read_object(MIRROR, commit_id, path))
            same += a == b == hashes.get(path)
            say(f"      {path:<34} {a[:12]:<14} {b[:12]:<14} "
                f"{'identical' if a == b else 'DIFFERENT'}")
        if same != len(hashes):
            raise DemoError(f"only {same} of {len(hashes)} objects match")
        say(f"      all {same} objects identical: the same commit id reads the same bytes "
            "in both regions")

    def lose_source(self, commit_id: str, hashes: dict[str, str]) -> None:
        """Stop the source region; the destination still serves the commit, read-only."""
        step(6, "stopping the source region (east server and replication service)")
        for p in self.cluster.east.processes:
            p.stop()
        say(f"      east: {'still answering?!' if self.east.healthy() else 'unreachable'}")
        head = self.west.branches(MIRROR)["main"]
        served = {s["path"]: sha(self.west.read_object(MIRROR, head, s["path"]))
                  for s in self.west.list_objects(MIRROR, head)}
        if head != commit_id or served != hashes:
            raise DemoError("west does not serve the last commit as east wrote it")
        say(f"      west: {MIRROR} main is at {short(head)} and serves all {len(served)} "
            "objects, identical to what east wrote")
        try:
            self.west.upload(MIRROR, "main", "new.csv", b"x")
            raise DemoError("west accepted a write to the mirror")
        except ApiError as e:
            say(f"      west: writes are refused ({e.status}: {e.message}) until the "
                "mirror is detached")


def next_steps(cluster: Cluster, mirror_id: str, keep_running: bool) -> None:
    east, west = cluster.east, cluster.west
    auth = f"{ACCESS_KEY_ID}:{SECRET_ACCESS_KEY}"
    state = "running" if keep_running else "stopped now"
    say("\nNext steps")
    say(f"  endpoints ({state})")
    say(f"    east (source)       {east.endpoint}   replication {east.sidecar_endpoint()}")
    say(f"    west (destination)  {west.endpoint}   replication {west.sidecar_endpoint()}")
    say("    each server: REST API under /api/v1, S3 gateway on the same port, mirrors "
        "API under /service/replication/v1")
    say("  web UI (sign in with the admin's key pair below)")
    say(f"    east   {east.endpoint}/ui/repositories/{REPO}/mirrors")
    say(f"    west   {west.endpoint}/ui/repositories/{MIRROR}/objects")
    user = cluster.replication_user
    if user is not None:
        policies = " + ".join(str(p["id"]) for p in user.policies)
        say(f"  the replication services act as user {user.name!r} (key "
            f"{user.access_key_id}, both regions): seed 003's narrow {policies}, with "
            "fs:ListTags so that tags are mirrored too")
    say("  credentials of the admin (both regions)")
    say(f"    access key id      {ACCESS_KEY_ID}")
    say(f"    secret access key  {SECRET_ACCESS_KEY}")
    say("  try")
    say(f"    curl -u '{auth}' {west.endpoint}/api/v1/repositories/{MIRROR}/refs/main/"
        "objects/ls")
    say(f"    curl -u '{auth}' {east.endpoint}/service/replication/v1/repositories/{REPO}/"
        f"mirrors/{mirror_id}/status")
    say(f"    curl -u '{auth}' -X POST {west.endpoint}/service/replication/v1/repositories/"
        f"{REPO}/mirrors/{mirror_id}/detach   # failover: west becomes writable")
    say("  run it again")
    say("    python -m e2e.demo --keep-running      # leave both regions running (Ctrl-C stops)")
    say("    python -m e2e.demo --data-dir ./demo   # keep data, configs and logs")
    say("    python -m e2e.chaos --seed 1 --ops 40  # random operations and faults, "
        "invariants checked")


def _secret_key(root: Path) -> str:
    """The encryption key of both regions, kept with the data so a rerun can reuse it
    (created readable by its owner only, never for a moment by anyone else)."""
    return load_or_create_secret_key(str(root / SECRET_KEY_FILE))[0]


def run(args: argparse.Namespace) -> int:
    say("lakefs-mirror demo: two regions on this machine, transactional mirroring between them")
    say("  embedded default: SQLite metadata and mirrors table, local storage, builtin "
        "object copier;\n  the replication services act as a user with seed 003's narrow "
        "replication policy (and fs:ListTags: tags are mirrored too)")
    with scratch_dir(args.data_dir, "lakefs-demo-") as root:
        kept = "kept" if args.data_dir else "removed at exit; --data-dir DIR keeps them"
        say(f"  data, configs and logs in {root} ({kept})")
        ports, note = choose_ports(args.port)
        step(1, "starting two regions: a server and a replication service each")
        if note:
            say(f"      {note}")
        with start_cluster(root, SPEC, ports=ports, secret_key=_secret_key(root)) as cluster, \
                cluster.east.client() as east, cluster.west.client() as west:
            for region in cluster.regions.values():
                pids = ", ".join(str(p.pid) for p in region.processes)
                say(f"      {region.name:<5} server {region.endpoint}  replication "
                    f"{region.sidecar_endpoint()}  (pids {pids})")
            demo = Demo(cluster, east, west)
            demo.create()
            commit_id, hashes = demo.write()
            demo.follow(commit_id, args.timeout)
            demo.compare(commit_id, hashes)
            demo.lose_source(commit_id, hashes)
            if args.keep_running:
                say("\nrestarting the source region so that both keep running")
                cluster.east.start()
                say(f"      east restarted (pids "
                    f"{', '.join(str(p.pid) for p in cluster.east.processes)})")
            next_steps(cluster, demo.mirror_id, args.keep_running)
            if args.keep_running:
                say("\nboth regions are running; press Ctrl-C to stop them")
                while all(p.alive for p in cluster.processes):
                    time.sleep(0.5)
                dead = [p.name for p in cluster.processes if not p.alive]
                raise DemoError(f"{', '.join(dead)} exited; see the logs in {root}")
        say("\nstopped every process" + ("" if args.data_dir else "; removed the data"))
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m e2e.demo",
        description="Two regions on this machine: a repository, its mirror, a commit "
                    "followed, the source lost.")
    parser.add_argument("--keep-running", action="store_true",
                        help="leave both regions running at the end (Ctrl-C stops them)")
    parser.add_argument("--data-dir", type=Path,
                        help="keep data, configs and logs here (default: a temporary "
                             "directory, removed at exit)")
    parser.add_argument("--port", type=int, default=8000,
                        help="east server port; west is +1, replication +8 and +9 "
                             "(0: any free ports)")
    parser.add_argument("--timeout", type=float, default=120.0,
                        help="seconds to wait for the mirror")
    args = parser.parse_args(argv)
    with terminate_as_exit():
        try:
            return run(args)
        except KeyboardInterrupt:
            say("\ninterrupted: stopped every process" +
                ("" if args.data_dir else " and removed the data"))
            return 130
        except (DemoError, LakeFSError) as e:
            say(f"\ndemo failed: {e}")
            return 1


if __name__ == "__main__":
    sys.exit(main())

