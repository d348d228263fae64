"""Repository routes: create (optionally with sample data), get, list, delete, metadata,
and branch protection settings."""

from __future__ import annotations

import hashlib
import io
import json
import random
from typing import Annotated

import pyarrow as pa
import pyarrow.parquet as pq
from fastapi import APIRouter, Body, Depends, Header, HTTPException, Query, Response
from pydantic import BaseModel, Field

from lakefs_core.api.routes import (
    AfterQuery,
    AmountQuery,
    Pagination,
    PrefixQuery,
    filtered_page,
    page_size,
    pagination,
)
from lakefs_core.api.security import Ctx, authenticated, namespace_arn, repo_arn
from lakefs_core.auth import rbac
from lakefs_core.errors import (
    ReadOnlyRepositoryError,
    StorageNotFoundError,
    ValidationError,
)
from lakefs_core.graveler.model import Repository
from lakefs_core.graveler.refs import validate_repository_id
from lakefs_core.services import Services

router = APIRouter()

SAMPLE_DATA_COMMIT_MESSAGE = "Add sample data"


# --- models ------------------------------------------------------------------------
class RepositoryModel(BaseModel):
    """lakeFS's Repository."""

    id: str
    creation_date: int = Field(description="Unix epoch in seconds")
    default_branch: str
    storage_namespace: str
    storage_id: str = ""
    read_only: bool = False


class RepositoryList(BaseModel):
    pagination: Pagination
    results: list[RepositoryModel]


class RepositoryCreation(BaseModel):
    """lakeFS's RepositoryCreation. ``storage_namespace`` may be left out when the
    server has a ``storage_config.default_namespace_prefix``."""

    name: str = Field(description="repository id: 3-63 of [a-z0-9-]")
    storage_namespace: str | None = Field(
        default=None, description="where the data lives, e.g. local://name or s3://bucket/path")
    default_branch: str | None = None
    sample_data: bool | None = False
    read_only: bool | None = False
    storage_id: str | None = Field(default=None, description="blockstore id (multi-store)")


class RepositoryMetadataSet(BaseModel):
    metadata: dict[str, str]


class RepositoryMetadataKeys(BaseModel):
    keys: list[str]


class BranchProtectionRule(BaseModel):
    pattern: str = Field(min_length=1, description="fnmatch pattern of branch names")


class DeleteBranchProtectionRule(BaseModel):
    pattern: str


def repository_model(repo: Repository) -> RepositoryModel:
    return RepositoryModel(id=repo.id, creation_date=repo.creation_date,
                           default_branch=repo.default_branch,
                           storage_namespace=repo.storage_namespace,
                           storage_id=repo.storage_id, read_only=repo.read_only)


# --- sample data ---------------------------------------------------------------------
_COUNTRIES = ("Canada", "Finland", "Sweden", "Norway", "Russia", "United States", "Chile",
              "Argentina", "Kenya", "Tanzania", "Uganda", "China", "Mongolia", "Kazakhstan",
              "Italy", "Switzerland", "Austria", "Germany", "New Zealand", "Peru", "Bolivia",
              "Iceland", "Scotland", "Ireland")
_SYLLABLES = ("ka", "lo", "mi", "ran", "su", "tek", "va", "ne", "ori", "pal", "que", "sil",
              "tor", "ul", "wen", "yar", "zel", "bri", "cor", "dun", "el", "fjor", "gal", "hin")

SAMPLE_README = """# Sample repository

This repository was created with sample data so that there is something to explore:

- `lakes.parquet`: a generated table of {rows} fictional lakes with the columns
  `name`, `country`, `area_km2`, `max_depth_m` and `elevation_m`.

Try it out:

- create a branch from `{branch}`, change or delete `lakes.parquet` on it, commit,
  and compare the two branches with a diff;
- merge the branch back into `{branch}`, or revert the commit;
- read the table at any commit id, for example with DuckDB or pandas.
"""


def sample_lakes(rows: int = 300, seed: int = 7) -> pa.Table:
    """A deterministic table of generated lakes (name, country, area, depth, elevation)."""
    rng = random.Random(seed)
    names: list[str] = []
    seen: set[str] = set()
    while len(names) < rows:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        name = f"Lake {word}"
        if name not in seen:
            seen.add(name)
            names.append(name)
    return pa.table({
        "name": pa.array(names, pa.string()),
        "country": pa.array([rng.choice(_COUNTRIES) for _ in range(rows)], pa.string()),
        "area_km2": pa.array([round(rng.lognormvariate(3.5, 1.6), 2) for _ in range(rows)],
                             pa.float64()),
        "max_depth_m": pa.array([rng.randint(3, 900) for _ in range(rows)], pa.int32()),
        "elevation_m": pa.array([rng.randint(-30, 4200) for _ in range(rows)], pa.int32()),
    })


def _write_sample_data(services: Services, repo: Repository, committer: str) -> None:
    table = sample_lakes()
    buf = io.BytesIO()
    pq.write_table(table, buf)
    readme = SAMPLE_README.format(rows=table.num_rows, branch=repo.default_branch)
    catalog = services.catalog
    catalog.upload(repo.id, repo.default_branch, "README.md", readme.encode(),
                   content_type="text/markdown")
    catalog.upload(repo.id, repo.default_branch, "lakes.parquet", buf.getvalue())
    services.graveler.commit(repo.id, repo.default_branch, SAMPLE_DATA_COMMIT_MESSAGE, committer,
                             metadata={"sample_data": "true"})


# --- repositories ------------------------------------------------------------------------
def _namespace_for(services: Services, body: RepositoryCreation) -> str:
    if body.storage_namespace:
        return body.storage_namespace
    prefix = services.config.storage_config.default_namespace_prefix
    if not prefix:
        raise ValidationError("storage_namespace is required")
    if not prefix.endswith(("/", "://")):
        prefix += "/"
    return prefix + body.name


@router.post("/repositories", status_code=201, response_model=RepositoryModel,
             tags=["repositories"])
def create_repository(
    body: RepositoryCreation,
    bare: Annotated[bool, Query(description="create without the initial commit")] = False,
    ctx: Ctx = Depends(authenticated),
) -> RepositoryModel:
    """Create a repository (201). With ``sample_data`` its first commit after
    "Repository created" holds a README and a Parquet table."""
    services = ctx.services
    namespace = _namespace_for(services, body)
    ctx.check_requirement(rbac.all_of(
        rbac.Permission(rbac.CREATE_REPOSITORY, repo_arn(body.name)),
        rbac.Permission(rbac.ATTACH_STORAGE_NAMESPACE, namespace_arn(namespace)),
    ))
    validate_repository_id(body.name)
    if bare and body.sample_data:
        raise ValidationError("a bare repository cannot have sample data")
    storage_id = body.storage_id or ""
    try:
        services.blockstores.for_storage_id(storage_id)
    except StorageNotFoundError as e:
        raise ValidationError(str(e)) from None
    graveler = services.graveler
    repo = graveler.create_repository(
        body.name, namespace, body.default_branch or "main", storage_id=storage_id,
        read_only=bool(body.read_only) and not body.sample_data, initial_commit=not bare)
    if body.sample_data:
        try:
            _write_sample_data(services, repo, ctx.user.username)
            if body.read_only:
                repo = graveler.set_read_only(repo.id, True)
        except BaseException:
            graveler.delete_repository(repo.id)
            raise
    return repository_model(repo)


@router.get("/repositories", response_model=RepositoryList, tags=["repositories"])
def list_repositories(
    prefix: PrefixQuery = "",
    after: AfterQuery = "",
    amount: AmountQuery = 100,
    search: Annotated[str, Query(description="only ids containing this string")] = "",
    ctx: Ctx = Depends(authenticated),
) -> RepositoryList:
    """A page of repositories, sorted by id."""
    ctx.check(rbac.LIST_REPOSITORIES, rbac.ALL)
    n = page_size(amount)
    graveler = ctx.services.graveler
    repos, has_more = filtered_page(
        lambda cursor, k: graveler.list_repositories(prefix=prefix, after=cursor, amount=k),
        key=lambda r: r.id, keep=lambda r: search in r.id, after=after, amount=n,
        batch=1000 if search else n + 1)
    return RepositoryList(
        pagination=pagination(len(repos), has_more, repos[-1].id if repos else "", n),
        results=[repository_model(r) for r in repos])


@router.get("/repositories/{repository}", response_model=RepositoryModel,
            tags=["repositories"])
def get_repository(repository: str, ctx: Ctx = Depends(authenticated)) -> RepositoryModel:
    ctx.check(rbac.READ_REPOSITORY, repo_arn(repository))
    return repository_model(ctx.services.graveler.get_repository(repository))


@router.delete("/repositories/{repository}", status_code=204, response_class=Response,
               tags=["repositories"])
def delete_repository(
    repository: str,
    force: Annotated[bool, Query(description="also delete a read-only repository")] = False,
    ctx: Ctx = Depends(authenticated),
) -> Response:
    """Delete a repository's records (its data stays in the storage namespace)."""
    ctx.check(rbac.DELETE_REPOSITORY, repo_arn(repository))
    graveler = ctx.services.graveler
    if graveler.get_repository(repository).read_only and not force:
        raise ReadOnlyRepositoryError(
            f"repository {repository!r} is read-only: delete it with force=true")
    graveler.delete_repository(repository)
    return Response(status_code=204)


# --- metadata ----------------------------------------------------------------------
@router.get("/repositories/{repository}/metadata", response_model=dict[str, str],
            tags=["repositories"])
def get_repository_metadata(repository: str,
                            ctx: Ctx = Depends(authenticated)) -> dict[str, str]:
    ctx.check(rbac.READ_REPOSITORY, repo_arn(repository))
    return ctx.services.refstore.get_repository_metadata(repository)


@router.post("/repositories/{repository}/metadata", status_code=204, response_class=Response,
             tags=["internal"])
def set_repository_metadata(repository: str, body: RepositoryMetadataSet,
                            ctx: Ctx = Depends(authenticated)) -> Response:
    """Merge keys into the repository's metadata."""
    ctx.check(rbac.UPDATE_REPOSITORY, repo_arn(repository))
    if any(not k for k in body.metadata):
        raise ValidationError("metadata keys must not be empty")
    ctx.services.refstore.set_repository_metadata(repository, body.metadata)
    return Response(status_code=204)


@router.delete("/repositories/{repository}/metadata", status_code=204, response_class=Response,
               tags=["internal"])
def delete_repository_metadata(repository: str, body: RepositoryMetadataKeys,
                               ctx: Ctx = Depends(authenticated)) -> Response:
    """Remove keys from the repository's metadata (missing keys are ignored)."""
    ctx.check(rbac.UPDATE_REPOSITORY, repo_arn(repository))
    ctx.services.refstore.delete_repository_metadata(repository, body.keys)
    return Response(status_code=204)


# --- branch protection -----------------------------------------------------------------
def _rules_etag(patterns: list[str]) -> str:
    return '"' + hashlib.sha256(json.dumps(patterns).encode()).hexdigest() + '"'


def _protection_rules(ctx: Ctx, repository: str, action: str) -> list[str]:
    ctx.check(action, repo_arn(repository))
    return ctx.services.graveler.get_branch_protection_rules(repository)


@router.get("/repositories/{repository}/settings/branch_protection",
            response_model=list[BranchProtectionRule], tags=["repositories"])
def get_branch_protection_rules(repository: str, response: Response,
                                ctx: Ctx = Depends(authenticated)) -> list[BranchProtectionRule]:
    """The repository's protected-branch patterns, with an ETag for a conditional PUT."""
    patterns = _protection_rules(ctx, repository, rbac.GET_BRANCH_PROTECTION_RULES)
    response.headers["ETag"] = _rules_etag(patterns)
    return [BranchProtectionRule(pattern=p) for p in patterns]


@router.put("/repositories/{repository}/settings/branch_protection", status_code=204,
            response_class=Response, tags=["repositories"])
def set_branch_protection_rules(
    repository: str,
    rules: Annotated[list[BranchProtectionRule], Body()],
    if_match: Annotated[str | None, Header(description="ETag of the rules being replaced")] = None,
    ctx: Ctx = Depends(authenticated),
) -> Response:
    """Replace the repository's protected-branch patterns."""
    current = _protection_rules(ctx, repository, rbac.SET_BRANCH_PROTECTION_RULES)
    if if_match is not None and if_match != _rules_etag(current):
        raise HTTPException(412, "branch protection rules changed (ETag mismatch)")
    ctx.services.graveler.set_branch_protection_rules(repository, [r.pattern for r in rules])
    return Response(status_code=204)


@router.get("/repositories/{repository}/branch_protection",
            response_model=list[BranchProtectionRule], tags=["internal"])
def internal_get_branch_protection_rules(
        repository: str, ctx: Ctx = Depends(authenticated)) -> list[BranchProtectionRule]:
    patterns = _protection_rules(ctx, repository, rbac.GET_BRANCH_PROTECTION_RULES)
    return [BranchProtectionRule(pattern=p) for p in patterns]


@router.post("/repositories/{repository}/branch_protection", status_code=204,
             response_class=Response, tags=["internal"])
def internal_create_branch_protection_rule(repository: str, rule: BranchProtectionRule,
                                           ctx: Ctx = Depends(authenticated)) -> Response:
    """Add one protected-branch pattern (409 when the repository has it already)."""
    ctx.check(rbac.SET_BRANCH_PROTECTION_RULES, repo_arn(repository))
    ctx.services.graveler.add_branch_protection_rule(repository, rule.pattern)
    return Response(status_code=204)


@router.delete("/repositories/{repository}/branch_protection", status_code=204,
               response_class=Response, tags=["internal"])
def internal_delete_branch_protection_rule(repository: str, body: DeleteBranchProtectionRule,
                                           ctx: Ctx = Depends(authenticated)) -> Response:
    """Remove one protected-branch pattern (404 when the repository has no such one)."""
    ctx.check(rbac.SET_BRANCH_PROTECTION_RULES, repo_arn(repository))
    ctx.services.graveler.delete_branch_protection_rule(repository, body.pattern)
    return Response(status_code=204)


@router.get("/repositories/{repository}/branch_protection/set_allowed", status_code=204,
            response_class=Response, tags=["internal"])
def create_branch_protection_rule_preflight(repository: str,
                                            ctx: Ctx = Depends(authenticated)) -> Response:
    """204 when the user may change the repository's branch protection rules."""
    _protection_rules(ctx, repository, rbac.SET_BRANCH_PROTECTION_RULES)
    return Response(status_code=204)
