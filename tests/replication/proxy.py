"""A recording HTTP proxy on loopback in front of a real server.

Tests put it between a sidecar and a lakeFS server to see what the sidecar asks
(paths and query parameters) and how many of its requests are in flight at once:
requests matching ``hold`` wait until :meth:`RecordingProxy.release`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlsplit

import httpx

#: headers not passed on (hop by hop, or recomputed)
_SKIPPED = frozenset({"connection", "keep-alive", "transfer-encoding", "content-length",
                      "host", "content-encoding"})
#: the longest a held request waits for release
HOLD_LIMIT = 30.0


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, list[str]]


class RecordingProxy:
    """Forwards every request to ``target``, recording it; holds those ``hold`` picks.

    Args:
        target: ``http://host:port`` of the real server.
        hold: ``(method, path) -> bool``: requests to keep waiting until released.
    """

    def __init__(self, target: str,
                 hold: Callable[[str, str], bool] | None = None) -> None:
        self.target = target.rstrip("/")
        self.hold = hold or (lambda _m, _p: False)
        self.seen: list[Seen] = []
        #: paths of the held requests waiting now
        self.holding: list[str] = []
        self._released = threading.Event()
        self._lock = threading.Lock()
        #: requests being forwarded now, and whether the proxy is stopping (a client
        #: still running, a sidecar, may send more on its open connections)
        self._forwarding = 0
        self._stopping = False
        self._idle = threading.Condition(self._lock)
        self._http = httpx.Client(base_url=self.target, timeout=60)
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def requests(self, method: str, path_suffix: str) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if s.method == method and s.path.endswith(path_suffix)]

    def held(self) -> list[str]:
        with self._lock:
            return list(self.holding)

    def release(self) -> None:
        """Let every held request through, and hold none from now on."""
        self._released.set()

    def start(self) -> RecordingProxy:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving; the client is closed once no request is forwarded through it
        (closing it under a request leaves that request's connection open)."""
        self._released.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=10)
        with self._idle:
            self._stopping = True
            self._idle.wait_for(lambda: self._forwarding == 0, timeout=30)
        self._http.close()

    def _forward(self, handler: BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        method = handler.command
        with self._lock:
            self.seen.append(Seen(method, parts.path, parse_qs(parts.query)))
        if not self._released.is_set() and self.hold(method, parts.path):
            with self._lock:
                self.holding.append(parts.path)
            try:
                self._released.wait(HOLD_LIMIT)
            finally:
                with self._lock:
                    self.holding.remove(parts.path)
        length = int(handler.headers.get("content-length") or 0)
        body = handler.rfile.read(length) if length else b""
        headers = {k: v for k, v in handler.headers.items() if k.lower() not in _SKIPPED}
        headers["accept-encoding"] = "identity"
        with self._idle:
            if self._stopping:  # a request on a connection opened before the stop
                handler.close_connection = True
                handler.send_error(503, "proxy stopped")
                return
            self._forwarding += 1
        try:
            resp = self._http.request(method, handler.path, content=body, headers=headers)
        finally:
            with self._idle:
                self._forwarding -= 1
                self._idle.notify_all()
        handler.send_response(resp.status_code)
        for k, v in resp.headers.items():
            if k.lower() not in _SKIPPED:
                handler.send_header(k, v)
        handler.send_header("content-length", str(len(resp.content)))
        handler.end_headers()
        if method != "HEAD":
            handler.wfile.write(resp.content)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:  # noqa: A002
                pass

            def _any(self) -> None:
                proxy._forward(self)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = do_PATCH = _any  # noqa: N815

        return Handler


@contextmanager
def recording_proxy(target: str, hold: Callable[[str, str], bool] | None = None
                    ) -> Iterator[RecordingProxy]:
    proxy = RecordingProxy(target, hold).start()
    try:
        yield proxy
    finally:
        proxy.stop()
