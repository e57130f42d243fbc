"""`agentwatch hosts`: the fleet's health, host by host, as the hub sees it; `hosts forget NAME`.

Per host: whether its link is up (the hub's stream heard from its source within the last few
seconds), its last event and its events in the last hour (the store's), the backlog not yet at
the hub and how old its oldest message is (the host's own stream, asked through its domain while
the link is up; the lag as of the last contact while it is cut), the hook's spool on the host and
the versions it runs (its announcement).

On an agent host (`up --hub` running here) it shows that host alone, as it sees itself: the link
is up while the hub tells it, every few seconds, how far into its stream it has reached, and the
backlog is its stream's messages past that point, counted here, so it grows while the link is cut
(when the hub can only say `>=N` as of its last contact).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time
from typing import Any

from agentwatch import config
from agentwatch.cli import buslogin
from agentwatch.cli.errors import CliError, require
from agentwatch.format import HOST_COLUMNS, host_cells

HOST_SQL = (
    "SELECT host, toUnixTimestamp64Milli(max(timestamp)) / 1000 AS last, "
    "countIf(timestamp > now64(3) - INTERVAL 1 HOUR) AS hour, "
    "arrayStringConcat(arraySort(groupUniqArray(harness)), ' ') AS harnesses "
    "FROM events WHERE timestamp > now64(3) - INTERVAL 7 DAY GROUP BY host"
)


def _store_rows(environ: dict[str, str]) -> dict[str, tuple[float | None, int, str]] | None:
    """(last event, events in the last hour, harnesses) per host name; None when the store
    cannot be asked."""
    from agentwatch.cli.sources import History
    from agentwatch.store.answer import HistoryError

    source = History(environ, timeout=10.0)
    try:
        answer = source.query(HOST_SQL)
    except HistoryError:
        return None
    finally:
        source.close()
    return {
        str(h): (None if last is None else float(last), int(n), str(hs)) for h, last, n, hs in answer.rows
    }


def host_rows(environ: dict[str, str]) -> list[dict[str, Any]]:
    """Every host of the fleet, one dict each (what `--json` prints); on a host (`up --hub`
    running here), that host alone, as it sees itself: its link, and its backlog even while cut."""
    from agentwatch.bus.fleet import fleet_view, own_state, own_view

    url = config.nats_url(environ)
    own = own_state(environ)
    try:
        views = [asyncio.run(own_view(url, environ, own))] if own else asyncio.run(fleet_view(url, environ))
    except Exception as exc:
        raise CliError(f"cannot read the fleet from the bus at {config.display_urls(url)}: {exc}") from None
    store = {}
    if own:  # a host's own row: no store here, the hook's spool beside it
        from agentwatch.emitter.hook import spool_for

        views[0].announced["spool_bytes"] = spool_for(environ).status().bytes
    else:
        store = _store_rows(environ) or {}
    now = time.time()
    rows = []
    for v in views:
        a = v.announced
        name = str(a.get("host") or v.domain)
        last, hour, harnesses = store.get(name, (v.stream.last_at, None if v.own else 0, ""))
        src = v.source
        rows.append(
            {
                "host": name,
                "domain": v.domain,
                "seen_from": "this host" if v.own else "the hub",
                "link": "cut" if v.cut else "up",
                "last_contact_s": None if src is None or src.active_s is None else round(src.active_s, 1),
                "last_event": last,
                "events_1h": hour,
                "backlog": v.backlog,
                "backlog_measured": v.stream.reached,
                "oldest_waiting_s": None
                if v.stream.oldest_waiting is None
                else round(max(now - v.stream.oldest_waiting, 0.0), 1),
                "spool_bytes": a.get("spool_bytes"),
                "version": a.get("version"),
                "nats_version": a.get("nats_version"),
                "harnesses": harnesses,
                "announced_at": a.get("at"),
                **({"hub": a.get("hub")} if v.own else {}),
                "error": src.error if src else "",
            }
        )
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    now = time.time()
    lines = [HOST_COLUMNS, *(host_cells(r, now) for r in rows)]
    widths = [max(len(str(line[i])) for line in lines) for i in range(len(HOST_COLUMNS))]
    return "\n".join(
        "  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip() for line in lines
    )


def cmd_hosts(args: argparse.Namespace) -> int:
    require("hosts", "consumers", "nats")
    environ = dict(os.environ)
    if args.action == "forget":
        return _forget(environ, args.name)
    if args.action == "add":
        return _add(environ, args.name)
    rows = host_rows(environ)
    if args.json:
        print(json.dumps(rows, indent=2))
    elif not rows:
        print(
            "no hosts: `agentwatch hosts add NAME` on the hub prints the URL host NAME joins with "
            "(`agentwatch up --hub URL`, docs/deploy.md)"
        )
    else:
        if rows[0]["seen_from"] == "this host":
            print(f"this host, as it sees itself (the hub is {rows[0].get('hub') or '?'}):")
        print(_table(rows))
    return 0


def _forget(environ: dict[str, str], name: str | None) -> int:
    from agentwatch.bus.fleet import forget_host

    if not name:
        raise CliError("hosts forget NAME: which host (its name as `agentwatch hosts` shows it)")
    url = config.nats_url(environ)
    domain = config.host_domain(name)
    try:
        known = asyncio.run(forget_host(url, environ, domain))
    except Exception as exc:
        raise CliError(f"cannot change the fleet on the bus at {config.display_urls(url)}: {exc}") from None
    login = buslogin.drop_host_login(environ, domain)
    if not known and not login:
        raise CliError(f"no host {name} in the fleet (`agentwatch hosts` lists them)", 1)
    print(f"forgot host {name}: the hub no longer sources its stream (it joins again if it announces itself)")
    if login:
        print(f"its leaf login is gone: {buslogin.reload_host_logins(environ)}")
    return 0


def _add(environ: dict[str, str], name: str | None) -> int:
    """`hosts add NAME`: host NAME's own leaf login on this hub, and the URL it joins with."""
    if not name:
        raise CliError("hosts add NAME: which host (its AGENTWATCH_HOST, else its machine's name)")
    domain = config.host_domain(name)
    password = buslogin.add_host_login(environ, domain)
    how = buslogin.reload_host_logins(environ)
    try:  # the hub's leaf port as `up` reads it; its own address only where it listens on one
        host, port = config.listen_address(environ, "AGENTWATCH_LEAF_ADDR", "0.0.0.0:7422") or ("", 7422)
    except ValueError as exc:
        raise CliError(str(exc)) from None
    if host in ("", "0.0.0.0", "::"):  # noqa: S104 - an address to replace, not to bind
        host = "HUB"
    print(f"host {name}'s leaf login is {buslogin.leaf_user(domain)}; {how}")
    print(f"on {name}, in a 0600 environment file (HUB: this hub's address as {name} reaches it):")
    print(f"AGENTWATCH_HOST={name}")
    print(f"AGENTWATCH_HUB_URL=nats-leaf://{buslogin.leaf_user(domain)}:{password}@{host}:{port}")
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    hosts = sub.add_parser(
        "hosts",
        help="the fleet's agent hosts: link, events, backlog not yet at the hub, spool, versions",
        description="The agent hosts of a fleet (`agentwatch up --hub`), as the hub sees them; on an "
        "agent host, that host as it sees itself (its backlog counted there, even while its link is cut). "
        "`hosts add NAME` makes host NAME's own login on this hub and prints the URL it joins with; "
        "`hosts forget NAME` stops sourcing a host that went away for good, and drops its login.",
    )
    hosts.add_argument("action", nargs="?", choices=["list", "add", "forget"], default="list")
    hosts.add_argument("name", nargs="?", help="with add or forget: the host")
    hosts.add_argument("--json", action="store_true", help="one JSON object per host, in a list")
    hosts.set_defaults(func=cmd_hosts)
