"""`agentwatch import [PATH]`: the token usage of logs written before the hook was installed.

Reads Claude Code's transcripts (default: `~/.claude/projects`, or `$CLAUDE_CONFIG_DIR/projects`),
Codex's rollouts (`$CODEX_HOME/sessions` or `~/.codex/sessions`) and Gemini CLI's chats
(`~/.gemini/tmp/<project>/chats`) with the hook's own readers and envelope builder
(agentwatch.emitter.usage, harness_logs), and publishes their
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
from agentwatch.harnesses import CLAUDE_CODE, CODEX, GEMINI_CLI, LABELS

if TYPE_CHECKING:
    from agentwatch.emitter.hook import Publisher
    from agentwatch.emitter.usage import Source

# API messages per read, and so per batch on the bus (each waits for the stream's acks).
BATCH = 500
BATCH_SECONDS = 30.0


def default_roots() -> list[tuple[Path, str]]:
    """Where each harness keeps its logs on this machine: Claude Code's projects
    (`$CLAUDE_CONFIG_DIR/projects`, else ~/.claude/projects), Codex's rollouts (`$CODEX_HOME/sessions`,
    else ~/.codex/sessions), Gemini CLI's chats (~/.gemini/tmp)."""
    home = os.path.expanduser("~")
    claude = os.environ.get("CLAUDE_CONFIG_DIR") or os.path.join(home, ".claude")
    codex = os.environ.get("CODEX_HOME") or os.path.join(home, ".codex")
    return [
        (Path(claude) / "projects", CLAUDE_CODE),
        (Path(codex) / "sessions", CODEX),
        (Path(home) / ".gemini" / "tmp", GEMINI_CLI),
    ]


def harness_of(path: Path) -> str:
    """Whose log `path` is, by where and how it is named: a Codex `rollout-*.jsonl`, a file under
    Gemini CLI's `chats/` folder, else a Claude Code transcript."""
    if path.name.startswith("rollout-"):
        return CODEX
    if "chats" in path.parts[-3:-1]:
        return GEMINI_CLI
    return CLAUDE_CODE


def transcripts(root: Path) -> list[Path]:
    """Every log under `root` (a file is itself): sessions first, then their subagents'."""
    if root.is_file():
        return [root]
    found = [p for p in root.rglob("*.jsonl") if p.is_file()]
    return sorted(found, key=lambda p: (_is_subagent(p), str(p)))


def _is_subagent(path: Path) -> bool:
    if harness_of(path) == GEMINI_CLI:
        return path.parent.name != "chats"
    return path.parent.name == "subagents"


def source_of(path: Path, host: str) -> Source:
    """The agent whose usage `path` holds, named as the hook names it (without the environment
    of the session, which is gone: main agents are `main-<session>`)."""
    from agentwatch.contract import identify
    from agentwatch.emitter.usage import subagent_source

    harness = harness_of(path)
    if harness != CLAUDE_CODE:
        return _other_source(path, host, harness)
    if path.parent.name == "subagents" and path.name.startswith("agent-"):
        session = path.parent.parent.name
        team = identify({"session_id": session}, {})[1]
        context = {"session_id": session, "team": team, "host": host, "cwd": ""}
        return subagent_source(str(path), context, {})
    return _main_source(path, path.stem, host)


def _main_source(path: Path, session: str, host: str) -> Source:
    from agentwatch.contract import identify
    from agentwatch.emitter.usage import Source

    agent, team, _ = identify({"session_id": session}, {})
    who = {"agent": agent, "team": team, "parent_agent": "", "agent_id": "", "agent_type": "",
           "session_id": session, "host": host, "cwd": ""}  # fmt: skip
    return Source(str(path), who)


def _other_source(path: Path, host: str, harness: str) -> Source:
    """A Codex rollout's agent (its session_meta says whose thread, and whose sub-agent) or a
    Gemini CLI chat's (a sub-agent's as the main chat's invoke_agent call names it)."""
    from agentwatch.contract import identify
    from agentwatch.emitter.harness_logs import chat_subagent, rollout_agent, rollout_meta
    from agentwatch.emitter.usage import Source

    named: tuple[str, str] | None
    if harness == CODEX:
        meta = rollout_meta(str(path))
        session = str(meta.get("session_id") or meta.get("id") or "")
        named = rollout_agent(meta)
        if named is None:
            return _main_source(path, session, host)
    elif path.parent.name == "chats":
        return _main_source(path, _chat_session(path), host)
    else:
        session = path.parent.name
        mains = sorted(path.parent.parent.glob(f"session-*-{session[:8]}.jsonl"))
        named = chat_subagent(str(mains[-1]), str(path), session) if mains else None
    agent_id, agent_type = named or (path.stem, "subagent")
    agent, team, parent = identify(
        {"session_id": session, "agent_id": agent_id, "agent_type": agent_type}, {}
    )
    who = {"agent": agent, "team": team, "parent_agent": parent, "agent_id": agent_id,
           "agent_type": agent_type, "session_id": session, "host": host, "cwd": ""}  # fmt: skip
    return Source(str(path), who, agent_id, agent_type)


def _chat_session(path: Path) -> str:
    """The session id in the header line of a Gemini CLI chat file."""
    from agentwatch.jsonfast import JSONError, loads

    try:
        with path.open("rb") as f:
            header = loads(f.readline(1 << 20).decode("utf-8", "replace"))
    except (OSError, JSONError):
        return path.stem
    return str(header.get("sessionId") or path.stem) if isinstance(header, dict) else path.stem


class Progress:
    """One line that says how far the import is: rewritten in place on a terminal, every few
    seconds elsewhere."""

    def __init__(self, files: int, size: int, out: TextIO) -> None:
        self.files, self.size, self.out = files, size, out
        self.done_files = self.done_bytes = self.usage = self.costs = 0
        self.tty = out.isatty()
        self.owners: dict[str, tuple[str, str, str]] = {}  # cwd: person, repository, branch
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


def attribute(found: list[tuple[str, dict[str, Any]]], owners: dict[str, tuple[str, str, str]]) -> None:
    """Person, repository and branch of each envelope's cwd, as the hook learns them today (the
    branch is the one checked out now, not the one of the transcript's time); `owners` keeps what
    was learnt per cwd."""
    from agentwatch.emitter.attribution import learn

    for _, env in found:
        cwd = env.get("cwd") or ""
        if cwd not in owners:
            owners[cwd] = learn(cwd, os.environ, config.data_dir())[:3]
        env["person"], env["repo"], env["branch"] = owners[cwd]


def import_file(path: Path, source: Source, publisher: Publisher, progress: Progress) -> None:
    """Read one transcript batch by batch, publishing each batch before the next is read."""
    from agentwatch.contract import DEFAULT_MAX_PAYLOAD, encode_envelope
    from agentwatch.emitter.hook import refit
    from agentwatch.emitter.usage import read_log, reading_envelopes

    fallback_ms = int(path.stat().st_mtime * 1000)
    offset = 0
    base = progress.done_bytes
    harness = harness_of(path)
    while True:
        reading = read_log(harness, source, offset, float("inf"), BATCH, {})
        found = reading_envelopes(reading, source, fallback_ms)
        attribute(found, progress.owners)
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


def run_import(roots: Path | list[Path], environ: Any = None, out: TextIO = sys.stdout) -> Progress:
    """Import every log under `roots`; the progress it made. Raises CliError when the bus cannot
    be reached or stops answering."""

    from agentwatch.emitter.hook import Publisher
    from agentwatch.emitter.wire import BusError

    environ = os.environ if environ is None else environ
    files = [p for root in ([roots] if isinstance(roots, Path) else roots) for p in transcripts(root)]
    progress = Progress(len(files), sum(p.stat().st_size for p in files), out)
    url = config.display_urls(config.nats_url(environ))
    try:
        publisher = Publisher(environ, time.monotonic() + BATCH_SECONDS)
    except (BusError, OSError, ValueError) as exc:
        raise CliError(f"cannot reach the bus at {url} ({exc}): start it with `agentwatch up`") from None
    host = config.host_name(environ)
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
    if args.path:
        roots = [Path(args.path).expanduser()]
        if not roots[0].exists():
            raise CliError(
                f"{roots[0]} does not exist: give a folder of Claude Code transcripts, Codex rollouts "
                "or Gemini CLI chats (or one file)"
            )
    else:
        found = [(root, harness) for root, harness in default_roots() if root.exists()]
        if not found:  # no agent here: nothing to import
            where = ", ".join(str(root) for root, _ in default_roots())
            print(f"nothing to import: none of {where} exists (give the folder of the logs)")
            return 0
        for root, harness in found:
            print(f"{LABELS[harness]}: {root}")
        roots = [root for root, _ in found]
    started = time.monotonic()
    done = run_import(roots)
    print(
        f"imported {done.usage:,} API messages and {done.costs:,} cost states from {done.done_files:,} "
        f"transcripts in {time.monotonic() - started:.1f}s; `agentwatch cost` shows them once the store "
        "has them (an API message already stored stays counted once)"
    )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    imp = sub.add_parser(
        "import",
        help="publish the token usage of existing Claude Code, Codex and Gemini CLI logs (idempotent)",
        description="Read the agents' own logs (default: Claude Code's ~/.claude/projects, Codex's "
        "~/.codex/sessions, Gemini CLI's ~/.gemini/tmp, those that exist) and publish their token usage "
        "(and Claude Code's cost-state records) to the bus, as the hook does at the end of a turn. Running "
        "it again, or after the hook already sent some of it, changes nothing.",
    )
    imp.add_argument("path", nargs="?", help="a folder of logs, or one log (.jsonl)")
    imp.set_defaults(func=cmd_import)
