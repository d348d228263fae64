"""The object browser: a ref's objects by prefix, upload, download and preview."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Depends, Form, UploadFile
from fastapi.responses import Response, StreamingResponse
from starlette.concurrency import run_in_threadpool

from lakefs_core.auth import rbac
from lakefs_core.ui import object_diff as diffs
from lakefs_core.ui import preview as previews
from lakefs_core.ui.backend import API
from lakefs_core.ui.context import ApiError, Page, page, redirect, url
from lakefs_core.ui.pages.common import branch_names, listing, q, repo_view

router = APIRouter()
PageDep = Annotated[Page, Depends(page)]
FormStr = Annotated[str, Form()]

_CHUNK = 1024 * 1024


def _crumbs(prefix: str) -> list[tuple[str, str]]:
    """(name, prefix) of each directory level of ``prefix``."""
    out: list[tuple[str, str]] = []
    acc = ""
    for part in [p for p in prefix.split("/") if p]:
        acc += part + "/"
        out.append((part, acc))
    return out


@router.get("/repositories/{repository}/objects")
async def browse(p: PageDep, repository: str, ref: str = "", prefix: str = "",
                 after: str = "") -> Response:
    view = await repo_view(p, repository, ref)
    entries = await listing(p, f"/repositories/{q(repository)}/refs/{q(view.ref)}/objects/ls",
                            {"prefix": prefix, "delimiter": "/", "after": after, "amount": 200})
    names = await branch_names(p, repository)
    is_branch = view.ref in names
    return p.render("objects.html", view=view, tab="objects", prefix=prefix,
                    crumbs=_crumbs(prefix), entries=entries["results"],
                    pagination=entries["pagination"], branches=names, is_branch=is_branch,
                    can_upload=is_branch and not view.repo.get("read_only") and p.can(
                        rbac.WRITE_OBJECT, rbac.object_arn(repository, prefix + "x")))


async def _chunks(upload: UploadFile) -> AsyncIterator[bytes]:
    while chunk := await upload.read(_CHUNK):
        yield chunk


@router.post("/repositories/{repository}/objects/upload")
async def upload(p: PageDep, repository: str, csrf: FormStr, branch: FormStr, file: UploadFile,
                 prefix: FormStr = "", path: FormStr = "") -> Response:
    p.check_form(csrf)
    target = path.strip() or prefix + (file.filename or "")
    back = url(f"/repositories/{q(repository)}/objects", ref=branch, prefix=prefix)
    if not target or target.endswith("/"):
        return redirect(back, error="choose a file (or give the object a path)")
    headers = {"content-type": "application/octet-stream"}
    if file.size is not None:
        headers["content-length"] = str(file.size)
    try:
        await p.api_raw("POST", f"/repositories/{q(repository)}/branches/{q(branch)}/objects",
                        params={"path": target}, content=_chunks(file), headers=headers)
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(back, error=f"upload failed: {e.message}")
    finally:
        await file.close()
    return redirect(back, notice=f"uploaded {target} to {branch} (uncommitted)")


@router.post("/repositories/{repository}/objects/delete")
async def delete_object(p: PageDep, repository: str, csrf: FormStr, branch: FormStr,
                        path: FormStr) -> Response:
    p.check_form(csrf)
    prefix = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    back = url(f"/repositories/{q(repository)}/objects", ref=branch, prefix=prefix)
    try:
        await p.api_raw("DELETE", f"/repositories/{q(repository)}/branches/{q(branch)}/objects",
                        params={"path": path})
    except ApiError as e:
        if e.status == 401:
            raise
        return redirect(back, error=f"delete failed: {e.message}")
    return redirect(back, notice=f"deleted {path} on {branch} (uncommitted)")


async def _read(p: Page, base: str, path: str, limit: int, size: int) -> bytes:
    """The first ``limit`` bytes of an object of ``size`` bytes (``base``: the objects
    of its ref in the API), read with a range."""
    limit = min(limit, size)
    if not limit:
        return b""
    resp = await p.api_raw("GET", base, params={"path": path},
                           headers={"range": f"bytes=0-{limit - 1}"})
    return bytes(resp.content[:limit])


@router.get("/repositories/{repository}/object")
async def show(p: PageDep, repository: str, path: str, ref: str = "") -> Response:
    view = await repo_view(p, repository, ref)
    base = f"/repositories/{q(repository)}/refs/{q(view.ref)}/objects"
    stat = await p.api("GET", f"{base}/stat", params={"path": path})
    size = int(stat.get("size_bytes") or 0)
    content_type = str(stat.get("content_type") or "")
    kind = previews.kind_of(path, content_type)
    preview = previews.Preview("none")
    if kind in ("image", "none"):
        preview = previews.Preview(kind)
    elif kind == "parquet" and size > previews.PARQUET_MAX_BYTES:
        preview = previews.Preview("none", note="too large to preview")
    else:
        data = await _read(p, base, path, size if kind == "parquet" else previews.PREVIEW_BYTES,
                           size)
        preview = await run_in_threadpool(previews.preview, path, content_type, data, size)
    names = await branch_names(p, repository)
    prefix = path.rsplit("/", 1)[0] + "/" if "/" in path else ""
    return p.render("object.html", view=view, tab="objects", path=path, stat=stat,
                    preview=preview, crumbs=_crumbs(prefix), prefix=prefix,
                    is_branch=view.ref in names,
                    can_delete=view.ref in names and not view.repo.get("read_only") and p.can(
                        rbac.DELETE_OBJECT, rbac.object_arn(repository, path)))


@router.get("/repositories/{repository}/object/raw")
async def raw(p: PageDep, repository: str, path: str, ref: str,
              inline: bool = False) -> Response:
    answer = await p.state.backend.stream(
        p.auth, f"{API}/repositories/{q(repository)}/refs/{q(ref)}/objects", {"path": path})
    name = path.rsplit("/", 1)[-1] or "object"
    content_type = answer.headers.get("content-type", "application/octet-stream")
    headers = {"x-content-type-options": "nosniff",
               # an object is data, never a page of this site that could run scripts
               "content-security-policy": "sandbox; default-src 'none'; img-src 'self'; "
                                          "style-src 'unsafe-inline'"}
    if inline:
        content_type = previews.image_type(path, content_type)
        headers["content-disposition"] = "inline"
    else:
        content_type = "application/octet-stream"
        headers["content-disposition"] = f"attachment; filename*=UTF-8''{quote(name)}"
    if "content-length" in answer.headers:
        headers["content-length"] = answer.headers["content-length"]
    return StreamingResponse(answer.body, media_type=content_type, headers=headers)


async def _version(p: Page, repository: str, ref: str, path: str
                   ) -> tuple[dict[str, Any] | None, str]:
    """The object's stat at ``ref`` and the API's objects address there; no stat where
    the object is absent."""
    base = f"/repositories/{q(repository)}/refs/{q(ref)}/objects"
    try:
        stat: dict[str, Any] = await p.api("GET", f"{base}/stat", params={"path": path})
    except ApiError as e:
        if e.status == 404:
            return None, base
        raise
    return stat, base


@router.get("/repositories/{repository}/object/diff")
async def object_diff(p: PageDep, repository: str, path: str, left: str,
                      right: str) -> Response:
    """What changed in the object at ``path`` from ``left`` to ``right``: its text side by
    side, or its table's columns, row counts and rows (see :mod:`lakefs_core.ui.object_diff`)."""
    view = await repo_view(p, repository, right, resolve=False)
    (old_stat, old_base), (new_stat, new_base) = (
        await _version(p, repository, left, path), await _version(p, repository, right, path))
    if old_stat is None and new_stat is None:
        raise ApiError(404, f"{path} is neither at {left} nor at {right}")
    shown = new_stat or old_stat or {}
    kind = previews.kind_of(path, str(shown.get("content_type") or ""))
    limit = previews.PARQUET_MAX_BYTES if kind == "parquet" else diffs.TEXT_BYTES
    versions = []
    for stat, base in ((old_stat, old_base), (new_stat, new_base)):
        size = int((stat or {}).get("size_bytes") or 0)
        too_big = kind == "parquet" and size > limit  # said so by the table's comparison
        data = b"" if stat is None or too_big or kind == "image" else await _read(
            p, base, path, limit, size)
        versions.append(diffs.Version(stat is not None, data, size))
    old, new = versions
    text: diffs.TextDiff | None = None
    table: diffs.TableDiff | None = None
    if kind in ("csv", "parquet"):
        table = await run_in_threadpool(lambda: diffs.table_diff(
            diffs.read_table(kind, old), diffs.read_table(kind, new)))
    elif kind != "image" and not diffs.is_binary(old.data) and not diffs.is_binary(new.data):
        text = await run_in_threadpool(diffs.text_diff, old, new)
    return p.render("object_diff.html", view=view, tab="compare", path=path, left=left,
                    right=right, old=old_stat, new=new_stat, kind=kind, text=text,
                    table=table)
