"""Throughput of many clients at once with 1, 2 and 4 server worker processes.

Run ``python -m bench.workers_bench [--seconds 60] [--clients 16] [--workers 1 2 4]
[--client-processes 4] [--operations stat get put] [--data-dir DIR] [--rounds 1]``.

For each worker count it starts, in child processes:

* the server (``python -m lakefs_core run --workers N``, embedded SQLite and local
  storage) with a repository holding 64 objects of 4 KiB on ``main``;
* the ceiling: a trivial ASGI app answering the same requests with bodies of the same
  size, under the same server stack (``uvicorn --workers N``), which measures what
  the machine, the HTTP stack and this client allow.

Against each, ``--clients`` clients (threads spread over ``--client-processes``
processes, one keep-alive connection each) send, in turn, a stat
(``GET .../objects/stat``), a 4 KiB read (``GET .../objects``) and a 4 KiB upload
(``POST .../branches/main/objects``, a new path each time) for ``--seconds``
seconds; the first tenth of that is warm-up and is not counted. It prints requests/s,
p50 and p99 per operation, and the server's requests/s as a fraction of the ceiling
with the same number of workers. The clients run on the same machine as the servers:
beside the figures it prints the CPU microseconds per answered request spent by the
server's processes (from ``/proc``) and by the clients (their own processes' CPU
time), and the load average before and after each run.

What the machine gives both moves from one minute to the next (the ceiling by a fifth
between runs here). ``--rounds N`` keeps both servers running and measures them in
turn N times, the one that goes first alternating; each round's fraction is of the
ceiling measured beside it, and the median of the rounds' fractions is printed last.

Every upload creates a file, and what the kernel spends on that depends on the disk (and
on what it still does for the files of an earlier run, deleted): ``--data-dir`` puts the
server's data on the filesystem of your choice, for instance ``/dev/shm`` to leave the
disk out. By default it is the system's temporary directory. Before the servers start,
it writes 2,000 objects of 4 KiB there through the local store and prints the CPU one
cost: on ext4 without a journal that figure grows several times over for some minutes
after many files were deleted nearby (an earlier run's, a test run's).
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import multiprocessing
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

# imported by every client process: keep it light (the servers' modules load in main)
ADMIN_KEY = "AKIAIOSFOLQUICKSTART"
ADMIN_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"

REPOSITORY = "bench"
OBJECT_SIZE = 4096
SEED_OBJECTS = 64
OPERATIONS = ("stat", "get", "put")
_API = f"/api/v1/repositories/{REPOSITORY}"


# --- the ceiling: a trivial app on the same server stack -------------------------------
_STAT_BODY = json.dumps({
    "path": "seed/00000", "path_type": "object", "physical_address": "local://x/" + "0" * 32,
    "checksum": "0" * 32, "size_bytes": OBJECT_SIZE, "mtime": 0,
    "content_type": "application/octet-stream", "metadata": {}}).encode()
_OBJECT_BODY = b"\0" * OBJECT_SIZE


async def trivial_app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers a stat, a read and an upload like the server, without doing anything."""
    if scope["type"] != "http":
        return
    more = True
    while more:  # read the whole request body, as the server does
        message = await receive()
        more = message.get("more_body", False)
    path: str = scope["path"]
    if scope["method"] == "POST":
        status, body, kind = 201, _STAT_BODY, b"application/json"
    elif path.endswith("/stat"):
        status, body, kind = 200, _STAT_BODY, b"application/json"
    else:
        status, body, kind = 200, _OBJECT_BODY, b"application/octet-stream"
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", kind),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})


@contextlib.contextmanager
def trivial_server(workers: int, work_dir: Path) -> Iterator[tuple[int, int]]:
    """The trivial app under ``uvicorn --workers``; yields its port and process id."""
    from lakefs_testing.servers import child_server, free_port

    port = free_port()
    output = work_dir / f"trivial-{port}.out"
    with child_server([sys.executable, "-m", "uvicorn", "bench.workers_bench:trivial_app",
                       "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
                       "--log-level", "info", "--no-access-log",
                       "--timeout-worker-healthcheck", "60"],
                      f"http://127.0.0.1:{port}/", output) as proc:
        wait_started(output, workers)
        yield port, proc.pid


def wait_started(output: Path, workers: int, timeout: float = 300) -> None:
    """Wait until the log of a uvicorn server says that every worker has started."""
    deadline = time.monotonic() + timeout
    while output.read_text(errors="replace").count("Application startup complete") < workers:
        if time.monotonic() > deadline:
            raise RuntimeError(f"not every worker started: {output.read_text()}")
        time.sleep(0.2)


# --- the clients ---------------------------------------------------------------------
@dataclass
class Samples:
    """Latencies (ms) per operation, failed requests, and the first errors met."""

    latencies: dict[str, list[float]] = field(
        default_factory=lambda: {op: [] for op in OPERATIONS})
    failed: int = 0
    errors: list[str] = field(default_factory=list)
    #: requests answered, warm-up included, and the CPU seconds the clients spent
    completed: int = 0
    client_cpu: float = 0.0

    def fail(self, error: str) -> None:
        self.failed += 1
        if len(self.errors) < 5:
            self.errors.append(error)

    def add(self, other: Samples) -> None:
        for op, values in other.latencies.items():
            self.latencies[op].extend(values)
        self.failed += other.failed
        self.errors.extend(other.errors[:5 - len(self.errors)])
        self.completed += other.completed
        self.client_cpu += other.client_cpu


def _client(port: int, client_id: int, operations: tuple[str, ...],
            times: tuple[float, float, float], samples: Samples) -> None:
    """One client: stat, read, upload in turn until ``stop_at`` (monotonic seconds)."""
    basic = base64.b64encode(f"{ADMIN_KEY}:{ADMIN_SECRET}".encode()).decode()
    auth = {"authorization": f"Basic {basic}"}
    put_headers = {**auth, "content-type": "application/octet-stream"}
    payload = os.urandom(OBJECT_SIZE)
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    n = client_id
    start, warm_until, stop_at = times
    time.sleep(max(0.0, start - time.monotonic()))
    # a bounded loop: it ends at stop_at whatever the server does
    while time.monotonic() < stop_at:
        n += 1
        op = operations[n % len(operations)]
        seed = f"seed/{n % SEED_OBJECTS:05d}"
        began = time.monotonic()
        try:
            if op == "stat":
                conn.request("GET", f"{_API}/refs/main/objects/stat?path={seed}", headers=auth)
            elif op == "get":
                conn.request("GET", f"{_API}/refs/main/objects?path={seed}", headers=auth)
            else:
                conn.request("POST", f"{_API}/branches/main/objects?path=put/{client_id}/{n}",
                             body=payload, headers=put_headers)
            response = conn.getresponse()
            response.read()
            status = response.status
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            samples.fail(f"{op}: {type(e).__name__}: {e}")
            continue
        if status not in (200, 201):
            samples.fail(f"{op}: HTTP {status}")
            continue
        samples.completed += 1
        if began >= warm_until:
            samples.latencies[op].append((time.monotonic() - began) * 1000)
    conn.close()


def _client_process(port: int, ids: list[int], operations: tuple[str, ...], go: Any,
                    times: Any, out: Any) -> None:
    out.put("ready")
    go.wait()
    cpu = time.process_time()
    each = [Samples() for _ in ids]
    threads = [threading.Thread(target=_client, args=(port, i, operations, tuple(times), mine))
               for i, mine in zip(ids, each, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    total = Samples()
    for mine in each:
        total.add(mine)
    total.client_cpu = time.process_time() - cpu
    out.put(total)


def run_clients(port: int, clients: int, processes: int, seconds: float,
                operations: tuple[str, ...] = OPERATIONS) -> tuple[Samples, float]:
    """Run the clients for ``seconds``; their samples and the counted seconds."""
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    go = ctx.Event()
    times = ctx.Array("d", 3)
    groups = [ids for p in range(processes) if (ids := list(range(p, clients, processes)))]
    procs = [ctx.Process(target=_client_process, args=(port, ids, operations, go, times, out))
             for ids in groups]
    for p in procs:
        p.start()
    for _ in procs:
        if out.get(timeout=300) != "ready":
            raise RuntimeError("a client process did not start")
    # every client starts at the same instant, once every process is up
    start = time.monotonic() + 0.5
    times[:] = [start, start + seconds / 10, start + seconds]
    go.set()
    total = Samples()
    for _ in procs:
        total.add(out.get(timeout=seconds + 300))
    for p in procs:
        p.join(timeout=60)
    return total, seconds - seconds / 10


def _percentile(values: list[float], fraction: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _seed(endpoint: str) -> None:
    with httpx.Client(base_url=f"{endpoint}/api/v1", auth=(ADMIN_KEY, ADMIN_SECRET),
                      timeout=60) as client:
        resp = client.post("/repositories", json={
            "name": REPOSITORY, "storage_namespace": f"local://{REPOSITORY}",
            "default_branch": "main"})
        resp.raise_for_status()
        for i in range(SEED_OBJECTS):
            client.post(f"/repositories/{REPOSITORY}/branches/main/objects",
                        params={"path": f"seed/{i:05d}"}, content=os.urandom(OBJECT_SIZE),
                        headers={"content-type": "application/octet-stream"}
                        ).raise_for_status()
        client.post(f"/repositories/{REPOSITORY}/branches/main/commits",
                    json={"message": "seed"}).raise_for_status()


@dataclass
class Result:
    workers: int
    target: str
    round: int
    requests_per_second: float
    p50: dict[str, float]
    p99: dict[str, float]
    errors: int
    load: str
    #: CPU microseconds per answered request: the server's processes, the clients'
    server_cpu: float = float("nan")
    client_cpu: float = float("nan")


def tree_cpu(pid: int) -> float:
    """CPU seconds (user + system) of process ``pid`` and of its children (a server's
    workers), read from ``/proc``."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0.0
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            fields = Path(entry.path, "stat").read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        if entry.name == str(pid) or fields[1] == str(pid):
            total += (int(fields[11]) + int(fields[12])) / ticks
    return total


def _measure(port: int, pid: int, workers: int, target: str, args: argparse.Namespace,
             round_: int = 0) -> Result:
    before = _load_average()
    server_before = tree_cpu(pid)
    samples, counted = run_clients(port, args.clients, args.client_processes, args.seconds,
                                   tuple(args.operations))
    server_cpu = tree_cpu(pid) - server_before
    if samples.failed:
        print(f"  {target} ({workers} workers): {samples.failed} failed requests, "
              f"e.g. {samples.errors}", flush=True)
    done = sum(len(v) for v in samples.latencies.values())
    everything = [x for v in samples.latencies.values() for x in v]
    return Result(
        workers, target, round_, done / counted,
        {**{op: _percentile(v, 0.5) for op, v in samples.latencies.items()},
         "all": _percentile(everything, 0.5)},
        {**{op: _percentile(v, 0.99) for op, v in samples.latencies.items()},
         "all": _percentile(everything, 0.99)},
        samples.failed, f"{before} -> {_load_average()}",
        server_cpu / max(samples.completed, 1) * 1e6,
        samples.client_cpu / max(samples.completed, 1) * 1e6)


def disk_probe(directory: Path, files: int = 2000) -> float:
    """CPU microseconds this process spends writing one 4 KiB object through the local
    store under ``directory``, as the server writes an upload. The files stay until the
    run ends: on ext4 without a journal, files deleted in the last minutes make the next
    ones dearer near them."""
    from lakefs_core.block.local import LocalBlockStore

    store = LocalBlockStore(str(directory))
    data = os.urandom(OBJECT_SIZE)
    began = time.process_time()
    for n in range(files):
        store.put(f"local://probe/data/{n // 1000}/{n}", data)
    return (time.process_time() - began) / files * 1e6


def _load_average() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=60.0,
                        help="how long each measurement runs (default 60)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--client-processes", type=int, default=4)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--operations", nargs="+", choices=OPERATIONS, default=list(OPERATIONS),
                        help="the operations each client sends in turn (default: all three)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="measurements of each server, in turn (default 1)")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where the server's data goes (default: the system's "
                             "temporary directory)")
    args = parser.parse_args(argv)
    if args.data_dir is not None and not args.data_dir.is_dir():
        parser.error(f"--data-dir {args.data_dir}: not a directory")
    if args.seconds <= 0 or args.clients < 1 or args.client_processes < 1 or args.rounds < 1:
        parser.error("--seconds, --clients, --client-processes and --rounds must be positive")

    from lakefs_testing.live_server import server_process

    print(f"{os.cpu_count()} CPUs; {args.clients} clients in {args.client_processes} "
          f"processes; {args.seconds:g} s per run (first tenth not counted); data under "
          f"{args.data_dir or tempfile.gettempdir()}", flush=True)
    results: list[Result] = []
    with tempfile.TemporaryDirectory(prefix="lakefs-workers-bench-", dir=args.data_dir) as tmp:
        root = Path(tmp)
        print(f"writing a 4 KiB object there costs {disk_probe(root / 'probe'):.0f} us of "
              f"CPU (2,000 through the local store)", flush=True)
        for workers in args.workers:
            data_dir = root / f"data-{workers}"
            # INFO: uvicorn says when each worker has started (no access log)
            with trivial_server(workers, root) as (port, pid), \
                    server_process(data_dir, {"LAKEFS_LOGGING_LEVEL": "INFO"},
                                   workers=workers) as server:
                wait_started(server.output, workers)
                _seed(server.endpoint)
                for n in range(args.rounds):
                    targets = [(port, pid, "ceiling"),
                               (server.port, server.process.pid, "lakefs")]
                    for target_port, target_pid, target in targets[::-1] if n % 2 else targets:
                        results.append(_measure(target_port, target_pid, workers, target,
                                                args, n))

    print()
    print("workers  round  target    req/s   p50 ms (stat/get/put)   "
          "p99 ms (stat/get/put/all)    of ceiling  errors  CPU us/request (server, clients)  "
          "load average (before -> after)")
    ceilings = {(r.workers, r.round): r.requests_per_second
                for r in results if r.target == "ceiling"}
    ratios: dict[int, list[float]] = {}
    for r in results:
        ratio = ""
        if r.target == "lakefs" and ceilings.get((r.workers, r.round)):
            fraction = r.requests_per_second / ceilings[(r.workers, r.round)]
            ratios.setdefault(r.workers, []).append(fraction)
            ratio = f"{fraction:.2f}"
        p50 = "/".join(f"{r.p50[op]:.1f}" for op in OPERATIONS)
        p99 = "/".join(f"{r.p99[op]:.1f}" for op in (*OPERATIONS, "all"))
        print(f"{r.workers:>7}  {r.round + 1:>5}  {r.target:<8} {r.requests_per_second:>7.0f}"
              f"   {p50:<22}  {p99:<27}  {ratio:>10}  {r.errors:>6}  "
              f"{r.server_cpu:>14.0f} {r.client_cpu:>8.0f}{'':>10}  {r.load}")
    if args.rounds > 1:
        print()
        for workers, fractions in ratios.items():
            print(f"{workers} workers: this server at {statistics.median(fractions):.2f} of "
                  f"the ceiling, median of {len(fractions)} rounds "
                  f"({', '.join(f'{f:.2f}' for f in fractions)})")


if __name__ == "__main__":
    main()
