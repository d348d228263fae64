"""Helpers for API tests that drive a live server with the lakefs SDK and httpx."""

from __future__ import annotations

import itertools

import httpx
import lakefs

from lakefs_testing.live_server import LiveServer

_users = itertools.count()


def sdk_client(server: LiveServer) -> lakefs.Client:
    """A lakefs SDK client of the server's admin."""
    return lakefs.Client(host=server.endpoint, username=server.access_key_id,
                         password=server.secret_access_key)


def viewer_client(server: LiveServer, name: str = "viewer") -> httpx.Client:
    """An API client of a new user in the built-in Viewers group (read-only)."""
    auth = server.services.auth
    auth.create_user(name)
    auth.add_user_to_group(name, "Viewers")
    cred = auth.create_credentials(name)
    return server.client(cred.access_key_id, cred.secret)


def user_client(server: LiveServer, *policies: str) -> httpx.Client:
    """An API client of a new user with ``policies`` attached directly."""
    auth = server.services.auth
    name = f"user-{next(_users)}"
    auth.create_user(name)
    for policy in policies:
        auth.attach_policy_to_user(name, policy)
    cred = auth.create_credentials(name)
    return server.client(cred.access_key_id, cred.secret)


def put(branch: lakefs.Branch, path: str, data: bytes | str) -> None:
    branch.object(path).upload(data)


def read(ref: lakefs.Reference, path: str) -> bytes:
    data: bytes = ref.object(path).reader(mode="rb").read()
    return data
