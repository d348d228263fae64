"""The names of the engine's hook points: lakeFS's event types, as action files name
them under ``on:``. A leaf module, so that a client (lakectl's ``actions validate``)
may read action files without the engine."""

from __future__ import annotations

from enum import StrEnum


class EventType(StrEnum):
    """lakeFS's event types, as action files name them under ``on:``."""

    PREPARE_COMMIT = "prepare-commit"
    PRE_COMMIT = "pre-commit"
    POST_COMMIT = "post-commit"
    PRE_MERGE = "pre-merge"
    POST_MERGE = "post-merge"
    PRE_CREATE_BRANCH = "pre-create-branch"
    POST_CREATE_BRANCH = "post-create-branch"
    PRE_DELETE_BRANCH = "pre-delete-branch"
    POST_DELETE_BRANCH = "post-delete-branch"
    PRE_CREATE_TAG = "pre-create-tag"
    POST_CREATE_TAG = "post-create-tag"
    PRE_DELETE_TAG = "pre-delete-tag"
    POST_DELETE_TAG = "post-delete-tag"
    PRE_REVERT = "pre-revert"
    POST_REVERT = "post-revert"
    PRE_CHERRY_PICK = "pre-cherry-pick"
    POST_CHERRY_PICK = "post-cherry-pick"

    @property
    def is_pre(self) -> bool:
        """A ``pre-*`` or ``prepare-*`` event: its hooks may refuse the operation."""
        return self.value.startswith(("pre-", "prepare-"))
