"""A webhook receiver on loopback for hook tests: records every POST, fails on ``/fail``."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class WebhookServer:
    """Records each POST's path, headers and JSON body; answers 500 with ``refusal`` on
    ``/fail...``, 200 elsewhere. Requests of other methods are recorded (no body) and
    answered 404.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, refusal: bytes = b"schema check failed: column x",
                 host: str = "127.0.0.1") -> None:
        self.calls: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with server._lock:
                    server.calls.append({"path": self.path, "headers": dict(self.headers),
                                         "payload": json.loads(body)})
                failing = self.path.startswith("/fail")
                answer = refusal if failing else b"ok"
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                # not a hook's method: recorded, so that a test sees it arrived
                with server._lock:
                    server.calls.append({"path": self.path, "headers": dict(self.headers),
                                         "payload": None})
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()

            do_PUT = do_HEAD = do_DELETE = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer((host, 0), Handler)
        self.url = f"http://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def payloads(self, **match: str) -> list[dict[str, Any]]:
        """The JSON bodies received so far whose fields equal ``match``."""
        with self._lock:
            calls = list(self.calls)
        return [c["payload"] for c in calls
                if all(c["payload"].get(k) == v for k, v in match.items())]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def __enter__(self) -> WebhookServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
