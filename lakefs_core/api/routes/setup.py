"""Installation routes: health check, first-admin setup and communication preferences,
server config, current user."""

from __future__ import annotations

import re

from fastapi import APIRouter, Depends, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from lakefs_core.api.security import Ctx, authenticated, services_of
from lakefs_core.auth.model import CommPrefs
from lakefs_core.block.registry import StoreInfo
from lakefs_core.errors import AlreadyExistsError, ValidationError
from lakefs_core.services import Services

router = APIRouter()

#: the lakeFS API version this server speaks (clients such as lakefs-spec compare it)
LAKEFS_COMPATIBLE_VERSION = "1.50.0"

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+\Z")

# blockstore type -> (namespace example, namespace validity regex)
_NAMESPACE_HINTS: dict[str, tuple[str, str]] = {
    "local": ("local://example-bucket/", "^local://"),
    "s3": ("s3://example-bucket/", "^s3://"),
    "azure": ("https://mystorageaccount.blob.core.windows.net/mycontainer/", "^https?://"),
    "gs": ("gs://example-bucket/", "^gs://"),
}


# --- models ------------------------------------------------------------------------
class AccessKey(BaseModel):
    access_key_id: str = Field(min_length=1)
    secret_access_key: str = Field(min_length=1)


class SetupRequest(BaseModel):
    """lakeFS's Setup body; the optional profile fields are accepted and ignored."""

    model_config = ConfigDict(extra="ignore")

    username: str = Field(description="name of the first admin user")
    key: AccessKey | None = Field(default=None, description="use this access key")


class SetupState(BaseModel):
    state: str
    comm_prefs_missing: bool = Field(default=False,
                                     description="no communication preferences set yet")


class CommPrefsInput(BaseModel):
    """lakeFS's CommPrefsInput; only the email and feature-updates choice are kept."""

    model_config = ConfigDict(populate_by_name=True)

    first_name: str | None = Field(default=None, alias="firstName")
    last_name: str | None = Field(default=None, alias="lastName")
    email: str | None = None
    company_name: str | None = Field(default=None, alias="companyName")
    country: str | None = None
    feature_updates: bool = Field(alias="featureUpdates")
    security_updates: bool = Field(alias="securityUpdates", description="no longer used")


class CredentialsWithSecret(BaseModel):
    access_key_id: str
    secret_access_key: str
    creation_date: int


class VersionConfig(BaseModel):
    version: str
    version_context: str
    upgrade_recommended: bool = False


class StorageConfig(BaseModel):
    """lakeFS's StorageConfig (one per configured blockstore)."""

    blockstore_type: str
    blockstore_namespace_example: str
    blockstore_namespace_validity_regex: str = Field(
        serialization_alias="blockstore_namespace_ValidityRegex")
    default_namespace_prefix: str | None = None
    pre_sign_support: bool = False
    pre_sign_support_ui: bool = False
    import_support: bool = False
    import_validity_regex: str
    pre_sign_multipart_upload: bool = False
    blockstore_id: str = ""
    blockstore_description: str = ""


class Config(BaseModel):
    version_config: VersionConfig
    storage_config: StorageConfig | None
    storage_config_list: list[StorageConfig]


class UserModel(BaseModel):
    id: str
    creation_date: int
    friendly_name: str | None = None
    email: str | None = None


class CurrentUser(BaseModel):
    user: UserModel


# --- helpers -----------------------------------------------------------------------
def _storage_config(services: Services, info: StoreInfo) -> StorageConfig:
    example, regex = _NAMESPACE_HINTS.get(info.type, (f"{info.type}://example/", f"^{info.type}://"))
    store = services.blockstores.store(info.id)
    presign = store.presign_support()
    return StorageConfig(
        blockstore_type=info.type,
        blockstore_namespace_example=example,
        blockstore_namespace_validity_regex=regex,
        default_namespace_prefix=services.config.storage_config.default_namespace_prefix,
        pre_sign_support=presign.pre_sign_support,
        pre_sign_support_ui=presign.pre_sign_support_ui,
        pre_sign_multipart_upload=presign.pre_sign_multipart_upload,
        import_support=store.import_enabled,
        import_validity_regex=regex,
        blockstore_id=info.id,
        blockstore_description=info.description,
    )


def storage_configs(services: Services) -> tuple[StorageConfig | None, list[StorageConfig]]:
    """The default store's config (None if there is none) and every store's config."""
    configs = [_storage_config(services, info) for info in services.blockstores.describe()]
    default = next((c for c, info in zip(configs, services.blockstores.describe(), strict=True)
                    if not services.blockstores.multi or info.backward_compatible), None)
    return default or (configs[0] if configs else None), configs


def _version() -> VersionConfig:
    return VersionConfig(version=LAKEFS_COMPATIBLE_VERSION,
                         version_context="lakefs-core (lakeFS-compatible)")


# --- routes ------------------------------------------------------------------------
@router.get("/healthcheck", status_code=204, response_class=Response, tags=["healthCheck"])
def health_check() -> Response:
    """Liveness probe; needs no credentials."""
    return Response(status_code=204)


@router.get("/setup_lakefs", response_model=SetupState, tags=["internal"])
def get_setup_state(request: Request) -> SetupState:
    """Whether the first admin has been created (and communication preferences set)."""
    auth = services_of(request).auth
    return SetupState(state="initialized" if auth.is_initialized() else "not_initialized",
                      comm_prefs_missing=auth.get_comm_prefs() is None)


@router.post("/setup_comm_prefs", status_code=200, response_class=Response,
             tags=["internal"])
def setup_comm_prefs(body: CommPrefsInput, request: Request) -> Response:
    """Record the communication preferences asked at setup.

    lakeFS's clients send no credentials here: anyone may answer while the installation
    is not set up or has no preferences yet; changing them later needs an authenticated
    user. An email that is given must look like one (400).
    """
    auth = services_of(request).auth
    if auth.is_initialized() and auth.get_comm_prefs() is not None:
        authenticated(request)
    email = (body.email or "").strip() or None
    if email is not None and not _EMAIL.match(email):
        raise ValidationError(f"invalid email address {email!r}")
    auth.set_comm_prefs(CommPrefs(email=email, feature_updates=body.feature_updates))
    return Response(status_code=200)


@router.post("/setup_lakefs", response_model=CredentialsWithSecret, tags=["internal"])
def setup(body: SetupRequest, request: Request) -> CredentialsWithSecret:
    """Create the first admin user and its access key, once per installation."""
    auth = services_of(request).auth
    if auth.is_initialized():
        raise AlreadyExistsError("lakeFS already initialized")
    key = body.key
    cred = auth.setup_admin(body.username, key.access_key_id if key else None,
                            key.secret_access_key if key else None)
    return CredentialsWithSecret(access_key_id=cred.access_key_id,
                                 secret_access_key=cred.secret,
                                 creation_date=int(cred.creation_date.timestamp()))


@router.get("/config", response_model=Config, tags=["config"])
def get_config(ctx: Ctx = Depends(authenticated)) -> Config:
    """Version and storage configuration (every configured blockstore)."""
    default, configs = storage_configs(ctx.services)
    return Config(version_config=_version(), storage_config=default, storage_config_list=configs)


@router.get("/config/storage", response_model=StorageConfig, tags=["internal"])
def get_storage_config(ctx: Ctx = Depends(authenticated)) -> StorageConfig:
    """The default blockstore's configuration."""
    default, configs = storage_configs(ctx.services)
    return default or configs[0]


@router.get("/config/version", response_model=VersionConfig, tags=["internal"])
def get_version(ctx: Ctx = Depends(authenticated)) -> VersionConfig:
    """The lakeFS version this server is compatible with."""
    return _version()


@router.get("/user", response_model=CurrentUser, tags=["auth"])
def get_current_user(ctx: Ctx = Depends(authenticated)) -> CurrentUser:
    """The authenticated user."""
    user = ctx.user
    return CurrentUser(user=UserModel(id=user.username,
                                      creation_date=int(user.creation_date.timestamp()),
                                      friendly_name=user.friendly_name, email=user.email))
