"""Benchmark of what authenticating a REST request costs the auth store, per backend.

Run ``python -m bench.auth_store_bench [--n 300] [--groups 2]``.
It opens an auth store on SQLite (a file), PostgreSQL (a throwaway cluster) and
DynamoDB (moto in a process of its own), sets up the admin, makes a user in
``--groups`` groups with a policy each, and times what the REST API does for every
request made with an access key: ``authenticate`` and then ``effective_policies``.

It prints, per backend and user, the milliseconds per authenticated request and, on
DynamoDB, the requests made to the table for each. All servers are on loopback on
this machine: moto is an emulator, slower than DynamoDB itself, and a real table adds
a network round trip (a few milliseconds) to every request counted.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench.refstore_cas_bench import moto_process
from lakefs_core.auth import AuthStore, BaseAuthStore
from lakefs_core.auth.dynamodb_store import DynamoDBAuthStore
from lakefs_core.auth.model import Credential, Effect, Policy, Statement
from lakefs_testing.servers import MOTO_ENV, postgres

SECRET_KEY = "bench-secret-key"


def _prepare(store: BaseAuthStore, groups: int) -> dict[str, Credential]:
    creds = {"admin": store.setup_admin("admin")}
    store.create_user("member")
    for i in range(groups):
        store.create_group(f"g{i}")
        store.create_policy(Policy(f"p{i}", [Statement(Effect.ALLOW, ["fs:ReadObject"],
                                                       f"arn:lakefs:fs:::repository/r{i}/*")]))
        store.attach_policy_to_group(f"g{i}", f"p{i}")
        store.add_user_to_group("member", f"g{i}")
    creds["member"] = store.create_credentials("member")
    return creds


def _time(store: BaseAuthStore, cred: Credential, n: int) -> float:
    start = time.perf_counter()
    for _ in range(n):
        user = store.authenticate(cred.access_key_id, cred.secret)
        store.effective_policies(user.username)
    return (time.perf_counter() - start) / n * 1000


def _requests(store: DynamoDBAuthStore, cred: Credential) -> int:
    made: list[str] = []

    def count(**kwargs: Any) -> None:
        made.append(str(kwargs.get("event_name")))

    events = store.client.meta.events
    events.register("before-call.dynamodb.*", count)
    try:
        user = store.authenticate(cred.access_key_id, cred.secret)
        store.effective_policies(user.username)
    finally:
        events.unregister("before-call.dynamodb.*", count)
    return len(made)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=300, help="authentications per case")
    parser.add_argument("--groups", type=int, default=2, help="groups of the member user")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp, postgres() as pg, moto_process() as endpoint:
        backends: dict[str, Callable[[], BaseAuthStore]] = {
            "sqlite": lambda: AuthStore(f"sqlite:///{Path(tmp) / 'auth.db'}", SECRET_KEY),
            "postgres": lambda: AuthStore(pg.create_database("authbench"), SECRET_KEY),
            "dynamodb (moto)": lambda: DynamoDBAuthStore(
                "authbench", SECRET_KEY, endpoint=endpoint,
                region=MOTO_ENV["AWS_DEFAULT_REGION"],
                access_key_id=MOTO_ENV["AWS_ACCESS_KEY_ID"],
                secret_access_key=MOTO_ENV["AWS_SECRET_ACCESS_KEY"]),
        }
        print(f"authenticate + effective_policies, {args.n} times per case")
        for name, open_store in backends.items():
            with open_store() as store:
                creds = _prepare(store, args.groups)
                for who, cred in creds.items():
                    ms = _time(store, cred, args.n)
                    extra = (f", {_requests(store, cred)} table requests"
                             if isinstance(store, DynamoDBAuthStore) else "")
                    print(f"  {name:16} {who:7} {ms:7.2f} ms per request{extra}")


if __name__ == "__main__":
    main()
