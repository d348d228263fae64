"""Object replicators standing in for S3 Cross-Region Replication in ``native`` mode.

moto does not replicate buckets, and local directories have no replication at all,
so a test runs one of these beside the cluster: it copies a source namespace's
objects to the mirror's namespace in another region, badly on purpose (random delay
and order, copies dropped for a while, copies made twice). The fault logic is
``lakefs_testing.replicator.FaultyReplicator``'s; :class:`S3FaultyReplicator` only
swaps its file operations for two buckets on two moto servers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from e2e.cluster import Cluster
from lakefs_testing.replicator import FaultyReplicator


def _split(namespace: str) -> tuple[str, str]:
    """``s3://bucket/prefix`` -> (bucket, prefix)."""
    rest = namespace.removeprefix("s3://")
    bucket, _, prefix = rest.partition("/")
    return bucket, prefix.strip("/")


class S3FaultyReplicator(FaultyReplicator):
    """:class:`FaultyReplicator` between ``s3://`` namespaces, possibly on two S3 servers.

    Args:
        src_client: boto3 S3 client of the source region.
        src_namespace: ``s3://bucket/prefix`` of the source repository.
        dst_client: boto3 S3 client of the destination region.
        dst_namespace: ``s3://bucket/prefix`` of the mirror.
        **faults: ``seed``, ``drop``, ``duplicate``, ``max_delay``, ``hold`` as for
            :class:`FaultyReplicator` (``hold`` gets the key below the prefix).
    """

    def __init__(self, src_client: Any, src_namespace: str, dst_client: Any,
                 dst_namespace: str, **faults: Any) -> None:
        self.src_client, self.dst_client = src_client, dst_client
        self.src_bucket, self.src_prefix = _split(src_namespace)
        self.dst_bucket, self.dst_prefix = _split(dst_namespace)
        # the base class's directories only label the two sides here
        super().__init__(Path(self.src_bucket, self.src_prefix),
                         Path(self.dst_bucket, self.dst_prefix), **faults)

    def _keys(self, client: Any, bucket: str, prefix: str) -> set[str]:
        out: set[str] = set()
        for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket,
                                                                      Prefix=prefix + "/"):
            out.update(o["Key"][len(prefix) + 1:] for o in page.get("Contents", ()))
        return out

    def pending(self) -> list[str]:
        have = self._keys(self.dst_client, self.dst_bucket, self.dst_prefix)
        return sorted(self._keys(self.src_client, self.src_bucket, self.src_prefix) - have)

    def _copy(self, rel: str) -> None:
        body = self.src_client.get_object(Bucket=self.src_bucket,
                                          Key=f"{self.src_prefix}/{rel}")["Body"].read()
        self.dst_client.put_object(Bucket=self.dst_bucket, Key=f"{self.dst_prefix}/{rel}",
                                   Body=body)
        self.copied.append(rel)


def object_replicator(cluster: Cluster, source_namespace: str, mirror_namespace: str,
                      *, source: str = "east", destination: str = "west",
                      **faults: Any) -> FaultyReplicator:
    """A faulty replicator from ``source``'s namespace to ``destination``'s (by default
    ``east`` to ``west``), for the cluster's storage.

    Args:
        cluster: the running cluster.
        source_namespace: the source repository's namespace (``local://x`` or ``s3://...``).
        mirror_namespace: the mirror's namespace in the destination.
        source, destination: the regions replicated from and to.
        **faults: passed to the replicator (``seed``, ``drop``, ``duplicate``, ...).
    """
    if cluster.spec.storage == "s3":
        return S3FaultyReplicator(cluster.s3_client(source), source_namespace,
                                  cluster.s3_client(destination), mirror_namespace, **faults)
    src = cluster.regions[source].blockstore_root / source_namespace.removeprefix("local://")
    dst = cluster.regions[destination].blockstore_root / mirror_namespace.removeprefix(
        "local://")
    return FaultyReplicator(src, dst, **faults)
