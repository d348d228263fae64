"""Authenticating callers against another lakeFS (``auth.api.endpoint``)."""

from __future__ import annotations

from lakefs_core.auth.model import Policy
from lakefs_core.auth.service import Principal
from lakefs_core.client import API_PREFIX, ApiError, RestClient
from lakefs_core.errors import AuthenticationError


class RemoteAuthenticator:
    """An :class:`~lakefs_core.auth.service.Authenticator` asking a lakeFS who a key is.

    One pooled client serves every caller; each request carries the caller's own
    credentials.

    Args:
        endpoint: the lakeFS base URL (``http://host:port``).
    """

    def __init__(self, endpoint: str, *, timeout: float = 10.0) -> None:
        self._rest = RestClient(endpoint, "", "", timeout=timeout, attempts=2)

    def close(self) -> None:
        self._rest.close()

    def authenticate(self, access_key_id: str, secret: str) -> Principal:
        """The caller's principal, with the effective policies that lakeFS reports.

        Raises:
            AuthenticationError: lakeFS does not know the key pair.
        """
        auth = (access_key_id, secret)
        try:
            user = self._rest.request("GET", f"{API_PREFIX}/user", auth=auth).json()
        except ApiError as e:
            if e.status == 401:
                raise AuthenticationError("invalid credentials") from None
            raise
        username = user["user"]["id"]
        resp = self._rest.request("GET", f"{API_PREFIX}/auth/users/{username}/policies",
                                  params={"effective": "true"}, auth=auth)
        return Principal(username, [Policy.from_dict(p) for p in resp.json().get("results", [])])
