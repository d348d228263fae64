"""The gate as an HTTP service (http.server): POST a lakeFS webhook event to any path."""

from __future__ import annotations

import json
import logging
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import lakefs

from examples.quality_gate.gate import BadEvent, QualityGate, SchemaViolation

log = logging.getLogger("quality_gate")


def _handler(gate: QualityGate) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            try:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                checked = gate.check(json.loads(body))
            except (json.JSONDecodeError, BadEvent) as e:
                self._answer(400, f"bad event: {e}")
            except SchemaViolation as e:
                self._answer(412, "schema check failed: " + "; ".join(e.problems))
            except lakefs.exceptions.LakeFSException as e:  # fail closed
                self._answer(502, f"cannot read the merge from lakeFS: {e}")
            else:
                self._answer(200, f"schema check passed: {checked} Parquet files checked")

        def _answer(self, status: int, text: str) -> None:
            log.info("%s %d %s", self.path, status, text)
            data = text.encode()
            self.send_response(status)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


def make_server(gate: QualityGate, host: str = "127.0.0.1", port: int = 0
                ) -> ThreadingHTTPServer:
    """The service bound to ``host:port`` (0: any free port); ``serve_forever()`` runs it."""
    return ThreadingHTTPServer((host, port), _handler(gate))
