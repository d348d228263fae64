"""Secrets at rest and key generation.

Secret access keys are stored encrypted with AES-256-GCM under a key derived (HKDF,
SHA-256) from ``auth.encrypt.secret_key``. The access key id is bound to the
ciphertext as associated data, so an encrypted secret copied onto another key's row
does not decrypt. Every server and sidecar that reads the same auth tables must be
configured with the same ``auth.encrypt.secret_key``.
"""

from __future__ import annotations

import base64
import os
import re
import secrets
import string

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from lakefs_core.errors import SecretDecryptionError, ValidationError

_FORMAT_VERSION = b"\x01"
_NONCE_SIZE = 12
_HKDF_SALT = b"lakefs-core/auth/v1"
_HKDF_INFO = b"credential secrets"

_KEY_ID_ALPHABET = string.ascii_uppercase + string.digits
_ACCESS_KEY_ID_RE = re.compile(r"^[A-Za-z0-9_.+=-]{3,128}\Z")
_SECRET_RE = re.compile(r"^[\x21-\x7e]{1,256}\Z")


class SecretBox:
    """Encrypts and decrypts credential secrets with one configured key.

    Args:
        secret_key: The value of ``auth.encrypt.secret_key`` (any non-empty string).

    Raises:
        ValidationError: ``secret_key`` is empty.
    """

    def __init__(self, secret_key: str | bytes) -> None:
        raw = secret_key.encode() if isinstance(secret_key, str) else bytes(secret_key)
        if not raw:
            raise ValidationError("auth.encrypt.secret_key must not be empty")
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=_HKDF_SALT,
                   info=_HKDF_INFO).derive(raw)
        self._aead = AESGCM(key)

    def encrypt(self, plaintext: str, context: str) -> bytes:
        """Encrypt ``plaintext``, bound to ``context`` (the access key id).

        Returns:
            ``version || nonce || ciphertext+tag``.
        """
        nonce = os.urandom(_NONCE_SIZE)
        sealed = self._aead.encrypt(nonce, plaintext.encode(), context.encode())
        return _FORMAT_VERSION + nonce + sealed

    def decrypt(self, blob: bytes, context: str) -> str:
        """Decrypt a value produced by :meth:`encrypt` with the same ``context``.

        Raises:
            SecretDecryptionError: The key differs from the one used to encrypt, the
                context differs, or the value is corrupt.
        """
        blob = bytes(blob)
        if len(blob) < 1 + _NONCE_SIZE + 16 or blob[:1] != _FORMAT_VERSION:
            raise SecretDecryptionError(f"stored secret of {context!r} has an unknown format")
        nonce, sealed = blob[1:1 + _NONCE_SIZE], blob[1 + _NONCE_SIZE:]
        try:
            return self._aead.decrypt(nonce, sealed, context.encode()).decode()
        except InvalidTag as exc:
            raise SecretDecryptionError(
                f"cannot decrypt the secret of {context!r}: auth.encrypt.secret_key differs "
                "from the key it was stored with"
            ) from exc


def generate_access_key_id() -> str:
    """A new access key id shaped like lakeFS's: ``AKIAJ`` + 14 of [A-Z0-9] + ``Q``."""
    return "AKIAJ" + "".join(secrets.choice(_KEY_ID_ALPHABET) for _ in range(14)) + "Q"


def generate_secret() -> str:
    """A new secret access key: 40 base64 characters (30 random bytes)."""
    return base64.b64encode(secrets.token_bytes(30)).decode()


def validate_access_key_id(access_key_id: str) -> str:
    """Check a caller-chosen access key id (3-128 of ``A-Za-z0-9_.+=-``) and return it.

    Raises:
        ValidationError: The id is not acceptable.
    """
    if not isinstance(access_key_id, str) or not _ACCESS_KEY_ID_RE.match(access_key_id):
        raise ValidationError(f"invalid access key id: {access_key_id!r}")
    return access_key_id


def validate_secret(secret: str) -> str:
    """Check a caller-chosen secret (1-256 printable ASCII, no spaces) and return it.

    Raises:
        ValidationError: The secret is not acceptable.
    """
    if not isinstance(secret, str) or not _SECRET_RE.match(secret):
        raise ValidationError("invalid secret access key")
    return secret
