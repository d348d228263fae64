"""Signing in to the web UI over HTTP, as a browser does: the login form's token and
its cookie go back with the keys."""

from __future__ import annotations

import re

import httpx


def ui_sign_in(c: httpx.Client, key: str, secret: str, **fields: str) -> httpx.Response:
    """Fill in ``c``'s server's login form (``fields``: more form fields, e.g. ``next``);
    the answer (303 to the next page on success)."""
    form = c.get("/ui/login")
    match = re.search(r'name="login_token" value="([^"]+)"', form.text)
    assert match is not None, form.text
    return c.post("/ui/login", data={"access_key_id": key, "secret_access_key": secret,
                                     "login_token": match.group(1), **fields})
