"""The gate's check: the merge's changed Parquet files against their tables' schemas."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import lakefs
import pyarrow as pa
import pyarrow.parquet as pq

#: the diff types whose right side is a file the merge brings
_BROUGHT = ("added", "changed")


class SchemaViolation(Exception):
    """A merge brings Parquet files that break their table's schema."""

    def __init__(self, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.problems = problems


class BadEvent(ValueError):
    """The POSTed body is not a lakeFS pre-merge event."""


@dataclass(frozen=True)
class TableSchemas:
    """The watched tables: each prefix with its expected schema, or None to take the
    schema of the table's files already on the destination branch."""

    tables: Mapping[str, Mapping[str, str] | None] = field(default_factory=dict)

    @classmethod
    def load(cls, schema_file: str | Path | None, inferred: list[str]) -> TableSchemas:
        """From a JSON file (``{prefix: {column: type}}``) and prefixes to infer."""
        tables: dict[str, Mapping[str, str] | None] = dict.fromkeys(inferred)
        if schema_file is not None:
            data = json.loads(Path(schema_file).read_text())
            if not isinstance(data, dict) or not all(
                    isinstance(v, dict) and all(isinstance(t, str) for t in v.values())
                    for v in data.values()):
                raise ValueError(f"{schema_file}: expected {{table prefix: {{column: type}}}}")
            tables.update(data)
        if not tables:
            raise ValueError("no table to watch: give --schema or --table")
        return cls(tables)

    def table_of(self, path: str) -> str | None:
        """The longest watched prefix of ``path``; None when no table holds it."""
        owners = [p for p in self.tables if path.startswith(p)]
        return max(owners, key=len) if owners else None


def _read_schema(ref: lakefs.Reference, path: str) -> pa.Schema:
    with ref.object(path).reader(mode="rb") as f:
        data = f.read()
    assert isinstance(data, bytes)  # mode "rb"
    return pq.read_schema(io.BytesIO(data))


def _columns(schema: pa.Schema) -> dict[str, str]:
    return {f.name: str(f.type) for f in schema}


def schema_problems(path: str, found: Mapping[str, str], expected: Mapping[str, str]) -> list[str]:
    """What ``found`` (column: type) lacks of ``expected``, in words."""
    problems = []
    for column, type_ in expected.items():
        if column not in found:
            problems.append(f"{path}: column {column!r} ({type_}) is missing")
        elif found[column] != type_:
            problems.append(f"{path}: column {column!r} is {found[column]}, expected {type_}")
    return problems


class QualityGate:
    """Checks pre-merge events against :class:`TableSchemas` through the lakeFS API."""

    def __init__(self, client: lakefs.Client, schemas: TableSchemas) -> None:
        self.client = client
        self.schemas = schemas

    def check(self, event: Mapping[str, Any]) -> int:
        """Check one pre-merge event; the number of Parquet files checked.

        Raises:
            BadEvent: not a pre-merge event.
            SchemaViolation: a file breaks its table's schema.
        """
        try:
            repo_id, dest, source = (str(event[k]) for k in
                                     ("repository_id", "branch_id", "source_ref"))
        except KeyError as e:
            raise BadEvent(f"not a lakeFS merge event: no {e.args[0]}") from None
        if event.get("event_type") != "pre-merge":
            raise BadEvent(f"expected a pre-merge event, got {event.get('event_type')!r}")
        repo = lakefs.Repository(repo_id, client=self.client)
        source_ref, dest_ref = repo.ref(source), repo.ref(dest)
        expected_of: dict[str, dict[str, str] | None] = {}
        problems: list[str] = []
        checked = 0
        for path in self._brought_parquet(dest_ref, source):
            table = self.schemas.table_of(path)
            if table is None:
                continue
            if table not in expected_of:
                expected_of[table] = self._expected(dest_ref, table)
            expected = expected_of[table]
            checked += 1
            if expected is None:  # a new table: nothing to break yet
                continue
            problems += schema_problems(path, _columns(_read_schema(source_ref, path)),
                                        expected)
        if problems:
            raise SchemaViolation(problems)
        return checked

    @staticmethod
    def _brought_parquet(dest_ref: lakefs.Reference, source: str) -> Iterator[str]:
        for change in dest_ref.diff(source):
            if (change.type in _BROUGHT and change.path_type == "object"
                    and change.path.endswith(".parquet")):
                yield change.path

    def _expected(self, dest_ref: lakefs.Reference, table: str) -> dict[str, str] | None:
        given = self.schemas.tables[table]
        if given is not None:
            return dict(given)
        for obj in dest_ref.objects(prefix=table):
            if obj.path.endswith(".parquet"):
                return _columns(_read_schema(dest_ref, obj.path))
        return None
