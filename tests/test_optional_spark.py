"""pyspark is an optional extra: the server and the sidecar neither need nor load it."""

from __future__ import annotations

import subprocess
import sys

import pytest


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False)


def test_server_and_sidecar_do_not_load_pyspark() -> None:
    done = run("import sys\n"
               "import lakefs_core.__main__, lakefs_core.server, lakefs_core.spark\n"
               "import replication.__main__, replication.api\n"
               "print(sorted(m for m in sys.modules if m.split('.')[0] == 'pyspark'))")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


@pytest.mark.parametrize("use", [
    "from lakefs_core.spark import register",
    "import lakefs_core.spark.datasource",
    "import lakefs_core.spark.gc",
])
def test_a_missing_pyspark_names_the_extra(use: str) -> None:
    done = run("import sys\nsys.modules['pyspark'] = None  # as if not installed\n" + use)
    assert done.returncode != 0
    assert "pip install 'lakefs-mirror[spark]'" in done.stderr
