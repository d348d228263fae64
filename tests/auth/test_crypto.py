"""Secrets are encrypted at rest and only the configured key reads them back."""

from __future__ import annotations

import base64
import re
from pathlib import Path

import pytest

from lakefs_core.auth import (
    AuthStore,
    BaseAuthStore,
    SecretBox,
    generate_access_key_id,
    generate_secret,
)
from lakefs_core.errors import SecretDecryptionError, ValidationError
from tests.auth.conftest import (
    SECRET_KEY,
    OpenStore,
    all_stored,
    overwrite_stored_secret,
    stored_secret,
)

SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"


def test_secret_is_not_stored_in_plain_text(store: BaseAuthStore) -> None:
    store.create_user("alice")
    store.create_credentials("alice", "AKIAALICE", SECRET)
    dump = all_stored(store)
    assert "AKIAALICE" in dump  # the dump does see the credentials row
    for form in (SECRET, base64.b64encode(SECRET.encode()).decode(), SECRET.encode().hex()):
        assert form not in dump
    assert SECRET.encode() not in stored_secret(store, "AKIAALICE")


def test_sqlite_file_does_not_contain_the_secret(tmp_path: Path) -> None:
    path = tmp_path / "auth.db"
    with AuthStore(f"sqlite:///{path}", SECRET_KEY) as store:
        store.create_user("alice")
        store.create_credentials("alice", "AKIAALICE", SECRET)
    raw = path.read_bytes()
    assert b"AKIAALICE" in raw
    assert SECRET.encode() not in raw


def test_another_key_cannot_decrypt(open_store: OpenStore) -> None:
    with open_store() as store:
        store.create_user("alice")
        store.create_credentials("alice", "AKIAALICE", SECRET)
    with open_store("some-other-key") as other:
        assert other.get_user("alice").username == "alice"  # the rest is readable
        with pytest.raises(SecretDecryptionError):
            other.get_credentials("AKIAALICE")
        with pytest.raises(SecretDecryptionError):
            other.authenticate("AKIAALICE", SECRET)
    with open_store() as same:
        assert same.get_credentials("AKIAALICE").secret == SECRET


def test_a_secret_moved_to_another_key_row_does_not_decrypt(store: BaseAuthStore) -> None:
    store.create_user("alice")
    store.create_user("mallory")
    store.create_credentials("alice", "AKIAALICE", SECRET)
    store.create_credentials("mallory", "AKIAMALLORY", "mallory-secret")
    overwrite_stored_secret(store, "AKIAMALLORY", stored_secret(store, "AKIAALICE"))
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


def test_secrets_move_to_a_new_key(open_store: OpenStore) -> None:
    with open_store("the-old-key") as old:
        old.create_user("alice")
        old.create_credentials("alice", "AKIAONE", SECRET)
        old.create_credentials("alice", "AKIATWO", "second-secret")
    with open_store("a-third-key") as third:
        third.create_credentials("alice", "AKIATHIRD", "third-secret")
    with open_store("the-new-key") as new:
        assert new.reencrypt_secrets("the-old-key") == 2
        assert new.get_credentials("AKIAONE").secret == SECRET
        assert new.authenticate("AKIATWO", "second-secret").username == "alice"
        with pytest.raises(SecretDecryptionError):  # another key's secret is left alone
            new.get_credentials("AKIATHIRD")
        assert new.reencrypt_secrets("the-old-key") == 0
    with open_store("the-old-key") as old, pytest.raises(SecretDecryptionError):
        old.get_credentials("AKIAONE")
