"""Which session a `--session` option means: a whole id, or a unique part of one a screen shows."""

from __future__ import annotations

from agentwatch.cli.errors import CliError
from agentwatch.harnesses import short_id

SHOWN = 10  # sessions listed when a prefix matches several


def resolve_session(text: str) -> str:
    """The one stored session whose id is `text`, begins with it or ends with it (the short id a
    screen shows); `text` itself when none is stored (the command then says there is nothing);
    CliError listing the matches when several are."""
    text = text.strip()
    if not text:
        return ""
    from agentwatch.cli.sql import run_sql
    from agentwatch.store import session_queries

    query = session_queries.sessions_matching(text, SHOWN + 1)
    rows = run_sql(query.sql, params=query.params).dicts()
    ids = [str(r["session_id"]) for r in rows]
    if not ids or ids[0] == text:
        return text
    if len(ids) == 1:
        return ids[0]
    listed = "\n".join(
        f"  {r['session_id']}  (shown as {short_id(str(r['session_id']))}, first seen "
        f"{str(r['first_seen'])[:16]} UTC, {int(r['events']):,} events)"
        for r in rows[:SHOWN]
    )
    more = "\n  ... and more" if len(ids) > SHOWN else ""
    raise CliError(
        f"{text!r} matches {'more than ' if len(ids) > SHOWN else ''}{min(len(ids), SHOWN)} "
        f"sessions; give more of the id:\n{listed}{more}"
    )
