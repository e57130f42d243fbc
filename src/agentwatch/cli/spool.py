"""`agentwatch spool status|flush`: what the hook kept while the bus was down, and sending it."""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Mapping

from agentwatch import config
from agentwatch.cli.errors import CliError
from agentwatch.contract import event_id_time
from agentwatch.format import ago, human_bytes


def when(event_id: str) -> str:
    """An event id's time, local, and how long ago."""
    if not event_id:
        return "-"
    ts = event_id_time(event_id)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) + f" ({ago(time.time() - ts)} ago)"


def cmd_status(_args: argparse.Namespace) -> int:
    from agentwatch.emitter.hook import spool_for

    spool = spool_for(os.environ)
    st = spool.status()
    print(f"spool:    {st.path}")
    print(
        f"pending:  {st.count} event message(s), {human_bytes(st.bytes)} (cap {human_bytes(spool.max_bytes)})"
    )
    if st.count:
        print(f"oldest:   {when(st.oldest_id)}")
        print(f"newest:   {when(st.newest_id)}")
    if st.malformed:
        print(f"damaged:  {st.malformed} line(s) that will be skipped")
    if st.lost:
        print(f"lost:     {st.lost} message(s) the disk had no room for, the last {_at(st.lost_at)}")
    if st.unreadable:
        print(f"unreadable: {st.unreadable} input(s) nothing was made of, kept redacted in {spool.inflight}")
    return 0


def _at(ts: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ts)) + f" ({ago(time.time() - ts)} ago)"


def cmd_flush(args: argparse.Namespace) -> int:
    from agentwatch.emitter.hook import Publisher, refit, spool_for
    from agentwatch.emitter.wire import BusError

    spool = spool_for(os.environ)
    before = spool.status()
    if not before.count:
        print("spool is empty: nothing to send")
        return 0
    url = config.nats_url(os.environ)
    print(f"sending {before.count} spooled message(s) to {config.display_urls(url)} ...", flush=True)
    total = 0
    started = time.monotonic()
    while True:
        deadline = time.monotonic() + args.timeout
        try:
            publisher = Publisher(os.environ, deadline)
        except (BusError, ValueError) as exc:
            raise CliError(
                f"the bus does not answer ({exc}); {before.count - total} message(s) stay spooled"
            ) from None
        try:
            sent, skipped = spool.flush(
                publisher.publish, deadline, refit(publisher.max_payload), wait_for_lock=True
            )
        except BusError as exc:
            raise CliError(f"sending stopped: {exc}; the rest stays spooled, run this again") from None
        finally:
            publisher.close()
        total += sent
        if skipped:
            print(f"skipped {skipped} damaged line(s)")
        left = spool.status().count
        print(f"  sent {total}/{before.count}, {left} left", flush=True)
        if not left or not sent:
            break
    print(f"done: {total} message(s) sent in {time.monotonic() - started:.1f}s")
    return 0 if not spool.status().count else 1


def flush_at_start(environ: Mapping[str, str], seconds: float = 10.0) -> list[str]:
    """What `up` says after sending what this host's hook spooled while the bus was down (the
    stream is there by then); nothing when the spool is empty. Never raises: what is not sent
    stays spooled for the next hook run or `agentwatch spool flush`."""
    from agentwatch.emitter.hook import Publisher, refit, spool_for
    from agentwatch.emitter.wire import BusError

    spool = spool_for(environ)
    try:
        waiting = spool.status().count
        if not waiting:
            return []
        deadline = time.monotonic() + seconds
        publisher = Publisher(environ, deadline)
        try:
            fit = refit(publisher.max_payload)
            sent, _ = spool.flush(publisher.publish, deadline, fit, wait_for_lock=True)
        finally:
            publisher.close()
        left = spool.status().count
    except (BusError, OSError, ValueError) as exc:
        return [f"spool:       could not send the spooled events ({exc}); `agentwatch spool flush` retries"]
    line = f"spool:       sent {sent:,} message(s) the hook spooled while the bus was down"
    return [line + (f"; {left:,} left: `agentwatch spool flush`" if left else "")]


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    spool = sub.add_parser(
        "spool",
        help="show or send the events the hook kept while the bus was down",
        description="The hook's spool: events kept while the bus was down, sent oldest first. "
        "With no action, its status.",
    )
    spool.set_defaults(func=cmd_status)  # bare `agentwatch spool`: the status
    actions = spool.add_subparsers(dest="spool_command", metavar="ACTION")
    status = actions.add_parser(
        "status",
        help="what is waiting in the spool",
        description="What this host's hook keeps in its spool: how many events, how old, what was lost "
        "to a full disk, and input nothing could be made of.",
    )
    status.set_defaults(func=cmd_status)
    flush = actions.add_parser(
        "flush",
        help="send everything spooled, oldest first",
        description="Send everything this host's hook spooled to the bus, oldest first (`agentwatch up` "
        "does this at its start, and each hook run sends some).",
    )
    flush.add_argument("--timeout", type=float, default=10.0, help="seconds per round (default 10)")
    flush.set_defaults(func=cmd_flush)
