"""Fixtures of the multi-process scenarios: start a two-region cluster, check, wait."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e.cluster import Cluster, ClusterSpec, start_cluster

Start = Callable[[ClusterSpec], Cluster]


@pytest.fixture
def start(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Start]:
    """Start a cluster for the test (stopped at teardown; logs printed for failures)."""
    with contextlib.ExitStack() as stack:
        clusters: list[Cluster] = []

        def _start(spec: ClusterSpec) -> Cluster:
            postgres = request.getfixturevalue("postgres_server") if spec.needs_postgres \
                else None
            cluster = stack.enter_context(start_cluster(tmp_path / f"c{len(clusters)}", spec,
                                                        postgres=postgres))
            clusters.append(cluster)
            return cluster

        yield _start
        for cluster in clusters:  # shown by pytest only when the test failed
            for p in cluster.processes:
                print(f"===== {p.name} (started {p.starts}x) =====\n{p.log_tail(15)}")

