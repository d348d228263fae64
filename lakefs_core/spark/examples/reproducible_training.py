"""Reproducible training across regions: ETL in region A, training by commit id in A and B.

The pipeline:

1. **raw data** (once): synthetic customer records as CSV under ``raw/`` on the
   source repository's default branch, committed;
2. **ETL in region A**: on a fresh branch, read ``raw/`` at a commit id, derive a
   feature table, write it as Parquet under ``features/`` (one commit), and merge
   the branch into the default branch: the merge commit id names the training set;
3. **the mirror advances**: region B's read-only mirror serves that commit once its
   sidecar proved every piece of it present;
4. **training in B, then in A**: read ``features/`` at the merge commit id, compute
   a row checksum, and fit a logistic regression (pyspark.ml).

Both regions read the same commit, hence the same files in the same order and the
same partitions, so the checksums and the model coefficients are identical.

Run it against two servers (the mirror must exist; see the replication API)::

    python -m lakefs_core.spark.examples.reproducible_training \\
        --source-option endpoint=http://region-a:8000 --source-option repository=sales \\
        --source-option blockstore_root=/data/a/blockstore \\
        --mirror-option endpoint=http://region-b:8000 --mirror-option repository=sales-mirror \\
        --mirror-option blockstore_root=/data/b/blockstore

Credentials come from ``access_key_id``/``secret_access_key`` options or ``LAKECTL_*``;
storage options are those of the data source. It prints a JSON report and exits 0
when both regions agree.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import sys
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_fixed

from lakefs_core.errors import NotFoundError
from lakefs_core.spark.cli import job_parser, job_session, option_pairs, print_report
from lakefs_core.spark.client import LakeFSClient
from lakefs_core.spark.datasource import FORMAT_NAME, register
from lakefs_core.spark.options import ServerOptions

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RAW_PATH = "raw"
FEATURES_PATH = "features"
FEATURE_COLUMNS = ("age_scaled", "log_income", "visits_per_month", "is_premium")


@dataclass(frozen=True)
class Region:
    """One region's view of the data: a repository there and how to reach it.

    Attributes:
        name: a label for reports.
        options: the data source options (endpoint, credentials, repository, storage).
    """

    name: str
    options: Mapping[str, str]

    @property
    def repository(self) -> str:
        return self.options["repository"]

    def client(self) -> LakeFSClient:
        return LakeFSClient(ServerOptions.from_options(self.options))


@dataclass(frozen=True)
class TrainingResult:
    """What one training run saw and produced."""

    region: str
    commit_id: str
    rows: int
    checksum: str
    coefficients: tuple[float, ...]
    intercept: float


@dataclass(frozen=True)
class PipelineReport:
    commit_id: str
    source: TrainingResult
    mirror: TrainingResult

    @property
    def identical(self) -> bool:
        """Same rows, same checksum, bit-for-bit the same model."""
        a, b = self.source, self.mirror
        return (a.rows, a.checksum, a.coefficients, a.intercept) == (
            b.rows, b.checksum, b.coefficients, b.intercept)

    def to_dict(self) -> dict[str, Any]:
        return {"commit_id": self.commit_id, "identical": self.identical,
                "source": asdict(self.source), "mirror": asdict(self.mirror)}


# --- 1. raw data ---------------------------------------------------------------------
def raw_csv(rows: int, seed: int, files: int = 4) -> list[bytes]:
    """Synthetic customers, deterministic in ``seed``: churn depends on the features."""
    rng = random.Random(seed)
    out: list[list[str]] = [[] for _ in range(files)]
    for i in range(rows):
        age = rng.randint(18, 80)
        income = round(rng.lognormvariate(10.5, 0.5), 2)
        visits = rng.randint(0, 30)
        premium = rng.random() < 0.3
        score = 2.0 - 0.04 * age + 0.15 * visits - 0.8 * premium + rng.gauss(0, 1)
        churned = 1 if score > 0 else 0
        out[i % files].append(f"{i},{age},{income},{visits},{str(premium).lower()},{churned}")
    header = "customer_id,age,income,visits,premium,churned\n"
    return [(header + "\n".join(lines) + "\n").encode() for lines in out]


def seed_raw_data(region: Region, rows: int = 20_000, seed: int = 7) -> str:
    """Upload the raw CSV files to the default branch and commit; returns the commit id."""
    with region.client() as client:
        repo = client.get_repository(region.repository)
        for i, data in enumerate(raw_csv(rows, seed)):
            client.upload_object(region.repository, repo.default_branch,
                                 f"{RAW_PATH}/customers-{i}.csv", data)
        return client.commit(region.repository, repo.default_branch,
                             f"raw customers ({rows} rows, seed {seed})").id


# --- 2. ETL -------------------------------------------------------------------------------
def features(raw: DataFrame) -> DataFrame:
    """The feature table: scaled numeric features and a double label."""
    from pyspark.sql import functions as F

    return raw.select(
        F.col("customer_id").cast("long").alias("customer_id"),
        (F.col("age") / F.lit(100.0)).alias("age_scaled"),
        F.log1p(F.col("income")).alias("log_income"),
        (F.col("visits") / F.lit(30.0)).alias("visits_per_month"),
        F.col("premium").cast("double").alias("is_premium"),
        F.col("churned").cast("double").alias("label"),
    )


def run_etl(spark: SparkSession, region: Region) -> str:
    """Derive the feature table on a branch and merge it; returns the merge commit id."""
    with region.client() as client:
        repo = client.get_repository(region.repository)
        main = repo.default_branch
        raw_commit = client.get_commit(region.repository, main).id
        branch = f"etl-{uuid.uuid4().hex[:8]}"
        client.create_branch(region.repository, branch, raw_commit)
        try:
            raw = (spark.read.format(FORMAT_NAME).options(**region.options)
                   .option("ref", raw_commit).option("format", "csv").load(RAW_PATH))
            (features(raw).write.format(FORMAT_NAME).options(**region.options)
             .option("branch", branch).option("commit_message", "feature table")
             .option("commit_metadata", json.dumps({"raw_commit": raw_commit}))
             .mode("overwrite").save(FEATURES_PATH))
            return client.merge(region.repository, branch, main,
                                message=f"features from {raw_commit[:12]}")
        finally:
            client.delete_branch(region.repository, branch)


# --- 3. the mirror --------------------------------------------------------------------
def wait_for_commit(region: Region, commit_id: str, timeout: float = 120.0) -> None:
    """Wait until ``commit_id`` is served by the region (a mirror serves only whole commits).

    Raises:
        NotFoundError: not there within ``timeout`` seconds.
    """
    with region.client() as client:
        for attempt in Retrying(retry=retry_if_exception_type(NotFoundError),
                                stop=stop_after_delay(timeout), wait=wait_fixed(0.5),
                                reraise=True):
            with attempt:
                client.get_commit(region.repository, commit_id)


# --- 4. training ----------------------------------------------------------------------
def row_checksum(df: DataFrame) -> tuple[int, str]:
    """Row count and an order-independent checksum of every value of every row."""
    from pyspark.sql import functions as F

    cols = [F.col(c) for c in df.columns]
    agg = df.agg(
        F.count(F.lit(1)).alias("n"),
        F.sum(F.xxhash64(*cols).cast("decimal(38,0)")).alias("xx"),
        F.sum(F.hash(*cols).cast("decimal(38,0)")).alias("mm"),
    ).collect()[0]
    digest = hashlib.sha256(f"{agg['n']}|{agg['xx']}|{agg['mm']}".encode()).hexdigest()
    return int(agg["n"]), digest


def train(spark: SparkSession, region: Region, commit_id: str) -> TrainingResult:
    """Fit churn ~ features on the feature table at ``commit_id``."""
    from pyspark.ml.classification import LogisticRegression
    from pyspark.ml.feature import VectorAssembler

    table = (spark.read.format(FORMAT_NAME).options(**region.options)
             .option("ref", commit_id).load(FEATURES_PATH))
    rows, checksum = row_checksum(table)
    assembled = VectorAssembler(inputCols=list(FEATURE_COLUMNS),
                                outputCol="features").transform(table)
    model = LogisticRegression(maxIter=25, regParam=0.01, featuresCol="features",
                               labelCol="label").fit(assembled)
    coefficients = tuple(float(c) for c in model.coefficients.toArray())
    if any(math.isnan(c) for c in coefficients):
        raise ArithmeticError("training diverged")
    return TrainingResult(region.name, commit_id, rows, checksum, coefficients,
                          float(model.intercept))


def run_pipeline(spark: SparkSession, source: Region, mirror: Region, *,
                 raw_rows: int = 20_000, seed: int = 7,
                 mirror_timeout: float = 120.0) -> PipelineReport:
    """Raw data (if absent), ETL and merge in the source region, then train in both."""
    register(spark)
    with source.client() as client:
        repo = client.get_repository(source.repository)
        has_raw = any(True for _ in client.list_objects(source.repository,
                                                        repo.default_branch, f"{RAW_PATH}/"))
    if not has_raw:
        seed_raw_data(source, raw_rows, seed)
    commit_id = run_etl(spark, source)
    wait_for_commit(mirror, commit_id, mirror_timeout)
    in_mirror = train(spark, mirror, commit_id)
    in_source = train(spark, source, commit_id)
    return PipelineReport(commit_id, in_source, in_mirror)


def main(argv: Sequence[str] | None = None, spark: SparkSession | None = None) -> int:
    """Run the pipeline; print the JSON report; 0 when both regions agree."""
    parser = job_parser("python -m lakefs_core.spark.examples.reproducible_training",
                        "ETL in the source region, training by commit id in both regions")
    parser.add_argument("--source-option", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--mirror-option", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--mirror-timeout", type=float, default=300.0)
    args = parser.parse_args(argv)
    # --option applies to both regions (e.g. shared credentials)
    shared = option_pairs(args.option)
    source = Region("source", {**shared, **option_pairs(args.source_option)})
    mirror = Region("mirror", {**shared, **option_pairs(args.mirror_option)})
    started = time.monotonic()
    with job_session(args.master, "reproducible-training", spark) as session:
        report = run_pipeline(session, source, mirror, raw_rows=args.rows, seed=args.seed,
                              mirror_timeout=args.mirror_timeout)
    print_report({**report.to_dict(), "seconds": round(time.monotonic() - started, 1)})
    return 0 if report.identical else 1


if __name__ == "__main__":
    sys.exit(main())
