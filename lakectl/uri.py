"""``lakefs://repository/ref/path`` addresses, parsed and checked as lakectl does.

An address names a repository (``lakefs://repo``), a ref (``lakefs://repo/ref``) or a
path (``lakefs://repo/ref/path``, the path possibly empty: ``lakefs://repo/ref/``).
With a base URI (``--base-uri``, ``LAKECTL_BASE_URI``) an address that does not start
with ``lakefs://`` is read relative to it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import urlsplit

SCHEME = "lakefs://"

_REPOSITORY_ID = re.compile(r"^[a-z0-9][a-z0-9-]{2,62}$")
_BRANCH_ID = re.compile(r"^\w[-\w]*$")
# a ref: a branch, tag or commit id, with ~N / ^N / @ modifiers
_REF = re.compile(r"^\S+$")


class URIError(ValueError):
    """An address that is not a lakeFS URI of the expected kind."""


@dataclass(frozen=True)
class LakeFSURI:
    repository: str
    ref: str = ""
    #: None when the address has no path part at all (``lakefs://repo/ref``)
    path: str | None = None

    def __str__(self) -> str:
        out = SCHEME + self.repository
        if self.ref:
            out += "/" + self.ref
            if self.path is not None:
                out += "/" + self.path
        return out

    @property
    def path_or_empty(self) -> str:
        return self.path or ""

    def with_path(self, path: str) -> LakeFSURI:
        return LakeFSURI(self.repository, self.ref, path)


def parse(text: str, base_uri: str = "") -> LakeFSURI:
    """Parse an address (relative to ``base_uri`` when it has no scheme).

    Raises:
        URIError: ``parsing <address>: malformed lakefs uri``.
    """
    if base_uri and not text.startswith(SCHEME):
        text = base_uri + text
    try:
        parts = urlsplit(text)
    except ValueError:
        parts = None
    if (parts is None or parts.scheme != "lakefs" or not text.startswith(SCHEME)
            or "@" in parts.netloc or not parts.netloc or parts.query or parts.fragment):
        raise URIError(f"parsing {text}: malformed lakefs uri")
    ref, path = "", None
    if parts.path:
        ref, sep, rest = parts.path[1:].partition("/")
        path = rest if sep else None
    return LakeFSURI(parts.netloc, ref, path)


def _repository_ok(u: LakeFSURI) -> bool:
    return bool(_REPOSITORY_ID.match(u.repository))


def repository(text: str, base_uri: str = "") -> LakeFSURI:
    u = parse(text, base_uri)
    if u.ref or u.path is not None or not _repository_ok(u):
        raise URIError("not a valid repo uri")
    return u


def ref(text: str, base_uri: str = "") -> LakeFSURI:
    u = parse(text, base_uri)
    if not u.ref or u.path is not None or not _repository_ok(u) or not _REF.match(u.ref):
        raise URIError("not a valid ref uri")
    return u


def branch(text: str, base_uri: str = "") -> LakeFSURI:
    u = parse(text, base_uri)
    if not u.ref or u.path is not None or not _repository_ok(u) or not _BRANCH_ID.match(u.ref):
        raise URIError("not a valid branch uri")
    return u


def path(text: str, base_uri: str = "") -> LakeFSURI:
    u = parse(text, base_uri)
    if not u.ref or u.path is None or not _repository_ok(u) or not _REF.match(u.ref):
        raise URIError("not a valid path uri")
    return u


__all__ = ["SCHEME", "LakeFSURI", "URIError", "branch", "parse", "path", "ref", "repository"]
