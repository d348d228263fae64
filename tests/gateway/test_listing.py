"""ListObjects v1 and v2 through the gateway: prefixes, delimiters, pagination, refs."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from tests.gateway.conftest import Repo

#: a tree with files at several depths and names that sort around "/"
PATHS = sorted([
    "a.txt", "b/1.txt", "b/2.txt", "b/c/3.txt", "b/c/4.txt", "b-x.txt", "b0/5.txt",
    "d/6.txt", "e.txt", "f/g/h/7.txt", "z.txt",
])


@pytest.fixture
def tree(repo: Repo) -> Repo:
    for path in PATHS:
        repo.s3.put_object(Bucket=repo.name, Key=f"main/{path}", Body=path.encode())
    return repo


def _v2_pages(repo: Repo, **params: Any) -> list[dict[str, Any]]:
    pages = []
    token = None
    while True:
        args = dict(params, **({"ContinuationToken": token} if token else {}))
        page = repo.s3.list_objects_v2(Bucket=repo.name, **args)
        pages.append(page)
        if not page["IsTruncated"]:
            return pages
        token = page["NextContinuationToken"]
        assert len(pages) < 50


def _names(pages: list[dict[str, Any]]) -> list[str]:
    return [o["Key"] for p in pages for o in p.get("Contents", [])] + [
        c["Prefix"] for p in pages for c in p.get("CommonPrefixes", [])]


def test_v2_flat_listing(tree: Repo) -> None:
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/")
    assert [o["Key"] for o in page["Contents"]] == [f"main/{p}" for p in PATHS]
    assert page["KeyCount"] == len(PATHS) and not page["IsTruncated"]
    first = page["Contents"][0]
    assert first["Size"] == len(b"a.txt") and first["ETag"].startswith('"')
    assert first["StorageClass"] == "STANDARD"


def test_v2_delimiter(tree: Repo) -> None:
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/", Delimiter="/")
    assert [o["Key"] for o in page["Contents"]] == [
        "main/a.txt", "main/b-x.txt", "main/e.txt", "main/z.txt"]
    assert [c["Prefix"] for c in page["CommonPrefixes"]] == [
        "main/b/", "main/b0/", "main/d/", "main/f/"]
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/b/", Delimiter="/")
    assert [o["Key"] for o in page["Contents"]] == ["main/b/1.txt", "main/b/2.txt"]
    assert [c["Prefix"] for c in page["CommonPrefixes"]] == ["main/b/c/"]
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/b", Delimiter="/")
    assert [o["Key"] for o in page.get("Contents", [])] == ["main/b-x.txt"]
    assert [c["Prefix"] for c in page["CommonPrefixes"]] == ["main/b/", "main/b0/"]


@pytest.mark.parametrize("max_keys", [1, 2, 3, 5])
def test_v2_pagination_with_delimiter(tree: Repo, max_keys: int) -> None:
    everything = _names(_v2_pages(tree, Prefix="main/", Delimiter="/"))
    pages = _v2_pages(tree, Prefix="main/", Delimiter="/", MaxKeys=max_keys)
    assert all(p["KeyCount"] <= max_keys for p in pages)
    assert sorted(_names(pages)) == sorted(everything)
    assert len(_names(pages)) == len(everything) == 8
    flat = _v2_pages(tree, Prefix="main/", MaxKeys=max_keys)
    assert [o["Key"] for p in flat for o in p["Contents"]] == [f"main/{p}" for p in PATHS]


def test_v2_start_after(tree: Repo) -> None:
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/", StartAfter="main/b0/5.txt")
    assert [o["Key"] for o in page["Contents"]] == [
        "main/d/6.txt", "main/e.txt", "main/f/g/h/7.txt", "main/z.txt"]
    assert page["StartAfter"] == "main/b0/5.txt"
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/", Delimiter="/",
                                   StartAfter="main/b/")
    # "main/b-x.txt" sorts before "main/b/"; the prefix named by StartAfter is done
    assert _names([page]) == ["main/e.txt", "main/z.txt", "main/b0/", "main/d/", "main/f/"]


def test_v1_marker_pagination(tree: Repo) -> None:
    keys: list[str] = []
    prefixes: list[str] = []
    marker = ""
    for _ in range(20):
        page = tree.s3.list_objects(Bucket=tree.name, Prefix="main/", Delimiter="/",
                                    MaxKeys=2, Marker=marker)
        keys += [o["Key"] for o in page.get("Contents", [])]
        prefixes += [c["Prefix"] for c in page.get("CommonPrefixes", [])]
        if not page["IsTruncated"]:
            break
        marker = page["NextMarker"]
    assert keys == ["main/a.txt", "main/b-x.txt", "main/e.txt", "main/z.txt"]
    assert prefixes == ["main/b/", "main/b0/", "main/d/", "main/f/"]
    # the paginator of boto3 (v1 without delimiter continues from the last key)
    paginator = tree.s3.get_paginator("list_objects")
    listed = [o["Key"] for page in paginator.paginate(
        Bucket=tree.name, Prefix="main/b", PaginationConfig={"PageSize": 2})
        for o in page["Contents"]]
    assert listed == [f"main/{p}" for p in PATHS if p.startswith("b")]


def test_paginators_v2(tree: Repo) -> None:
    paginator = tree.s3.get_paginator("list_objects_v2")
    listed = [o["Key"] for page in paginator.paginate(
        Bucket=tree.name, Prefix="main/", PaginationConfig={"PageSize": 3})
        for o in page["Contents"]]
    assert listed == [f"main/{p}" for p in PATHS]


def test_bucket_root_lists_branches(tree: Repo) -> None:
    graveler = tree.server.services.graveler
    tree.commit("tree")
    for name in ("dev", "feature-1", "main-2"):
        graveler.create_branch(tree.name, name, "main")
    page = tree.s3.list_objects_v2(Bucket=tree.name, Delimiter="/")
    assert [c["Prefix"] for c in page["CommonPrefixes"]] == [
        "dev/", "feature-1/", "main/", "main-2/"]
    assert "Contents" not in page
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="ma", Delimiter="/")
    assert [c["Prefix"] for c in page["CommonPrefixes"]] == ["main/", "main-2/"]
    pages = _v2_pages(tree, Delimiter="/", MaxKeys=1)
    assert _names(pages) == ["dev/", "feature-1/", "main/", "main-2/"]
    v1 = tree.s3.list_objects(Bucket=tree.name, Delimiter="/", MaxKeys=2)
    assert [c["Prefix"] for c in v1["CommonPrefixes"]] == ["dev/", "feature-1/"]
    assert v1["IsTruncated"] and v1["NextMarker"] == "feature-1/"
    # objects of another branch, by branch prefix
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="dev/b/c/")
    assert [o["Key"] for o in page["Contents"]] == ["dev/b/c/3.txt", "dev/b/c/4.txt"]


def test_listing_sees_staged_deletes_and_commits(tree: Repo) -> None:
    tree.commit("tree")
    tree.s3.delete_object(Bucket=tree.name, Key="main/a.txt")
    tree.s3.put_object(Bucket=tree.name, Key="main/new.txt", Body=b"n")
    names = [o["Key"] for o in tree.s3.list_objects_v2(
        Bucket=tree.name, Prefix="main/", Delimiter="/")["Contents"]]
    assert "main/a.txt" not in names and "main/new.txt" in names
    committed = [o["Key"] for o in tree.s3.list_objects_v2(
        Bucket=tree.name, Prefix="main@/", Delimiter="/")["Contents"]]
    assert "main@/a.txt" in committed and "main@/new.txt" not in committed


def test_listing_edge_cases(tree: Repo) -> None:
    empty = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="no-such-branch/")
    assert empty["KeyCount"] == 0 and "Contents" not in empty
    zero = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/", MaxKeys=0)
    assert zero["KeyCount"] == 0 and not zero["IsTruncated"]
    with pytest.raises(ClientError) as exc:
        tree.s3.list_objects_v2(Bucket="no-such-repo", Prefix="main/")
    assert exc.value.response["Error"]["Code"] == "NoSuchBucket"
    with pytest.raises(ClientError) as exc:
        tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/", ContinuationToken="!!")
    assert exc.value.response["Error"]["Code"] == "InvalidArgument"
    # a key that needs URL encoding survives boto3's encoding-type=url round trip
    tree.s3.put_object(Bucket=tree.name, Key="main/sp ace/ü&<>.txt", Body=b"x")
    page = tree.s3.list_objects_v2(Bucket=tree.name, Prefix="main/sp ace/")
    assert [o["Key"] for o in page["Contents"]] == ["main/sp ace/ü&<>.txt"]
    assert page["Prefix"] == "main/sp ace/"
