"""Errors of settings: each names the field, the problem and where the value came from.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lakefs_core.errors import ValidationError


# --- errors ---------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ConfigFieldError:
    """One invalid setting.

    Attributes:
        field: dotted path of the setting, e.g. ``database.type`` or
            ``blockstores.stores[1].id``.
        message: what is wrong with it.
        source: where the value came from (an environment variable name or a file
            path), or None for a default or a programmatic value.
    """

    field: str
    message: str
    source: str | None = None

    def __str__(self) -> str:
        where = f" (from {self.source})" if self.source else ""
        return f"{self.field}: {self.message}{where}"


class ConfigError(ValidationError):
    """The configuration is invalid; the message names every offending field.

    Attributes:
        errors: one entry per invalid setting (empty for file-level problems such as
            unreadable YAML).
    """

    def __init__(self, message: str, errors: Sequence[ConfigFieldError] = ()) -> None:
        self.errors: list[ConfigFieldError] = list(errors)
        if self.errors:
            message = message + ":\n" + "\n".join(f"  {e}" for e in self.errors)
        super().__init__(message)

    @property
    def fields(self) -> list[str]:
        """Dotted paths of the invalid settings."""
        return [e.field for e in self.errors]


class FieldValueError(ValueError):
    """Raised by a model validator to blame one field below the model being validated.

    Args:
        field: dotted path relative to the model, e.g. ``encrypt.secret_key``.
        message: what is wrong.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field
        self.message = message
