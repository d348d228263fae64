"""Server CPU per request: this server beside a minimal FastAPI app and a trivial app.

Run ``python -m bench.request_cost [--requests 1000] [--rounds 3]``.

It starts, each in a child process of its own on loopback:

* the server as its command line runs it (``python -m lakefs_core run``, one
  process, embedded SQLite and local storage) with a repository holding 4 KiB objects
  on ``main``;
* a minimal FastAPI app answering the same REST requests with the same JSON (sync
  routes, basic auth parsed, nothing stored): what the framework alone costs;
* the trivial ASGI app of :mod:`bench.workers_bench` under uvicorn: what the HTTP
  stack alone costs.

Against each, one warm keep-alive client sends ``--requests`` requests of each kind,
``--rounds`` times: a stat (``GET .../objects/stat``), a 4 KiB read
(``GET .../objects``), a 4 KiB upload (``POST .../branches/main/objects``, a new path
each time) and a 4 KiB read through the S3 gateway (SigV4, boto3). Around each round
it reads the server process's CPU time (user + system, from ``/proc/<pid>/stat``)
and prints the median over the rounds of CPU microseconds per request, then the part
of it spent in the kernel (system time). Client CPU is not counted; the machine's other
load shows in wall time only, not in these figures.

An upload creates a file, and what the kernel spends on that depends on the disk:
``--data-dir`` puts the server's data (and the apps' scratch files) on the filesystem
of your choice, for instance ``/dev/shm`` to leave the disk out. By default it is the
system's temporary directory.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import os
import statistics
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import httpx
from fastapi import Body, FastAPI, Header, Response

from bench.workers_bench import (
    ADMIN_KEY,
    ADMIN_SECRET,
    OBJECT_SIZE,
    REPOSITORY,
    SEED_OBJECTS,
    _seed,
    wait_started,
)
from lakefs_core.api.routes.objects import ObjectStats

WARM_UP = 50
_TICKS = os.sysconf("SC_CLK_TCK")
OPERATIONS = ("stat", "GET 4 KiB", "PUT 4 KiB", "gateway GET 4 KiB")


# --- the minimal FastAPI app: the framework's own cost -----------------------------------
def _minimal_app() -> FastAPI:
    app = FastAPI()
    stats = ObjectStats(path="", path_type="object", physical_address="local://x/" + "0" * 32,
                        checksum="0" * 32, size_bytes=OBJECT_SIZE, mtime=0, metadata={},
                        content_type="application/octet-stream")
    data = b"\0" * OBJECT_SIZE

    def user(authorization: str) -> str:
        scheme, _, value = authorization.partition(" ")
        key, _, secret = base64.b64decode(value).decode().partition(":")
        if scheme.lower() != "basic" or (key, secret) != (ADMIN_KEY, ADMIN_SECRET):
            raise ValueError("bad credentials")
        return key

    @app.get("/api/v1/repositories/{repository}/refs/{ref}/objects/stat",
             response_model=ObjectStats, response_model_exclude_none=True)
    def stat(repository: str, ref: str, path: str,
             authorization: Annotated[str, Header()]) -> ObjectStats:
        user(authorization)
        return stats.model_copy(update={"path": path})

    @app.get("/api/v1/repositories/{repository}/refs/{ref}/objects")
    def get(repository: str, ref: str, path: str,
            authorization: Annotated[str, Header()]) -> Response:
        user(authorization)
        return Response(data, media_type="application/octet-stream")

    @app.post("/api/v1/repositories/{repository}/branches/{branch}/objects",
              status_code=201, response_model=ObjectStats, response_model_exclude_none=True)
    def put(repository: str, branch: str, path: str,
            body: Annotated[bytes, Body(media_type="application/octet-stream")],
            authorization: Annotated[str, Header()]) -> ObjectStats:
        user(authorization)
        return stats.model_copy(update={"path": path, "size_bytes": len(body)})

    return app


minimal_app = _minimal_app()


# --- the servers ---------------------------------------------------------------------------
@contextlib.contextmanager
def _uvicorn(app: str, work_dir: Path) -> Iterator[tuple[int, int]]:
    """``app`` under uvicorn in one child process; yields (port, process id)."""
    from lakefs_testing.servers import child_server, free_port

    port = free_port()
    output = work_dir / f"{app.rpartition(':')[2]}-{port}.out"
    with child_server([sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1",
                       "--port", str(port), "--log-level", "info", "--no-access-log"],
                      f"http://127.0.0.1:{port}/", output) as process:
        wait_started(output, 1)
        yield port, process.pid


@contextlib.contextmanager
def _lakefs(work_dir: Path) -> Iterator[tuple[int, int]]:
    from lakefs_testing.live_server import server_process

    with server_process(work_dir / "data", {"LAKEFS_LOGGING_LEVEL": "WARN"}) as server:
        _seed(server.endpoint)
        yield server.port, server.process.pid


# --- measuring -----------------------------------------------------------------------------
def cpu_times(pid: int) -> tuple[float, float]:
    """User and system CPU seconds of a process (all its threads, living and ended)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return int(fields[11]) / _TICKS, int(fields[12]) / _TICKS


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (all its threads, living and ended)."""
    return sum(cpu_times(pid))


def cpu_per_request(pid: int, call: Callable[[int], None], requests: int,
                    rounds: int) -> tuple[float, float]:
    """Medians over ``rounds`` of the server's CPU microseconds per call, and of the
    kernel's part of them, after a warm-up."""
    for i in range(WARM_UP):
        call(-1 - i)
    figures, kernel = [], []
    n = 0
    for _ in range(rounds):
        user, system = cpu_times(pid)
        for _ in range(requests):
            call(n)
            n += 1
        user_after, system_after = cpu_times(pid)
        figures.append((user_after - user + system_after - system) / requests * 1e6)
        kernel.append((system_after - system) / requests * 1e6)
    return statistics.median(figures), statistics.median(kernel)


def _rest_calls(client: httpx.Client, payload: bytes) -> dict[str, Callable[[int], None]]:
    api = f"/api/v1/repositories/{REPOSITORY}"
    octets = {"content-type": "application/octet-stream"}

    def expect(response: httpx.Response, status: int) -> None:
        if response.status_code != status:
            raise RuntimeError(f"unexpected answer {response.status_code}: {response.text}")

    def stat(i: int) -> None:
        expect(client.get(f"{api}/refs/main/objects/stat",
                          params={"path": f"seed/{i % SEED_OBJECTS:05d}"}), 200)

    def get(i: int) -> None:
        response = client.get(f"{api}/refs/main/objects",
                              params={"path": f"seed/{i % SEED_OBJECTS:05d}"})
        expect(response, 200)
        if len(response.content) != OBJECT_SIZE:
            raise RuntimeError("read returned another size")

    def put(i: int) -> None:
        expect(client.post(f"{api}/branches/main/objects", params={"path": f"put/{i}"},
                           content=payload, headers=octets), 201)

    return {"stat": stat, "GET 4 KiB": get, "PUT 4 KiB": put}


def _gateway_call(port: int) -> Callable[[int], None]:
    import boto3
    from botocore.config import Config

    s3 = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}",
                      aws_access_key_id=ADMIN_KEY, aws_secret_access_key=ADMIN_SECRET,
                      region_name="us-east-1",
                      config=Config(s3={"addressing_style": "path"},
                                    retries={"max_attempts": 1}))

    def get(i: int) -> None:
        body = s3.get_object(Bucket=REPOSITORY,
                             Key=f"main/seed/{i % SEED_OBJECTS:05d}")["Body"].read()
        if len(body) != OBJECT_SIZE:
            raise RuntimeError("read returned another size")

    return get


def measure(port: int, pid: int, operations: tuple[str, ...], requests: int,
            rounds: int) -> dict[str, tuple[float, float]]:
    """CPU microseconds per request of each of ``operations`` on the server at ``port``,
    and the kernel's part of them."""
    payload = os.urandom(OBJECT_SIZE)
    with httpx.Client(base_url=f"http://127.0.0.1:{port}", auth=(ADMIN_KEY, ADMIN_SECRET),
                      timeout=60) as client:
        calls = _rest_calls(client, payload)
        calls["gateway GET 4 KiB"] = _gateway_call(port)
        return {op: cpu_per_request(pid, calls[op], requests, rounds) for op in operations}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000,
                        help="requests of each kind per round (default 1000)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where the servers keep their data (default: the system's "
                             "temporary directory)")
    args = parser.parse_args(argv)
    if args.requests < 1 or args.rounds < 1:
        parser.error("--requests and --rounds must be positive")
    if args.data_dir is not None and not args.data_dir.is_dir():
        parser.error(f"--data-dir {args.data_dir}: not a directory")

    results: dict[str, dict[str, tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="lakefs-request-cost-", dir=args.data_dir) as tmp:
        root = Path(tmp)
        with _lakefs(root) as (port, pid):
            results["this server"] = measure(port, pid, OPERATIONS, args.requests, args.rounds)
        with _uvicorn("bench.request_cost:minimal_app", root) as (port, pid):
            results["minimal FastAPI"] = measure(port, pid, OPERATIONS[:3], args.requests,
                                                 args.rounds)
        with _uvicorn("bench.workers_bench:trivial_app", root) as (port, pid):
            results["trivial ASGI"] = measure(port, pid, OPERATIONS, args.requests, args.rounds)

    print(f"server CPU per request (us), one warm client, {args.requests} requests a round, "
          f"median of {args.rounds} rounds; data under {args.data_dir or tempfile.gettempdir()}")
    for title, part in (("all", 0), ("of which in the kernel", 1)):
        print(f"\n{title}")
        print(f"{'request':<20}" + "".join(f"{name:>18}" for name in results))
        for op in OPERATIONS:
            cells = "".join(f"{r[op][part]:>18,.0f}" if op in r else f"{'-':>18}"
                            for r in results.values())
            print(f"{op:<20}{cells}")


if __name__ == "__main__":
    main()
