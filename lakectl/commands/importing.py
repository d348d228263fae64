"""``lakectl import --from <object store URI> --to <lakeFS path URI>``.

On lakeFS's import API: ``POST .../branches/{branch}/import`` starts an import of a
prefix outside any storage namespace and answers its id; ``GET .../import?id=`` is
its status (ingested objects, then the commit); ``DELETE .../import?id=`` cancels.
"""

from __future__ import annotations

import re
import sys
import time
from typing import Any

import click
from rich.console import Console
from rich.progress import Progress, SpinnerColumn, TextColumn

from lakectl import flags
from lakectl.output import Fatal, Output, date, output_option
from lakectl.session import Session, pass_session
from lakefs_core.client import ApiError

POLL_INTERVAL = 1.0
#: polls in a row without any news before giving up
MAX_STALE_POLLS = 25


def _check_source(s: Session, source: str) -> None:
    """lakectl's check that the source fits the server's store, when it says how."""
    storage = (s.json("GET", "/config").get("storage_config") or {})
    regex = storage.get("import_validity_regex") or ""
    if regex and not re.match(regex, source):
        raise Fatal(f"import source '{source}' doesn't match current configured storage "
                    f"'{storage.get('blockstore_type', '')}'")


@click.command("import")
@click.option("--from", "source", required=True, help='prefix to read from (e.g. '
              '"s3://bucket/sub/path/"). must not be in a storage namespace')
@click.option("--to", "to", required=True, help='lakeFS path to load objects into (e.g. '
              '"lakefs://repo/branch/sub/path/")')
@click.option("--no-progress", is_flag=True, help="switch off the progress output")
@flags.commit_options(empty_message_default=True)
@output_option
@pass_session
def import_(s: Session, source: str, to: str, no_progress: bool, message: str,
            meta: tuple[str, ...], allow_empty_message: bool, output_format: str) -> None:
    """Import data from external source to a destination branch"""
    u = s.path_uri(to, "lakeFS path URI")
    body: dict[str, Any] = {
        "paths": [{"path": source, "destination": u.path_or_empty, "type": "common_prefix"}],
        "commit": {"message": flags.commit_message(message, allow_empty_message)}}
    metadata = flags.key_values(meta)
    if metadata:
        body["commit"]["metadata"] = metadata
    _check_source(s, source)
    try:
        s.call("GET", f"/repositories/{u.repository}/branches/{u.ref}")
    except ApiError as e:
        if e.status == 404:
            raise Fatal(f"Target branch '{u.ref}', does not exists!") from e
        raise
    path = f"/repositories/{u.repository}/branches/{u.ref}/import"
    import_id = s.json("POST", path, ok=(202,), json=body)["id"]
    console = Console(file=sys.stderr)
    progress = Progress(SpinnerColumn(), TextColumn("Importing {task.completed} objects"),
                        console=console, disable=no_progress)
    status: dict[str, Any] = {}
    stale, updated = 0, None
    try:
        with progress:
            task = progress.add_task("import", total=None)
            while not status.get("completed"):
                time.sleep(POLL_INTERVAL)
                status = s.json("GET", path, params={"id": import_id})
                if status.get("error"):
                    raise Fatal(f"Import failed: {status['error'].get('message', '')}")
                progress.update(task, completed=int(status.get("ingested_objects") or 0))
                stale = stale + 1 if status.get("update_time") == updated else 0
                updated = status.get("update_time")
                if stale >= MAX_STALE_POLLS:
                    raise Fatal(f"Import status did not update for "
                                f"{MAX_STALE_POLLS * POLL_INTERVAL:.0f}s - abandon")
    except KeyboardInterrupt:
        click.echo("\nCanceling import")
        s.call("DELETE", path, ok=(204,), params={"id": import_id})
        raise Fatal("Import Canceled") from None
    out = Output(output_format)
    if out.json:
        out.dump(status)
        return
    commit = status.get("commit") or {}
    out.echo(f'Import of {status.get("ingested_objects", 0)} object(s) into "{u.ref}" '
             f"completed.\n"
             f"MetaRange ID: {status.get('metarange_id', '')}\n"
             f"Commit ID: {commit.get('id', '')}\n"
             f"Message: {commit.get('message', '')}\n"
             f"Timestamp: {date(commit.get('creation_date'))}\n"
             f"Parents: {', '.join(commit.get('parents') or [])}")
