"""moto in server mode, with DynamoDB requests taken one at a time.

moto runs a DynamoDB transaction against a deep copy of its tables and, when one of
its conditions fails, puts that copy back, so that a write another request made in
the meantime is undone (an item deleted by one client came back after another
client's transaction failed). DynamoDB isolates a transaction from other writes. Taking
DynamoDB requests one at a time gives moto that isolation; S3 and DynamoDB Streams
requests still run concurrently.

In a test process: :class:`MotoThread` (``lakefs_testing.servers.start_moto``). As a
process of its own: ``python -m lakefs_testing.moto_server -H 127.0.0.1 -p PORT``.
"""

from __future__ import annotations

import argparse
import threading
from collections.abc import Callable, Iterable
from typing import Any

from moto.moto_server.werkzeug_app import (
    DomainDispatcherApplication,
    MotoRequestHandler,
    create_backend_app,
)
from werkzeug.serving import BaseWSGIServer, make_server

#: the ``X-Amz-Target`` prefix of DynamoDB's API (not that of DynamoDB Streams)
DYNAMODB_TARGET = "DynamoDB_"

Wsgi = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


class DynamoDBOneAtATime:
    """A WSGI application that runs the DynamoDB requests of ``app`` one at a time."""

    def __init__(self, app: Wsgi) -> None:
        self.app = app
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]
                 ) -> Iterable[bytes]:
        if not str(environ.get("HTTP_X_AMZ_TARGET", "")).startswith(DYNAMODB_TARGET):
            return self.app(environ, start_response)
        with self._lock:  # the whole answer is made under the lock
            return list(self.app(environ, start_response))


def make_moto_server(host: str, port: int) -> BaseWSGIServer:
    """A threaded moto server (every service) whose DynamoDB requests take turns."""
    app = DynamoDBOneAtATime(DomainDispatcherApplication(create_backend_app))
    return make_server(host, port, app, threaded=True, request_handler=MotoRequestHandler)


class MotoThread:
    """A moto server in a thread of this process."""

    def __init__(self, host: str, port: int) -> None:
        self._server = make_moto_server(host, port)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True,
                                        name=f"moto-{port}")

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m lakefs_testing.moto_server",
                                 description=__doc__.split("\n")[0])
    ap.add_argument("-H", "--host", default="127.0.0.1")
    ap.add_argument("-p", "--port", type=int, default=5000)
    args = ap.parse_args(argv)
    server = make_moto_server(args.host, args.port)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    main()
