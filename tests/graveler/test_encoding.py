"""Canonical encoding and the ids computed from it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lakefs_core.errors import ValidationError
from lakefs_core.graveler import (
    EMPTY_METARANGE_ID,
    AddressType,
    Commit,
    EntryRecord,
    RangeInfo,
    commit_id,
    encode,
    entry_digest,
    metarange_id,
    range_id,
)
from lakefs_core.graveler.encoding import entry_fields, record_encoding
from tests.graveler.support import entries, entry, paths

SETTINGS = settings(max_examples=80, deadline=None)

hex_ids = st.text(alphabet="0123456789abcdef", min_size=64, max_size=64)
commits = st.builds(
    Commit,
    parents=st.lists(hex_ids, max_size=2).map(tuple),
    metarange_id=hex_ids,
    message=st.text(max_size=30),
    committer=st.text(max_size=10),
    creation_date=st.integers(min_value=0, max_value=2**40),
    metadata=st.dictionaries(st.text(max_size=6), st.text(max_size=6), max_size=5),
    generation=st.integers(min_value=1, max_value=1000),
)


def test_encoding_is_tag_length_payload() -> None:
    assert encode(None) == b"N" + bytes(8)
    assert encode(True) == b"T" + (1).to_bytes(8, "big") + b"\x01"
    assert encode(-2) == b"I" + (8).to_bytes(8, "big") + (-2).to_bytes(8, "big", signed=True)
    assert encode("é") == b"S" + (2).to_bytes(8, "big") + "é".encode()
    assert encode(b"\x00") == b"Y" + (1).to_bytes(8, "big") + b"\x00"
    assert encode(0.5) == b"F" + (8).to_bytes(8, "big") + bytes.fromhex("3fe0000000000000")
    inner = encode("a") + encode(1)
    assert encode(("a", 1)) == b"L" + len(inner).to_bytes(8, "big") + inner
    assert encode(["a", 1]) == encode(("a", 1))


def test_types_are_distinguished() -> None:
    values: list[Any] = [None, False, 0, 0.0, "", b"", (), {}, "0", 1, True]
    assert len({encode(v) for v in values}) == len(values)


def test_float_edge_cases_are_canonical() -> None:
    assert encode(-0.0) == encode(0.0)
    assert encode(float("nan")) == encode(-float("nan"))


@pytest.mark.parametrize("bad", [2**63, -(2**63) - 1, object(), {1, 2}, "\ud800"])
def test_unencodable_values_are_refused(bad: object) -> None:
    with pytest.raises(ValidationError):
        encode(bad)


@SETTINGS
@given(st.dictionaries(st.text(max_size=4), st.integers(-(2**63), 2**63 - 1), max_size=8),
       st.randoms())
def test_mapping_order_does_not_matter(mapping: dict[str, int], rnd: Any) -> None:
    items = list(mapping.items())
    rnd.shuffle(items)
    assert encode(dict(items)) == encode(mapping)


@SETTINGS
@given(commits)
def test_commit_id_is_stable_and_ignores_generation(commit: Commit) -> None:
    cid = commit_id(commit)
    assert len(cid) == 64 and int(cid, 16) >= 0
    copy = dataclasses.replace(commit, metadata=dict(reversed(list(commit.metadata.items()))))
    assert commit_id(copy) == cid
    assert commit_id(dataclasses.replace(commit, generation=commit.generation + 1)) == cid


@SETTINGS
@given(commits, st.data())
def test_any_field_change_changes_the_commit_id(commit: Commit, data: st.DataObject) -> None:
    changed = data.draw(st.sampled_from([
        dataclasses.replace(commit, parents=(*commit.parents, "0" * 64)),
        dataclasses.replace(commit, parents=tuple(reversed(commit.parents)) + ("",))
        if commit.parents else dataclasses.replace(commit, parents=("",)),
        dataclasses.replace(commit, metarange_id=commit.metarange_id + "0"),
        dataclasses.replace(commit, message=commit.message + "!"),
        dataclasses.replace(commit, committer=commit.committer + "x"),
        dataclasses.replace(commit, creation_date=commit.creation_date + 1),
        dataclasses.replace(commit, metadata={**commit.metadata, "\x00new": ""}),
    ]))
    assert commit_id(changed) != commit_id(commit)


def test_fields_do_not_run_into_each_other() -> None:
    a = Commit(parents=(), metarange_id="m", message="ab", committer="c", creation_date=1)
    b = dataclasses.replace(a, message="a", committer="bc")
    assert commit_id(a) != commit_id(b)


_CHILD = """
import json
from lakefs_core.graveler import Commit, EntryRecord, commit_id, range_id
from tests.graveler.support import entry
keys = {f"k{i}" for i in range(40)}
meta = {k: k.upper() for k in keys}  # insertion order follows the set's hash order
commit = Commit(parents=("p1", "p2"), metarange_id="m", message="msg", committer="me",
                creation_date=1700000000, metadata=meta)
records = [EntryRecord(k, entry(k, metadata={m: "v" for m in keys})) for k in keys]
print(json.dumps([commit_id(commit), range_id(records), list(meta)]))
"""


def test_ids_are_equal_across_processes() -> None:
    here: dict[str, Any] = {}
    exec(_CHILD.replace("print(", "result = ("), here)  # the same code in this process
    outputs = [json.loads(here["result"])]
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                             text=True, check=True, cwd=os.getcwd()).stdout
        outputs.append(json.loads(out))
    # the processes really did see different dict orders...
    assert len({tuple(o[2]) for o in outputs}) > 1
    # ...and still computed the same ids
    assert len({(o[0], o[1]) for o in outputs}) == 1


@SETTINGS
@given(paths, st.one_of(st.none(), entries))
def test_record_encoding_matches_the_generic_encoding(path: str, e: Any) -> None:
    rec = EntryRecord(path, e)
    expected = encode((path, None) if e is None else (path, *entry_fields(e)))
    assert record_encoding(rec) == expected
    assert len(entry_digest(rec)) == 32


def test_integer_mtime_encodes_like_the_float_parquet_returns() -> None:
    assert record_encoding(EntryRecord("p", entry("p", mtime=5))) == record_encoding(
        EntryRecord("p", entry("p", mtime=5.0)))


@SETTINGS
@given(st.lists(st.tuples(paths, entries), unique_by=lambda t: t[0], max_size=20), st.randoms())
def test_range_id_sorts_its_records(items: list[Any], rnd: Any) -> None:
    records = [EntryRecord(p, e) for p, e in items]
    shuffled = list(records)
    rnd.shuffle(shuffled)
    assert range_id(shuffled) == range_id(records)


def test_range_id_covers_every_field() -> None:
    base = entry("p")
    rid = range_id([EntryRecord("p", base)])
    variants = [
        dataclasses.replace(base, address="other"),
        dataclasses.replace(base, size=base.size + 1),
        dataclasses.replace(base, etag="x"),
        dataclasses.replace(base, mtime=base.mtime + 0.5),
        dataclasses.replace(base, address_type=AddressType.FULL),
        dataclasses.replace(base, content_type="text/csv"),
        dataclasses.replace(base, metadata={"k": "v"}),
    ]
    ids = {range_id([EntryRecord("p", v)]) for v in variants}
    assert len(ids) == len(variants) and rid not in ids
    assert range_id([EntryRecord("q", base)]) != rid


def test_metarange_id() -> None:
    r1 = RangeInfo("a" * 64, "a", "b", 2, 100)
    r2 = RangeInfo("b" * 64, "c", "d", 1, 50)
    assert metarange_id([r1, r2]) == metarange_id((r1, r2))
    assert metarange_id([r1, r2]) != metarange_id([r2, r1])
    assert metarange_id([r1]) != metarange_id([dataclasses.replace(r1, count=3)])
    assert EMPTY_METARANGE_ID == metarange_id([]) != metarange_id([r1])
