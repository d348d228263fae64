"""The auth store on DynamoDB (``database.type: dynamodb``).

The auth records live in the refstore's table (``database.dynamodb.table_name``), in
partitions of their own whose keys begin with ``auth#``. One table is one thing to
provision, grant and back up, and is all that several server processes (and the
replication service) on different machines share. The refstore's partitions are
``repos`` and ``repo#<id>`` and it only ever reads partitions by key, so neither store
sees the other's items.

Items (partition key ``pk``, sort key ``sk``):

* ``auth#users`` / ``<username>``, ``auth#groups`` / ``<name>``, ``auth#policies`` /
  ``<name>``: the entities (``v``: JSON; a policy's statements in ``st``). Listing
  one kind is one Query, in key order (UTF-8 byte order, as the SQL store sorts).
* ``auth#credentials`` / ``<access key id>``: the owner (``username``), the secret
  encrypted as by the SQL store (``secret``, :mod:`lakefs_core.auth.crypto`) and the
  creation date.
* ``auth#user#<username>`` / ``cred#<key id>``, ``group#<name>``, ``policy#<name>``;
  ``auth#group#<name>`` / ``member#<username>``, ``policy#<name>``;
  ``auth#policy#<name>`` / ``user#<username>``, ``group#<name>``: each link (access
  key, membership, attachment) from both of its sides, written and deleted together
  in one transaction with ConditionChecks that both entities exist.
* ``auth#meta`` / ``setup_timestamp``, ``installation_id``, ``comm_prefs``;
  ``auth#sessions`` / ``<session id>``: revoked UI sessions (``expires``).

Deleting a user, group or policy first marks its item ``deleting`` (from then on it
reads as missing and no link to it can be written), then deletes every link in its
own partition together with the other side of each, then the item. A deletion cut
short (the process lost) is finished by deleting again; until then the name cannot
be created anew. Writes that race on one item (concurrent ``setup_admin`` from
several processes) are conditional, so exactly one creates the admin.
"""

from __future__ import annotations

import hmac
import itertools
import json
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

import botocore.exceptions
from tenacity import retry, retry_if_exception_type, stop_after_attempt, wait_random_exponential

from lakefs_core.auth import builtin
from lakefs_core.auth.base import BaseAuthStore
from lakefs_core.auth.crypto import (
    SecretBox,
    generate_access_key_id,
    generate_secret,
    validate_access_key_id,
    validate_secret,
)
from lakefs_core.auth.model import (
    CommPrefs,
    Credential,
    CredentialSummary,
    Group,
    Policy,
    Statement,
    User,
    validate_entity_id,
)
from lakefs_core.dynamodb_table import (
    ABSENT,
    BATCH_GET_LIMIT,
    PK,
    PRESENT,
    SK,
    DynamoDBTable,
    code,
    key,
    s,
)
from lakefs_core.errors import (
    AlreadyExistsError,
    AuthenticationError,
    DatabaseError,
    NotFoundError,
    SecretDecryptionError,
    ValidationError,
)

USERS, GROUPS, POLICIES = "auth#users", "auth#groups", "auth#policies"
CREDENTIALS, META, SESSIONS = "auth#credentials", "auth#meta", "auth#sessions"
#: an entity that exists and is not being deleted
LIVE = "attribute_exists(sk) AND attribute_not_exists(deleting)"
_SETUP_TIMESTAMP = "setup_timestamp"
_INSTALLATION_ID = "installation_id"
_COMM_PREFS = "comm_prefs"
#: the item counting writes (:meth:`DynamoDBAuthStore.changes`)
_CHANGES = "changes"
#: the longest name used in a key (DynamoDB takes sort keys up to 1024 bytes)
_MAX_KEY_BYTES = 900
#: what a kind of entity is called in messages, by its partition
_KIND = {USERS: "user", GROUPS: "group", POLICIES: "policy"}

T = TypeVar("T")


class _ItemConflict(Exception):
    """A plain write met a transaction on the same item (retried)."""


def _user_pk(username: str) -> str:
    return "auth#user#" + username


def _group_pk(name: str) -> str:
    return "auth#group#" + name


def _policy_pk(name: str) -> str:
    return "auth#policy#" + name


_PARTITION_OF = {USERS: _user_pk, GROUPS: _group_pk, POLICIES: _policy_pk}


@dataclass(frozen=True)
class _Side:
    """One end of a link: the entity (its kind's partition, e.g. :data:`USERS`, and its
    name) and the link item's sort key in the entity's own partition."""

    kind: str
    name: str
    sort_key: str

    @property
    def partition(self) -> str:
        return _PARTITION_OF[self.kind](self.name)


def _fits(name: str) -> bool:
    """Whether ``name`` can be part of a key at all (anything else names nothing)."""
    try:
        return 0 < len(name.encode()) <= _MAX_KEY_BYTES
    except UnicodeEncodeError:
        return False


def _now() -> datetime:
    return datetime.now(UTC)


def _date(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _statements(policy: Policy) -> str:
    return json.dumps([st.to_dict() for st in policy.statements], separators=(",", ":"))


class DynamoDBAuthStore(DynamoDBTable, BaseAuthStore):
    """Users, access keys, groups and policies on the server's DynamoDB table.

    Args:
        table_name: ``database.dynamodb.table_name`` (created when missing).
        secret_key: ``auth.encrypt.secret_key``; secrets are encrypted with it.
        endpoint, region, profile, access_key_id, secret_access_key,
        read_capacity_units, write_capacity_units, scan_limit: as for
            :class:`~lakefs_core.refstore.dynamodb.DynamoDBRefStore`
            (:func:`lakefs_core.dynamodb_table.table_options` of the settings).

    Raises:
        ValidationError: bad settings or an empty ``secret_key``.
        DatabaseError: the table cannot be reached, created or used.
    """

    def __init__(self, table_name: str, secret_key: str | bytes, *,
                 endpoint: str | None = None, region: str | None = None,
                 profile: str | None = None, access_key_id: str | None = None,
                 secret_access_key: str | None = None,
                 read_capacity_units: int | None = None,
                 write_capacity_units: int | None = None, scan_limit: int = 1024) -> None:
        self._box = SecretBox(secret_key)
        self._connect(table_name, endpoint=endpoint, region=region, profile=profile,
                      access_key_id=access_key_id, secret_access_key=secret_access_key,
                      read_capacity_units=read_capacity_units,
                      write_capacity_units=write_capacity_units, scan_limit=scan_limit)

    def __repr__(self) -> str:
        return f"DynamoDBAuthStore({self._where})"

    # --- plumbing --------------------------------------------------------------------
    @retry(retry=retry_if_exception_type(_ItemConflict), stop=stop_after_attempt(8),
           wait=wait_random_exponential(multiplier=0.01, max=0.5), reraise=True)
    def _write(self, operation: str, **kwargs: Any) -> dict[str, Any] | None:
        """One conditional put/update/delete: its result, or None when the condition
        failed."""
        try:
            return self._call(operation, ("ConditionalCheckFailedException",
                                          "TransactionConflictException"),
                              TableName=self._table, **kwargs)
        except botocore.exceptions.ClientError as exc:
            if code(exc) == "TransactionConflictException":
                raise _ItemConflict(str(exc)) from None
            return None
        finally:
            self._count_change()

    def _counted_transact(self, items: list[dict[str, Any]]) -> list[bool] | None:
        """:meth:`_transact`, counted as a change."""
        try:
            return self._transact(items)
        finally:
            self._count_change()

    def _count_change(self) -> None:
        """Count a write (see :meth:`changes`), once it is made: a reader that saw the
        count before it may have read either state, and reads again at the next count."""
        self._call("update_item", TableName=self._table, Key=key(META, _CHANGES),
                   UpdateExpression="ADD n :one", ExpressionAttributeValues={":one": {"N": "1"}})

    def changes(self) -> int:
        """See :meth:`BaseAuthStore.changes`: one consistent GetItem."""
        item = self._get(META, _CHANGES)
        return int(item["n"]["N"]) if item is not None else 0

    def _entity(self, pk: str, name: str) -> dict[str, Any] | None:
        """The item of a user, group or policy; None when missing or being deleted."""
        if not _fits(name):
            return None
        item = self._get(pk, name)
        return None if item is None or "deleting" in item else item

    def _require(self, pk: str, name: str) -> dict[str, Any]:
        item = self._entity(pk, name)
        if item is None:
            raise NotFoundError(f"{_KIND[pk]} not found: {name}")
        return item

    def _check(self, pk: str, name: str) -> dict[str, Any]:
        return {"ConditionCheck": {"TableName": self._table, "Key": key(pk, name),
                                   "ConditionExpression": LIVE}}

    def _in_transaction(self, parents: list[tuple[str, str]],
                        ops: list[dict[str, Any]]) -> list[bool]:
        """Run ``ops`` if every parent entity (partition, name) is live; which of
        ``ops``' own conditions failed.

        Raises:
            NotFoundError: a parent is missing (the first one, in order).
        """
        for pk, name in parents:
            if not _fits(name):
                raise NotFoundError(f"{_KIND[pk]} not found: {name}")
        failed = self._counted_transact([*(self._check(pk, n) for pk, n in parents), *ops])
        if failed is None:
            return [False] * len(ops)
        for (pk, name), missing in zip(parents, failed, strict=False):
            if missing:
                raise NotFoundError(f"{_KIND[pk]} not found: {name}")
        return failed[len(parents):]

    def _page(self, pk: str, kind: str, prefix: str, after: str,
              limit: int | None = None) -> Iterator[dict[str, Any]]:
        """Items of ``kind`` in partition ``pk`` whose name starts with ``prefix`` and
        sorts after ``after``, by name; a prefix or bound longer than a key can hold
        is handled here (no name is that long)."""
        if prefix and not _fits(prefix):
            return
        bound = after
        while bound and not _fits(bound):  # a shorter bound, then filtered exactly
            bound = bound[:len(bound) // 2]
        for item in self._query(pk, kind, prefix, bound,
                                limit if bound == after else None):
            if bound == after or self._name(item, kind) > after:
                yield item

    @staticmethod
    def _check_amount(amount: int) -> None:
        if amount < 0:
            raise ValidationError("amount must not be negative")

    def _live_entities(self, pk: str, prefix: str, after: str,
                       amount: int) -> Iterator[dict[str, Any]]:
        """Live entities of one kind, by name (``prefix``/``after``), ``amount`` at most."""
        self._check_amount(amount)
        if amount == 0:
            return
        found = 0
        for item in self._page(pk, "", prefix, after):
            if "deleting" in item:
                continue
            yield item
            found += 1
            if found >= amount:
                return

    def _linked(self, pk: str, kind: str, target: str, after: str, amount: int | None,
                convert: Callable[[dict[str, Any]], T]) -> list[T]:
        """The live entities (of partition ``target``) that partition ``pk`` links to with
        ``kind`` items, by name, ``amount`` at most."""
        out: list[T] = []
        names: list[str] = []

        def flush() -> None:
            items = {i[SK]["S"]: i for i in self._batch_get([key(target, n) for n in names])}
            for n in names:
                item = items.get(n)
                if item is not None and "deleting" not in item and (
                        amount is None or len(out) < amount):
                    out.append(convert(item))
            names.clear()

        if amount is not None:
            self._check_amount(amount)
            if amount == 0:
                return out
        for item in self._page(pk, kind, "", after):
            names.append(self._name(item, kind))
            if len(names) == BATCH_GET_LIMIT or (
                    amount is not None and len(out) + len(names) >= amount):
                flush()
                if amount is not None and len(out) >= amount:
                    return out
        if names:
            flush()
        return out

    def _sweep(self, pk: str, name: str, other: Callable[[str], tuple[str, str] | None]) -> None:
        """Finish deleting an entity marked ``deleting``: its own partition's links with
        their other sides, then the entity's item."""
        own = self._partition_of(pk, name)
        keys: list[dict[str, Any]] = []
        for item in self._query(own, ""):
            keys.append({PK: item[PK], SK: item[SK]})
            far = other(item[SK]["S"])
            if far is not None:
                keys.append(key(*far))
        self._batch_delete(keys)
        self._write("delete_item", Key=key(pk, name),
                    ConditionExpression="attribute_exists(deleting)")

    @staticmethod
    def _partition_of(pk: str, name: str) -> str:
        return _PARTITION_OF[pk](name)

    def _delete_entity(self, pk: str, name: str,
                       other: Callable[[str], tuple[str, str] | None]) -> None:
        if not _fits(name) or self._write(
                "update_item", Key=key(pk, name), UpdateExpression="SET deleting = :t",
                ConditionExpression=PRESENT,
                ExpressionAttributeValues={":t": {"BOOL": True}}) is None:
            raise NotFoundError(f"{_KIND[pk]} not found: {name}")
        self._sweep(pk, name, other)

    def _create_entity(self, pk: str, name: str, item: dict[str, Any]) -> None:
        if self._write("put_item", Item={**key(pk, name), **item},
                       ConditionExpression=ABSENT) is None:
            raise AlreadyExistsError(f"{_KIND[pk]} already exists: {name}")

    # --- values ------------------------------------------------------------------------
    @staticmethod
    def _user(item: dict[str, Any]) -> User:
        v = json.loads(item["v"]["S"])
        return User(username=item[SK]["S"], creation_date=_date(v["created"]),
                    email=v["email"], friendly_name=v["friendly_name"])

    @staticmethod
    def _group(item: dict[str, Any]) -> Group:
        v = json.loads(item["v"]["S"])
        return Group(name=item[SK]["S"], creation_date=_date(v["created"]),
                     description=v["description"])

    @staticmethod
    def _policy(item: dict[str, Any]) -> Policy:
        return Policy(name=item[SK]["S"], creation_date=_date(item["created"]["S"]),
                      statements=[Statement.from_dict(st) for st in json.loads(item["st"]["S"])])

    def _credential(self, item: dict[str, Any]) -> Credential:
        key_id = item[SK]["S"]
        return Credential(access_key_id=key_id, user=item["username"]["S"],
                          creation_date=_date(item["created"]["S"]),
                          secret=self._box.decrypt(bytes(item["secret"]["B"]), key_id))

    @staticmethod
    def _user_item(user: User) -> dict[str, Any]:
        return {**key(USERS, user.username), "v": s(json.dumps({
            "email": user.email, "friendly_name": user.friendly_name,
            "created": user.creation_date.isoformat()}))}

    def _credential_ops(self, cred: Credential) -> list[dict[str, Any]]:
        """Puts of a new access key: its item (if the id is free) and the user's link."""
        created = s(cred.creation_date.isoformat())
        return [
            self._put({**key(CREDENTIALS, cred.access_key_id), "username": s(cred.user),
                       "created": created,
                       "secret": {"B": self._box.encrypt(cred.secret, cred.access_key_id)}},
                      ABSENT),
            self._put({**key(_user_pk(cred.user), "cred#" + cred.access_key_id),
                       "created": created}),
        ]

    # --- users -------------------------------------------------------------------------
    def create_user(self, username: str, *, email: str | None = None,
                    friendly_name: str | None = None) -> User:
        validate_entity_id("user", username)
        user = User(username=username, email=email, friendly_name=friendly_name)
        item = self._user_item(user)
        self._create_entity(USERS, username, {"v": item["v"]})
        return user

    def get_user(self, username: str) -> User:
        return self._user(self._require(USERS, username))

    def list_users(self, prefix: str = "", after: str = "", amount: int = 1000) -> list[User]:
        return [self._user(i) for i in self._live_entities(USERS, prefix, after, amount)]

    def delete_user(self, username: str) -> None:
        def other(sk: str) -> tuple[str, str] | None:
            kind, _, name = sk.partition("#")
            if kind == "cred":
                return CREDENTIALS, name
            if kind == "group":
                return _group_pk(name), "member#" + username
            if kind == "policy":
                return _policy_pk(name), "user#" + username
            return None

        self._delete_entity(USERS, username, other)

    # --- credentials -------------------------------------------------------------------
    def create_credentials(self, username: str, access_key_id: str | None = None,
                           secret: str | None = None) -> Credential:
        cred = Credential(
            access_key_id=validate_access_key_id(access_key_id)
            if access_key_id is not None else generate_access_key_id(),
            secret=validate_secret(secret) if secret is not None else generate_secret(),
            user=username,
        )
        failed = self._in_transaction([(USERS, username)], self._credential_ops(cred))
        if failed[0]:
            raise AlreadyExistsError(f"access key id already exists: {cred.access_key_id}")
        return cred

    def get_credentials(self, access_key_id: str) -> Credential:
        item = self._get(CREDENTIALS, access_key_id) if _fits(access_key_id) else None
        if item is None:
            raise NotFoundError(f"credentials not found: {access_key_id}")
        return self._credential(item)

    def list_credentials(self, username: str, after: str = "",
                         amount: int = 1000) -> list[CredentialSummary]:
        self._check_amount(amount)
        self._require(USERS, username)
        if amount == 0:
            return []
        return [CredentialSummary(self._name(i, "cred#"), username, _date(i["created"]["S"]))
                for i in itertools.islice(
                    self._page(_user_pk(username), "cred#", "", after, amount), amount)]

    def delete_credentials(self, username: str, access_key_id: str) -> None:
        if not _fits(access_key_id):
            self._require(USERS, username)
            raise NotFoundError(f"credentials not found: {access_key_id}")
        ops = [{"Delete": {"TableName": self._table, "Key": key(CREDENTIALS, access_key_id),
                           "ConditionExpression": "#u = :u",
                           "ExpressionAttributeNames": {"#u": "username"},
                           "ExpressionAttributeValues": {":u": s(username)}}},
               self._delete(_user_pk(username), "cred#" + access_key_id, PRESENT)]
        if any(self._in_transaction([(USERS, username)], ops)):
            raise NotFoundError(f"credentials not found: {access_key_id}")

    def authenticate(self, access_key_id: str, secret: str) -> User:
        item = self._get(CREDENTIALS, access_key_id) if _fits(access_key_id) else None
        if item is None:
            raise AuthenticationError("invalid credentials")
        user = self._entity(USERS, item["username"]["S"])
        if user is None:  # its user is being deleted
            raise AuthenticationError("invalid credentials")
        stored = self._credential(item).secret
        if not hmac.compare_digest(stored.encode(), secret.encode()):
            raise AuthenticationError("invalid credentials")
        return self._user(user)

    def reencrypt_secrets(self, old_key: str) -> int:
        """See :meth:`BaseAuthStore.reencrypt_secrets`; here key by key (each write is
        conditional on the secret it replaces), so running it again finishes a run cut
        short."""
        old = SecretBox(old_key)
        moved = 0
        for item in list(self._query(CREDENTIALS, "")):
            key_id, blob = item[SK]["S"], bytes(item["secret"]["B"])
            try:
                plain = old.decrypt(blob, key_id)
            except SecretDecryptionError:
                continue
            if self._write("update_item", Key=key(CREDENTIALS, key_id),
                           UpdateExpression="SET secret = :new",
                           ConditionExpression="secret = :old",
                           ExpressionAttributeValues={
                               ":new": {"B": self._box.encrypt(plain, key_id)},
                               ":old": {"B": blob}}) is not None:
                moved += 1
        return moved

    # --- revoked UI sessions -----------------------------------------------------------
    def revoke_session(self, session_id: str, expires_at: datetime) -> None:
        if not session_id or len(session_id) > 64:
            raise ValidationError("a session id is 1 to 64 characters")
        if not _fits(session_id):
            raise ValidationError("a session id is 1 to 64 characters of UTF-8")
        now = _now().timestamp()
        self._batch_delete([{PK: i[PK], SK: i[SK]} for i in self._query(SESSIONS, "")
                            if float(i["expires"]["N"]) < now])
        if expires_at.tzinfo is None:
            expires_at = expires_at.replace(tzinfo=UTC)
        self._write("put_item", Item={**key(SESSIONS, session_id),
                                      "expires": {"N": repr(expires_at.timestamp())}},
                    ConditionExpression=ABSENT)

    def session_revoked(self, session_id: str) -> bool:
        return _fits(session_id) and self._get(SESSIONS, session_id) is not None

    # --- groups ------------------------------------------------------------------------
    def create_group(self, name: str, *, description: str | None = None) -> Group:
        validate_entity_id("group", name)
        group = Group(name=name, description=description)
        self._create_entity(GROUPS, name, {"v": s(json.dumps({
            "description": description, "created": group.creation_date.isoformat()}))})
        return group

    def get_group(self, name: str) -> Group:
        return self._group(self._require(GROUPS, name))

    def list_groups(self, prefix: str = "", after: str = "", amount: int = 1000) -> list[Group]:
        return [self._group(i) for i in self._live_entities(GROUPS, prefix, after, amount)]

    def delete_group(self, name: str) -> None:
        def other(sk: str) -> tuple[str, str] | None:
            kind, _, linked = sk.partition("#")
            if kind == "member":
                return _user_pk(linked), "group#" + name
            if kind == "policy":
                return _policy_pk(linked), "group#" + name
            return None

        self._delete_entity(GROUPS, name, other)

    def add_user_to_group(self, username: str, group: str) -> None:
        self._link(_Side(USERS, username, "group#" + group),
                   _Side(GROUPS, group, "member#" + username))

    def remove_user_from_group(self, username: str, group: str) -> None:
        self._unlink(_Side(USERS, username, "group#" + group),
                     _Side(GROUPS, group, "member#" + username),
                     f"user {username} is not a member of group {group}")

    def list_group_members(self, group: str, after: str = "",
                           amount: int = 1000) -> list[User]:
        self._check_amount(amount)
        self._require(GROUPS, group)
        return self._linked(_group_pk(group), "member#", USERS, after, amount, self._user)

    def list_user_groups(self, username: str, after: str = "",
                         amount: int = 1000) -> list[Group]:
        self._check_amount(amount)
        self._require(USERS, username)
        return self._linked(_user_pk(username), "group#", GROUPS, after, amount, self._group)

    # --- policies ----------------------------------------------------------------------
    def create_policy(self, policy: Policy, *, system: bool = False) -> Policy:
        if not system:
            validate_entity_id("policy", policy.name)
        elif not _fits(policy.name):
            raise ValidationError(f"policy name too long: {policy.name!r}")
        self._create_entity(POLICIES, policy.name, {
            "created": s(policy.creation_date.isoformat()), "st": s(_statements(policy))})
        return policy

    def update_policy(self, policy: Policy) -> Policy:
        result = self._write(
            "update_item", Key=key(POLICIES, policy.name), UpdateExpression="SET st = :st",
            ConditionExpression=LIVE, ExpressionAttributeValues={":st": s(_statements(policy))},
            ReturnValues="ALL_NEW") if _fits(policy.name) else None
        if result is None:
            raise NotFoundError(f"policy not found: {policy.name}")
        return self._policy(result["Attributes"])

    def get_policy(self, name: str) -> Policy:
        return self._policy(self._require(POLICIES, name))

    def list_policies(self, prefix: str = "", after: str = "",
                      amount: int = 1000) -> list[Policy]:
        return [self._policy(i) for i in self._live_entities(POLICIES, prefix, after, amount)]

    def delete_policy(self, name: str) -> None:
        def other(sk: str) -> tuple[str, str] | None:
            kind, _, linked = sk.partition("#")
            if kind == "user":
                return _user_pk(linked), "policy#" + name
            if kind == "group":
                return _group_pk(linked), "policy#" + name
            return None

        self._delete_entity(POLICIES, name, other)

    def attach_policy_to_user(self, username: str, policy: str) -> None:
        self._link(_Side(USERS, username, "policy#" + policy),
                   _Side(POLICIES, policy, "user#" + username))

    def detach_policy_from_user(self, username: str, policy: str) -> None:
        self._unlink(_Side(USERS, username, "policy#" + policy),
                     _Side(POLICIES, policy, "user#" + username),
                     f"policy {policy} is not attached to user {username}")

    def attach_policy_to_group(self, group: str, policy: str) -> None:
        self._link(_Side(GROUPS, group, "policy#" + policy),
                   _Side(POLICIES, policy, "group#" + group))

    def detach_policy_from_group(self, group: str, policy: str) -> None:
        self._unlink(_Side(GROUPS, group, "policy#" + policy),
                     _Side(POLICIES, policy, "group#" + group),
                     f"policy {policy} is not attached to group {group}")

    # --- two-sided links (a membership, an attachment) ---------------------------------
    def _link(self, a: _Side, b: _Side) -> None:
        """Write a link on both of its ends, in one transaction that checks both exist."""
        self._in_transaction([(a.kind, a.name), (b.kind, b.name)], [
            self._put(key(a.partition, a.sort_key)), self._put(key(b.partition, b.sort_key))])

    def _unlink(self, a: _Side, b: _Side, missing: str) -> None:
        """Remove a link from both of its ends; NotFoundError(``missing``) if there was
        none."""
        failed = self._in_transaction([(a.kind, a.name), (b.kind, b.name)], [
            self._delete(a.partition, a.sort_key, PRESENT),
            self._delete(b.partition, b.sort_key)])
        if failed[0]:
            raise NotFoundError(missing)

    def list_user_policies(self, username: str) -> list[Policy]:
        self._require(USERS, username)
        return self._linked(_user_pk(username), "policy#", POLICIES, "", None, self._policy)

    def list_group_policies(self, group: str) -> list[Policy]:
        self._require(GROUPS, group)
        return self._linked(_group_pk(group), "policy#", POLICIES, "", None, self._policy)

    def effective_policies(self, username: str) -> list[Policy]:
        """See :meth:`BaseAuthStore.effective_policies`: one Query of the user's links, a
        batch read of the user and its groups (a group being deleted counts no more),
        one Query of each group's policies and a batch read of the policies."""
        if not _fits(username):
            raise NotFoundError(f"user not found: {username}")
        names: set[str] = set()
        groups: list[str] = []
        for item in self._query(_user_pk(username), ""):
            kind, _, name = item[SK]["S"].partition("#")
            if kind == "policy":
                names.add(name)
            elif kind == "group":
                groups.append(name)
        entities = [(USERS, username), *((GROUPS, g) for g in groups)]
        live: set[tuple[str, str]] = set()
        for start in range(0, len(entities), BATCH_GET_LIMIT):
            live.update((i[PK]["S"], i[SK]["S"]) for i in self._batch_get(
                [key(*e) for e in entities[start:start + BATCH_GET_LIMIT]])
                if "deleting" not in i)
        if (USERS, username) not in live:
            raise NotFoundError(f"user not found: {username}")
        for group in groups:
            if (GROUPS, group) in live:
                names.update(self._name(i, "policy#")
                             for i in self._query(_group_pk(group), "policy#"))
        ordered = sorted(names)
        found: dict[str, Policy] = {}
        for start in range(0, len(ordered), BATCH_GET_LIMIT):
            for item in self._batch_get([key(POLICIES, n)
                                         for n in ordered[start:start + BATCH_GET_LIMIT]]):
                if "deleting" not in item:
                    found[item[SK]["S"]] = self._policy(item)
        return [found[n] for n in ordered if n in found]

    # --- setup -------------------------------------------------------------------------
    def _meta(self, name: str) -> str | None:
        item = self._get(META, name)
        return None if item is None else str(item["v"]["S"])

    def _put_meta_once(self, name: str, value: str) -> None:
        self._write("put_item", Item={**key(META, name), "v": s(value)},
                    ConditionExpression=ABSENT)

    def is_initialized(self) -> bool:
        return self._meta(_SETUP_TIMESTAMP) is not None

    def ensure_builtins(self) -> None:
        now = _now().isoformat()
        for policy in builtin.builtin_policies():
            if self._write("put_item", Item={**key(POLICIES, policy.name), "created": s(now),
                                              "st": s(_statements(policy))},
                           ConditionExpression=ABSENT) is not None:
                continue
            earlier = [[st.to_dict() for st in version]
                       for version in builtin.SUPERSEDED.get(policy.name, ())]
            stored = self._entity(POLICIES, policy.name) if earlier else None
            if stored is not None and json.loads(stored["st"]["S"]) in earlier:
                self._write("update_item", Key=key(POLICIES, policy.name),
                            UpdateExpression="SET st = :st",
                            ConditionExpression=f"{LIVE} AND st = :old",
                            ExpressionAttributeValues={":st": s(_statements(policy)),
                                                       ":old": stored["st"]})
        for group, attached in builtin.BUILTIN_GROUPS.items():
            self._write("put_item", Item={**key(GROUPS, group), "v": s(json.dumps(
                {"description": None, "created": now}))}, ConditionExpression=ABSENT)
            for policy_name in attached:
                self.attach_policy_to_group(group, policy_name)

    def installation_id(self) -> str:
        self._put_meta_once(_INSTALLATION_ID, str(uuid.uuid4()))
        value = self._meta(_INSTALLATION_ID)
        assert value is not None  # written just before, never deleted
        return value

    def set_comm_prefs(self, prefs: CommPrefs) -> None:
        value = json.dumps({"email": prefs.email, "feature_updates": prefs.feature_updates})
        self._call("put_item", TableName=self._table,
                   Item={**key(META, _COMM_PREFS), "v": s(value)})
        self._count_change()

    def get_comm_prefs(self) -> CommPrefs | None:
        value = self._meta(_COMM_PREFS)
        if value is None:
            return None
        data = json.loads(value)
        return CommPrefs(email=data.get("email"),
                         feature_updates=bool(data.get("feature_updates")))

    def setup_admin(self, username: str, access_key_id: str | None = None,
                    secret: str | None = None) -> Credential:
        """See :meth:`BaseAuthStore.setup_admin`. The admin, its key and its membership
        are one transaction conditional on the user not existing: of processes setting
        up at once one creates them, the others find the user and return its key."""
        validate_entity_id("user", username)
        if access_key_id is not None:
            validate_access_key_id(access_key_id)
        if secret is not None:
            validate_secret(secret)
        for _attempt in range(5):
            if self._entity(USERS, username) is not None:
                cred = self._existing_admin_key(username, access_key_id, secret)
                self.ensure_builtins()
                self.add_user_to_group(username, builtin.ADMINS)
                break
            self.ensure_builtins()
            cred = Credential(access_key_id=access_key_id or generate_access_key_id(),
                              secret=secret or generate_secret(), user=username)
            user_put = self._put(self._user_item(User(username=username)), ABSENT)
            failed = self._counted_transact([
                user_put, self._check(GROUPS, builtin.ADMINS), *self._credential_ops(cred),
                self._put(key(_user_pk(username), "group#" + builtin.ADMINS)),
                self._put(key(_group_pk(builtin.ADMINS), "member#" + username))])
            if failed is None:
                break
            if not (failed[0] or failed[1]) and failed[2]:
                raise AlreadyExistsError(f"access key id already exists: {cred.access_key_id}")
            # the user appeared (or Admins went) meanwhile: look again
        else:
            raise DatabaseError(f"{self._where}: setup of {username!r} kept meeting "
                                "concurrent changes (is the user being deleted?)")
        self._put_meta_once(_SETUP_TIMESTAMP, _now().isoformat())
        return cred

    def _existing_admin_key(self, username: str, access_key_id: str | None,
                            secret: str | None) -> Credential:
        if access_key_id is None:
            raise AlreadyExistsError(
                f"user {username} already exists; setup creates no new access key for it")
        item = self._get(CREDENTIALS, access_key_id)
        if item is None or item["username"]["S"] != username:
            raise AlreadyExistsError(
                f"user {username} already exists without access key {access_key_id}")
        cred = self._credential(item)
        if secret is not None and not hmac.compare_digest(cred.secret.encode(), secret.encode()):
            raise AlreadyExistsError(
                f"access key {access_key_id} of user {username} has a different secret")
        return cred
