"""``lakectl auth users|groups|policies``: users, their credentials, groups and the
policies attached to either, as lakectl prints them."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import click

from lakectl import flags
from lakectl.output import Fatal, Output, date, output_option
from lakectl.session import Session, pass_session

POLICY_HEADERS = ("Policy ID", "Creation Date", "Statement #", "Resource", "Effect", "Actions")


def _id_option(help_text: str, required: bool = True) -> Callable[[Any], Any]:
    if required:
        return click.option("--id", "id_", required=True, help=help_text)
    return click.option("--id", "id_", default="", help=help_text)


_USER_ID = "Username (email for password-based users)"
_USER_ID_OR_CURRENT = "Username (email for password-based users, default: current user)"
_GROUP_ID = "Group identifier"
_POLICY_ID = "Policy identifier"


def _pages(f: Any) -> Any:
    f = click.option("--after", default="",
                     help="show results after this value (used for pagination)")(f)
    return click.option("--amount", type=int, default=flags.DEFAULT_AMOUNT, show_default=True,
                        help="how many results to return")(f)


def _current_user(s: Session, user_id: str) -> str:
    return user_id or str(s.json("GET", "/user")["user"]["id"])


def _id_and_date(kind: str) -> Callable[[dict[str, Any]], str]:
    return lambda o: (f"{kind} created successfully.\nID: {o['id']}\n"
                      f"Creation Date: {date(o.get('creation_date'))}")


def _policy_rows(policies: list[dict[str, Any]]) -> list[list[Any]]:
    return [[p["id"], date(p.get("creation_date")), i, st.get("resource", ""),
             st.get("effect", ""), ", ".join(st.get("action") or [])]
            for p in policies for i, st in enumerate(p.get("statement") or [])]


def _policies_listing(s: Session, path: str, params: dict[str, Any], amount: int, after: str,
                      output_format: str) -> None:
    out = Output(output_format)
    page = s.page(path, params, amount, after)
    if out.json:
        out.page(page["results"], page.get("pagination"))
        return
    out.table(POLICY_HEADERS, _policy_rows(page["results"]), page.get("pagination"), amount)


def _statement(st: dict[str, Any]) -> dict[str, Any]:
    """A statement as lakectl shows it: its fields in order, no empty condition."""
    out = {"action": st.get("action") or []}
    if st.get("condition"):
        out["condition"] = st["condition"]
    return {**out, "effect": st.get("effect", ""), "resource": st.get("resource", "")}


def _policy_text(p: dict[str, Any]) -> str:
    statements = json.dumps({"statement": [_statement(st) for st in p.get("statement") or []]},
                            indent=2)
    return (f"\nID: {p['id']}\nCreation Date: {date(p.get('creation_date'))}\n"
            f"Statements:\n{statements}\n")


@click.group()
def auth() -> None:
    """Manage authentication and authorization"""


# --- users -----------------------------------------------------------------------------------
@auth.group()
def users() -> None:
    """Manage users"""


@users.command("create")
@_id_option("Username")
@click.option("--email", default=None, hidden=True, help="email of the user")
@output_option
@pass_session
def users_create(s: Session, id_: str, email: str | None, output_format: str) -> None:
    """Create a user"""
    body: dict[str, Any] = {"id": id_}
    if email:
        body["email"] = email
    created = s.json("POST", "/auth/users", ok=(201,), json=body)
    Output(output_format).show(created, _id_and_date("User"))


@users.command("delete")
@_id_option(_USER_ID)
@pass_session
def users_delete(s: Session, id_: str) -> None:
    """Delete a user"""
    s.call("DELETE", f"/auth/users/{id_}", ok=(204,))
    click.echo("User deleted successfully")


@users.command("list")
@_pages
@output_option
@pass_session
def users_list(s: Session, amount: int, after: str, output_format: str) -> None:
    """List users"""
    page = s.page("/auth/users", {}, amount, after)
    Output(output_format).listing(page, ["User ID", "Creation Date"],
                                  lambda u: [u["id"], date(u.get("creation_date"))], amount)


@users.group("groups")
def users_groups() -> None:
    """Manage user groups"""


@users_groups.command("list")
@_id_option(_USER_ID)
@_pages
@output_option
@pass_session
def users_groups_list(s: Session, id_: str, amount: int, after: str, output_format: str) -> None:
    """List groups for the given user"""
    page = s.page(f"/auth/users/{id_}/groups", {}, amount, after)
    Output(output_format).listing(page, ["Group ID", "Creation Date"],
                                  lambda g: [g["id"], date(g.get("creation_date"))], amount)


@users.group("policies")
def users_policies() -> None:
    """Manage user policies"""


@users_policies.command("list")
@click.option("--effective", is_flag=True, help="List all distinct policies attached to the "
              "user, including by group memberships")
@_id_option(_USER_ID)
@_pages
@output_option
@pass_session
def users_policies_list(s: Session, effective: bool, id_: str, amount: int, after: str,
                        output_format: str) -> None:
    """List policies for the given user"""
    _policies_listing(s, f"/auth/users/{id_}/policies",
                      {"effective": "true" if effective else None}, amount, after,
                      output_format)


@users_policies.command("attach")
@_id_option(_USER_ID)
@click.option("--policy", required=True, help=_POLICY_ID)
@pass_session
def users_policies_attach(s: Session, id_: str, policy: str) -> None:
    """Attach a policy to a user"""
    s.call("PUT", f"/auth/users/{id_}/policies/{policy}", ok=(201,))
    click.echo("Policy attached successfully")


@users_policies.command("detach")
@_id_option(_USER_ID)
@click.option("--policy", required=True, help=_POLICY_ID)
@pass_session
def users_policies_detach(s: Session, id_: str, policy: str) -> None:
    """Detach a policy from a user"""
    s.call("DELETE", f"/auth/users/{id_}/policies/{policy}", ok=(204,))
    click.echo("Policy detached successfully")


@users.group("credentials")
def credentials() -> None:
    """Manage user credentials"""


@credentials.command("create")
@_id_option(_USER_ID_OR_CURRENT, required=False)
@output_option
@pass_session
def credentials_create(s: Session, id_: str, output_format: str) -> None:
    """Create user credentials"""
    created = s.json("POST", f"/auth/users/{_current_user(s, id_)}/credentials", ok=(201,))
    Output(output_format).show(created, lambda c: (
        "Credentials created successfully.\n"
        f"{'Access Key ID:':<18} {c['access_key_id']}\n"
        f"{'Secret Access Key:':<18} {c['secret_access_key']}\n\n"
        "Keep these somewhere safe since you will not be able to see the secret key again"))


@credentials.command("delete")
@_id_option(_USER_ID_OR_CURRENT, required=False)
@click.option("--access-key-id", required=True, help="Access key ID to delete")
@pass_session
def credentials_delete(s: Session, id_: str, access_key_id: str) -> None:
    """Delete user credentials"""
    s.call("DELETE", f"/auth/users/{_current_user(s, id_)}/credentials/{access_key_id}", ok=(204,))
    click.echo("Credentials deleted successfully")


@credentials.command("list")
@_id_option(_USER_ID_OR_CURRENT, required=False)
@_pages
@output_option
@pass_session
def credentials_list(s: Session, id_: str, amount: int, after: str, output_format: str) -> None:
    """List user credentials"""
    page = s.page(f"/auth/users/{_current_user(s, id_)}/credentials", {}, amount, after)
    Output(output_format).listing(
        page, ["Access Key ID", "Issued Date"],
        lambda c: [c["access_key_id"], date(c.get("creation_date"))], amount)


# --- groups ----------------------------------------------------------------------------------
@auth.group()
def groups() -> None:
    """Manage groups"""


@groups.command("create")
@_id_option(_GROUP_ID)
@click.option("--description", default="", help="Group description")
@output_option
@pass_session
def groups_create(s: Session, id_: str, description: str, output_format: str) -> None:
    """Create a group"""
    body: dict[str, Any] = {"id": id_}
    if description:
        body["description"] = description
    created = s.json("POST", "/auth/groups", ok=(201,), json=body)
    Output(output_format).show(created, _id_and_date("Group"))


@groups.command("delete")
@_id_option(_GROUP_ID)
@pass_session
def groups_delete(s: Session, id_: str) -> None:
    """Delete a group"""
    s.call("DELETE", f"/auth/groups/{id_}", ok=(204,))
    click.echo("Group deleted successfully")


@groups.command("list")
@_pages
@output_option
@pass_session
def groups_list(s: Session, amount: int, after: str, output_format: str) -> None:
    """List groups"""
    page = s.page("/auth/groups", {}, amount, after)
    Output(output_format).listing(page, ["Group ID", "Creation Date"],
                                  lambda g: [g["id"], date(g.get("creation_date"))], amount)


@groups.group("members")
def members() -> None:
    """Manage group user memberships"""


def _member_add(s: Session, group: str, user: str) -> None:
    s.call("PUT", f"/auth/groups/{group}/members/{user}", ok=(201,))
    click.echo("User successfully added")


def _member_remove(s: Session, group: str, user: str) -> None:
    s.call("DELETE", f"/auth/groups/{group}/members/{user}", ok=(204,))
    click.echo("User successfully removed")


def _members_list(s: Session, group: str, amount: int, after: str, output_format: str) -> None:
    page = s.page(f"/auth/groups/{group}/members", {}, amount, after)
    Output(output_format).listing(page, ["User ID"], lambda u: [u["id"]], amount)


def _member_command(name: str, doc: str, hidden: bool = False) -> Callable[[Any], Any]:
    def decorate(f: Any) -> Any:
        f.__doc__ = doc
        f = click.option("--user", required=True, help=_USER_ID)(f)
        f = _id_option(_GROUP_ID)(f)
        return click.command(name, hidden=hidden)(pass_session(f))
    return decorate


@_member_command("add", "Add a user to a group")
def members_add(s: Session, id_: str, user: str) -> None:
    _member_add(s, id_, user)


@_member_command("remove", "Remove a user from a group")
def members_remove(s: Session, id_: str, user: str) -> None:
    _member_remove(s, id_, user)


@members.command("list")
@_id_option(_GROUP_ID)
@_pages
@output_option
@pass_session
def members_list(s: Session, id_: str, amount: int, after: str, output_format: str) -> None:
    """List users in a group"""
    _members_list(s, id_, amount, after, output_format)


members.add_command(members_add)
members.add_command(members_remove)


# lakectl's earlier names of the member commands, still accepted
@_member_command("add-member", "Add a user to a group", hidden=True)
def add_member(s: Session, id_: str, user: str) -> None:
    _member_add(s, id_, user)


@_member_command("remove-member", "Remove a user from a group", hidden=True)
def remove_member(s: Session, id_: str, user: str) -> None:
    _member_remove(s, id_, user)


@groups.command("list-members", hidden=True)
@_id_option(_GROUP_ID)
@_pages
@output_option
@pass_session
def list_members(s: Session, id_: str, amount: int, after: str, output_format: str) -> None:
    """List users in a group"""
    _members_list(s, id_, amount, after, output_format)


groups.add_command(add_member)
groups.add_command(remove_member)


@groups.group("policies")
def groups_policies() -> None:
    """Manage group policies"""


@groups_policies.command("list")
@_id_option(_GROUP_ID)
@_pages
@output_option
@pass_session
def groups_policies_list(s: Session, id_: str, amount: int, after: str,
                         output_format: str) -> None:
    """List policies for the given group"""
    _policies_listing(s, f"/auth/groups/{id_}/policies", {}, amount, after, output_format)


@groups_policies.command("attach")
@_id_option(_GROUP_ID)
@click.option("--policy", required=True, help=_POLICY_ID)
@pass_session
def groups_policies_attach(s: Session, id_: str, policy: str) -> None:
    """Attach a policy to a group"""
    s.call("PUT", f"/auth/groups/{id_}/policies/{policy}", ok=(201,))
    click.echo("Policy attached successfully")


@groups_policies.command("detach")
@_id_option(_GROUP_ID)
@click.option("--policy", required=True, help=_POLICY_ID)
@pass_session
def groups_policies_detach(s: Session, id_: str, policy: str) -> None:
    """Detach a policy from a group"""
    s.call("DELETE", f"/auth/groups/{id_}/policies/{policy}", ok=(204,))
    click.echo("Policy detached successfully")


@groups.group("acl")
def acl() -> None:
    """Manage ACLs"""


@acl.command("get")
@_id_option(_GROUP_ID)
@output_option
@pass_session
def acl_get(s: Session, id_: str, output_format: str) -> None:
    """Get ACL of group"""
    got = s.json("GET", f"/auth/groups/{id_}/acl")
    Output(output_format).show(got, lambda a: (
        f"Permission: {a.get('permission', '')}\n" + (
            "All repositories" if a.get("all_repositories")
            else "Repositories: " + ", ".join(a.get("repositories") or []))))


@acl.command("set")
@_id_option(_GROUP_ID)
@click.option("--permission", required=True,
              help='Permission, typically one of "Read", "Write", "Super" or "Admin"')
@click.option("--repository", multiple=True,
              help="Repository IDs to which access is granted (repeat for several)")
@click.option("--all-repositories", is_flag=True, help="Grant access to all repositories")
@pass_session
def acl_set(s: Session, id_: str, permission: str, repository: tuple[str, ...],
            all_repositories: bool) -> None:
    """Set ACL of group"""
    if all_repositories == bool(repository):
        raise Fatal("Must specify exactly one of --all-repositories or --repository")
    body: dict[str, Any] = {"permission": permission, "all_repositories": all_repositories}
    if repository:
        body["repositories"] = list(repository)
    s.call("POST", f"/auth/groups/{id_}/acl", ok=(201,), json=body)


# --- policies --------------------------------------------------------------------------------
@auth.group()
def policies() -> None:
    """Manage policies"""


@policies.command("create")
@_id_option(_POLICY_ID)
@click.option("--statement-document", required=True,
              help='JSON statement document path (or "-" for stdin)')
@output_option
@pass_session
def policies_create(s: Session, id_: str, statement_document: str,
                    output_format: str) -> None:
    """Create a policy"""
    doc = flags.read_json_file(statement_document,
                               open_prefix="could not open policy document: ",
                               parse_prefix="could not parse statement JSON document: ")
    if not isinstance(doc, dict):
        raise Fatal("could not parse statement JSON document: not an object")
    created = s.json("POST", "/auth/policies", ok=(201,),
                     json={"id": id_, "statement": doc.get("statement") or doc.get("Statement")})
    Output(output_format).show(created, lambda p: "Policy created successfully.\n"
                               + _policy_text(p))


@policies.command("delete")
@_id_option(_POLICY_ID)
@pass_session
def policies_delete(s: Session, id_: str) -> None:
    """Delete a policy"""
    s.call("DELETE", f"/auth/policies/{id_}", ok=(204,))
    click.echo("Policy deleted successfully")


@policies.command("list")
@_pages
@output_option
@pass_session
def policies_list(s: Session, amount: int, after: str, output_format: str) -> None:
    """List policies"""
    page = s.page("/auth/policies", {}, amount, after)
    Output(output_format).listing(page, ["Policy ID", "Creation Date"],
                                  lambda p: [p["id"], date(p.get("creation_date"))], amount)


@policies.command("show")
@_id_option(_POLICY_ID)
@output_option
@pass_session
def policies_show(s: Session, id_: str, output_format: str) -> None:
    """Show a policy"""
    Output(output_format).show(s.json("GET", f"/auth/policies/{id_}"), _policy_text)
