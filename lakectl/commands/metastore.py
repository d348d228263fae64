"""``lakectl metastore copy|copy-all|import-all|diff|create-symlink``: table metadata
between metastores, pointed at lakeFS branches (:mod:`lakectl.metastore`).

The metastore is AWS Glue (``metastore.type: glue`` or ``--*-client-type glue``, with
``metastore.glue.*``); a Hive metastore (Thrift) is refused with a message.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import click

from lakectl import metastore as ms
from lakectl.output import Fatal
from lakectl.session import Session, pass_session

F = TypeVar("F", bound=Callable[..., Any])
CLIENT_TYPE_HELP = "metastore type [hive, glue]"


def open_metastore(s: Session, client_type: str) -> ms.GlueMetastore:
    """The metastore of ``client_type`` (the configuration's ``metastore.type`` when
    empty)."""
    kind = client_type or s.config.metastore.type
    if kind == "glue":
        return ms.GlueMetastore(s.config.metastore)
    if kind == "hive":
        raise Fatal("hive metastore is not supported by this lakectl: use glue "
                    "(metastore.type: glue)")
    raise Fatal(f"unknown type, expected hive or glue got: {kind}")


def _run(step: Callable[[], None]) -> None:
    try:
        step()
    except ms.MetastoreError as e:
        raise Fatal(str(e)) from None


@click.group()
def metastore() -> None:
    """Manage metastore commands"""


def _catalog_options(f: F) -> F:
    f = click.option("--catalog-id", default="", help="Glue catalog ID")(f)
    return click.option("--metastore-uri", default="", help="Hive metastore URI")(f)


def _with_catalog(s: Session, catalog_id: str) -> None:
    if catalog_id:
        from dataclasses import replace

        s.config = replace(s.config, metastore=replace(s.config.metastore,
                                                         glue_catalog_id=catalog_id))


@metastore.command("copy")
@click.option("--from-client-type", default="", help=CLIENT_TYPE_HELP)
@_catalog_options
@click.option("--from-schema", required=True, help="source schema name")
@click.option("--from-table", required=True, help="source table name")
@click.option("--to-client-type", default="", help=CLIENT_TYPE_HELP)
@click.option("--to-schema", default="", help="destination schema name [default is from-branch]")
@click.option("--to-table", default="", help="destination table name [default is  from-table] ")
@click.option("--to-branch", required=True, help="lakeFS branch name")
@click.option("--serde", default="", help="serde to set copy to  [default is  to-table]")
@click.option("-p", "--partition", multiple=True, help="partition to copy")
@pass_session
def copy(s: Session, from_client_type: str, metastore_uri: str, catalog_id: str,
         from_schema: str, from_table: str, to_client_type: str, to_schema: str,
         to_table: str, to_branch: str, serde: str, partition: tuple[str, ...]) -> None:
    """Copy or merge table

    copy or merge table. the destination table will point to the selected branch
    """
    _with_catalog(s, catalog_id)
    source, to = open_metastore(s, from_client_type), open_metastore(s, to_client_type)
    to_schema = to_schema or to_branch
    to_table = to_table or from_table
    serde = serde or to_table
    values = [v for p in partition for v in p.split(",")]
    click.echo(f"copy {from_schema}.{from_table} -> {to_schema}.{to_table}")
    _run(lambda: ms.copy_or_merge(
        source, to, from_schema, from_table, to_schema, to_table, serde, values,
        partial(ms.replace_branch_name, branch=to_branch)))


def _all_options(f: F) -> F:
    for option in reversed((
            click.option("--from-client-type", default="", help=CLIENT_TYPE_HELP),
            click.option("--from-address", default="", help="source metastore address"),
            click.option("--to-client-type", default="", help=CLIENT_TYPE_HELP),
            click.option("--to-address", required=True, help="destination metastore address"),
            click.option("--schema-filter", default=".*", show_default=True,
                         help="filter for schemas to copy in metastore pattern"),
            click.option("--table-filter", default=".*", show_default=True,
                         help="filter for tables to copy in metastore pattern"))):
        f = option(f)
    return f


@metastore.command("copy-all")
@_all_options
@click.option("--branch", required=True, help="lakeFS branch name")
@click.option("--continue-on-error", is_flag=True,
              help="prevent copy-all from failing when a single table fails")
@pass_session
def copy_all(s: Session, from_client_type: str, from_address: str, to_client_type: str,
             to_address: str, schema_filter: str, table_filter: str, branch: str,
             continue_on_error: bool) -> None:
    """Copy from one metastore to another

    copy or merge requested tables between hive metastores. the destination tables will
    point to the selected branch
    """
    if from_address == to_address:
        raise Fatal("from-address must be different than to-address")
    source, to = open_metastore(s, from_client_type), open_metastore(s, to_client_type)
    click.echo(f"copy {from_address} -> {to_address}")
    _run(lambda: ms.copy_all(source, to, schema_filter, table_filter,
                             partial(ms.replace_branch_name, branch=branch),
                             continue_on_error, click.echo))


@metastore.command("import-all")
@_all_options
@click.option("--repo", required=True, help="lakeFS repo name")
@click.option("--branch", required=True, help="lakeFS branch name")
@click.option("--continue-on-error", is_flag=True,
              help="prevent import-all from failing when a single table fails")
@pass_session
def import_all(s: Session, from_client_type: str, from_address: str, to_client_type: str,
               to_address: str, schema_filter: str, table_filter: str, repo: str,
               branch: str, continue_on_error: bool) -> None:
    """Import from one metastore to another

    \b
    import requested tables between hive metastores. the destination tables will point
    to the selected repository and branch
    table with location s3://my-s3-bucket/path/to/table
    will be transformed to location s3://repo-param/bucket-param/path/to/table
    """
    if from_address == to_address:
        raise Fatal("from-address must be different than to-address")
    source, to = open_metastore(s, from_client_type), open_metastore(s, to_client_type)
    click.echo(f"import {from_address} -> {to_address}")
    _run(lambda: ms.copy_all(source, to, schema_filter, table_filter,
                             partial(ms.imported_location, repository=repo, branch=branch),
                             continue_on_error, click.echo))


@metastore.command("diff")
@click.option("--from-client-type", default="", help=CLIENT_TYPE_HELP)
@_catalog_options
@click.option("--from-address", default="", help="source metastore address")
@click.option("--from-schema", required=True, help="source schema name")
@click.option("--from-table", required=True, help="source table name")
@click.option("--to-client-type", default="", help=CLIENT_TYPE_HELP)
@click.option("--to-address", default="", help="destination metastore address")
@click.option("--to-schema", default="", help="destination schema name ")
@click.option("--to-table", default="", help="destination table name [default is from-table]")
@pass_session
def diff(s: Session, from_client_type: str, metastore_uri: str, catalog_id: str,
         from_address: str, from_schema: str, from_table: str, to_client_type: str,
         to_address: str, to_schema: str, to_table: str) -> None:
    """Show column and partition differences between two tables"""
    _with_catalog(s, catalog_id)
    source, to = open_metastore(s, from_client_type), open_metastore(s, to_client_type)
    to_schema = to_schema or from_schema
    to_table = to_table or from_table

    def show() -> None:
        columns = ms.column_diff(source.get_table(from_schema, from_table),
                                 to.get_table(to_schema, to_table))
        partitions = ms.partition_diff(source.get_partitions(from_schema, from_table),
                                       to.get_partitions(to_schema, to_table))
        click.echo(f"{from_schema}.{from_table} <--> {to_schema}.{to_table}")
        for title, found in (("Columns", columns), ("Partitions", partitions)):
            click.echo(f"{title} are identical" if not found else
                       "\n".join([title, *map(str, found)]))

    _run(show)


@metastore.command("create-symlink")
@click.option("--repo", required=True, help="lakeFS repository name")
@click.option("--branch", required=True, help="lakeFS branch name")
@click.option("--path", required=True, help="path to table on lakeFS")
@click.option("--catalog-id", default="", help="Glue catalog ID")
@click.option("--from-schema", required=True, help="source schema name")
@click.option("--from-table", required=True, help="source table name")
@click.option("--to-schema", required=True, help="destination schema name")
@click.option("--to-table", required=True, help="destination table name")
@pass_session
def create_symlink(s: Session, repo: str, branch: str, path: str, catalog_id: str,
                   from_schema: str, from_table: str, to_schema: str, to_table: str) -> None:
    """Create symlink table and data

    create table with symlinks, and create the symlinks in s3 in order to access from
    external services that could only access s3 directly (e.g athena)
    """
    _with_catalog(s, catalog_id)
    location = s.json("POST", f"/repositories/{repo}/refs/{branch}/symlink", ok=(201,),
                      params={"location": path})["location"]
    glue = ms.GlueMetastore(s.config.metastore)
    _run(lambda: ms.copy_or_merge(glue, glue, from_schema, from_table, to_schema, to_table,
                                  "", (), partial(ms.symlink_location, prefix=location)))
