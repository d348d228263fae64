"""The C allocator settings of long-running processes (lakefs_core.memory)."""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from lakefs_core import memory


class _RecordingLibc:
    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []
        self.trims = 0
        self.trimmed = threading.Event()

    def mallopt(self, param: int, value: int) -> int:
        self.calls.append((param, value))
        return 1

    def malloc_trim(self, pad: int) -> int:
        self.trims += 1
        self.trimmed.set()
        return 1


@pytest.fixture
def libc(monkeypatch: pytest.MonkeyPatch) -> _RecordingLibc:
    fake = _RecordingLibc()
    monkeypatch.setattr(memory, "_glibc", lambda: fake)
    for name in ("MALLOC_ARENA_MAX", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(name, raising=False)
    return fake


def test_the_allocator_is_tuned_unless_the_environment_says_otherwise(
        libc: _RecordingLibc, monkeypatch: pytest.MonkeyPatch) -> None:
    import pyarrow as pa

    before = pa.default_memory_pool()
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "unset")  # restored after the test
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
    try:
        assert memory.tune_allocator()
        assert pa.default_memory_pool().backend_name == "jemalloc"
        assert os.environ["ARROW_DEFAULT_MEMORY_POOL"] == "jemalloc"  # for processes it starts
    finally:
        pa.set_memory_pool(before)
    assert libc.calls == [(-8, memory.ARENA_MAX), (-3, memory.MMAP_THRESHOLD),
                          (-1, memory.TRIM_THRESHOLD)]
    libc.calls.clear()
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "mimalloc")
    pa.set_memory_pool(before)
    assert memory.tune_allocator()
    assert [p for p, _ in libc.calls] == [-3, -1]  # the operator's arena cap stays
    assert pa.default_memory_pool().backend_name == before.backend_name  # and Arrow's pool


def test_an_arrow_without_jemalloc_is_put_on_the_system_allocator(
        libc: _RecordingLibc, monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrow already loaded, and built without jemalloc: its Python pool goes to the
    tuned C allocator rather than staying on Arrow's own default."""
    import pyarrow as pa

    def no_jemalloc() -> pa.MemoryPool:
        raise pa.ArrowNotImplementedError("This Arrow C++ build does not include jemalloc")

    before = pa.default_memory_pool()
    monkeypatch.setattr(pa, "jemalloc_memory_pool", no_jemalloc)
    monkeypatch.setenv("ARROW_DEFAULT_MEMORY_POOL", "unset")  # restored after the test
    monkeypatch.delenv("ARROW_DEFAULT_MEMORY_POOL")
    try:
        assert memory.tune_allocator()
        assert pa.default_memory_pool().backend_name == "system"
    finally:
        pa.set_memory_pool(before)


def test_the_releaser_trims_until_stopped(libc: _RecordingLibc) -> None:
    releaser = memory.MemoryReleaser(interval=0.01).start()
    assert libc.trimmed.wait(5)
    releaser.stop()
    trims = libc.trims
    assert not releaser._thread.is_alive()
    assert libc.trims == trims


def test_without_glibc_nothing_is_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory, "_glibc", lambda: None)
    assert not memory.tune_allocator()
    assert not memory.release_free_memory()
    releaser = memory.MemoryReleaser(interval=0.01).start()
    assert not releaser._thread.is_alive()
    releaser.stop()


def test_on_glibc_the_real_calls_are_accepted() -> None:
    """The machines this runs on (Debian) have glibc: the real calls are made."""
    assert platform.libc_ver()[0] == "glibc"
    libc: Any = memory._glibc()
    assert libc is not None
    import pyarrow as pa

    before = pa.default_memory_pool()
    try:
        assert memory.tune_allocator()
    finally:
        pa.set_memory_pool(before)
    blocks = [bytearray(1 << 20) for _ in range(32)]
    del blocks
    assert isinstance(memory.release_free_memory(), bool)


#: reads a Parquet file after the entry point ran, and tells Arrow's allocator and how
#: much of the work mimalloc (Arrow's own default allocator) held at most; on one
#: thread, as the range files are read (Arrow's thread pool left running may abort the
#: process at exit)
_ARROW_AFTER = """
import io, sys
{call}
import pyarrow as pa, pyarrow.parquet as pq
table = pa.table({{"path": [f"data/{{i:08d}}" for i in range(50_000)]}})
buf = io.BytesIO()
pq.write_table(table, buf, compression="zstd")
assert pq.ParquetFile(pa.BufferReader(buf.getvalue())).read(use_threads=False).equals(table)
print(pa.default_memory_pool().backend_name, pa.mimalloc_memory_pool().max_memory(),
      "pandas" in sys.modules)
"""


@pytest.mark.parametrize(("call", "pandas"), [
    ("from lakefs_core import memory; memory.tune_allocator()", "True"),
    # the entry points tune before they load Arrow (here they stop at the missing file),
    # and leave pandas out
    ("from lakefs_core.__main__ import main\n"
     "try: main(['run', '--config', '/nonexistent/lakefs.yaml'])\nexcept SystemExit: pass",
     "False"),
    ("from replication.__main__ import main\n"
     "try: main(['run', '--config', '/nonexistent/replication.yaml'])\nexcept SystemExit: pass",
     "False"),
])
def test_arrow_allocates_nothing_on_its_own_allocator_once_tuned(call: str, pandas: str) -> None:
    """Arrow picks its allocator when it loads: Parquet decoding went to mimalloc, whose
    freed pages stayed resident, though another pool was set from Python afterwards."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARROW_", "MALLOC_"))}
    out = subprocess.run([sys.executable, "-c", _ARROW_AFTER.format(call=call)], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-3:] == ["jemalloc", "0", pandas], out.stdout + out.stderr


#: writes 200 MiB through Arrow's allocator, frees it, and tells how much of it was
#: resident at most and how much still is once given back (or after 20 s)
_ARROW_FREED = """
import time
from lakefs_core import memory
memory.tune_allocator()
import numpy as np, pyarrow as pa, pyarrow.compute as pc
def rss(): return int(open("/proc/self/statm").read().split()[1]) * 4096
base = pa.array(np.arange(1 << 17, dtype=np.int64))  # 1 MiB
before = rss()
arrays = [pc.add(base, i) for i in range(200)]
grown = rss() - before
del arrays
deadline = time.monotonic() + 20
while rss() - before > grown / 4 and time.monotonic() < deadline:
    time.sleep(0.1)
print(pa.default_memory_pool().backend_name, grown, rss() - before)
"""


def test_what_arrow_frees_goes_back_to_the_system_within_seconds() -> None:
    """Arrow's own default allocator kept what it freed resident; the one chosen for it
    gives it back shortly after the work ends, with no further allocation."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARROW_", "MALLOC_"))}
    out = subprocess.run([sys.executable, "-c", _ARROW_FREED], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    backend, grown, left = out.stdout.split()
    assert backend == "jemalloc"
    assert int(grown) >= 150 << 20  # the work was resident
    assert int(left) <= int(grown) / 4, out.stdout


_WITHOUT_PANDAS = """
import sys
from lakefs_core import memory
assert memory.leave_pandas_unloaded()
from lakefs_core.graveler.model import Entry, EntryRecord
from lakefs_core.graveler.rangefile import decode_range, encode_range
records = [EntryRecord(f"p/{i}", Entry(f"a{i}", i, "e", 0.0, metadata={"k": "v"}))
           for i in range(3)]
assert decode_range(encode_range(records)) == records
try:
    import pandas
except ImportError:
    print("kept out")
"""


def test_pandas_is_kept_out_of_a_service_process() -> None:
    """A process that kept pandas out writes and reads range files (pyarrow builds its
    arrays from Python objects) without loading it; one that loaded it keeps it."""
    import pandas  # noqa: F401 - installed here, as where the services run beside it

    done = subprocess.run([sys.executable, "-c", _WITHOUT_PANDAS], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["kept", "out"]
    assert sys.modules["pandas"] is not None
    assert not memory.leave_pandas_unloaded()  # loaded before: left as it is
    assert sys.modules["pandas"] is not None


def test_a_server_reads_committed_objects_without_loading_pandas(tmp_path: Any) -> None:
    """The server as its command line runs it: its first read of a range (a stat of a
    committed object) used to load pandas, through pyarrow, amid its first requests."""
    import httpx

    from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, server_process

    with server_process(tmp_path / "data") as server, httpx.Client(
            base_url=f"{server.endpoint}/api/v1", auth=(ADMIN_KEY, ADMIN_SECRET),
            timeout=60) as client:
        assert client.post("/repositories", json={
            "name": "repo", "storage_namespace": "local://repo"}).status_code == 201
        assert client.post("/repositories/repo/branches/main/objects", params={"path": "a"},
                           content=b"data").status_code == 201
        assert client.post("/repositories/repo/branches/main/commits",
                           json={"message": "m"}).status_code == 201
        stat = client.get("/repositories/repo/refs/main/objects/stat", params={"path": "a"})
        assert stat.status_code == 200, stat.text
        maps = Path(f"/proc/{server.process.pid}/maps").read_text()
    assert "libarrow" in maps  # the check sees the libraries pyarrow loaded
    assert "/pandas/" not in maps
