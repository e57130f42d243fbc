"""`agentwatch up`'s bus has a login per role, made into the data dir on first start.

Nothing logs in without one of the data dir's passwords (nats-py and a raw socket are refused);
the hook's login publishes events and nothing else; the hook, the demo, `sql`, `status` and the
dashboard's live feed log in by themselves from the data dir, and what they send is stored. A data
dir of an older `up` (a bus without logins) keeps the events its stream held.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import nats
import pytest
from nats.aio.client import Client as NATS

from agentwatch import config
from agentwatch.contract import encode_envelope, envelopes_from_stdin
from tests.conftest import clean_env, free_port, hook_settled, run_cli, run_emit, tool, wait_port
from tests.integration.test_store import Service, sql_rows, wait_rows


class Up(NamedTuple):
    url: str
    port: int
    data: Path
    env: dict[str, str]

    def password(self, role: str) -> str:
        return (self.data / "bus" / f"{role}.password").read_text().strip()


@pytest.fixture(scope="module")
def up(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Up]:
    root = tmp_path_factory.mktemp("logins")
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(root / "data"),
        AGENTWATCH_NATS_URL=url,
        AGENTWATCH_METRICS_ADDR=f"127.0.0.1:{free_port()}",
        AGENTWATCH_OTLP_ADDR=f"127.0.0.1:{free_port()}",
    )
    service = Service(["up"], env)
    try:
        service.wait_ready(60)
        yield Up(url, port, root / "data", env)
    finally:
        code, output = service.stop()
        assert code == 0, output


def violations(up: Up, user: str) -> list[str]:
    """The permission violations nats-server logged for `user`."""
    log = (up.data / "nats-server.log").read_text()
    return [line for line in log.splitlines() if "Violation" in line and f"user:{user}" in line]


def test_the_logins_are_private_files_and_never_on_the_command_line(up: Up) -> None:
    folder = up.data / "bus"
    assert folder.stat().st_mode & 0o777 == 0o700
    for name in ("hook.password", "store.password", "dashboard.password", "nats-server.conf"):
        assert (folder / name).stat().st_mode & 0o777 == 0o600, name
    passwords = {up.password(role) for role in config.ROLES}
    assert len(passwords) == 3 and all(len(p) >= 32 for p in passwords)
    servers = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    found = False
    for proc in servers:
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if argv[0].endswith(b"nats-server") and str(up.data).encode() in b" ".join(argv):
            found = True
            assert b"-c" in argv
            assert not any(p.encode() in arg for p in passwords for arg in argv)
    assert found, "no nats-server of this data dir"


def test_nats_py_without_a_login_is_refused(up: Up) -> None:
    async def attempt() -> str:
        nc = NATS()
        try:
            await nc.connect(up.url, allow_reconnect=False, max_reconnect_attempts=0, connect_timeout=3)
        except Exception as exc:
            return str(exc)
        finally:
            await nc.close()
        return "connected"

    assert "Authorization Violation" in asyncio.run(attempt())


def test_a_raw_connect_without_a_login_cannot_publish(up: Up) -> None:
    marker = f"forged-{time.time_ns()}"
    body = json.dumps({"id": marker}).encode()
    with socket.create_connection(("127.0.0.1", up.port), timeout=5) as sock:
        info = json.loads(sock.recv(65536).split(b" ", 1)[1])
        assert info.get("auth_required") is True
        sock.sendall(
            b'CONNECT {"verbose":false,"pedantic":false}\r\n'
            + f"PUB genie.agent.x.session.started {len(body)}\r\n".encode()
            + body
            + b"\r\nPING\r\n"
        )
        answer = b""
        deadline = time.monotonic() + 5
        while b"Authorization Violation" not in answer and time.monotonic() < deadline:
            chunk = sock.recv(65536)
            if not chunk:
                break
            answer += chunk
    assert b"-ERR 'Authorization Violation'" in answer
    assert b"PONG" not in answer


def test_the_hooks_login_publishes_and_does_nothing_else(up: Up) -> None:
    """With the hook's password: no reading events, no answering queries in the query service's
    place (its queue group), no deleting the stream."""

    async def attempt() -> tuple[list[str], bool, bool]:
        errors: list[str] = []

        async def keep(exc: Exception) -> None:
            errors.append(str(exc))

        nc = await nats.connect(up.url, user="hook", password=up.password("hook"), error_cb=keep,
                                allow_reconnect=False)  # fmt: skip
        seen: list[bytes] = []

        async def took(msg: Any) -> None:
            seen.append(msg.data)

        await nc.subscribe("genie.>", cb=took)
        await nc.subscribe("agentwatch.query", queue="agentwatch-query", cb=took)
        deleted = True
        try:
            await nc.request("$JS.API.STREAM.DELETE.GENIE", b"", timeout=2)
        except Exception:
            deleted = False
        await nc.flush()
        await asyncio.sleep(0.5)
        await nc.close()
        store = await nats.connect(up.url, user="store", password=up.password("store"))
        try:
            still = (await store.jetstream().stream_info("GENIE")).config.name == "GENIE"
        finally:
            await store.close()
        return errors, deleted or bool(seen), still

    errors, did_something, stream_there = asyncio.run(attempt())
    said = " ".join(errors).lower()
    assert 'violation for subscription to "genie.>"' in said, errors
    assert 'violation for subscription to "agentwatch.query"' in said, errors
    assert 'violation for publish to "$js.api.stream.delete.genie"' in said, errors
    assert not did_something
    assert stream_there
    # The query service still answers every query: no impostor joined its group.
    for _ in range(6):
        assert sql_rows(up.env, "SELECT 1 AS one") == [{"one": 1}]


def test_every_command_logs_in_by_itself_and_what_is_sent_is_stored(up: Up, tmp_path: Path) -> None:
    """The real hook, the demo, `sql` and `status` with nothing but the data dir and the plain
    URL: their events are stored, and nats-server logged no violation for the collector's or the
    readers' logins (they have every subject they use)."""
    session = f"logins-{time.time_ns()}"
    payload = {"hook_event_name": "Notification", "session_id": session, "message": "through the login"}
    emitted = run_emit(json.dumps(payload).encode(), up.env)
    assert emitted.returncode == 0, emitted.stderr
    assert hook_settled(up.data)
    wait_rows(up.env, f"SELECT count() AS n FROM events WHERE session_id = '{session}'", 1)  # noqa: S608
    assert (
        not (up.data / "spool" / "events.ndjson").exists()
        or not (up.data / "spool" / "events.ndjson").read_text().strip()
    ), "the hook published, it did not spool"

    demo = run_cli("demo", "--count", "60", "--rate", "0", "--team", "logins", env=up.env)
    assert demo.returncode == 0, demo.stdout + demo.stderr
    wait_rows(up.env, "SELECT count() AS n FROM events WHERE team = 'logins'", 60)

    status = run_cli("status", env=up.env)
    assert status.returncode == 0, status.stdout + status.stderr
    assert re.search(r"agentwatch-store: [\d,]+ waiting", status.stdout), status.stdout
    assert violations(up, "store") == [] and violations(up, "dashboard") == []


def test_the_dashboards_live_feed_logs_in(up: Up) -> None:
    """The dashboard's live source (the dashboard's login: it may watch genie.>) sees an event the
    moment the hook's login publishes it."""
    from agentwatch.bus.live import NatsLiveSource

    session = f"live-{time.time_ns()}"
    payload = json.dumps({"hook_event_name": "Notification", "session_id": session, "message": "x"}).encode()

    async def watch() -> bool:
        source = NatsLiveSource(up.url, up.env)
        got, connected = asyncio.Event(), asyncio.Event()
        said: list[str] = []

        def take(body: bytes) -> None:
            if session.encode() in body:
                got.set()

        def status(up_now: bool, line: str) -> None:
            said.append(line)
            if up_now:
                connected.set()

        task = asyncio.create_task(source.run(take, status))
        try:
            await asyncio.wait_for(connected.wait(), 10)
            emitted = await asyncio.to_thread(run_emit, payload, up.env)
            assert emitted.returncode == 0
            await asyncio.wait_for(got.wait(), 10)
            return True
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task  # its connection closed before the loop is

    assert asyncio.run(watch())


def test_a_command_without_the_login_says_what_to_do(up: Up, tmp_path: Path) -> None:
    elsewhere = {**up.env, "AGENTWATCH_DATA_DIR": str(tmp_path / "other")}
    result = run_cli("sql", "SELECT 1", env=elsewhere)
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert "refused the login" in lines[0] and "AGENTWATCH_DATA_DIR" in lines[0], lines[0]


def test_an_older_data_dir_keeps_the_events_its_stream_held(tmp_path: Path) -> None:
    """A data dir an older `up` ran (a bus without logins, its stream in the global account):
    the next `up` moves the stream into its account, and the events it held are stored."""
    from agentwatch.bus.streams import ensure_stream

    data = tmp_path / "data"
    port = free_port()
    url = f"nats://127.0.0.1:{port}"
    old = subprocess.Popen(
        [str(Path(tool("agentwatch")).parent / "nats-server"), "-a", "127.0.0.1", "-p", str(port), "-js",
         "-sd", str(data / "nats")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    ids: list[str] = []

    async def publish() -> None:
        nc = await nats.connect(url, allow_reconnect=False)
        js = nc.jetstream()
        await ensure_stream(js, {})
        for n in range(20):
            raw = json.dumps({"hook_event_name": "Notification", "session_id": "older", "message": str(n)})
            for subject, env in envelopes_from_stdin(raw.encode(), {}, host="older"):
                await js.publish(subject, encode_envelope(env), headers={"Nats-Msg-Id": env["id"]})
                ids.append(env["id"])
        await nc.close()

    try:
        wait_port(port)
        asyncio.run(publish())
    finally:
        old.terminate()
        old.wait(10)
    assert (data / "nats" / "jetstream" / "$G" / "streams" / "GENIE").is_dir()
    env = clean_env(
        AGENTWATCH_DATA_DIR=str(data),
        AGENTWATCH_NATS_URL=url,
        AGENTWATCH_METRICS_ADDR="off",
        AGENTWATCH_OTLP_ADDR="off",
    )
    service = Service(["up"], env)
    try:
        service.wait_ready(60)
        assert any("moved into its account" in line for line in service.lines), service.lines
        wait_rows(env, "SELECT count() AS n FROM events WHERE session_id = 'older'", len(ids))
        # An anonymous client of the old kind is now refused.
        refused = run_cli("demo", "--count", "1", "--url", f"nats://127.0.0.1:{port}", env={
            **env, "AGENTWATCH_DATA_DIR": str(tmp_path / "none")})  # fmt: skip
        assert refused.returncode != 0
    finally:
        code, output = service.stop()
    assert code == 0, output
    assert (data / "nats" / "jetstream" / "AGENTWATCH" / "streams" / "GENIE").is_dir()
    assert not (data / "nats" / "jetstream" / "$G").exists()


def test_only_a_plain_local_url_takes_the_data_dirs_login(tmp_path: Path) -> None:
    """A URL with credentials of its own, a creds or NKEY file, a remote bus or a cluster list is
    left as the user gave it; a plain local one takes the role's login when `up` wrote one."""
    environ = {"AGENTWATCH_DATA_DIR": str(tmp_path)}
    (tmp_path / "bus").mkdir()
    (tmp_path / "bus" / "hook.password").write_text("s3cret\n")

    def login(url: str, extra: dict[str, str] | None = None, role: str = "hook") -> tuple[str, str]:
        first = config.bus_servers(url, {**environ, **(extra or {})}, role)[0]
        return first.user, first.password

    assert login("nats://127.0.0.1:4222") == ("hook", "s3cret")
    assert login("nats://localhost:5000") == ("hook", "s3cret")
    assert login("nats://me:mine@127.0.0.1:4222") == ("me", "mine")
    assert login("nats://token@127.0.0.1:4222") == ("", "")
    assert login("nats://bus.example:4222") == ("", "")
    assert login("tls://127.0.0.1:4222") == ("", "")
    assert login("nats://127.0.0.1:4222,nats://127.0.0.1:4223") == ("", "")
    assert login("nats://127.0.0.1:4222", {"AGENTWATCH_NATS_CREDS": "/x.creds"}) == ("", "")
    assert login("nats://127.0.0.1:4222", {"AGENTWATCH_NATS_NKEY": "/x.nk"}) == ("", "")
    assert login("nats://127.0.0.1:4222", role="store") == ("", ""), "no file, no login"
    opts = config.nats_options("nats://127.0.0.1:4222", environ, name="t", role="hook")
    assert (opts["user"], opts["password"]) == ("hook", "s3cret")
    assert "s3cret" not in " ".join(opts["servers"])


def test_the_logins_are_made_once(tmp_path: Path) -> None:
    from agentwatch.cli import buslogin

    environ = {"AGENTWATCH_DATA_DIR": str(tmp_path / "data")}
    first = buslogin.ensure_logins(environ)
    conf = Path(buslogin.write_server_config(environ))
    assert buslogin.ensure_logins(environ) == first
    text = conf.read_text()
    assert all(password in text for password in first.values())
    assert os.stat(conf).st_mode & 0o777 == 0o600
