"""The REST client and the remote authenticator against a real server."""

from __future__ import annotations

import pytest

from lakefs_core.client import API_PREFIX, RestClient
from lakefs_core.errors import AuthenticationError, NotFoundError
from lakefs_testing.live_server import ADMIN_KEY, ADMIN_SECRET, LiveServer
from replication.remote_auth import RemoteAuthenticator


def test_paging_and_typed_errors_on_a_real_server(server: LiveServer) -> None:
    with RestClient(server.endpoint, ADMIN_KEY, ADMIN_SECRET) as c:
        c.request("POST", f"{API_PREFIX}/repositories", ok=(201,),
                  json={"name": "paged", "storage_namespace": "local://paged"})
        for i in range(5):
            c.request("POST", f"{API_PREFIX}/repositories/paged/branches", ok=(201,),
                      json={"name": f"b{i}", "source": "main"})
        names = [r["id"] for r in c.pages(f"{API_PREFIX}/repositories/paged/branches",
                                          page_size=2)]
        assert names == ["b0", "b1", "b2", "b3", "b4", "main"]
        assert c.requests == 1 + 5 + 3
        with pytest.raises(NotFoundError, match="not found"):
            c.request("GET", f"{API_PREFIX}/repositories/nope")


def test_remote_authenticator(server: LiveServer) -> None:
    remote = RemoteAuthenticator(server.endpoint)
    try:
        admin = remote.authenticate(ADMIN_KEY, ADMIN_SECRET)
        assert admin.username == "admin" and admin.policies
        with pytest.raises(AuthenticationError):
            remote.authenticate(ADMIN_KEY, "wrong")
    finally:
        remote.close()
