"""One invocation's state: the configuration and a REST client of the server."""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, Concatenate, ParamSpec, TypeVar

import click
import httpx

from lakectl import uri
from lakectl.config import LakectlConfig
from lakectl.output import Fatal
from lakefs_core.client import API_PREFIX, RestClient

#: lakectl's page size when it fetches every result
INTERNAL_PAGE_SIZE = 1000


class Session:
    """The configuration, and the server's REST client (built at the first call)."""

    def __init__(self, config: LakectlConfig) -> None:
        self.config = config
        self._client: RestClient | None = None
        self._lock = threading.Lock()

    @property
    def client(self) -> RestClient:
        with self._lock:  # transfers call from several threads at once
            if self._client is None:
                self._client = RestClient(
                    self.config.server, self.config.access_key_id,
                    self.config.secret_access_key,
                    attempts=self.config.max_attempts if self.config.retries_enabled else 1,
                    timeout=60.0)
            return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    # --- addresses -------------------------------------------------------------------
    def _parse(self, kind: str, name: str, text: str) -> uri.LakeFSURI:
        parser = getattr(uri, kind)
        try:
            return parser(text, self.config.base_uri)
        except uri.URIError as e:
            raise Fatal(f"{name} {e}") from None

    def repository_uri(self, text: str, name: str = "repository URI") -> uri.LakeFSURI:
        return self._parse("repository", name, text)

    def ref_uri(self, text: str, name: str = "ref URI") -> uri.LakeFSURI:
        return self._parse("ref", name, text)

    def branch_uri(self, text: str, name: str = "branch URI") -> uri.LakeFSURI:
        return self._parse("branch", name, text)

    def path_uri(self, text: str, name: str = "path URI") -> uri.LakeFSURI:
        return self._parse("path", name, text)

    # --- calls -----------------------------------------------------------------------
    def call(self, method: str, path: str, *, ok: Sequence[int] = (200,),
             **kwargs: Any) -> httpx.Response:
        """A call of the API (``path`` under ``/api/v1``); errors as typed ``ApiError``."""
        return self.client.request(method, API_PREFIX + path, ok=ok, **kwargs)

    def json(self, method: str, path: str, *, ok: Sequence[int] = (200,),
             **kwargs: Any) -> Any:
        return self.call(method, path, ok=ok, **kwargs).json()

    @contextlib.contextmanager
    def stream(self, method: str, path: str, *, ok: Sequence[int] = (200,),
               **kwargs: Any) -> Iterator[httpx.Response]:
        with self.client.stream(method, API_PREFIX + path, ok=ok, **kwargs) as resp:
            yield resp

    def page(self, path: str, params: Mapping[str, Any], amount: int,
             after: str = "") -> dict[str, Any]:
        """One page of a listing (lakeFS's ``{results, pagination}``)."""
        query = {k: v for k, v in params.items() if v not in (None, "", [])}
        query["amount"] = amount
        if after:
            query["after"] = after
        return dict(self.json("GET", path, params=query))

    def every(self, path: str, params: Mapping[str, Any],
              page_size: int = INTERNAL_PAGE_SIZE, after: str = "") -> Iterator[dict[str, Any]]:
        """Every result of a listing from ``after`` on, page by page."""
        while True:
            body = self.page(path, params, page_size, after)
            yield from body.get("results", [])
            pagination = body.get("pagination") or {}
            if not pagination.get("has_more"):
                return
            after = pagination.get("next_offset", "")




class App:
    """The root command's options; the session is made at the first command that calls."""

    def __init__(self, config_path: str | None, base_uri: str | None) -> None:
        self.config_path = config_path
        self.base_uri = base_uri
        self._session: Session | None = None

    @property
    def session(self) -> Session:
        if self._session is None:
            from lakectl.config import ConfigError, load_config

            try:
                config = load_config(self.config_path, base_uri=self.base_uri)
            except ConfigError as e:
                raise Fatal(str(e)) from None
            self._session = Session(config)
        return self._session

    def close(self) -> None:
        if self._session is not None:
            self._session.close()


P = ParamSpec("P")
R = TypeVar("R")


def pass_session(f: Callable[Concatenate[Session, P], R]) -> Callable[P, R]:
    """Give a command the invocation's :class:`Session` as its first argument."""
    @functools.wraps(f)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        app = click.get_current_context().find_object(App)
        if app is None:  # a command invoked on its own, outside the root group
            app = App(None, None)
        return f(app.session, *args, **kwargs)
    return wrapper


__all__ = ["INTERNAL_PAGE_SIZE", "App", "Session", "pass_session"]
