"""Seed 003's topologies with real processes (e2e/topologies.py): one source mirrored to
two regions, two regions each the source of one repository and the mirror of the other,
and a group of two repositories mirrored to two regions. I1-I4 are checked for every
mirror all along, I6 on the status reads, I8 in both regions of the group."""

from __future__ import annotations

import pytest

from e2e.topologies import SCENARIOS
from tests.e2e.conftest import Start

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_topology_keeps_every_invariant(start: Start, name: str) -> None:
    spec, scenario = SCENARIOS[name]
    figures = scenario(start(spec))
    assert figures["violations"] == 0 and figures["commits_verified"] > 0
    if name == "group-two-regions":
        assert figures["groups"] == 2 and figures["group_reads"] > 0
        assert figures["cuts_checked"] > 0
