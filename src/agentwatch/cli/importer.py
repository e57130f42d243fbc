"""`agentwatch import [PATH]`: the token usage of transcripts written before the hook was installed.

Reads Claude Code's transcripts (default: `~/.claude/projects`, or `$CLAUDE_CONFIG_DIR/projects`)
with the hook's own reader and envelope builder (agentwatch.emitter.usage), and publishes their
usage and cost-state envelopes to the bus with the hook's wire client, waiting for the stream's
acknowledgements, batch after batch. The store takes them like the hook's: an API message already
stored (by the hook, or by an earlier import) stays one row, so importing twice changes nothing.
Envelope ids depend only on what they say, so JetStream drops a repeat within its window too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from agentwatch import config
from agentwatch.cli.errors import CliError

if TYPE_CHECKING:
    from agentwatch.emitter.hook import Publisher
    from agentwatch.emitter.usage import Source

# API messages per read, and so per batch on the bus (each waits for the stream's acks).
BATCH = 500
BATCH_SECONDS = 30.0


def default_root() -> Path:
    base = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(os.path.expanduser("~"), ".claude")
    return Path(base) / "projects"


def transcripts(root: Path) -> list[Path]:
    """Every transcript under `root` (a file is itself): sessions and their subagents'."""
    if root.is_file():
        return [root]
    found = [p for p in root.rglob("*.jsonl") if p.is_file()]
    return sorted(found, key=lambda p: (p.parent.name == "subagents", str(p)))


def source_of(path: Path, host: str) -> Source:
    """The agent whose usage `path` holds, named as the hook names it (without the environment
    of the session, which is gone: main agents are `main-<session>`)."""
    from agentwatch.contract import identify
    from agentwatch.emitter.usage import Source, subagent_source

    if path.parent.name == "subagents" and path.name.startswith("agent-"):
        session = path.parent.parent.name
        team = identify({"session_id": session}, {})[1]
        context = {"session_id": session, "team": team, "host": host, "cwd": ""}
        return subagent_source(str(path), context, {})
    session = path.stem
    agent, team, _ = identify({"session_id": session}, {})
    who = {"agent": agent, "team": team, "parent_agent": "", "agent_id": "", "agent_type": "",
           "session_id": session, "host": host, "cwd": ""}  # fmt: skip
    return Source(str(path), who)


class Progress:
    """One line that says how far the import is: rewritten in place on a terminal, every few
    seconds elsewhere."""

    def __init__(self, files: int, size: int, out: TextIO) -> None:
        self.files, self.size, self.out = files, size, out
        self.done_files = self.done_bytes = self.usage = self.costs = 0
        self.tty = out.isatty()
        self.started = self.shown = time.monotonic()

    def show(self, final: bool = False) -> None:
        now = time.monotonic()
        if not final and not self.tty and now - self.shown < 2.0:
            return
        self.shown = now
        pct = 100.0 * self.done_bytes / self.size if self.size else 100.0
        line = (
            f"importing: {self.done_files:,}/{self.files:,} transcripts, {pct:5.1f}% of "
            f"{self.size / 1e6:,.1f} MB, {self.usage:,} API messages, {self.costs:,} cost states"
        )
        if self.tty:
            print("\r" + line, end="\n" if final else "", file=self.out, flush=True)
        else:
            print(line, file=self.out, flush=True)


def import_file(path: Path, source: Source, publisher: Publisher, progress: Progress) -> None:
    """Read one transcript batch by batch, publishing each batch before the next is read."""
    from agentwatch.contract import DEFAULT_MAX_PAYLOAD, encode_envelope
    from agentwatch.emitter.hook import refit
    from agentwatch.emitter.transcripts import read_transcript
    from agentwatch.emitter.usage import reading_envelopes

    fallback_ms = int(path.stat().st_mtime * 1000)
    offset = 0
    base = progress.done_bytes
    while True:
        reading = read_transcript(str(path), offset, max_messages=BATCH, subagent_id=source.subagent_id)
        found = reading_envelopes(reading, source, fallback_ms)
        if found:
            fit = refit(publisher.max_payload)
            messages = [(s, e["id"], fit(encode_envelope(e, DEFAULT_MAX_PAYLOAD))) for s, e in found]
            publisher.renew(time.monotonic() + BATCH_SECONDS)
            publisher.publish(messages)
        progress.usage += len(reading.usage)
        progress.costs += reading.cost_state is not None and not source.subagent_id
        progress.done_bytes = base + reading.offset
        progress.show()
        if reading.done or reading.offset <= offset:
            return
        offset = reading.offset


def run_import(root: Path, environ: Any = None, out: TextIO = sys.stdout) -> Progress:
    """Import every transcript under `root`; the progress it made. Raises CliError when the bus
    cannot be reached or stops answering."""
    import _socket

    from agentwatch.emitter.hook import Publisher
    from agentwatch.emitter.wire import BusError

    environ = os.environ if environ is None else environ
    files = transcripts(root)
    progress = Progress(len(files), sum(p.stat().st_size for p in files), out)
    url = config.display_urls(config.nats_url(environ))
    try:
        publisher = Publisher(environ, time.monotonic() + BATCH_SECONDS)
    except (BusError, OSError, ValueError) as exc:
        raise CliError(f"cannot reach the bus at {url} ({exc}): start it with `agentwatch up`") from None
    host = _socket.gethostname()
    try:
        for path in files:
            import_file(path, source_of(path, host), publisher, progress)
            progress.done_files += 1
    except (BusError, OSError) as exc:
        progress.show(final=True)
        raise CliError(
            f"the bus stopped answering ({exc}): run `agentwatch import` again, nothing is counted twice"
        ) from None
    finally:
        publisher.close()
    progress.show(final=True)
    return progress


def cmd_import(args: argparse.Namespace) -> int:
    root = Path(args.path).expanduser() if args.path else default_root()
    if not root.exists():
        if not args.path:  # no Claude Code here: nothing to import
            print(f"nothing to import: {root} does not exist (give the folder of the transcripts)")
            return 0
        raise CliError(f"{root} does not exist: give the folder of Claude Code's transcripts (or one file)")
    started = time.monotonic()
    done = run_import(root)
    print(
        f"imported {done.usage:,} API messages and {done.costs:,} cost states from {done.done_files:,} "
        f"transcripts in {time.monotonic() - started:.1f}s; `agentwatch cost` shows them once the store "
        "has them (an API message already stored stays counted once)"
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imp = sub.add_parser(
        "import",
        help="publish the token usage of existing Claude Code transcripts (idempotent)",
        description="Read Claude Code's transcripts (default ~/.claude/projects) and publish their token "
        "usage and cost-state records to the bus, as the hook does on Stop. Running it again, or after "
        "the hook already sent some of it, changes nothing.",
    )
    imp.add_argument("path", nargs="?", help="a folder of transcripts, or one transcript (.jsonl)")
    imp.set_defaults(func=cmd_import)
