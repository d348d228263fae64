"""The auth store's contract: users, access keys, groups, policies and setup state.

Two implementations keep it: :class:`lakefs_core.auth.store.AuthStore` on SQL (SQLite,
PostgreSQL) and :class:`lakefs_core.auth.dynamodb_store.DynamoDBAuthStore` on the
refstore's DynamoDB table. Everything else (:class:`~lakefs_core.auth.service.AuthService`,
the API routes, the UI, the command line) types against :class:`BaseAuthStore`; open the
store of a ``database`` settings block with :func:`lakefs_core.auth.backends.open_auth_store`.

Both behave alike, which the auth test suite checks on every backend:

- names sort and page bytewise (``prefix``, ``after``, ``amount``);
- deleting a user, group or policy also deletes its access keys, memberships and
  attachments; adding a member or attaching a policy that is there is a no-op;
  removing or detaching one that is not there raises :class:`NotFoundError`;
- secret access keys are stored encrypted with ``auth.encrypt.secret_key``
  (:mod:`lakefs_core.auth.crypto`);
- :meth:`setup_admin` is safe to run from several processes at once;
- :meth:`changes` grows with every write, so that every process sees at once that
  what it cached of the store is out of date.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from datetime import datetime

from lakefs_core.auth.model import CommPrefs, Credential, CredentialSummary, Group, Policy, User


class BaseAuthStore(ABC):
    """Users, access keys, groups and policies (see the module docstring)."""

    # --- lifecycle ---------------------------------------------------------------------
    @abstractmethod
    def close(self) -> None:
        """Release the store's connections."""

    def __enter__(self) -> BaseAuthStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- users -------------------------------------------------------------------------
    @abstractmethod
    def create_user(self, username: str, *, email: str | None = None,
                    friendly_name: str | None = None) -> User:
        """Raises ValidationError (invalid name), AlreadyExistsError."""

    @abstractmethod
    def get_user(self, username: str) -> User:
        """Raises NotFoundError."""

    @abstractmethod
    def list_users(self, prefix: str = "", after: str = "", amount: int = 1000) -> list[User]:
        """Users whose name starts with ``prefix`` and sorts after ``after``, by name."""

    @abstractmethod
    def delete_user(self, username: str) -> None:
        """Delete a user with its access keys, memberships and policy attachments.
        Raises NotFoundError."""

    # --- credentials -------------------------------------------------------------------
    @abstractmethod
    def create_credentials(self, username: str, access_key_id: str | None = None,
                           secret: str | None = None) -> Credential:
        """Add an access key to a user; generate the id and/or secret when not given.
        Raises ValidationError, NotFoundError (no such user), AlreadyExistsError."""

    @abstractmethod
    def get_credentials(self, access_key_id: str) -> Credential:
        """An access key with its decrypted secret. Raises NotFoundError,
        SecretDecryptionError (another ``secret_key`` stored it)."""

    @abstractmethod
    def list_credentials(self, username: str, after: str = "",
                         amount: int = 1000) -> list[CredentialSummary]:
        """A user's access keys (no secrets), by id. Raises NotFoundError."""

    @abstractmethod
    def delete_credentials(self, username: str, access_key_id: str) -> None:
        """Delete one of a user's access keys. Raises NotFoundError (no such user, or
        the key is not the user's)."""

    @abstractmethod
    def authenticate(self, access_key_id: str, secret: str) -> User:
        """The user owning ``access_key_id`` if ``secret`` is its secret.
        Raises AuthenticationError "invalid credentials" (unknown key or wrong secret)."""

    @abstractmethod
    def reencrypt_secrets(self, old_key: str) -> int:
        """Re-encrypt with this store's key every secret that ``old_key`` encrypted
        (others are left as they are); how many were."""

    # --- revoked UI sessions -----------------------------------------------------------
    @abstractmethod
    def revoke_session(self, session_id: str, expires_at: datetime) -> None:
        """Record a signed-out UI session until it would have expired (dropping those
        expired by now). Raises ValidationError (not 1 to 64 characters)."""

    @abstractmethod
    def session_revoked(self, session_id: str) -> bool:
        """Whether the UI session ``session_id`` was signed out."""

    # --- groups ------------------------------------------------------------------------
    @abstractmethod
    def create_group(self, name: str, *, description: str | None = None) -> Group:
        """Raises ValidationError (invalid name), AlreadyExistsError."""

    @abstractmethod
    def get_group(self, name: str) -> Group:
        """Raises NotFoundError."""

    @abstractmethod
    def list_groups(self, prefix: str = "", after: str = "", amount: int = 1000) -> list[Group]:
        """Groups whose name starts with ``prefix`` and sorts after ``after``, by name."""

    @abstractmethod
    def delete_group(self, name: str) -> None:
        """Delete a group with its memberships and attachments. Raises NotFoundError."""

    @abstractmethod
    def add_user_to_group(self, username: str, group: str) -> None:
        """No-op when already a member. Raises NotFoundError (no such user or group)."""

    @abstractmethod
    def remove_user_from_group(self, username: str, group: str) -> None:
        """Raises NotFoundError (no such user or group, or not a member)."""

    @abstractmethod
    def list_group_members(self, group: str, after: str = "",
                           amount: int = 1000) -> list[User]:
        """The group's members, by username. Raises NotFoundError."""

    @abstractmethod
    def list_user_groups(self, username: str, after: str = "",
                         amount: int = 1000) -> list[Group]:
        """The user's groups, by name. Raises NotFoundError."""

    # --- policies ----------------------------------------------------------------------
    @abstractmethod
    def create_policy(self, policy: Policy, *, system: bool = False) -> Policy:
        """Store a new policy; ``system``: a name the server makes (``ACL(_-_)...``),
        exempt from the id rules. Raises ValidationError, AlreadyExistsError."""

    @abstractmethod
    def update_policy(self, policy: Policy) -> Policy:
        """Replace an existing policy's statements (its creation date is kept); the
        stored policy. Raises NotFoundError."""

    @abstractmethod
    def get_policy(self, name: str) -> Policy:
        """Raises NotFoundError."""

    @abstractmethod
    def list_policies(self, prefix: str = "", after: str = "",
                      amount: int = 1000) -> list[Policy]:
        """Policies whose name starts with ``prefix`` and sorts after ``after``, by name."""

    @abstractmethod
    def delete_policy(self, name: str) -> None:
        """Delete a policy and detach it everywhere. Raises NotFoundError."""

    @abstractmethod
    def attach_policy_to_user(self, username: str, policy: str) -> None:
        """No-op when attached. Raises NotFoundError (no such user or policy)."""

    @abstractmethod
    def detach_policy_from_user(self, username: str, policy: str) -> None:
        """Raises NotFoundError (no such user or policy, or not attached)."""

    @abstractmethod
    def attach_policy_to_group(self, group: str, policy: str) -> None:
        """No-op when attached. Raises NotFoundError (no such group or policy)."""

    @abstractmethod
    def detach_policy_from_group(self, group: str, policy: str) -> None:
        """Raises NotFoundError (no such group or policy, or not attached)."""

    @abstractmethod
    def list_user_policies(self, username: str) -> list[Policy]:
        """Policies attached directly to a user, by name. Raises NotFoundError."""

    @abstractmethod
    def list_group_policies(self, group: str) -> list[Policy]:
        """Policies attached to a group, by name. Raises NotFoundError."""

    @abstractmethod
    def effective_policies(self, username: str) -> list[Policy]:
        """Every policy of a user, attached directly or through a group, once each, by
        name. Raises NotFoundError."""

    # --- changes -----------------------------------------------------------------------
    @abstractmethod
    def changes(self) -> int:
        """How many times the store was written: one indexed read.

        Every write of users, access keys, groups, policies, their links and the setup
        state counts once it is visible, so an answer read from the store stays
        current while this number stays what it was before the answer was read
        (:class:`~lakefs_core.auth.service.AuthService` caches on that).
        """

    # --- setup -------------------------------------------------------------------------
    @abstractmethod
    def is_initialized(self) -> bool:
        """Whether :meth:`setup_admin` has completed once."""

    @abstractmethod
    def ensure_builtins(self) -> None:
        """Create the missing built-in policies and groups (and their attachments); a
        built-in policy still as an earlier version defined it is brought up to date."""

    @abstractmethod
    def installation_id(self) -> str:
        """This installation's id: a UUID made at the first call, the same ever after."""

    @abstractmethod
    def set_comm_prefs(self, prefs: CommPrefs) -> None:
        """Record the communication preferences (replacing earlier ones)."""

    @abstractmethod
    def get_comm_prefs(self) -> CommPrefs | None:
        """The recorded communication preferences; None until some are set."""

    @abstractmethod
    def setup_admin(self, username: str, access_key_id: str | None = None,
                    secret: str | None = None) -> Credential:
        """Initialize the installation with an admin user; safe to call again and from
        several processes at once.

        Creates the missing built-ins, then: a new ``username`` is created in
        ``Admins`` with one access key (the given one, or generated), returned; an
        existing one is made a member of ``Admins`` and gets no key: when
        ``access_key_id`` is its key and ``secret`` is omitted or that key's secret, the
        key is returned, else AlreadyExistsError is raised. Finally the installation is
        marked initialized.

        Raises:
            ValidationError: invalid username, access key id or secret.
            AlreadyExistsError: see above; also when ``access_key_id`` is another user's.
        """
