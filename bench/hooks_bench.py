"""Commit latency with no hook, one no-op webhook and one Lua hook.

Run ``python -m bench.hooks_bench [--commits 100]``.

It starts the server (embedded database, local storage) in its own process and a
no-op webhook receiver (HTTP/1.1, answers 200 at once) in this one, on loopback. Three
repositories get, on ``main``: no action; one action with one ``pre-commit`` webhook
hook; one action with one ``pre-commit`` Lua hook that checks a metadata field. Each
then gets ``--commits`` sequential commits of one staged 1 KiB object (the upload is
not timed), after a short warm-up.

It prints commit p50 and p99 in milliseconds, and the p50 each hook adds to a commit
(the target for the webhook on loopback is 10 ms or less).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import httpx

from bench.gateway_bench import lakefs_server
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET

WARM_UP = 5
PAYLOAD = b"x" * 1024

_WEBHOOK_ACTION = """name: noop webhook
on:
  pre-commit:
    branches: [main]
hooks:
  - id: noop
    type: webhook
    properties:
      url: "{url}/hook"
      timeout: 5s
"""

_LUA_ACTION = """name: lua check
on:
  pre-commit:
    branches: [main]
hooks:
  - id: check_metadata
    type: lua
    properties:
      args:
        required: [job]
      script: |
        for _, k in ipairs(args.required) do
          if action.commit.metadata[k] == nil then error("missing " .. k) end
        end
"""


class _NoOp(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out as separate writes

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", "0")))
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def noop_webhook() -> Iterator[str]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _NoOp)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


def _commits(api: httpx.Client, repo: str, count: int) -> list[float]:
    objects = f"/repositories/{repo}/branches/main/objects"
    samples: list[float] = []
    for i in range(-WARM_UP, count):
        api.post(objects, params={"path": f"data/{i}"}, content=PAYLOAD,
                 headers={"Content-Type": "application/octet-stream"}).raise_for_status()
        start = time.perf_counter()
        resp = api.post(f"/repositories/{repo}/branches/main/commits",
                        json={"message": f"commit {i}", "metadata": {"job": "bench"}})
        elapsed = (time.perf_counter() - start) * 1000
        if resp.status_code != 201:
            raise RuntimeError(f"commit failed {resp.status_code}: {resp.text}")
        if i >= 0:
            samples.append(elapsed)
    return samples


def _setup(api: httpx.Client, repo: str, action: str | None) -> None:
    api.post("/repositories", json={"name": repo, "storage_namespace": f"local://{repo}",
                                    "default_branch": "main"}).raise_for_status()
    if action is not None:
        api.post(f"/repositories/{repo}/branches/main/objects",
                 params={"path": "_lakefs_actions/bench.yaml"}, content=action.encode(),
                 headers={"Content-Type": "application/octet-stream"}).raise_for_status()
        api.post(f"/repositories/{repo}/branches/main/commits",
                 json={"message": "action", "metadata": {"job": "bench"}}
                 ).raise_for_status()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=100)
    args = parser.parse_args(argv)

    with noop_webhook() as hook_url, lakefs_server() as endpoint, httpx.Client(
            base_url=f"{endpoint}/api/v1", auth=(ADMIN_KEY, ADMIN_SECRET), timeout=60) as api:
        cases = {"no hook": None, "1 webhook": _WEBHOOK_ACTION.format(url=hook_url),
                 "1 lua hook": _LUA_ACTION}
        results: dict[str, list[float]] = {}
        for i, (name, action) in enumerate(cases.items()):
            repo = f"hooks-bench-{i}"
            _setup(api, repo, action)
            results[name] = _commits(api, repo, args.commits)

    base = statistics.median(results["no hook"])
    print(f"Commit latency, {args.commits} sequential commits each (ms)")
    for name, samples in results.items():
        p50 = statistics.median(samples)
        added = "" if name == "no hook" else f"  added p50 {p50 - base:+7.2f}"
        print(f"{name:11s} p50 {p50:7.2f}  p99 {_percentile(samples, 0.99):7.2f}{added}")


if __name__ == "__main__":
    main()
