"""Seconds each test file took, from a pytest JUnit report, for the suite's ordering.

``python -m lakefs_testing.durations report.xml [tests/file_durations.json]`` writes
``{"tests/e2e/test_soak.py": 65.2, ...}``: the sum of each file's test times (setup,
call and teardown). ``tests/conftest.py`` runs the longest files first, so that the
two workers of ``make test`` end together.
"""

from __future__ import annotations

import json
import sys
import xml.etree.ElementTree as ET  # noqa: S405 - our own pytest's report
from collections import defaultdict
from pathlib import Path

DEFAULT_OUTPUT = Path("tests/file_durations.json")


def file_of(classname: str, root: Path = Path(".")) -> str:
    """The test file of a JUnit ``classname`` (``tests.e2e.test_soak`` or a class in it)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = Path(*parts[:end]).with_suffix(".py")
        if (root / path).is_file():
            return path.as_posix()
    raise ValueError(f"no test file for {classname!r}")


def file_durations(report: Path, root: Path = Path(".")) -> dict[str, float]:
    totals: dict[str, float] = defaultdict(float)
    for case in ET.parse(report).getroot().iter("testcase"):  # noqa: S314
        totals[file_of(case.get("classname", ""), root)] += float(case.get("time", 0))
    return {path: round(seconds, 2) for path, seconds in
            sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))}


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print("usage: python -m lakefs_testing.durations report.xml [output.json]",
              file=sys.stderr)
        return 2
    output = Path(argv[1]) if len(argv) == 2 else DEFAULT_OUTPUT
    durations = file_durations(Path(argv[0]))
    output.write_text(json.dumps(durations, indent=1) + "\n")
    print(f"{len(durations)} files, {sum(durations.values()):.0f} s in all -> {output}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
