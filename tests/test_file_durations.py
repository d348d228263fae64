"""The suite's ordering data: seconds per test file, from a JUnit report."""

from __future__ import annotations

from pathlib import Path

import pytest

from lakefs_testing.durations import file_durations, file_of, main


def test_durations_are_summed_per_file_longest_first(tmp_path: Path) -> None:
    (tmp_path / "tests" / "e2e").mkdir(parents=True)
    (tmp_path / "tests" / "e2e" / "test_soak.py").write_text("")
    (tmp_path / "tests" / "test_api.py").write_text("")
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="tests.test_api" name="test_a" time="1.5"/>'
        '<testcase classname="tests.test_api.TestGroup" name="test_b[x]" time="2.0"/>'
        '<testcase classname="tests.e2e.test_soak" name="test_long" time="60.25"/>'
        '</testsuite></testsuites>')
    durations = file_durations(report, tmp_path)
    assert list(durations.items()) == [("tests/e2e/test_soak.py", 60.25),
                                       ("tests/test_api.py", 3.5)]
    with pytest.raises(ValueError, match="tests.nowhere"):
        file_of("tests.nowhere", tmp_path)
    assert main([]) == 2


def test_the_committed_durations_name_existing_files() -> None:
    import json

    root = Path(__file__).parent.parent
    durations = json.loads((root / "tests" / "file_durations.json").read_text())
    assert durations, "tests/file_durations.json is empty"
    missing = [path for path in durations if not (root / path).is_file()]
    assert len(missing) <= len(durations) // 10, missing  # a few may be renamed since


def test_a_shared_directory_is_one_unit_of_work_placed_by_its_total() -> None:
    """Spark's test files go to one worker together (one JVM started, not one per
    worker), and the unit runs where its summed time puts it."""
    from types import SimpleNamespace

    from tests.conftest import pytest_collection_modifyitems, work_unit

    assert work_unit("tests/spark/test_gc.py") == work_unit("tests/spark/test_read.py")
    assert work_unit("tests/e2e/test_soak.py") == "tests/e2e/test_soak.py"
    known = json_durations()
    spark = [p for p in known if p.startswith("tests/spark/")]
    assert len(spark) >= 2
    longest_file = max((p for p in known if not p.startswith("tests/spark/")),
                       key=known.__getitem__)
    items = [SimpleNamespace(nodeid=f"{p}::test_x") for p in (longest_file, *spark)]
    pytest_collection_modifyitems(None, items)  # type: ignore[arg-type]
    order = [i.nodeid.partition("::")[0] for i in items]
    first_spark = order.index(spark[0]) if spark[0] in order else None
    assert first_spark is not None
    # the spark files run one after another
    positions = sorted(order.index(p) for p in spark)
    assert positions == list(range(positions[0], positions[0] + len(spark)))
    spark_total = sum(known[p] for p in spark)
    assert (order[0] == longest_file) == (known[longest_file] >= spark_total)


def json_durations() -> dict[str, float]:
    import json

    root = Path(__file__).parent.parent
    return dict(json.loads((root / "tests" / "file_durations.json").read_text()))
