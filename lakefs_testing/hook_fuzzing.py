"""Generated action files and Lua scripts, committed to a live server.

Each round writes one generated action file (``webhook``, ``airflow`` or ``lua`` hooks,
valid or not) and a data object to a branch and commits, so that the hooks run at
``pre-commit`` (and sometimes ``post-commit``). Lua scripts are composed from fragments:
ordinary library use (strings, JSON, the ``lakefs`` module on the hook's own
repository, ``hook.fail``) and the hostile kinds a security review found (endless
loops, loops in ``__gc``, catastrophic patterns in Lua and ``regexp``, allocation past
the memory limit inside and outside Lua, self-referencing tables, modules that reach
the network).

What is checked after every round:
- the commit answers 201 or 412 (a hook failed or an action file is invalid), never
  a 5xx or a dropped connection;
- ``/_health`` answers within :data:`HEALTH_BOUND` seconds (the server is not stalled);
- no answer, and no recorded hook output, carries a canary: the value of a server
  environment variable without the hooks' prefix, or the server's encryption key;
- the receiver on :data:`DENIED_HOST` (in ``actions.webhook.denied_networks``) never
  gets a request.
"""

from __future__ import annotations

import os
import random
import secrets
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from lakefs_testing.live_server import LiveServer, live_server
from lakefs_testing.webhook import WebhookServer

REPO = "hooks-fuzz"
#: a loopback address the fuzzed server refuses to send hook requests to
DENIED_HOST = "127.0.0.3"
#: seconds ``/_health`` may take while hooks run before the server counts as stalled
HEALTH_BOUND = 5.0
CANARY_VAR = "LAKEFS_FUZZ_CANARY"
VISIBLE_VAR = "LAKEFSACTION_FUZZ_TOKEN"


@dataclass
class HookFuzzReport:
    """What a run did and found."""

    rounds: int = 0
    hook_types: Counter[str] = field(default_factory=Counter)
    fragments: Counter[str] = field(default_factory=Counter)
    statuses: Counter[str] = field(default_factory=Counter)
    #: rounds answered other than 201/412, or not at all
    unexpected: list[str] = field(default_factory=list)
    #: rounds after which /_health was slow or did not answer
    stalls: list[str] = field(default_factory=list)
    #: rounds whose answer or hook output carried a canary
    leaks: list[str] = field(default_factory=list)
    denied_reached: int = 0
    health_max: float = 0.0
    rss_start_mib: float = 0.0
    rss_end_mib: float = 0.0
    seconds: float = 0.0

    def summary(self) -> str:
        def counts(c: Counter[str]) -> str:
            return ", ".join(f"{k}: {n}" for k, n in sorted(c.items()))

        lines = [f"rounds: {self.rounds}", f"hooks: {counts(self.hook_types)}",
                 f"lua fragments: {counts(self.fragments)}",
                 f"commit statuses: {counts(self.statuses)}",
                 f"unexpected answers: {len(self.unexpected)}",
                 *(f"  {u}" for u in self.unexpected[:10]),
                 f"health stalls (> {HEALTH_BOUND:g} s): {len(self.stalls)}, slowest "
                 f"/_health {self.health_max * 1000:.0f} ms",
                 *(f"  {s}" for s in self.stalls[:10]),
                 f"canary leaks: {len(self.leaks)}", *(f"  {x}" for x in self.leaks[:10]),
                 f"requests reaching a denied address: {self.denied_reached}",
                 f"server process RSS: {self.rss_start_mib:.0f} -> {self.rss_end_mib:.0f} MiB",
                 f"time: {self.seconds:.1f} s"]
        return "\n".join(lines)

    @property
    def violations(self) -> int:
        return (len(self.unexpected) + len(self.stalls) + len(self.leaks)
                + self.denied_reached)


# -- Lua fragments ---------------------------------------------------------------------------
Fragment = Callable[[random.Random], str]


def _word(rng: random.Random) -> str:
    return "".join(rng.choice("abcxyz_/.") for _ in range(rng.randint(0, 12)))


LUA_FRAGMENTS: dict[str, Fragment] = {
    "print": lambda r: f'print("{_word(r)}", {r.randint(-5, 5)})',
    "strings": lambda r: ('local s = require("strings")\n'
                          f'print(s.split("{_word(r)}", "{r.choice("/._")}")[1])\n'
                          f'print(s.replace("{_word(r)}", "a", "b", {r.randint(-1, 3)}))'),
    "json": lambda r: ('local j = require("encoding/json")\n'
                       f'print(j.marshal({{a = {r.randint(0, 9)}, b = {{"{_word(r)}"}}}}))'),
    "regexp_ok": lambda r: (f'print(require("regexp").match("^{_word(r)}", "{_word(r)}"))'),
    "lakefs_list": lambda r: ('local code, res = require("lakefs").list_objects('
                              'action.repository_id, action.branch_id)\nprint(code)'),
    "lakefs_read": lambda r: ('local code, body = require("lakefs").get_object('
                              'action.repository_id, action.branch_id, "seed/data.txt")\n'
                              'print(code)'),
    "lakefs_tag": lambda r: ('print(require("lakefs").create_tag(action.repository_id, '
                             f'action.branch_id, "t-{r.randint(0, 10**9)}"))'),
    "other_repo": lambda r: ('print(require("lakefs").list_objects("some-other-repo", '
                             '"main"))'),
    "fail": lambda r: f'require("hook").fail("{_word(r)}")',
    "error": lambda r: f'error("{_word(r)}")',
    "pcall": lambda r: f'print(pcall(function() error("{_word(r)}") end))',
    "no_os": lambda r: 'print(os.getenv("LAKEFS_AUTH_ENCRYPT_SECRET_KEY"))',
    "no_io": lambda r: 'print(io.open("/etc/passwd"):read("*a"))',
    "net_http": lambda r: 'print(require("net/http").request("http://127.0.0.1:9/"))',
    "aws_denied": lambda r: ('local c = require("aws").s3_client("k", "s", "us-east-1", '
                             '"@DENIED@")\n'
                             'print(c.get_object("b", "k"))'),
    # the hostile kinds
    "endless_loop": lambda r: "while true do end",
    "endless_pcall": lambda r: "while true do pcall(function() while true do end end) end",
    "gc_loop": lambda r: ("setmetatable({}, {__gc = function() while true do end end})\n"
                          "collectgarbage = nil"),
    "lua_pattern": lambda r: ('print(string.find(string.rep("a", 40), '
                              '"a*a*a*a*a*a*a*a*a*a*a*a*b"))'),
    "regexp_bomb": lambda r: ('print(require("regexp").match("^(a+)+$", '
                              'string.rep("a", 34) .. "!"))'),
    "lua_memory": lambda r: ("local t = {}\nfor i = 1, 1e8 do t[i] = string.rep('x', 1024)"
                             " .. i end"),
    "library_memory": lambda r: ('print(#require("strings").replace(string.rep("a", 4000), '
                                 '"a", string.rep("b", 150000), -1))'),
    "split_memory": lambda r: ('print(#require("strings").split(string.rep("ab", 1e7), '
                               '""))'),
    "json_dag": lambda r: ('local t = {}\nlocal u = t\nfor i = 1, 40 do u = {u, u} end\n'
                           'print(#require("encoding/json").marshal(u))'),
    "deep_recursion": lambda r: "local function f(n) return f(n + 1) + 1 end\nf(1)",
    "string_bomb": lambda r: "local s = 'x'\nfor i = 1, 40 do s = s .. s end",
}


def lua_script(rng: random.Random) -> tuple[str, list[str]]:
    """A script of one to three fragments, and their names."""
    names = rng.sample(sorted(LUA_FRAGMENTS), rng.randint(1, 3))
    return "\n".join(LUA_FRAGMENTS[n](rng) for n in names), names


def _indent(text: str, spaces: int) -> str:
    pad = " " * spaces
    return "\n".join(pad + line for line in text.splitlines())


class HookFuzzer:
    """Commits generated action files to ``server`` (see module doc)."""

    def __init__(self, server: LiveServer, receiver: WebhookServer, denied: WebhookServer,
                 *, seed: int = 0) -> None:
        self.server = server
        self.receiver, self.denied = receiver, denied
        self.rng = random.Random(seed)
        self.report = HookFuzzReport()
        self.http = server.client(server.access_key_id, server.secret_access_key)
        key = server.services.config.auth.encrypt.secret_key
        self.canaries = [os.environ[CANARY_VAR], key.get_secret_value() if key else ""]

    # -- generation --------------------------------------------------------------------
    def _env(self) -> str:
        return self.rng.choice([VISIBLE_VAR, CANARY_VAR, "LAKEFS_AUTH_ENCRYPT_SECRET_KEY",
                                "PATH", "LAKEFSACTION_MISSING"])

    def _url(self) -> str:
        return self.rng.choice([
            f"{self.receiver.url}/ok", f"{self.receiver.url}/fail", self.denied.url + "/x",
            f"http://{DENIED_HOST}:9/x", "http://127.0.0.1:9/closed", "not a url",
            "file:///etc/passwd", ""])

    def _hook(self, i: int) -> tuple[str, str]:
        kind = self.rng.choices(["lua", "webhook", "airflow", "bogus"], [6, 2, 1, 1])[0]
        hook_id = self.rng.choice([f"h{i}", f"h{i}", "", "9bad id"])
        if kind == "lua":
            script, names = lua_script(self.rng)
            script = script.replace("@DENIED@", self.denied.url)
            self.report.fragments.update(names)
            props = f"script: |\n{_indent(script, 8)}"
        elif kind == "webhook":
            props = (f'url: "{self._url()}"\n      timeout: 2s\n      headers:\n'
                     f'        x-h: "{{{{ ENV.{self._env()} }}}}"\n      query_params:\n'
                     f'        q: "{{{{ ENV.{self._env()} }}}}"')
        elif kind == "airflow":
            props = (f'url: "{self._url()}"\n      dag_id: d\n      username: u\n'
                     f'      password: "{{{{ ENV.{self._env()} }}}}"\n      timeout: 2s')
        else:
            props = self.rng.choice(["script: 7", "url: [1, 2]", "{}", "script_path: ''"])
        self.report.hook_types[kind] += 1
        return kind, (f"  - id: \"{hook_id}\"\n    type: {kind if kind != 'bogus' else 'shell'}"
                      f"\n    properties:\n      {props}\n")

    def action(self) -> str:
        event = self.rng.choices(["pre-commit", "post-commit", "pre-merge"], [6, 2, 1])[0]
        hooks = "".join(self._hook(i)[1] for i in range(self.rng.randint(1, 2)))
        return f"name: fuzz\non:\n  {event}:\n    branches: [main]\nhooks:\n{hooks}"

    # -- running -----------------------------------------------------------------------
    def run(self, rounds: int) -> HookFuzzReport:
        """Commit ``rounds`` generated action files, then read every run's output."""
        try:
            return self._run(rounds)
        finally:
            self.http.close()

    def _run(self, rounds: int) -> HookFuzzReport:
        started = time.monotonic()
        self.report.rss_start_mib = _rss_mib()
        api = f"{self.server.endpoint}/api/v1/repositories"
        self.http.post(api, json={"name": REPO, "storage_namespace": f"local://{REPO}"})
        objects = f"{api}/{REPO}/branches/main/objects"
        self.http.post(objects, params={"path": "seed/data.txt"}, content=b"seed")
        for i in range(rounds):
            action = self.action()
            self.http.post(objects, params={"path": "_lakefs_actions/fuzz.yaml"},
                           content=action.encode())
            self.http.post(objects, params={"path": f"data/{i}"}, content=b"x")
            self._commit(i, f"{api}/{REPO}/branches/main/commits")
            self._health(i)
            self.report.rounds += 1
        self._check_outputs(api)
        self.report.denied_reached = len(self.denied.calls)
        self.report.rss_end_mib = _rss_mib()
        self.report.seconds = time.monotonic() - started
        return self.report

    def _commit(self, i: int, url: str) -> None:
        try:
            resp = self.http.post(url, json={"message": f"round {i}"}, timeout=120)
        except httpx.HTTPError as exc:
            self.report.unexpected.append(f"round {i}: {type(exc).__name__}: {exc}")
            return
        self.report.statuses[str(resp.status_code)] += 1
        if resp.status_code not in (201, 412):
            self.report.unexpected.append(f"round {i}: {resp.status_code} {resp.text[:200]}")
        self._scan(f"round {i} answer", resp.text)

    def _health(self, i: int) -> None:
        start = time.monotonic()
        try:
            ok = self.http.get(f"{self.server.endpoint}/_health",
                               timeout=HEALTH_BOUND).is_success
        except httpx.HTTPError:
            ok = False
        took = time.monotonic() - start
        self.report.health_max = max(self.report.health_max, took)
        if not ok or took > HEALTH_BOUND:
            self.report.stalls.append(f"round {i}: /_health took {took:.1f} s (ok={ok})")

    def _check_outputs(self, api: str) -> None:
        runs = self.http.get(f"{api}/{REPO}/actions/runs", params={"amount": 1000}).json()
        for run in runs.get("results", []):
            rid = run["run_id"]
            hooks = self.http.get(f"{api}/{REPO}/actions/runs/{rid}/hooks").json()
            for hook in hooks.get("results", []):
                out = self.http.get(
                    f"{api}/{REPO}/actions/runs/{rid}/hooks/{hook['hook_run_id']}/output")
                self._scan(f"run {rid} hook {hook['hook_id']} output", out.text)

    def _scan(self, where: str, text: str) -> None:
        if any(c and c in text for c in self.canaries):
            self.report.leaks.append(where)


def _rss_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


@contextmanager
def hook_fuzz_server(root: Path, lua_timeout: str = "1s") -> Iterator[
        tuple[LiveServer, WebhookServer, WebhookServer]]:
    """A live server whose hooks run with short bounds, a receiver its hooks may reach,
    and one on :data:`DENIED_HOST` that they must never reach."""
    saved = {k: os.environ.get(k) for k in (CANARY_VAR, VISIBLE_VAR)}
    os.environ[CANARY_VAR] = f"canary-{secrets.token_hex(8)}"
    os.environ[VISIBLE_VAR] = "visible-token"
    env = {"LAKEFS_ACTIONS_LUA_TIMEOUT": lua_timeout,
           "LAKEFS_ACTIONS_LUA_MAX_MEMORY": str(32 << 20),
           "LAKEFS_ACTIONS_WEBHOOK_DENIED_NETWORKS": f'["169.254.0.0/16", "{DENIED_HOST}/32"]',
           "LAKEFS_AUTH_ENCRYPT_SECRET_KEY": f"fuzz-key-{secrets.token_hex(8)}"}
    try:
        with WebhookServer() as receiver, WebhookServer(host=DENIED_HOST) as denied, \
                live_server(str(root / "server"), env) as server:
            yield server, receiver, denied
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
