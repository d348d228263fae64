"""Field types and validators shared by every settings model, and the models' base.
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    SecretStr,
)

from lakefs_core.block.config import BlockstoreConfig, BlockstoresConfig
from lakefs_core.settings.errors import (
    FieldValueError,
)


# --- shared validators ----------------------------------------------------------------
def check_listen_address(value: str) -> str:
    """Check ``host:port`` (host may be empty, a name, an IPv4 or a bracketed IPv6)."""
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"expected host:port, such as 0.0.0.0:8000, got {value!r}")
    if host.startswith("[") != host.endswith("]"):
        raise ValueError(f"malformed IPv6 host in {value!r}")
    return value


def check_http_url(value: str) -> str:
    """Check an absolute http(s) URL with a host; the trailing slash is dropped."""
    match = re.fullmatch(r"https?://([^/?#]+)(/[^?#]*)?", value.strip())
    if not match:
        raise ValueError(f"expected an http:// or https:// URL, got {value!r}")
    return value.strip().rstrip("/")


#: ``host:port`` to listen on.
ListenAddress = Annotated[str, AfterValidator(check_listen_address)]
#: An absolute http(s) URL, trailing slash dropped.
HttpEndpoint = Annotated[str, AfterValidator(check_http_url)]


def check_blockstore_sections(
    blockstore: BlockstoreConfig | None, blockstores: BlockstoresConfig | None, *, required: bool
) -> None:
    """Check that at most one (exactly one if ``required``) blockstore section is set.

    Raises:
        FieldValueError: both sections, or none when one is required.
    """
    if blockstore is not None and blockstores is not None:
        raise FieldValueError(
            "blockstores", "blockstore and blockstores are mutually exclusive: set one"
        )
    if required and blockstore is None and blockstores is None:
        raise FieldValueError(
            "blockstore", "required (the same blockstore as the lakeFS installation)"
        )


# --- models ---------------------------------------------------------------------------
def _reveal(value: Any) -> Any:
    if isinstance(value, SecretStr):
        return value.get_secret_value()
    if isinstance(value, dict):
        return {k: _reveal(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_reveal(v) for v in value]
    return value


def plain_dict(model: BaseModel) -> dict[str, Any]:
    """A model as a plain nested dict, secrets revealed, unset optionals omitted.

    Durations stay timedelta objects; this is for handing settings to code that takes
    plain data (a backend's own config object), not for printing.
    """
    return typing.cast(dict[str, Any], _reveal(model.model_dump(exclude_none=True)))


class ConfigModel(BaseModel):
    """Base of every config section: unknown keys are errors, so a typo is caught."""

    model_config = ConfigDict(extra="forbid")

    def to_dict(self) -> dict[str, Any]:
        """Plain nested dict of the section (see :func:`plain_dict`)."""
        return plain_dict(self)
