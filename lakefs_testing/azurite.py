"""Azurite, the Azure Storage emulator (its blob service), on loopback.

``make test`` installs the npm package ``azurite`` beside the Python virtualenv
(``<venv>/azurite``); :func:`azurite_binary` finds it there, or where
``AZURITE_BLOB`` points, or on ``PATH``. Azurite serves the well-known development
account (``devstoreaccount1``) and its published key, path-style:
``http://127.0.0.1:<port>/devstoreaccount1/<container>/<blob>``.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from lakefs_testing.servers import free_port

#: Azurite's development account and its key (published, the same everywhere)
AZURITE_ACCOUNT = "devstoreaccount1"
AZURITE_KEY = ("Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq"
               "/K1SZFPTOtr/KBHBeksoGMGw==")

#: where ``make test`` installs the package: ``npm install --prefix <venv>/azurite``
_INSTALLED = Path(sys.prefix) / "azurite" / "node_modules" / ".bin" / "azurite-blob"


def azurite_binary() -> str:
    """The ``azurite-blob`` executable.

    Raises:
        RuntimeError: Azurite is not installed (the message says how to install it).
    """
    candidates = [os.environ.get("AZURITE_BLOB"), str(_INSTALLED), shutil.which("azurite-blob")]
    for candidate in candidates:
        if candidate and os.access(candidate, os.X_OK):
            return candidate
    raise RuntimeError(
        "Azurite (azurite-blob) not found: looked at $AZURITE_BLOB, "
        f"{_INSTALLED} and PATH. Install it with `make azurite` (npm install --prefix "
        f"{_INSTALLED.parents[2]} azurite), or set AZURITE_BLOB to its azurite-blob.")


@dataclass
class AzuriteServer:
    """A running Azurite blob service with its data in a temporary directory."""

    port: int
    workdir: str
    _process: subprocess.Popen[bytes] = field(repr=False)

    @property
    def endpoint(self) -> str:
        """The service endpoint without the account (``test_endpoint_url``)."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def account_url(self) -> str:
        return f"{self.endpoint}/{AZURITE_ACCOUNT}"

    @property
    def connection_string(self) -> str:
        return (f"DefaultEndpointsProtocol=http;AccountName={AZURITE_ACCOUNT};"
                f"AccountKey={AZURITE_KEY};BlobEndpoint={self.account_url};")

    def stop(self) -> None:
        if self._process.poll() is None:
            os.killpg(self._process.pid, signal.SIGTERM)
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self._process.pid, signal.SIGKILL)
                self._process.wait(10)
        shutil.rmtree(self.workdir, ignore_errors=True)


def azurite_command(port: int, location: str | os.PathLike[str]) -> list[str]:
    """The command serving Azurite's blob service on ``127.0.0.1:<port>``, its data (kept
    across restarts) under ``location``.

    Raises:
        RuntimeError: Azurite is not installed.
    """
    return [azurite_binary(), "--blobHost", "127.0.0.1", "--blobPort", str(port),
            "--location", str(location), "--skipApiVersionCheck", "--loose", "--silent",
            "--disableTelemetry"]


def start_azurite(timeout: float = 60.0) -> AzuriteServer:
    """Start ``azurite-blob`` on a free loopback port, its data in a new temp directory.

    Raises:
        RuntimeError: Azurite is not installed, or did not start within ``timeout``.
    """
    azurite_binary()  # a missing Azurite raises before anything is created
    workdir = tempfile.mkdtemp(prefix="lakefs-azurite-")
    port = free_port()
    log = open(os.path.join(workdir, "azurite.log"), "wb")  # noqa: SIM115 - the child owns it
    data = os.path.join(workdir, "data")
    os.makedirs(data)
    process = subprocess.Popen(
        azurite_command(port, data),
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        start_new_session=True)
    log.close()
    server = AzuriteServer(port=port, workdir=workdir, _process=process)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            output = Path(workdir, "azurite.log").read_text(errors="replace")
            server.stop()
            raise RuntimeError(f"azurite-blob exited with {process.returncode}: {output}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return server
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"azurite-blob did not listen on 127.0.0.1:{port} within {timeout}s")


@contextlib.contextmanager
def azurite() -> Iterator[AzuriteServer]:
    server = start_azurite()
    try:
        yield server
    finally:
        server.stop()
