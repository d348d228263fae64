"""Treeverse's Airflow provider (``airflow-provider-lakefs`` on Airflow 2, in its own
virtualenv: see ``AIRFLOW_PYTHON``) runs its example workflow against the REST API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.compat.conftest import AIRFLOW_PYTHON, Target, run

pytestmark = pytest.mark.compat_airflow

SCRIPT = Path(__file__).parent / "clients" / "airflow_lakefs.py"
TASKS = ["create_branch", "get_branch_commit", "upload_file", "sense_file", "sense_commit",
         "commit", "create_symlink", "get_object", "check_content", "merge_branches",
         "check_log_bulk", "check_log_paged", "delete_branch", "check_branch_gone"]


def test_provider_example_workflow(target: Target) -> None:
    assert AIRFLOW_PYTHON.exists(), f"{AIRFLOW_PYTHON} is missing: run `make compat-airflow`"
    main_before = target.server.services.graveler.get_branch(target.repo, "main").commit_id
    connection = {"conn_type": "http", "host": target.endpoint,
                  "extra": {"access_key_id": target.server.access_key_id,
                            "secret_access_key": target.server.secret_access_key}}
    done = run([AIRFLOW_PYTHON, SCRIPT, target.repo], target.env(
        AIRFLOW_HOME=str(target.home / "airflow"),
        AIRFLOW_CONN_LAKEFS_DEFAULT=json.dumps(connection),
        AIRFLOW__CORE__LOAD_EXAMPLES="False"),
        timeout=300)
    report = json.loads(done.stdout.decode().strip().splitlines()[-1])
    assert report["connection_test"] == [True, "Connection Tested Successfully"]
    assert report["states"] == dict.fromkeys(TASKS, "success"), done.stderr.decode()[-5000:]
    returned = report["returned"]

    with target.server.client() as api:
        # the branch is gone, its commit stays with the DAG run's metadata
        assert api.get(f"/repositories/{target.repo}/branches/airflow-etl").status_code == 404
        commit = api.get(f"/repositories/{target.repo}/commits/{returned['commit']}").json()
        assert commit["message"] == "committing to lakeFS using airflow!"
        assert commit["parents"] == [main_before]
        assert commit["metadata"]["committed_from"] == "airflow-operator"
        assert commit["metadata"]["airflow_task_id"] == "commit"
        assert commit["metadata"]["::lakefs::Airflow::dag_id"] == "lakefs_workflow"
        # main is the merge of the branch, and holds its object
        main = api.get(f"/repositories/{target.repo}/branches/main").json()
        assert main["commit_id"] == returned["merge_branches"]
        merge = api.get(f"/repositories/{target.repo}/commits/{main['commit_id']}").json()
        assert merge["message"] == "merging to the default branch"
        assert merge["parents"] == [main_before, returned["commit"]]
        assert merge["metadata"]["committer"] == "airflow-operator"
        assert merge["metadata"]["airflow_task_id"] == "merge_branches"
    assert target.read("main", "path/to/_SUCCESS") == (
        b"It is not enough to succeed.  Others must fail.")
    assert returned["get_object"] == "It is not enough to succeed.  Others must fail."
    assert returned["get_branch_commit"]["id"] == main_before
    assert returned["create_symlink"].endswith("/symlinks")
