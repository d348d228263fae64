"""Treeverse's Airflow provider (``airflow-provider-lakefs`` on Airflow 2) running the
provider's own example workflow through ``dag.test()``: create a branch, read its commit,
upload, wait for the file and for the commit with the sensors, commit, write the symlink
manifests, read the object back, merge into the default branch, walk the log (in bulk and
one commit a page), delete the branch and find its object gone. Before the run, the
hook's connection test (the button of Airflow's connection form) signs in.

Usage: python airflow_lakefs.py REPO
The server and its keys come from ``AIRFLOW_CONN_LAKEFS_DEFAULT`` (Airflow's connection
as JSON: ``http`` type, the keys in ``extra`` as the provider's example has them) and
Airflow's state from ``AIRFLOW_HOME`` (its SQLite database is created here). Prints one
JSON object: the connection test's outcome, each task's final state and the values the
tasks returned.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import UTC, datetime

from airflow.exceptions import AirflowFailException
from airflow.models.dag import DAG
from airflow.operators.python import PythonOperator
from airflow.utils import db
from lakefs_provider.hooks.lakefs_hook import LakeFSHook
from lakefs_provider.operators.commit_operator import LakeFSCommitOperator
from lakefs_provider.operators.create_branch_operator import LakeFSCreateBranchOperator
from lakefs_provider.operators.create_symlink_operator import LakeFSCreateSymlinkOperator
from lakefs_provider.operators.delete_branch_operator import LakeFSDeleteBranchOperator
from lakefs_provider.operators.get_commit_operator import LakeFSGetCommitOperator
from lakefs_provider.operators.get_object_operator import LakeFSGetObjectOperator
from lakefs_provider.operators.merge_operator import LakeFSMergeOperator
from lakefs_provider.operators.upload_operator import LakeFSUploadOperator
from lakefs_provider.sensors.commit_sensor import LakeFSCommitSensor
from lakefs_provider.sensors.file_sensor import LakeFSFileSensor
from lakefs_sdk.exceptions import NotFoundException

CONN = "lakefs_default"
BRANCH = "airflow-etl"
PATH = "path/to/_SUCCESS"
CONTENT = b"It is not enough to succeed.  Others must fail."
COMMIT_MESSAGE = "committing to lakeFS using airflow!"
MERGE_MESSAGE = "merging to the default branch"


def check_content(actual: str) -> None:
    if actual != CONTENT.decode():
        raise AirflowFailException(f"read {actual!r}")


def check_log(repo: str, ref: str, commits: Sequence[str], messages: Sequence[str],
              amount: int) -> None:
    """The log from ``ref`` starts with ``commits`` and their ``messages``, read
    ``amount`` commits a page."""
    expected = list(zip(commits, messages, strict=True))
    actual = []
    for commit in LakeFSHook(CONN).log_commits(repo, ref, amount):
        actual.append((commit["id"], commit["message"]))
        if len(actual) == len(expected):
            break
    if actual != expected:
        raise AirflowFailException(f"log {actual} is not {expected}")


def check_branch_gone(repo: str, branch: str, path: str) -> None:
    try:
        LakeFSHook(CONN).stat_object(repo=repo, ref=branch, path=path)
    except NotFoundException:
        return
    raise AirflowFailException(f"{path} still found on deleted branch {branch}")


def workflow(repo: str) -> DAG:
    """The provider's example DAG (``lakefs_provider/example_dags``) on ``repo``."""
    args = {"owner": "lakeFS", "lakefs_conn_id": CONN, "repo": repo, "branch": BRANCH,
            "path": PATH}
    with DAG("lakefs_workflow", default_args=args, render_template_as_native_obj=True,
             start_date=datetime(2024, 1, 1, tzinfo=UTC), schedule=None,
             max_active_runs=1) as dag:
        create_branch = LakeFSCreateBranchOperator(task_id="create_branch",
                                                   source_branch="main")
        upload = LakeFSUploadOperator(task_id="upload_file", content=CONTENT)
        branch_commit = LakeFSGetCommitOperator(task_id="get_branch_commit", ref=BRANCH)
        # both sensors may run before the upload and the commit: they wait for them
        sense_file = LakeFSFileSensor(task_id="sense_file", mode="reschedule",
                                      poke_interval=1, timeout=30)
        commit = LakeFSCommitOperator(task_id="commit", msg=COMMIT_MESSAGE,
                                      metadata={"committed_from": "airflow-operator"})
        symlink = LakeFSCreateSymlinkOperator(task_id="create_symlink")
        sense_commit = LakeFSCommitSensor(
            task_id="sense_commit", mode="reschedule", poke_interval=1, timeout=30,
            prev_commit_id="{{ ti.xcom_pull(task_ids='get_branch_commit').id }}")
        get_object = LakeFSGetObjectOperator(task_id="get_object", ref=BRANCH)
        check_object = PythonOperator(
            task_id="check_content", python_callable=check_content,
            op_kwargs={"actual": "{{ ti.xcom_pull(task_ids='get_object') }}"})
        merge = LakeFSMergeOperator(task_id="merge_branches", source_ref=BRANCH,
                                    destination_branch="main", msg=MERGE_MESSAGE,
                                    metadata={"committer": "airflow-operator"})
        log_checks = [PythonOperator(
            task_id=f"check_log_{name}", python_callable=check_log,
            op_kwargs={"repo": repo, "ref": "{{ ti.xcom_pull(task_ids='merge_branches') }}",
                       "commits": ["{{ ti.xcom_pull(task_ids='merge_branches') }}",
                                   "{{ ti.xcom_pull(task_ids='commit') }}"],
                       "messages": [MERGE_MESSAGE, COMMIT_MESSAGE], "amount": amount})
            for name, amount in (("bulk", 100), ("paged", 1))]
        delete_branch = LakeFSDeleteBranchOperator(task_id="delete_branch")
        branch_gone = PythonOperator(
            task_id="check_branch_gone", python_callable=check_branch_gone,
            op_kwargs={"repo": repo, "branch": BRANCH, "path": PATH})

        create_branch >> branch_commit >> [upload, sense_commit, sense_file]
        upload >> commit >> symlink
        sense_file >> get_object >> check_object
        sense_commit >> merge >> log_checks
        [check_object, symlink, *log_checks] >> delete_branch >> branch_gone
    return dag


def main(repo: str) -> None:
    db.initdb(load_connections=False)
    connection_test = LakeFSHook(CONN).test_connection()
    run = workflow(repo).test()
    report = {"connection_test": connection_test,
              "states": {ti.task_id: str(ti.state) for ti in run.get_task_instances()},
              "returned": {ti.task_id: ti.xcom_pull(task_ids=ti.task_id)
                           for ti in run.get_task_instances()}}
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main(sys.argv[1])
