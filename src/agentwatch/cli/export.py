"""`agentwatch export`: a session (or everything since a time) as a file: JSON lines, Parquet, or
a Markdown transcript of its turns.

The events come from the read side in pages (session_queries.export_page: in time order, after
the last page's last event), so an export of any size goes through the store's query service,
whose every reply is one NATS message, as well as from a ClickHouse server: a reply cut to fit
simply makes the next page start earlier. JSON lines are the envelopes as the hook published
them (the payload an object again); Parquet holds the events table's columns with their types
(the payload as its JSON text), one row group per page (pyarrow, which the [consumers] extra
brings); Markdown names every turn with its prompt, tools, tokens and cost, then its events.
A progress line on stderr says how far a long export is.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, BinaryIO, TextIO

from agentwatch.cli.errors import CliError, require
from agentwatch.cli.sessions import resolve_session

if TYPE_CHECKING:
    from agentwatch.cli.sources import History
    from agentwatch.store.answer import Answer

FORMATS = ("jsonl", "parquet", "md")
PAGE = 2000


class Progress:
    """One line on stderr: rewritten in place on a terminal, every few seconds elsewhere, and
    only for an export that takes a while."""

    def __init__(self, total: int, out: TextIO) -> None:
        self.total, self.out = total, out
        self.done = 0
        self.tty = out.isatty()
        self.started = self.shown = time.monotonic()

    def add(self, n: int) -> None:
        self.done += n
        now = time.monotonic()
        if now - self.started < 1.0 or now - self.shown < (0.2 if self.tty else 2.0):
            return
        self.shown = now
        self._show()

    def _show(self, end: str = "") -> None:
        self.total = max(self.total, self.done)  # an event stored late, from before the export began
        pct = 100.0 * self.done / self.total if self.total else 100.0
        line = f"exporting: {self.done:,} of {self.total:,} events ({pct:.0f}%)"
        self.out.write(("\r" + line + end) if self.tty else line + "\n")
        self.out.flush()

    def finish(self) -> None:
        if time.monotonic() - self.started >= 1.0:
            self._show("\n")


def pages(
    history: History,
    session: str,
    since: str,
    page: int = PAGE,
    owner: tuple[str, str] = ("", ""),
    until: str = "",
) -> Iterator[Answer]:
    """The export's events, page after page, each page after the last one's last event."""
    from agentwatch.store import queries, session_queries
    from agentwatch.store.answer import params_of

    after = (queries.EPOCH, "")
    while True:
        query = session_queries.export_page(session, since, after, page, *owner, until=until)
        answer = history.query(query.sql, query.params, max_rows=page)
        if not answer.rows and answer.truncated:
            raise CliError(
                f"the event after {after[0]} UTC is larger than one reply of the query service: export "
                "from the ClickHouse server itself (AGENTWATCH_CLICKHOUSE_URL), or with --since after it"
            )
        if not answer.rows:
            return
        yield answer
        last = answer.rows[-1]
        at, event_id = params_of([last[answer.columns.index("timestamp")]])[0], last[0]
        after = (str(at), str(event_id))


def envelope(row: dict[str, Any]) -> dict[str, Any]:
    """A stored event as the hook published it: times in ISO text, the payload an object."""
    out: dict[str, Any] = {}
    for key, value in row.items():
        is_time = isinstance(value, dt.datetime)
        out[key] = (
            value.astimezone(dt.UTC).isoformat(timespec="milliseconds")[:-6] + "Z" if is_time else value
        )
    data = out.get("data")
    if isinstance(data, str):
        with contextlib.suppress(ValueError):  # not JSON: kept as the text the store holds
            out["data"] = json.loads(data)
    return out


def write_jsonl(answers: Iterator[Answer], out: BinaryIO, progress: Progress) -> int:
    n = 0
    for answer in answers:
        for row in answer.dicts():
            out.write(json.dumps(envelope(row), ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        n += len(answer.rows)
        progress.add(len(answer.rows))
    return n


def _arrow_type(clickhouse: str) -> Any:
    import pyarrow as pa

    name = clickhouse
    for wrapper in ("Nullable(", "LowCardinality("):
        while name.startswith(wrapper):
            name = name[len(wrapper) : -1]
    base = name.split("(", 1)[0]
    if base == "DateTime64":
        return pa.timestamp("ms", tz="UTC")
    if base == "DateTime":
        return pa.timestamp("s", tz="UTC")
    if base == "Bool":
        return pa.bool_()
    if base.startswith(("UInt", "Int")):
        return getattr(pa, base.lower())()  # UInt64 -> pa.uint64()
    if base.startswith("Float"):
        return pa.float64()
    return pa.string()


def write_parquet(answers: Iterator[Answer], out: BinaryIO, progress: Progress) -> int:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:
        raise CliError(
            f"Parquet export needs pyarrow ({exc.name} is not installed): pip install pyarrow "
            "(the [consumers] extra has it), or export --format jsonl"
        ) from None
    writer = None
    n = 0
    try:
        for answer in answers:
            if writer is None:
                schema = pa.schema(
                    [(c, _arrow_type(t)) for c, t in zip(answer.columns, answer.types, strict=True)]
                )
                writer = pq.ParquetWriter(out, schema, compression="zstd")
            writer.write_table(pa.Table.from_pylist(answer.dicts(), schema=writer.schema))
            n += len(answer.rows)
            progress.add(len(answer.rows))
    finally:
        if writer is not None:
            writer.close()
    return n


def cmd_export(args: argparse.Namespace) -> int:
    require("export", "tui", "nats", "orjson")
    from agentwatch.cli.cost import parse_since
    from agentwatch.cli.sql import history
    from agentwatch.store import queries, session_queries
    from agentwatch.store.answer import HistoryError, params_of

    if not args.session and not args.since:
        raise CliError("say what to export: --session ID (`agentwatch sql` lists them), or --since 1d")
    since = parse_since(args.since) if args.since else queries.EPOCH
    binary = args.format == "parquet"
    if args.output in (None, "-") and binary and sys.stdout.isatty():
        raise CliError("Parquet is binary: give a file with -o FILE.parquet, or redirect stdout")
    args.session = resolve_session(args.session or "")
    source = history()
    try:
        owner = (args.person, args.repo)
        count = session_queries.export_count(args.session or "", since, *owner)
        counted = source.query(*count).first()
        total = int(counted.get("events") or 0)
        # The newest event's time then: what is stored while this runs is the next export's.
        until = str(params_of([counted["until"]])[0]) if total else ""
        if total == 0:
            raise CliError(
                f"no events in session {args.session!r}" if args.session else f"no events since {since} UTC"
            )
        progress = Progress(total, sys.stderr)
        answers = pages(source, args.session or "", since, owner=owner, until=until)
        target = sys.stdout.buffer if args.output in (None, "-") else open(args.output, "wb")  # noqa: SIM115
        try:
            if args.format == "jsonl":
                written = write_jsonl(answers, target, progress)
            elif args.format == "parquet":
                written = write_parquet(answers, target, progress)
            else:
                from agentwatch.cli.markdown import write_markdown

                written = write_markdown(source, answers, target, progress.add)
        finally:
            if target is not sys.stdout.buffer:
                target.close()
            else:
                target.flush()
        progress.finish()
    except HistoryError as exc:
        raise CliError(str(exc)) from None
    finally:
        source.close()
    if args.output not in (None, "-"):
        print(f"{written:,} events written to {args.output}", file=sys.stderr)
    if written < total:  # only a store that lost rows meanwhile (retention) writes fewer
        print(
            f"agentwatch: {total - written:,} of {total:,} events were gone before they were read",
            file=sys.stderr,
        )
    return 0


def register(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    export = sub.add_parser(
        "export",
        help="a session, or everything since a time, as JSON lines, Parquet or a Markdown transcript",
        description="Every event of a session (or since a time), in time order: JSON lines (the envelopes "
        "as published), Parquet (the events table's columns and types; needs pyarrow), or Markdown (a "
        "readable transcript: each turn with its prompt, tools, tokens and cost, then its events).",
    )
    export.add_argument(
        "--session", metavar="ID", help="the session to export: its id, or a unique part shown on screens"
    )
    export.add_argument(
        "--since", metavar="WHEN", help="everything since: 30m, 12h, 7d, 2w, today, or a date (UTC)"
    )
    export.add_argument("--person", default="", help="only events of this person's sessions")
    export.add_argument("--repo", default="", help="only events in this repository (host/owner/name)")
    export.add_argument("--format", choices=FORMATS, default="jsonl", help="jsonl (default), parquet or md")
    export.add_argument("-o", "--output", metavar="FILE", help="where to write (default: stdout)")
    export.set_defaults(func=cmd_export)
