"""``lakectl config`` (write the configuration file from prompts) and ``lakectl doctor``
(check that the configuration reaches the server and authenticates)."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import click
import yaml

from lakectl.config import DEFAULT_FILE, ENV_PREFIX, ConfigError, load_config
from lakectl.output import Fatal
from lakectl.session import App
from lakefs_core.client import API_PREFIX, ApiError

#: (configuration key, prompt) of ``lakectl config``, in lakectl's order
QUESTIONS = (("credentials.access_key_id", "Access key ID"),
             ("credentials.secret_access_key", "Secret access key"),
             ("server.endpoint_url", "Server endpoint URL"))

_ACCESS_KEY_ID = re.compile(r"^AKIA[A-Z0-9]{12,}$")
_SECRET_ACCESS_KEY = re.compile(r"^[A-Za-z0-9/+=]{40}$")


def _config_file(app: App) -> Path:
    named = app.config_path or os.environ.get(f"{ENV_PREFIX}CONFIG_FILE")
    return Path(named or DEFAULT_FILE).expanduser()


def _valid_url(text: str) -> bool:
    parts = urlsplit(text)
    return parts.scheme in ("http", "https") and bool(parts.netloc)


@click.command("config")
@click.pass_obj
def config(app: App) -> None:
    """Create/update local lakeFS configuration"""
    file = _config_file(app)
    click.echo(f"Config file {file} will be used")
    doc: dict[str, Any] = {}
    if file.is_file():
        loaded = yaml.safe_load(file.read_text())
        doc = loaded if isinstance(loaded, dict) else {}
    for key, prompt in QUESTIONS:
        section, _, name = key.partition(".")
        current = (doc.get(section) or {}).get(name, "")
        while True:
            value = click.prompt(prompt, default=current or "", show_default=bool(current))
            if key != "server.endpoint_url" or _valid_url(value):
                break
            click.echo(f'parse "{value}": invalid URI for request', err=True)
        doc.setdefault(section, {})[name] = value
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(yaml.safe_dump(doc, sort_keys=False))


def _diagnosis(app: App) -> tuple[str, str] | None:
    """None when the configuration lists repositories, else (problem, details)."""
    try:
        session = app.session
    except Fatal as e:
        return "It looks like you have a problem with your configuration file.", e.message
    if not _valid_url(session.config.endpoint_url):
        return ("It looks like endpoint url is wrong.",
                f"parse {session.config.endpoint_url!r}: invalid URI")
    try:
        session.json("GET", "/repositories", params={"amount": 1})
    except ApiError as e:
        if e.unreachable or e.status == 404:
            return "It looks like endpoint url is wrong.", e.message
        if e.status == 401:
            return ("It seems like the `access_key_id` or `secret_access_key` you supplied "
                    "are wrong.", e.message)
        return "It looks like you have a problem with your configuration file.", e.message
    return None


@click.command("doctor")
@click.pass_obj
def doctor(app: App) -> None:
    """Run a basic diagnosis of the LakeFS configuration"""
    problem = _diagnosis(app)
    if problem is None:
        click.echo("Valid configuration")
        return
    click.echo(f"{problem[0]}\n{problem[1]}")
    try:
        cfg = load_config(app.config_path, base_uri=app.base_uri)
    except ConfigError:
        return
    if not _ACCESS_KEY_ID.match(cfg.access_key_id):
        click.echo(f"access_key_id value looks suspicious: {cfg.access_key_id}")
    if not _SECRET_ACCESS_KEY.match(cfg.secret_access_key):
        click.echo("secret_access_key value looks suspicious...")
    if not cfg.endpoint_url.rstrip("/").endswith(API_PREFIX):
        click.echo(f"Suspicious URI format for server.endpoint_url: {cfg.endpoint_url} "
                   f"doesn't end with: `{API_PREFIX}`.")
