"""A Cloud Storage emulator (gcp-storage-emulator) on loopback, for tests and benchmarks.

The emulator runs as a child process (in memory, on a free port), so its
single-threaded HTTP server competes with neither the tests' threads nor the GIL.

What it does, as found by trying it: the JSON API's object calls (media, multipart and
resumable uploads, downloads with ``Range``, get, list, delete, copy, rewrite,
compose); the XML-style ``GET``/``PUT /<bucket>/<object>`` that signed URLs use. What
it does not: it checks no credentials and no signature (a signed URL with a forged or
expired signature works), it answers a range starting past the end with ``206`` and no
bytes (Cloud Storage: ``416``), and it ignores ``generation`` preconditions.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lakefs_testing.servers import free_port

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.rsa import RSAPrivateKey

#: how long the emulator may take to answer its health check
START_TIMEOUT = 30.0


@dataclass
class GCSEmulator:
    """gcp-storage-emulator serving the Cloud Storage JSON API on 127.0.0.1."""

    port: int
    _process: subprocess.Popen[bytes]
    _workdir: tempfile.TemporaryDirectory[str] = field(repr=False)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._workdir.cleanup()


def _healthy(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(endpoint + "/", timeout=1) as resp:
            return bool(resp.status == 200)
    except OSError:
        return False


def emulator_command(port: int, data_dir: str | os.PathLike[str], *,
                     in_memory: bool = True) -> list[str]:
    """The command serving the emulator on ``127.0.0.1:<port>`` (run it with ``data_dir``
    as its working directory); ``in_memory=False`` keeps its buckets in ``data_dir``,
    across restarts."""
    return [sys.executable, "-m", "gcp_storage_emulator", "--data-dir", str(data_dir),
            "start", "--host", "127.0.0.1", "--port", str(port), "-q",
            *(["--in-memory"] if in_memory else [])]


def start_gcs_emulator() -> GCSEmulator:
    """Start the emulator on a free loopback port and wait until it answers.

    Raises:
        RuntimeError: the emulator is not installed, exited, or did not answer within
            :data:`START_TIMEOUT` seconds (the message carries its output).
    """
    workdir = tempfile.TemporaryDirectory(prefix="gcs-emulator-")
    log_path = Path(workdir.name) / "emulator.log"
    port = free_port()
    with open(log_path, "wb") as log:
        process = subprocess.Popen(
            emulator_command(port, workdir.name), cwd=workdir.name, stdout=log,
            stderr=subprocess.STDOUT)
    emulator = GCSEmulator(port=port, _process=process, _workdir=workdir)
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            break
        if _healthy(emulator.endpoint):
            return emulator
        time.sleep(0.05)
    output = log_path.read_text(errors="replace")[-2000:]
    emulator.stop()
    raise RuntimeError(
        f"the Cloud Storage emulator did not start on port {port} "
        f"(exit status {process.returncode}); install it with "
        f"`pip install gcp-storage-emulator` (the dev extra has it). Output:\n{output}")


@contextlib.contextmanager
def gcs_emulator() -> Iterator[GCSEmulator]:
    """The emulator, stopped on exit."""
    emulator = start_gcs_emulator()
    try:
        yield emulator
    finally:
        emulator.stop()


#: the account a throwaway key names
SERVICE_ACCOUNT_EMAIL = "lakefs@test-project.iam.gserviceaccount.com"


def throwaway_service_account_key() -> tuple[RSAPrivateKey, str]:
    """A new RSA key and a service-account key file (JSON text) holding it, to sign V4
    URLs with. Its token URI is a closed loopback port: nothing ever leaves the machine.
    """
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                            serialization.NoEncryption()).decode()
    return key, json.dumps({
        "type": "service_account", "project_id": "test-project", "private_key_id": "k1",
        "private_key": pem, "client_email": SERVICE_ACCOUNT_EMAIL, "client_id": "1",
        "token_uri": "http://127.0.0.1:9/token",
    })
