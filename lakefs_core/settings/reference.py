"""A Markdown configuration reference generated from a settings model.

Every field of a :class:`~lakefs_core.settings.PrefixedSettings` model becomes one row:
its key path, type, default, the environment variable the settings framework maps to
it (:func:`~lakefs_core.settings.env_var_paths`) and its description, taken from the
field's ``description`` or from the ``Attributes:`` section of its model's docstring.
Sections are expanded into their fields; a list or map of sections is expanded under
``path[]`` or ``path.<key>`` (such entries are set as a whole, in JSON, through the
variable of the list or map).
"""

from __future__ import annotations

import enum
import inspect
import re
import types
import typing
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SecretStr
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from lakefs_core.settings.durations import format_duration
from lakefs_core.settings.envsource import PrefixedSettings, env_var_paths

__all__ = ["Row", "model_rows", "render_reference"]


class Row(typing.NamedTuple):
    """One setting of the reference."""

    key: str
    type: str
    default: str
    env: str
    description: str


def attribute_docs(model: type[BaseModel]) -> dict[str, str]:
    """``name: text`` entries of the ``Attributes:`` sections of a model and its bases."""
    docs: dict[str, str] = {}
    for cls in reversed(model.__mro__):
        doc = inspect.getdoc(cls) if "__doc__" in cls.__dict__ else None
        if not doc or "Attributes:" not in doc:
            continue
        name = None
        for line in doc.split("Attributes:", 1)[1].splitlines()[1:]:
            if not line.strip():
                name = None
                continue
            entry = re.match(r"    (\w+): (.*)", line)
            if entry:
                name = entry.group(1)
                docs[name] = entry.group(2).strip()
            elif name and line.startswith("        "):
                docs[name] += " " + line.strip()
            elif not line.startswith(" "):
                break
    return docs


def _summary(model: type[BaseModel]) -> str:
    doc = model.__dict__.get("__doc__")
    return inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ") if doc else ""


def _args(annotation: Any) -> list[Any]:
    return [a for a in typing.get_args(annotation) if a is not type(None)]


def _is_optional(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType) and \
        type(None) in typing.get_args(annotation)


def _model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if _is_optional(annotation) and len(_args(annotation)) == 1:
        return _model(_args(annotation)[0])
    return None


def type_name(annotation: Any, metadata: list[Any] | None = None) -> str:
    """A reader's name for a field type: ``duration``, ``int``, ``"a" | "b"``, ..."""
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extra = typing.get_args(annotation)
        return type_name(base, extra)
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):  # optional, or one of several sections
        names = dict.fromkeys(type_name(a) for a in _args(annotation))
        return " | ".join(names)
    if origin is typing.Literal:
        return " | ".join(f'"{a}"' for a in typing.get_args(annotation))
    if origin in (list, tuple, set):
        return f"list of {type_name(typing.get_args(annotation)[0])}"
    if origin is dict:
        key, value = typing.get_args(annotation)
        return f"map of {type_name(key)} to {type_name(value)}"
    if annotation is timedelta:
        return "duration"
    if annotation is SecretStr:
        return "secret"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(f'"{m.value}"' for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if annotation is str and metadata:
        validators = " ".join(getattr(m, "func", lambda: None).__name__ for m in metadata)
        if "url" in validators:
            return "URL"
        if "listen_address" in validators:
            return "host:port"
    return getattr(annotation, "__name__", str(annotation))


def _default(info: FieldInfo) -> str:
    if info.is_required():
        return "required"
    value = info.default
    if value is PydanticUndefined and info.default_factory is not None:
        value = info.default_factory()  # type: ignore[call-arg]
    if value is None or isinstance(value, BaseModel) or value in ({}, (), []):
        return ""
    if isinstance(value, timedelta):
        return format_duration(value)
    if isinstance(value, enum.Enum):
        value = value.value
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return ", ".join(str(v) for v in value)
    return str(value)


def model_rows(
    model: type[BaseModel],
    env: dict[tuple[str, ...], str],
    prefix: tuple[str, ...] = (),
    label: str = "",
    expanded: dict[type[BaseModel], str] | None = None,
) -> Iterator[Row]:
    """The rows of every field of ``model``, sections expanded, depth first.

    Args:
        model: the settings model or one of its sections.
        env: field path -> environment variable name.
        prefix: the field path of ``model``.
        label: the key of ``model`` as printed (with ``[]`` or ``.<key>`` for the
            entries of lists and maps), empty at the top.
        expanded: section model -> the key where its fields were listed; the entries
            of a list or map of such a model (or of a subclass) list only the fields
            not listed there.
    """
    expanded = {} if expanded is None else expanded
    expanded.setdefault(model, label)
    docs = attribute_docs(model)
    for name, info in model.model_fields.items():
        if info.exclude:
            continue
        path, key = (*prefix, name), f"{label}.{name}" if label else name
        annotation = info.annotation
        section = _model(annotation)
        description = info.description or docs.get(name, "")
        origin, args = typing.get_origin(annotation), typing.get_args(annotation)
        entry, entry_key = None, ""
        if origin in (list, tuple) and args:
            entry, entry_key = _model(args[0]), key + "[]"
        elif origin is dict:
            entry, entry_key = _model(args[1]), key + ".<key>"
        known = next((b for b in (entry.__mro__ if entry else ()) if b in expanded), None)
        if section is not None:
            description = description or _summary(section)
        elif entry is not None:
            description = description or _summary(entry)
            if known is not None:
                description += f" Each entry has the keys of `{expanded[known]}`"
                description += ", and:" if entry is not known else "."
        yield Row(key, type_name(annotation, info.metadata), _default(info),
                  env.get(path, ""), description.strip())
        if section is not None:
            yield from model_rows(section, env, path, key, expanded)
        elif entry is not None:
            if known is None:
                yield from model_rows(entry, {}, (), entry_key, expanded)
            else:
                for row in model_rows(entry, {}, (), entry_key, {}):
                    if row.key[len(entry_key) + 1:].split(".")[0] not in known.model_fields:
                        yield row


def _cell(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|").replace("\n", " ")


def render_reference(model: type[PrefixedSettings], *, title: str, intro: str) -> str:
    """The Markdown reference page of a settings model.

    Args:
        model: the settings model (its ``ENV_PREFIX`` and ``ENV_ALIASES`` name the
            variables).
        title: the page's heading.
        intro: Markdown paragraphs between the heading and the table.
    """
    env = {path: name for name, (path, _) in env_var_paths(model, model.ENV_PREFIX).items()}
    for alias, path in model.ENV_ALIASES.items():
        env[path] = f"{env[path]}, {alias}" if path in env else alias
    lines = [
        f"# {title}",
        "",
        "<!-- Generated from the settings models by "
        "`python -m lakefs_testing.config_reference`; do not edit. -->",
        "",
        intro.strip(),
        "",
        "| key | type | default | environment variable | description |",
        "|---|---|---|---|---|",
    ]
    for row in model_rows(model, env):
        env_cell = ", ".join(f"`{v}`" for v in row.env.split(", ")) if row.env else ""
        default = f"`{row.default}`" if row.default not in ("", "required") else row.default
        lines.append(f"| `{row.key}` | {_cell(row.type)} | {_cell(default)} | {env_cell} "
                     f"| {_cell(row.description)} |")
    return "\n".join(lines) + "\n"
