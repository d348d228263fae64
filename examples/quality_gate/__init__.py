"""A data-quality gate: a pre-merge webhook that checks the Parquet schema of a merge.

lakeFS (or this server) POSTs the pre-merge event to the service; it lists the merge's
changed files (the three-dot diff from the destination ``branch_id`` to
``source_ref``), reads the schema of every added or changed Parquet file of a watched
table with pyarrow, and compares it with the table's expected schema: a column of the
expected schema missing, or of another type, refuses the merge (a non-2xx answer whose
body lakeFS shows in the 412 of the merge). Extra columns are allowed.

A table's expected schema comes from a JSON file (``--schema``: table prefix to
``{column: arrow type}``, types written as pyarrow prints them: ``int64``,
``string``, ``timestamp[us]``) or, for a table given with ``--table``, from a Parquet
file of that table already on the destination branch (a new table passes).

Run it with credentials of a lakeFS user that may read the repository::

    export LAKECTL_CREDENTIALS_ACCESS_KEY_ID=... LAKECTL_CREDENTIALS_SECRET_ACCESS_KEY=...
    python -m examples.quality_gate --port 8090 --lakefs http://127.0.0.1:8000 \\
        --table tables/animals/ --schema examples/quality_gate/schema.json

and put ``examples/quality_gate/action.yaml`` under ``_lakefs_actions/`` in the
repository. It needs the ``lakefs`` SDK and pyarrow.
"""

from examples.quality_gate.gate import QualityGate, SchemaViolation, TableSchemas
from examples.quality_gate.server import make_server

__all__ = ["QualityGate", "SchemaViolation", "TableSchemas", "make_server"]
