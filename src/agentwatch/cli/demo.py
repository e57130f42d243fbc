"""`agentwatch demo`: simulated agent-team traffic on the bus, to see the pipeline work without
Claude Code (the simulator is demo/)."""

from __future__ import annotations

import argparse
import signal
import sys

from agentwatch.cli.errors import CliError, require
from agentwatch.demo import DEFAULT_RATE, DEFAULT_TEAM, DEFAULT_TEAMMATES, DEMO_HOST, MAX_TEAMMATES


def _positive_int(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def _positive_float(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number, not {text}")
    return value


def _rate(text: str) -> float:
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 (full speed) or more, not {text}")
    return value


def _agents(text: str) -> int:
    value = int(text)
    if not 0 <= value <= MAX_TEAMMATES:
        raise argparse.ArgumentTypeError(f"must be between 0 and {MAX_TEAMMATES}, not {text}")
    return value


async def _demo_main(args: argparse.Namespace) -> int:
    import asyncio

    from agentwatch.demo import DemoError, run_demo

    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    installed: list[signal.Signals] = []

    def on_signal(sig: signal.Signals) -> None:
        stop.set()
        loop.remove_signal_handler(sig)  # a second Ctrl-C interrupts for good

    for sig in (signal.SIGINT, signal.SIGTERM):
        try:
            loop.add_signal_handler(sig, on_signal, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError):  # pragma: no cover - not the main thread / Windows
            pass
    try:
        await run_demo(
            args.url,
            rate=args.rate,
            count=args.count,
            duration=args.duration,
            seed=args.seed,
            agents=args.agents,
            team=args.team,
            out=sys.stdout,
            stop=stop,
        )
    except DemoError as exc:
        raise CliError(str(exc), exc.code) from None
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    import asyncio

    require("demo", "tui", "nats")
    return asyncio.run(_demo_main(args))


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `demo` to the `agentwatch` command line."""
    demo = subparsers.add_parser(
        "demo",
        help="publish simulated agent-team traffic, to see the pipeline work without Claude Code",
        description=(
            "Publish realistic simulated hook events of an agent team (a lead, teammates, subagents) "
            "to the bus, built by the hook's own contract code. Envelopes carry host "
            f"{DEMO_HOST!r}. Runs until Ctrl-C unless --count or --duration is given."
        ),
    )
    demo.add_argument(
        "--rate",
        type=_rate,
        default=DEFAULT_RATE,
        help="events per second; 0: full speed (default %(default)g)",
    )
    demo.add_argument("--count", type=_positive_int, default=None, help="stop after this many events")
    demo.add_argument(
        "--duration", type=_positive_float, default=None, metavar="SECONDS", help="stop after this long"
    )
    demo.add_argument("--seed", type=int, default=None, help="seed for a reproducible run (default: random)")
    demo.add_argument(
        "--agents",
        type=_agents,
        default=DEFAULT_TEAMMATES,
        metavar="N",
        help="teammates besides the lead (default %(default)s)",
    )
    demo.add_argument(
        "--team",
        default=DEFAULT_TEAM,
        help="team name (GENIE_TEAM) of the events; '' for the session's implicit team (default %(default)s)",
    )
    demo.add_argument(
        "--url", default=None, help="NATS URL (default: AGENTWATCH_NATS_URL, else nats://127.0.0.1:4222)"
    )
    demo.set_defaults(func=cmd_demo)
