"""Who, where, which branch (emitter/attribution.py): the installed hook, on real git repositories
made here by `git` itself, publishes on a real nats-server each event of a session with its person,
repository and branch; a remote's credentials reach neither the bus nor the store; a branch
switched mid-session shows on the events after it. Expected values come from git (`git rev-parse`)
or are written out, never from the module under test."""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from clickhouse_connect.driver.client import Client

from agentwatch.store.migrations import apply_migrations
from agentwatch.store.writes import insert_batch
from tests.conftest import clean_env, run_emit
from tests.services import Collector, NatsServer

LEAK = "s3cr3t-t0ken-9f1c"
REMOTE = f"https://bob:{LEAK}@Git.Example.com:8443/team/app.git"
EMAIL = "dev@example.com"
GLOBAL_EMAIL = "global@example.com"
EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Stop")


class Lab:
    """A home with a global git config, and repositories made under it by `git`."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "home"
        self.home.mkdir(parents=True)
        (self.home / ".gitconfig").write_text(f"[user]\n\temail = {GLOBAL_EMAIL}\n\tname = Global\n")
        self.env = clean_env(HOME=str(self.home), GIT_CONFIG_NOSYSTEM="1", USER="osuser")
        self.env.pop("XDG_CONFIG_HOME", None)

    def git(self, *args: str, cwd: Path) -> str:
        done = subprocess.run(
            ["git", "-c", "protocol.file.allow=always", *args],
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            check=True,
        )
        return done.stdout.strip()

    def repo(self, name: str, remote: str = "", email: str = "") -> Path:
        path = self.root / name
        path.mkdir()
        self.git("init", "-q", "-b", "main", cwd=path)
        if email:
            self.git("config", "user.email", email, cwd=path)
        if remote:
            self.git("remote", "add", "origin", remote, cwd=path)
        (path / "README").write_text(name)
        self.git("add", "README", cwd=path)
        self.git("commit", "-q", "-m", "first", cwd=path)
        return path

    def branch(self, cwd: Path) -> str:
        """What git says HEAD is: the branch, or the short commit of a detached head."""
        name = self.git("rev-parse", "--abbrev-ref", "HEAD", cwd=cwd)
        return self.git("rev-parse", "--short=7", "HEAD", cwd=cwd) if name == "HEAD" else name


class Session:
    """The hook's runs of one session, and what they published."""

    def __init__(self, lab: Lab, bus: NatsServer, collector: Collector, data: Path, **extra: str) -> None:
        self.id = str(uuid.uuid4())
        self.lab, self.collector = lab, collector
        self.env = dict(lab.env, AGENTWATCH_DATA_DIR=str(data), AGENTWATCH_NATS_URL=bus.url, **extra)
        self.sent = 0

    def emit(self, cwd: Path, event: str = "PreToolUse") -> dict[str, Any]:
        payload: dict[str, Any] = {"session_id": self.id, "hook_event_name": event, "cwd": str(cwd)}
        if event in ("PreToolUse", "PostToolUse"):
            payload.update(tool_name="Bash", tool_input={"command": "ls"}, tool_use_id=f"t{self.sent}")
        result = run_emit(json.dumps(payload).encode(), self.env)
        assert result.returncode == 0 and result.stdout == b""
        self.sent += 1
        return self.published()[-1]

    def published(self) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 20
        while True:
            mine = [json.loads(m.data) for m in self.collector.wait_for(0)]
            mine = [e for e in mine if e.get("session_id") == self.id]
            if len(mine) >= self.sent or time.monotonic() > deadline:
                break
            time.sleep(0.02)
        assert len(mine) == self.sent, "every event reached the bus once"
        return sorted(mine, key=lambda e: e["seq"])


def owner(env: dict[str, Any]) -> tuple[str, str, str]:
    return env["person"], env["repo"], env["branch"]


@pytest.fixture
def lab(tmp_path: Path) -> Lab:
    return Lab(tmp_path / "lab")


@pytest.fixture
def bus(nats_server: NatsServer, collector_for: Any) -> tuple[NatsServer, Collector]:
    return nats_server, collector_for(nats_server.url)


def session(lab: Lab, bus: tuple[NatsServer, Collector], tmp_path: Path, **extra: str) -> Session:
    return Session(lab, bus[0], bus[1], tmp_path / "data", **extra)


def test_every_event_of_a_session_names_its_person_repository_and_branch(
    lab: Lab, bus: tuple[NatsServer, Collector], tmp_path: Path, chdb_database: Client
) -> None:
    app = lab.repo("app", REMOTE, EMAIL)
    deep = app / "src" / "deep"
    deep.mkdir(parents=True)
    s = session(lab, bus, tmp_path)
    for event in EVENTS:
        s.emit(deep, event)
    envelopes = s.published()
    assert [owner(e) for e in envelopes] == [(EMAIL, "git.example.com/team/app", "main")] * len(EVENTS)
    # The session's answer is kept: a later event reads no config (one made unreadable changes nothing).
    (app / ".git" / "config").chmod(0o000)
    try:
        assert owner(s.emit(deep)) == (EMAIL, "git.example.com/team/app", "main")
    finally:
        (app / ".git" / "config").chmod(0o644)
    bodies = [m.data for m in bus[1].wait_for(s.sent)]
    assert all(LEAK.encode() not in b and b"bob" not in b for b in bodies), "no credential on the bus"
    apply_migrations(chdb_database)
    insert_batch(chdb_database, bodies, [])
    stored = chdb_database.raw_query("SELECT * FROM events FORMAT JSONEachRow")
    assert stored.count(b"\n") == len(bodies) and LEAK.encode() not in stored
    rows = chdb_database.query("SELECT DISTINCT person, repo, branch FROM events").result_rows
    assert rows == [(EMAIL, "git.example.com/team/app", "main")]
    view = chdb_database.query("SELECT session_id, person, repo, branch FROM sessions").result_rows
    assert view == [(s.id, EMAIL, "git.example.com/team/app", "main")]


def test_a_branch_switched_mid_session_shows_on_the_events_after_it(
    lab: Lab, bus: tuple[NatsServer, Collector], tmp_path: Path
) -> None:
    app = lab.repo("app", REMOTE, EMAIL)
    s = session(lab, bus, tmp_path)
    assert s.emit(app, "SessionStart")["branch"] == "main"
    assert s.emit(app)["branch"] == "main"
    lab.git("switch", "-q", "-c", "feature/login", cwd=app)
    assert s.emit(app)["branch"] == "feature/login"
    assert s.emit(app, "Stop")["branch"] == "feature/login"
    lab.git("checkout", "-q", "--detach", cwd=app)
    assert s.emit(app)["branch"] == lab.branch(app) != "feature/login"
    lab.git("remote", "set-url", "origin", "git@github.com:team/renamed.git", cwd=app)
    assert s.emit(app)["repo"] == "github.com/team/renamed"


def test_worktree_detached_head_submodule_and_no_repository(
    lab: Lab, bus: tuple[NatsServer, Collector], tmp_path: Path
) -> None:
    app = lab.repo("app", REMOTE, EMAIL)
    worktree, detached = lab.root / "app-wt", lab.root / "app-detached"
    lab.git("worktree", "add", "-q", "-b", "wt-branch", str(worktree), cwd=app)
    lab.git("worktree", "add", "-q", "--detach", str(detached), cwd=app)
    outer = lab.repo("outer")  # no remote, no email of its own: the global config's
    lab.git("submodule", "add", "-q", str(app), "libs/app", cwd=outer)
    plain = lab.root / "plain"
    plain.mkdir()
    expected = {
        worktree: (EMAIL, "git.example.com/team/app", "wt-branch"),
        detached: (EMAIL, "git.example.com/team/app", lab.branch(detached)),
        # A submodule's origin is the local path it was cloned from: its folder's name.
        outer / "libs" / "app": (GLOBAL_EMAIL, "app", lab.branch(outer / "libs" / "app")),
        outer: (GLOBAL_EMAIL, "outer", "main"),
        plain: (GLOBAL_EMAIL, "", ""),
    }
    assert len(expected[detached][2]) == 7
    for cwd, want in expected.items():
        s = session(lab, bus, tmp_path)
        assert owner(s.emit(cwd, "SessionStart")) == want, cwd
        assert owner(s.emit(cwd)) == want, cwd


def test_without_any_git_config_the_person_is_the_os_user_or_the_setting(
    lab: Lab, bus: tuple[NatsServer, Collector], tmp_path: Path
) -> None:
    (lab.home / ".gitconfig").unlink()
    plain = lab.root / "plain"
    plain.mkdir()
    assert owner(session(lab, bus, tmp_path).emit(plain)) == ("osuser", "", "")
    named = session(lab, bus, tmp_path, AGENTWATCH_PERSON="ada@team.example")
    assert owner(named.emit(plain)) == ("ada@team.example", "", "")


@pytest.mark.parametrize("mode", ["hash", "off"])
def test_no_email_reaches_the_bus_or_the_store_in_hash_and_off_modes(
    mode: str, lab: Lab, bus: tuple[NatsServer, Collector], tmp_path: Path, chdb_database: Client
) -> None:
    app = lab.repo("app", REMOTE, EMAIL)
    plain = lab.root / "plain"
    plain.mkdir()
    first = session(lab, bus, tmp_path, AGENTWATCH_PERSON_MODE=mode)
    people = {first.emit(app, event)["person"] for event in EVENTS}
    people.add(first.emit(plain)["person"])  # the cwd changed: the global config's email
    again = session(lab, bus, tmp_path, AGENTWATCH_PERSON_MODE=mode)
    people.add(again.emit(app)["person"])
    if mode == "off":
        assert people == {""}
    else:
        assert len(people) == 2 and all(p.startswith("h-") and len(p) == 18 for p in people), people
        assert again.published()[0]["person"] == first.published()[0]["person"], "stable across sessions"
    bodies = [m.data for m in bus[1].wait_for(first.sent + again.sent)]
    for text in (EMAIL, GLOBAL_EMAIL, "example.com>", "@example.com"):
        assert all(text.encode() not in b for b in bodies), text
    apply_migrations(chdb_database)
    insert_batch(chdb_database, bodies, [])
    stored = chdb_database.raw_query("SELECT * FROM events FORMAT JSONEachRow")
    assert stored.count(b"\n") == len(bodies)
    assert b"@example.com" not in stored
