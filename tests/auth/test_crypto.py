"""Secrets are encrypted at rest and only the configured key reads them back."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest
import sqlalchemy as sa

from lakefs_core.auth import AuthStore, SecretBox, generate_access_key_id, generate_secret
from lakefs_core.errors import SecretDecryptionError, ValidationError
from tests.auth.conftest import SECRET_KEY

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def _all_auth_rows(store: AuthStore) -> str:
    dump = []
    with store.engine.connect() as conn:
        for table in sa.inspect(conn).get_table_names():
            if table.startswith("auth_"):
                for row in conn.execute(sa.text(f"SELECT * FROM {table}")):
                    dump.append(repr(tuple(bytes(v) if isinstance(v, memoryview) else v
                                           for v in row)))
    return "\n".join(dump)


def test_secret_is_not_stored_in_plain_text(store: AuthStore) -> None:
    store.create_user("alice")
    store.create_credentials("alice", "AKIAALICE", SECRET)
    dump = _all_auth_rows(store)
    assert "AKIAALICE" in dump  # the dump does see the credentials row
    for form in (SECRET, base64.b64encode(SECRET.encode()).decode(), SECRET.encode().hex()):
        assert form not in dump
    with store.engine.connect() as conn:
        blob = conn.execute(sa.text(
            "SELECT secret_encrypted FROM auth_credentials WHERE access_key_id = 'AKIAALICE'"
        )).scalar_one()
    assert SECRET.encode() not in bytes(blob)


def test_sqlite_file_does_not_contain_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"
    with AuthStore(f"sqlite:///{path}", SECRET_KEY) as store:
        store.create_user("alice")
        store.create_credentials("alice", "AKIAALICE", SECRET)
    raw = path.read_bytes()
    assert b"AKIAALICE" in raw
    assert SECRET.encode() not in raw


def test_another_key_cannot_decrypt(auth_url: str) -> None:
    with AuthStore(auth_url, SECRET_KEY) as store:
        store.create_user("alice")
        store.create_credentials("alice", "AKIAALICE", SECRET)
    with AuthStore(auth_url, "some-other-key") as other:
        assert other.get_user("alice").username == "alice"  # the rest is readable
        with pytest.raises(SecretDecryptionError):
            other.get_credentials("AKIAALICE")
        with pytest.raises(SecretDecryptionError):
            other.authenticate("AKIAALICE", SECRET)
    with AuthStore(auth_url, SECRET_KEY) as same:
        assert same.get_credentials("AKIAALICE").secret == SECRET


def test_a_secret_moved_to_another_key_row_does_not_decrypt(store: AuthStore) -> None:
    store.create_user("alice")
    store.create_user("mallory")
    store.create_credentials("alice", "AKIAALICE", SECRET)
    store.create_credentials("mallory", "AKIAMALLORY", "mallory-secret")
    with store.engine.begin() as conn:
        blob = conn.execute(sa.text(
            "SELECT secret_encrypted FROM auth_credentials WHERE access_key_id = 'AKIAALICE'"
        )).scalar_one()
        conn.execute(sa.text(
            "UPDATE auth_credentials SET secret_encrypted = :b WHERE access_key_id = :k"),
            {"b": bytes(blob), "k": "AKIAMALLORY"})
    with pytest.raises(SecretDecryptionError):
        store.get_credentials("AKIAMALLORY")


def test_secret_box_round_trip_and_fresh_nonces() -> None:
    box = SecretBox("k1")
    a, b = box.encrypt(SECRET, "ctx"), box.encrypt(SECRET, "ctx")
    assert a != b
    assert box.decrypt(a, "ctx") == box.decrypt(b, "ctx") == SECRET
    with pytest.raises(SecretDecryptionError):
        SecretBox("k2").decrypt(a, "ctx")
    with pytest.raises(SecretDecryptionError):
        box.decrypt(a, "other-ctx")
    with pytest.raises(SecretDecryptionError):
        box.decrypt(a[:-1] + bytes([a[-1] ^ 1]), "ctx")
    with pytest.raises(SecretDecryptionError):
        box.decrypt(b"\x02" + a[1:], "ctx")
    with pytest.raises(ValidationError):
        SecretBox("")


def test_generated_keys_look_like_lakefs_keys() -> None:
    ids = {generate_access_key_id() for _ in range(200)}
    secrets = {generate_secret() for _ in range(200)}
    assert len(ids) == 200 and len(secrets) == 200
    assert all(re.fullmatch(r"AKIAJ[A-Z0-9]{14}Q", i) for i in ids)
    assert all(re.fullmatch(r"[A-Za-z0-9+/]{40}", s) for s in secrets)
