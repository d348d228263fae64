"""The configuration reference and the chart's values name every setting."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from replication.config import ReplicationConfig

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "docs" / "REPLICATION_CONFIG.md"
CHART_VALUES = ROOT / "helm" / "lakefs-mirror" / "values.yaml"
#: sections configured as a whole (their own models, shared with the server)
WHOLE = {"mirrors_database", "blockstore", "blockstores", "refstore_database",
         "object_replication.builtin.source_blockstores"}


def setting_paths(model: type[BaseModel], prefix: str = "") -> list[str]:
    paths = []
    for name, field in model.model_fields.items():
        path = prefix + name
        annotation = field.annotation
        if path not in WHOLE and isinstance(annotation, type) and \
                issubclass(annotation, BaseModel):
            paths += setting_paths(annotation, path + ".")
        else:
            paths.append(path)
    return paths


SETTINGS = setting_paths(ReplicationConfig)


def test_there_are_settings_to_check() -> None:
    assert {"validator.run_interval", "list_repositories_page_size",
            "validator.missing_recheck_interval", "auth.cache.ttl"} <= set(SETTINGS)


@pytest.mark.parametrize("path", SETTINGS)
def test_the_reference_says_what_each_setting_does(path: str) -> None:
    assert f"`{path}`" in REFERENCE.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", [p for p in SETTINGS if p.startswith(
    ("validator.", "commit_sensor.", "mirrors_manager.", "list_"))])
def test_the_chart_values_name_each_schedule_setting(path: str) -> None:
    assert path.rsplit(".", 1)[-1] + ":" in CHART_VALUES.read_text(encoding="utf-8")
