"""`agentwatch demo`: simulated agent-team traffic on the bus, so a new user sees the pipeline work.

A seeded simulator plays a Claude Code session with agent teams: a lead (the main session) with
teammates (researcher, implementer, reviewer, tester, ...) that share its session id, foreground and
background subagents, and now and then a second, short session on the same host. Each agent runs
realistic turns: prompts, parallel tool calls (PreToolUse, sometimes a PermissionRequest that is
granted or denied, then PostToolUse with `duration_ms` or PostToolUseFailure), PostToolBatch, tasks,
SendMessage between teammates and to the lead, Stop, SubagentStop, TeammateIdle, notifications and
compaction. The firing order per tool call is the one the reference documents for Claude Code
2.1.330, and the payload shapes follow the captures in tests/fixtures.

Every simulated hook payload goes through the hook's own contract code (`envelopes_from_stdin`,
`encode_envelope`), so subjects, ids, redaction and the SendMessage companion on `genie.msg.*` are
exactly what the hook would publish. The simulator keeps simulated time only to order events; an
envelope's timestamp is when it is published, at the chosen rate.

Importing this module is cheap: nats-py is imported only by the code that publishes.
"""

from __future__ import annotations

import contextlib
import heapq
import os
import random
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple, TextIO

from agentwatch import config
from agentwatch.config import display_urls
from agentwatch.contract import (
    DEFAULT_MAX_PAYLOAD,
    MSG_ID_HEADER,
    encode_envelope,
    envelopes_from_stdin,
)
from agentwatch.jsonfast import dumpb
from agentwatch.summaries import one_line

if TYPE_CHECKING:
    import asyncio

Json = dict[str, Any]
# (subject, event id, body): one NATS message, as the hook publishes it.
Message = tuple[str, str, bytes]
Event = tuple[float, Json]

DEFAULT_RATE = 20.0
DEFAULT_TEAMMATES = 4
DEFAULT_TEAM = "demo"
# The envelopes' `host`: demo traffic is easy to tell from (and to delete next to) real traffic.
DEMO_HOST = "agentwatch-demo"
MAX_TEAMMATES = 16
REPORT_EVERY = 2.0

ROLES = ("researcher", "implementer", "reviewer", "tester", "designer", "docs-writer", "security", "perf")
COLORS = ("blue", "green", "yellow", "purple", "cyan", "orange", "pink", "red")
PROJECTS = ("shop-api", "shop-backend", "shop")
CLAUDE_VERSION_MODEL = "claude-sonnet-4-5"
TMP_ROOT = "/tmp/claude-1000"  # noqa: S108 - a path inside simulated payloads, never opened
_B62 = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

# --- the simulated project ---------------------------------------------------------------------

SOURCE_FILES = (
    "src/shop/api/orders.py",
    "src/shop/api/refunds.py",
    "src/shop/api/routes.py",
    "src/shop/payments/client.py",
    "src/shop/payments/retry.py",
    "src/shop/payments/models.py",
    "src/shop/payments/errors.py",
    "src/shop/db/session.py",
    "src/shop/db/migrations/0007_refund_keys.py",
    "src/shop/settings.py",
)
TEST_FILES = (
    "tests/test_orders.py",
    "tests/test_refunds.py",
    "tests/test_payments_client.py",
    "tests/test_retry.py",
    "tests/conftest.py",
)
OTHER_FILES = ("docs/payments.md", "README.md", "pyproject.toml", "CLAUDE.md")
ALL_FILES = SOURCE_FILES + TEST_FILES + OTHER_FILES

CODE_LINES = (
    "from __future__ import annotations",
    "import logging",
    "from decimal import Decimal",
    "from shop.payments.errors import PaymentError, RetryableError",
    "log = logging.getLogger(__name__)",
    "MAX_ATTEMPTS = 5",
    "class RefundRequest(BaseModel):",
    "    order_id: str",
    "    amount: Decimal",
    "def refund(order_id: str, amount: Decimal) -> Refund:",
    "    resp = self._http.post(f'/v1/refunds', json=body, timeout=self.timeout)",
    "    if resp.status_code in (429, 502, 503):",
    "        raise RetryableError(resp.status_code, retry_after=resp.headers.get('Retry-After'))",
    "    return Refund.model_validate(resp.json())",
    "@router.post('/orders/{order_id}/refunds', status_code=201)",
    "async def create_refund(order_id: str, body: RefundIn, db: Session = Depends(get_db)) -> RefundOut:",
)
EDITS = (
    ("MAX_ATTEMPTS = 1", "MAX_ATTEMPTS = 5"),
    (
        "    return self._http.post(url, json=body)",
        "    return retry(lambda: self._http.post(url, json=body), policy=self.retry_policy)",
    ),
    (
        "def refund(order_id: str, amount: Decimal) -> Refund:",
        "def refund(order_id: str, amount: Decimal, *, idempotency_key: str) -> Refund:",
    ),
    (
        "    delay = base * 2 ** attempt",
        "    delay = min(max_delay, base * 2**attempt) * rng.uniform(0.5, 1.0)",
    ),
    ("        raise PaymentError(resp.text)", "        raise PaymentError.from_response(resp)"),
    ("    status_code=201)", "    status_code=201, responses={409: {'model': RefundConflict}})"),
)
NEW_FILES: dict[str, tuple[str, ...]] = {
    "tester": ("tests/test_retry.py", "tests/test_refund_idempotency.py", "tests/test_retry_after.py"),
    "docs-writer": ("docs/payments.md", "docs/retries.md"),
    "": ("src/shop/payments/retry.py", "src/shop/db/migrations/0008_refund_idempotency.py"),
}
# Which open task a teammate picks up first: role -> words of the task subject.
ROLE_TASKS = {
    "researcher": ("Survey",),
    "implementer": ("Implement", "Make"),
    "reviewer": ("Review",),
    "tester": ("Test", "Benchmark"),
    "docs-writer": ("Document",),
    "perf": ("Benchmark",),
}
PEER_TARGETS = {
    "researcher": "implementer",
    "implementer": "reviewer",
    "reviewer": "implementer",
    "tester": "implementer",
}
GREP_PATTERNS = ("retry", "PaymentError", "idempotency", "Retry-After", "def refund", "TODO", "backoff")
GLOB_PATTERNS = ("**/*.py", "src/shop/payments/**/*.py", "tests/test_*.py", "**/*.md")
URLS = (
    ("https://docs.stripe.com/api/idempotent_requests", "How do idempotency keys behave on retries?"),
    ("https://datatracker.ietf.org/doc/html/rfc9110#name-retry-after", "Summarize Retry-After semantics"),
    (
        "https://aws.amazon.com/builders-library/timeouts-retries-and-backoff-with-jitter/",
        "What backoff and jitter do they recommend?",
    ),
    ("https://www.python-httpx.org/advanced/transports/", "Can transports retry on connect errors?"),
)
SEARCHES = ("exponential backoff full jitter", "payment gateway 409 idempotency conflict", "httpx retry 429")


class BashSpec(NamedTuple):
    """A shell command an agent runs: its output, how long it takes, how it fails and how often."""

    command: str
    description: str
    stdout: str
    seconds: tuple[float, float]
    fail: float = 0.0
    failure: str = ""


# fmt: off
BASH_GIT = (
    BashSpec("git status", "Show working tree status",
             "On branch feature/payment-retries\nChanges not staged for commit:\n"
             "\tmodified:   src/shop/payments/client.py\n\tmodified:   src/shop/api/refunds.py",
             (0.03, 0.12)),
    BashSpec("git diff --stat", "Summarize changes",
             " src/shop/api/refunds.py     | 24 ++++++++++++++-----\n"
             " src/shop/payments/client.py | 31 +++++++++++++++++++----\n 2 files changed, 43 insertions(+)",
             (0.03, 0.1)),
    BashSpec("git log --oneline -5", "Recent commits",
             "9c1e2f4 payments: retry 429/5xx with backoff\n41aa0b7 refunds: accept Idempotency-Key\n"
             "d83c9e1 tests: gateway stub", (0.02, 0.08)),
    BashSpec("git diff src/shop/payments/retry.py", "Show the retry changes",
             "@@ -1,4 +1,18 @@\n+def backoff(attempt: int, base: float = 0.2) -> float:", (0.02, 0.1)),
)
BASH_SEARCH = (
    BashSpec('rg -n "Retry-After" src tests', "Find Retry-After handling",
             "src/shop/payments/client.py:88:    retry_after = resp.headers.get('Retry-After')", (0.05, 0.3)),
    BashSpec("ls -la src/shop/payments", "List the payments package",
             "total 40\n-rw-r--r-- 1 dev dev 4211 client.py\n-rw-r--r-- 1 dev dev  918 errors.py\n"
             "-rw-r--r-- 1 dev dev 1733 models.py", (0.01, 0.05)),
    BashSpec("rg -l idempotency", "Files mentioning idempotency",
             "src/shop/api/refunds.py\ndocs/payments.md", (0.05, 0.25)),
    BashSpec("wc -l src/shop/payments/*.py", "Count lines",
             "  212 src/shop/payments/client.py\n   41 src/shop/payments/errors.py\n  318 total",
             (0.01, 0.04)),
)
BASH_CHECK = (
    BashSpec("pytest -q tests/test_retry.py", "Run the retry tests",
             "..........                                         [100%]\n10 passed in 0.84s", (1.0, 4.0), 0.2,
             "Exit code 1\n....F.....\nFAILED tests/test_retry.py::test_backoff_caps_at_max_delay - "
             "assert 3.2 <= 2.0\n1 failed, 9 passed in 0.91s"),
    BashSpec("ruff check src tests", "Lint", "All checks passed!", (0.2, 0.9), 0.15,
             "Exit code 1\nsrc/shop/payments/client.py:42:9: F841 Local variable `resp` is assigned to but "
             "never used\nFound 1 error."),
    BashSpec("mypy src", "Type-check", "Success: no issues found in 38 source files", (3.0, 12.0), 0.2,
             "Exit code 1\nsrc/shop/api/refunds.py:88: error: Incompatible return value type "
             '(got "str | None", expected "str")  [return-value]\n'
             "Found 1 error in 1 file (checked 38 source files)"),
)
# Long runs: visible as in progress for a while.
BASH_LONG = (
    BashSpec("pytest -q", "Run the full test suite",
             "........................................  [100%]\n64 passed in 41.30s", (45.0, 180.0), 0.35,
             "Exit code 1\n........F.....................\n"
             "FAILED tests/test_refunds.py::test_duplicate_refund_returns_409 - assert 201 == 409\n"
             "1 failed, 63 passed in 9.02s"),
    BashSpec("python scripts/bench_checkout.py --requests 2000", "Benchmark checkout latency",
             "requests: 2000  p50: 41 ms  p95: 118 ms  p99: 240 ms", (60.0, 240.0), 0.1,
             'Exit code 1\nTraceback (most recent call last):\n  File "scripts/bench_checkout.py", line 57\n'
             "ConnectionError: gateway stub not running on :8089"),
    BashSpec("docker compose build api", "Build the API image",
             " => [api 6/6] RUN pip install --no-cache-dir .\n => exporting to image", (60.0, 200.0), 0.15,
             'Exit code 17\nfailed to solve: process "/bin/sh -c pip install ." '
             "did not complete successfully"),
)
# Commands the default permission mode asks about.
BASH_ASK = (
    BashSpec("uv pip install 'httpx>=0.28' tenacity", "Install the retry dependency",
             "Resolved 6 packages in 412ms\nInstalled 2 packages in 18ms", (2.0, 9.0), 0.1,
             "Exit code 1\nerror: Failed to fetch: `https://pypi.org/simple/tenacity/`"),
    BashSpec("docker compose up -d postgres gateway-stub", "Start the database and gateway stub",
             "Container shop-postgres-1  Started\nContainer shop-gateway-stub-1  Started", (4.0, 15.0), 0.1,
             "Exit code 1\nError response from daemon: port is already allocated"),
    BashSpec("git push -u origin feature/payment-retries", "Push the branch",
             "branch 'feature/payment-retries' set up to track 'origin/feature/payment-retries'.",
             (1.0, 4.0), 0.1,
             "Exit code 128\nfatal: could not read Username for 'https://github.com': "
             "terminal prompts disabled"),
    BashSpec("alembic upgrade head", "Apply migrations",
             "INFO  [alembic.runtime.migration] Running upgrade 0007 -> 0008, refund idempotency",
             (1.0, 5.0), 0.2,
             'Exit code 1\nsqlalchemy.exc.OperationalError: connection to server at "localhost" (127.0.0.1), '
             "port 5432 failed: Connection refused"),
)
# fmt: on

GOAL = (
    "We need retries with exponential backoff in the payments client (429 and 5xx, honour Retry-After) "
    "and idempotent refunds. Set up a team to research, implement, review and test it."
)
TASKS = (
    ("Survey error handling in the payments client", "List every gateway error path and what callers see"),
    ("Implement retry with exponential backoff", "429/5xx with full jitter; honour Retry-After; cap delay"),
    ("Make refunds idempotent", "Idempotency-Key header, unique index, 409 on conflicting replay"),
    ("Test retry and refund paths", "Unit tests for backoff and an API test for duplicate refunds"),
    ("Review the payments changes", "Read the diff; check error mapping and the migration"),
    ("Document retries in docs/payments.md", "Explain the retry policy and the idempotency contract"),
    ("Benchmark checkout latency with retries", "p95 must not regress more than 10%"),
)
USER_PROMPTS = (
    "How is it going? Anything blocked?",
    "Make sure the retry respects the Retry-After header, including the HTTP-date form",
    "Run the full test suite before we merge",
    "Can someone check the migration is reversible?",
    "What is the p95 latency impact of the retries?",
    "Please summarize the changes so far",
    "Open a PR once the reviewer signs off",
    "Don't retry on 400s, only 429 and 5xx",
)
SIDE_PROMPTS = (
    "what does the checkout flow do when the gateway times out?",
    "where do we build the refund request body?",
    "fix the typo in the README install section",
)
# Per role: (summary, message) sent to the lead, and to a peer.
REPORTS: dict[str, tuple[tuple[str, str], ...]] = {
    "researcher": (
        ("Findings ready", "The client retries nothing today; gateway 502/503 surface as PaymentError."),
        (
            "Retry-After semantics",
            "Gateway sends Retry-After in seconds on 429; RFC 9110 also allows a date.",
        ),
        ("Idempotency notes", "Gateway replays the first response for a repeated key within 24h."),
    ),
    "implementer": (
        ("Retry landed", "Backoff with full jitter is in src/shop/payments/retry.py; ready for review."),
        ("Refunds idempotent", "Refunds take an Idempotency-Key; duplicates now return the first refund."),
        ("Blocked on migration", "alembic upgrade fails: postgres is not running locally."),
    ),
    "reviewer": (
        (
            "Review: 2 issues",
            "retry.py: max_delay is applied before jitter; refunds.py: key must include order id.",
        ),
        ("LGTM", "Changes look good; one nit left about logging the attempt number."),
    ),
    "tester": (
        ("Tests red", "test_duplicate_refund_returns_409 fails: second refund returns 201, expected 409."),
        ("All green", "64 passed; added 9 tests for retry and refunds."),
    ),
}
PEER_NOTES: dict[str, tuple[str, str]] = {
    "researcher": ("Gateway quirks", "Gateway answers 409 with the original refund on a repeated key."),
    "implementer": (
        "Ready for review",
        "Please review src/shop/payments/retry.py and src/shop/api/refunds.py.",
    ),
    "reviewer": (
        "Review feedback",
        "Apply max_delay after jitter, and add the order id to the idempotency key.",
    ),
    "tester": ("Failing test", "tests/test_refunds.py::test_duplicate_refund_returns_409 fails on main."),
}
GENERIC_REPORTS = (
    ("Done", "Finished my part; notes are in the task."),
    ("Question", "Should refunds over the order total be rejected with 422 or 409?"),
)
LEAD_NOTES = (
    ("Next: idempotency", "Please add idempotency keys to refunds next; see the researcher's notes."),
    ("Run the suite", "Run the full suite against the gateway stub and report failures."),
    ("Check Retry-After", "Make sure Retry-After in HTTP-date form is handled too."),
    ("Review please", "The retry change is in; please review it."),
    ("Hold on", "Wait for the migration before you touch refunds.py."),
)
LEAD_REPLIES = (
    "Thanks. I've asked the implementer to pick that up next.",
    "Good progress: retries are in, refunds next. The tester is running the suite.",
    "Noted; the reviewer's two issues are assigned back to the implementer.",
    "Everything is green. Summary: retry with jitter, idempotent refunds, 9 new tests.",
)
DENIED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
    "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
    "tell you how to proceed."
)


# --- small helpers ------------------------------------------------------------------------------


def _hex(rng: random.Random, n: int) -> str:
    return f"{rng.getrandbits(4 * n):0{n}x}"


def _uuid(rng: random.Random) -> str:
    h = _hex(rng, 32)
    return f"{h[:8]}-{h[8:12]}-4{h[13:16]}-{'89ab'[int(h[16], 16) % 4]}{h[17:20]}-{h[20:]}"


def _b62(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(_B62) for _ in range(n))


class _Call:
    """One tool call: what the model asked, what the tool answered, how long it ran."""

    def __init__(
        self,
        tool: str,
        tool_input: Json,
        response: Any = None,
        seconds: float = 0.05,
        *,
        ask: bool = False,
        model_text: str = "",
        pre_input: Json | None = None,
        suggestion: Json | None = None,
        inside: Callable[[_Turn, float], float] | None = None,
        after: Callable[[float], None] | None = None,
    ) -> None:
        self.tool = tool
        self.tool_input = tool_input
        self.response = response
        self.seconds = seconds
        self.error = ""  # set: the call fails (PostToolUseFailure) with this text
        self.ask = ask  # the default permission mode prompts the user first
        self.model_text = model_text  # what the model sees of the result (PostToolBatch)
        # PreToolUse/PermissionRequest input, when it differs from PostToolUse's.
        self.pre_input = pre_input
        self.suggestion = suggestion
        # Events fired while the tool runs (TaskCreated, a subagent...): (turn, start) -> end time.
        self.inside = inside
        # What the call changes once it is done (a message delivered, a teammate spawned).
        self.after = after


class _Turn:
    """Events of one stretch of an agent's work, sorted by simulated time when drained."""

    def __init__(self) -> None:
        self.items: list[tuple[float, int, Json]] = []

    def add(self, t: float, payload: Json) -> None:
        self.items.append((t, len(self.items), payload))

    def drain(self) -> Iterator[Event]:
        self.items.sort(key=lambda item: (item[0], item[1]))
        for t, _, payload in self.items:
            yield t, payload
        self.items = []


# (time, sender, summary, text, kind): a message waiting for its recipient's next turn.
_Mail = tuple[float, str, str, str, str]


class _World:
    """Shared state of one simulation run: the clock-ordered merge of every agent's events."""

    def __init__(self, seed: int, teammates: int) -> None:
        self.rng = random.Random(seed)  # noqa: S311 - a simulation, reproducible by design
        rng = self.rng
        self.project = rng.choice(PROJECTS)
        self.cwd = f"/home/dev/{self.project}"
        self.session_id = _uuid(rng)
        self.team_name = f"session-{self.session_id[:8]}"
        self.teammates = [ROLES[i] if i < len(ROLES) else f"worker{i + 1}" for i in range(teammates)]
        self.colors = {name: COLORS[i % len(COLORS)] for i, name in enumerate(self.teammates)}
        self.teammate_ids = {name: f"a{name}-{_hex(rng, 16)}" for name in self.teammates}
        self.inbox: dict[str, list[_Mail]] = {}
        self.tasks: dict[str, tuple[str, str, str]] = {}  # id -> (subject, description, owner)
        self.next_task = 1
        self._heap: list[tuple[float, int, Json, Iterator[Event]]] = []
        self._seq = 0
        self.now = 0.0

    def transcript(self, session_id: str) -> str:
        return f"/home/dev/.claude/projects/-home-dev-{self.project}/{session_id}.jsonl"

    def tasks_dir(self, session_id: str) -> str:
        return f"{TMP_ROOT}/-home-dev-{self.project}/{session_id}/tasks"

    def path(self, rel: str) -> str:
        return f"{self.cwd}/{rel}"

    def spawn(self, stream: Iterator[Event]) -> None:
        first = next(stream, None)
        if first is not None:
            self._seq += 1
            heapq.heappush(self._heap, (max(first[0], self.now), self._seq, first[1], stream))

    def deliver(self, to: str, mail: _Mail) -> None:
        self.inbox.setdefault(to, []).append(mail)

    def take_mail(self, who: str, after: float, within: float) -> tuple[float, list[_Mail]]:
        """(when `who` wakes, the messages it reads then): the earliest message arriving before
        `after + within` wakes it, and everything that arrived by then comes along; no message
        in time gives (-1, [])."""
        box = self.inbox.get(who)
        if not box:
            return -1.0, []
        box.sort(key=lambda m: m[0])
        if box[0][0] > after + within:
            return -1.0, []
        wake = max(after, box[0][0])
        n = sum(1 for m in box if m[0] <= wake)
        taken = box[:n]
        del box[:n]
        return wake, taken

    def run(self) -> Iterator[Event]:
        while self._heap:
            t, _, payload, stream = heapq.heappop(self._heap)
            self.now = t
            yield t, payload
            nxt = next(stream, None)
            if nxt is not None:
                self._seq += 1
                heapq.heappush(self._heap, (max(nxt[0], t), self._seq, nxt[1], stream))


class _Agent:
    """One agent: builds its hook payloads and plays its tool calls into turns."""

    def __init__(
        self,
        world: _World,
        name: str,
        *,
        session_id: str,
        agent_id: str = "",
        agent_type: str = "",
        role: str = "",
    ) -> None:
        self.world = world
        self.rng = world.rng
        self.name = name
        self.session_id = session_id
        self.agent_id = agent_id
        self.agent_type = agent_type
        self.role = role or agent_type or "lead"
        self.prompt_id = ""
        self.task = ""  # id of the task this agent works on

    @property
    def is_teammate(self) -> bool:
        return bool(self.agent_id) and self.world.teammate_ids.get(self.name) == self.agent_id

    def payload(self, event: str, *, mode: bool = True, ctx: bool = True, **fields: Any) -> Json:
        p: Json = {
            "session_id": self.session_id,
            "transcript_path": self.world.transcript(self.session_id),
            "cwd": self.world.cwd,
        }
        if self.prompt_id:
            p["prompt_id"] = self.prompt_id
        if mode:
            p["permission_mode"] = "default"
        if ctx and self.agent_id:
            p["agent_id"] = self.agent_id
            p["agent_type"] = self.agent_type
        p["hook_event_name"] = event
        p.update(fields)
        return p

    def new_prompt(self) -> None:
        self.prompt_id = _uuid(self.rng)

    # --- one model step: parallel tool calls and their batch ---------------------------------

    def step(self, turn: _Turn, t: float, calls: list[_Call]) -> float:
        """Issue `calls` in parallel at `t`; returns the time the model continues after the batch."""
        rng = self.rng
        batch: list[Json] = []
        ends = [t]
        for i, call in enumerate(calls):
            tool_use_id = f"toolu_01{_b62(rng, 22)}"
            pre_t = t + 0.002 * i
            pre_input = call.pre_input or call.tool_input
            turn.add(
                pre_t,
                self.payload(
                    "PreToolUse", tool_name=call.tool, tool_input=pre_input, tool_use_id=tool_use_id
                ),
            )
            start = pre_t + rng.uniform(0.005, 0.03)
            if call.ask:
                turn.add(
                    start,
                    self.payload(
                        "PermissionRequest",
                        tool_name=call.tool,
                        tool_input=pre_input,
                        permission_suggestions=[call.suggestion] if call.suggestion else [],
                    ),
                )
                wait = rng.uniform(3.0, 90.0)
                if wait > 6.0:
                    turn.add(
                        start + 6.0,
                        self.payload(
                            "Notification",
                            mode=False,
                            ctx=False,
                            message=f"Claude needs your permission to use {call.tool}",
                            notification_type="permission_prompt",
                        ),
                    )
                start += wait
                if rng.random() < 0.25:  # denied: no PostToolUse, the model hears it in the batch
                    ends.append(start)
                    batch.append(
                        {
                            "tool_name": call.tool,
                            "tool_input": call.tool_input,
                            "tool_use_id": tool_use_id,
                            "tool_response": DENIED,
                        }
                    )
                    continue
            end = call.inside(turn, start) if call.inside else start + call.seconds
            duration_ms = max(1, int((end - start) * 1000))
            if call.error:
                turn.add(
                    end,
                    self.payload(
                        "PostToolUseFailure",
                        tool_name=call.tool,
                        tool_input=call.tool_input,
                        tool_use_id=tool_use_id,
                        error=call.error,
                        is_interrupt=False,
                        duration_ms=duration_ms,
                    ),
                )
                text = call.error
            else:
                turn.add(
                    end,
                    self.payload(
                        "PostToolUse",
                        tool_name=call.tool,
                        tool_input=call.tool_input,
                        tool_response=call.response,
                        tool_use_id=tool_use_id,
                        duration_ms=duration_ms,
                    ),
                )
                text = call.model_text or "(completed)"
                if call.after is not None:
                    call.after(end)
            ends.append(end)
            batch.append(
                {
                    "tool_name": call.tool,
                    "tool_input": call.tool_input,
                    "tool_use_id": tool_use_id,
                    "tool_response": text,
                }
            )
        done = max(ends) + rng.uniform(0.005, 0.03)
        turn.add(done, self.payload("PostToolBatch", tool_calls=batch))
        return done + self.think()

    def think(self) -> float:
        return self.rng.uniform(0.8, 6.0)

    # --- tools --------------------------------------------------------------------------------

    def bash(self, spec: BashSpec, *, ask: bool = False) -> _Call:
        rng = self.rng
        inp: Json = {"command": spec.command, "description": spec.description}
        if spec.seconds[1] >= 60:
            inp["timeout"] = 600000
        call = _Call("Bash", inp, seconds=rng.uniform(*spec.seconds), ask=ask)
        if rng.random() < spec.fail:
            call.error = spec.failure
        else:
            call.response = {
                "stdout": spec.stdout,
                "stderr": "",
                "interrupted": False,
                "isImage": False,
                "noOutputExpected": False,
            }
            call.model_text = spec.stdout or "(Bash completed with no output)"
        if ask:
            prefix = " ".join(spec.command.split()[:2])
            call.suggestion = {
                "type": "addRules",
                "rules": [{"toolName": "Bash", "ruleContent": f"{prefix}:*"}],
                "behavior": "allow",
                "destination": "localSettings",
            }
        return call

    def bash_from(self, specs: tuple[BashSpec, ...]) -> _Call:
        return self.bash(self.rng.choice(specs), ask=specs is BASH_ASK)

    def curl_with_token(self) -> _Call:
        # A secret in a command: the envelope shows it redacted, as the hook would.
        token = "sk_test_" + _b62(self.rng, 24)
        spec = BashSpec(
            f"curl -s -H 'Authorization: Bearer {token}' http://localhost:8089/v1/refunds?limit=3",
            "Query the gateway stub",
            '{"data":[{"id":"re_3","status":"succeeded"}],"has_more":false}',
            (0.1, 0.6),
            0.2,
            "Exit code 7\ncurl: (7) Failed to connect to localhost port 8089: Connection refused",
        )
        return self.bash(spec)

    def read(self) -> _Call:
        rng = self.rng
        path = self.world.path(rng.choice(ALL_FILES))
        total = rng.randint(18, 420)
        lines = [rng.choice(CODE_LINES) for _ in range(rng.randint(3, 6))]
        content = "\n".join(lines) + "\n"
        response = {
            "type": "text",
            "file": {
                "filePath": path,
                "content": content,
                "numLines": len(lines),
                "startLine": 1,
                "totalLines": total,
            },
        }
        numbered = "\n".join(f"{i + 1:>6}\t{line}" for i, line in enumerate(lines))
        return _Call("Read", {"file_path": path}, response, rng.uniform(0.005, 0.06), model_text=numbered)

    def edit(self) -> _Call:
        rng = self.rng
        path = self.world.path(rng.choice(SOURCE_FILES + TEST_FILES))
        old, new = rng.choice(EDITS)
        start = rng.randint(5, 200)
        response = {
            "filePath": path,
            "oldString": old,
            "newString": new,
            "originalFile": f"{rng.choice(CODE_LINES)}\n{old}\n{rng.choice(CODE_LINES)}\n",
            "structuredPatch": [
                {
                    "oldStart": start,
                    "oldLines": 1,
                    "newStart": start,
                    "newLines": 1,
                    "lines": [f"-{old}", f"+{new}"],
                }
            ],
            "userModified": False,
            "replaceAll": False,
        }
        inp = {"file_path": path, "old_string": old, "new_string": new, "replace_all": False}
        return _Call(
            "Edit", inp, response, rng.uniform(0.005, 0.05), model_text=f"The file {path} has been updated."
        )

    def write(self) -> _Call:
        rng = self.rng
        path = self.world.path(rng.choice(NEW_FILES.get(self.role, NEW_FILES[""])))
        content = "\n".join(rng.choice(CODE_LINES) for _ in range(rng.randint(4, 9))) + "\n"
        response: Json = {
            "type": "create",
            "filePath": path,
            "content": content,
            "structuredPatch": [],
            "originalFile": None,
            "userModified": False,
        }
        ask = rng.random() < 0.1
        return _Call(
            "Write",
            {"file_path": path, "content": content},
            response,
            rng.uniform(0.005, 0.04),
            ask=ask,
            model_text=f"File created successfully at: {path}",
            suggestion={"type": "setMode", "mode": "acceptEdits", "destination": "session"} if ask else None,
        )

    def grep(self) -> _Call:
        rng = self.rng
        pattern = rng.choice(GREP_PATTERNS)
        files = sorted(rng.sample(SOURCE_FILES + TEST_FILES, rng.randint(0, 4)))
        inp: Json = {"pattern": pattern, "output_mode": "files_with_matches"}
        if rng.random() < 0.5:
            inp["path"] = self.world.path("src")
        response = {"mode": "files_with_matches", "numFiles": len(files), "filenames": files}
        text = f"Found {len(files)} files\n" + "\n".join(files) if files else "No files found"
        return _Call("Grep", inp, response, rng.uniform(0.02, 0.4), model_text=text)

    def glob(self) -> _Call:
        rng = self.rng
        pattern = rng.choice(GLOB_PATTERNS)
        files = [self.world.path(f) for f in sorted(rng.sample(ALL_FILES, rng.randint(1, 8)))]
        ms = rng.randint(3, 90)
        response = {"filenames": files, "durationMs": ms, "numFiles": len(files), "truncated": False}
        return _Call("Glob", {"pattern": pattern}, response, ms / 1000, model_text="\n".join(files))

    def web_fetch(self) -> _Call:
        rng = self.rng
        url, prompt = rng.choice(URLS)
        seconds = rng.uniform(0.8, 6.0)
        ask = rng.random() < 0.2
        call = _Call("WebFetch", {"url": url, "prompt": prompt}, seconds=seconds, ask=ask)
        if ask:
            domain = url.split("/")[2]
            call.suggestion = {
                "type": "addRules",
                "rules": [{"toolName": "WebFetch", "ruleContent": f"domain:{domain}"}],
                "behavior": "allow",
                "destination": "localSettings",
            }
        if rng.random() < 0.12:
            call.error = rng.choice(
                ("Request failed with status code 404", "Request failed with status code 503")
            )
        else:
            result = "Retry only idempotent requests; use capped exponential backoff with full jitter."
            call.response = {
                "bytes": rng.randint(8000, 190000),
                "code": 200,
                "codeText": "OK",
                "result": result,
                "durationMs": int(seconds * 1000),
                "url": url,
            }
            call.model_text = result
        return call

    def web_search(self) -> _Call:
        rng = self.rng
        query = rng.choice(SEARCHES)
        seconds = rng.uniform(1.5, 7.0)
        hits = [
            {"title": "Exponential Backoff And Jitter", "url": "https://aws.amazon.com/blogs/architecture/"},
            {"title": "Idempotent requests", "url": "https://docs.stripe.com/api/idempotent_requests"},
        ]
        response = {
            "query": query,
            "results": [{"tool_use_id": f"srvtoolu_01{_b62(rng, 22)}", "content": hits}],
            "durationSeconds": round(seconds, 3),
        }
        return _Call(
            "WebSearch", {"query": query}, response, seconds, model_text="\n".join(h["url"] for h in hits)
        )

    def task_create(self) -> _Call | None:
        world = self.world
        if len(world.tasks) >= 5:
            return None
        subject, description = TASKS[(world.next_task - 1) % len(TASKS)]
        rounds = (world.next_task - 1) // len(TASKS)
        if rounds:
            subject = f"{subject} (follow-up {rounds})"
        task_id = str(world.next_task)
        world.next_task += 1
        seconds = self.rng.uniform(0.08, 0.3)

        def inside(turn: _Turn, start: float) -> float:
            world.tasks[task_id] = (subject, description, "")
            turn.add(start + seconds / 2, self.task_event("TaskCreated", task_id, subject, description))
            return start + seconds

        return _Call(
            "TaskCreate",
            {"subject": subject, "description": description, "activeForm": f"Working on: {subject.lower()}"},
            {"task": {"id": task_id, "subject": subject, "description": description}},
            seconds,
            model_text=f"Task #{task_id} created successfully: {subject}",
            inside=inside,
        )

    def task_event(self, event: str, task_id: str, subject: str, description: str) -> Json:
        extra: Json = {}
        if self.is_teammate:
            extra = {"teammate_name": self.name, "team_name": self.world.team_name}
        return self.payload(
            event, mode=False, task_id=task_id, task_subject=subject, task_description=description, **extra
        )

    def task_update(self, task_id: str, status: str) -> _Call:
        world = self.world
        subject, description, owner = world.tasks.get(task_id, ("", "", ""))
        before = "in_progress" if status == "completed" else "pending"
        seconds = self.rng.uniform(0.05, 0.25)
        inp: Json = {"taskId": task_id, "status": status}
        fields = ["status"]
        if status == "in_progress" and self.is_teammate:
            inp["owner"] = self.name
            fields.append("owner")

        def inside(turn: _Turn, start: float) -> float:
            if status == "completed":
                world.tasks.pop(task_id, None)
                turn.add(start + seconds / 2, self.task_event("TaskCompleted", task_id, subject, description))
            else:
                world.tasks[task_id] = (subject, description, self.name if self.is_teammate else owner)
            return start + seconds

        response = {
            "success": True,
            "taskId": task_id,
            "updatedFields": fields,
            "statusChange": {"from": before, "to": status},
        }
        return _Call(
            "TaskUpdate",
            inp,
            response,
            seconds,
            model_text=f"Updated task #{task_id} {status}",
            inside=inside,
        )

    def send(self, to: str, summary: str, message: str) -> _Call:
        """SendMessage to a teammate, to "main" (the lead) or to "*" (everyone)."""
        world = self.world
        rng = self.rng
        if to == "main":
            response: Json = {
                "success": True,
                "message": "Message queued for the main conversation's next turn.",
            }
            kind = "main"
        elif to == "*":
            response = {"success": True, "message": f"Message broadcast to {len(world.teammates)} teammates"}
            kind = "broadcast"
        else:
            response = {
                "success": True,
                "message": f"Message sent to {to}'s inbox",
                "msg_id": _hex(rng, 12),
                "routing": {
                    "sender": self.name if self.agent_id else "team-lead",
                    "senderColor": world.colors.get(self.name, "white"),
                    "target": f"@{to}",
                    "targetColor": world.colors.get(to, "white"),
                    "summary": summary,
                    "content": message,
                },
            }
            kind = "name"
        post_input = {"to": to, "summary": summary, "message": message}
        # PreToolUse and PermissionRequest carry the legacy alias keys too (captures of 2.1.330).
        pre_input = dict(post_input, type="message", recipient=to, recipient_kind=kind, content=message)
        sender = self.name if self.agent_id else "main"

        def after(end: float) -> None:
            if to == "*":
                for name in world.teammates:
                    if name != self.name:
                        world.deliver(name, (end, sender, summary, message, "message"))
            else:
                world.deliver(to, (end, sender, summary, message, "message"))

        return _Call(
            "SendMessage",
            post_input,
            response,
            rng.uniform(0.003, 0.02),
            model_text=str(response["message"]),
            pre_input=pre_input,
            after=after,
        )

    def work_call(self) -> _Call:
        """One tool call typical of this agent's role."""
        rng = self.rng
        role = self.role
        choices: list[tuple[Callable[[], _Call], int]]
        if role == "researcher":
            choices = [
                (self.read, 4), (self.grep, 3), (self.glob, 2), (self.web_fetch, 3), (self.web_search, 1),
                (lambda: self.bash_from(BASH_SEARCH), 2), (self.curl_with_token, 1),
            ]  # fmt: skip
        elif role == "implementer":
            choices = [
                (self.read, 3), (self.edit, 5), (self.write, 1), (lambda: self.bash_from(BASH_CHECK), 3),
                (self.grep, 1), (lambda: self.bash_from(BASH_ASK), 1),
            ]  # fmt: skip
        elif role == "reviewer":
            choices = [
                (self.read, 4), (lambda: self.bash_from(BASH_GIT), 3), (self.grep, 2),
                (lambda: self.bash_from(BASH_CHECK), 1),
            ]  # fmt: skip
        elif role == "tester":
            choices = [
                (self.read, 2), (self.write, 2), (self.edit, 1), (lambda: self.bash_from(BASH_CHECK), 3),
                (lambda: self.bash_from(BASH_LONG), 2), (lambda: self.bash_from(BASH_ASK), 1),
            ]  # fmt: skip
        elif role == "Explore":
            choices = [
                (self.glob, 2),
                (self.grep, 3),
                (self.read, 4),
                (lambda: self.bash_from(BASH_SEARCH), 1),
            ]
        elif role == "lead":
            choices = [(self.read, 3), (self.grep, 2), (lambda: self.bash_from(BASH_GIT), 3)]
        else:
            choices = [
                (self.read, 3), (self.grep, 2), (self.edit, 1), (lambda: self.bash_from(BASH_CHECK), 1),
                (lambda: self.bash_from(BASH_LONG), 1), (self.web_fetch, 1),
            ]  # fmt: skip
        make = rng.choices([c for c, _ in choices], [w for _, w in choices])[0]
        return make()

    def work_calls(self) -> list[_Call]:
        rng = self.rng
        n = rng.choices((1, 2, 3), (6, 3, 1))[0]
        return [self.work_call() for _ in range(n)]

    # --- subagents --------------------------------------------------------------------------

    def subagent_run(self, turn: _Turn, start: float, sub: _Agent) -> tuple[float, str, int]:
        """A subagent's whole life into `turn`: SubagentStart, its steps, SubagentStop.
        Returns (end time, its last message, tool calls made)."""
        rng = self.rng
        turn.add(start, sub.payload("SubagentStart", mode=False))
        t = start + rng.uniform(0.8, 3.0)
        used = 0
        for _ in range(rng.randint(1, 4)):
            calls = sub.work_calls()
            used += len(calls)
            t = sub.step(turn, t, calls)
        last = rng.choice(
            (
                "The payments client wraps httpx; errors map to PaymentError in errors.py. No retries yet.",
                "Refunds are created in src/shop/api/refunds.py; there is no uniqueness constraint on them.",
                "Found 3 call sites of client.post that need the retry policy.",
            )
        )
        turn.add(
            t,
            sub.payload(
                "SubagentStop",
                stop_hook_active=False,
                agent_transcript_path=self.world.transcript(self.session_id).removesuffix(".jsonl")
                + f"/subagents/agent-{sub.agent_id}.jsonl",
                last_assistant_message=last,
                background_tasks=[],
                session_crons=[],
            ),
        )
        return t, last, used

    def new_subagent(self, agent_type: str) -> _Agent:
        sub = _Agent(
            self.world,
            agent_type,
            session_id=self.session_id,
            agent_id="a" + _hex(self.rng, 16),
            agent_type=agent_type,
            role=agent_type,
        )
        sub.prompt_id = self.prompt_id
        return sub

    def agent_foreground(self, agent_type: str, description: str, prompt: str) -> _Call:
        sub = self.new_subagent(agent_type)
        call = _Call("Agent", {"description": description, "prompt": prompt, "subagent_type": agent_type})

        def inside(turn: _Turn, start: float) -> float:
            end, last, used = self.subagent_run(turn, start + self.rng.uniform(0.02, 0.2), sub)
            total_ms = int((end - start) * 1000)
            call.response = {
                "status": "completed",
                "prompt": prompt,
                "agentId": sub.agent_id,
                "agentType": agent_type,
                "content": [{"type": "text", "text": last}],
                "resolvedModel": CLAUDE_VERSION_MODEL,
                "totalDurationMs": total_ms,
                "totalTokens": self.rng.randint(3000, 60000),
                "totalToolUseCount": used,
                "usage": {
                    "input_tokens": self.rng.randint(2000, 50000),
                    "output_tokens": self.rng.randint(200, 3000),
                },
            }
            call.model_text = last
            return end + self.rng.uniform(0.01, 0.1)

        call.inside = inside
        return call

    def agent_background(self, description: str, prompt: str) -> _Call:
        world = self.world
        sub = self.new_subagent("general-purpose")
        output = f"{world.tasks_dir(self.session_id)}/{sub.agent_id}.output"
        response = {
            "isAsync": True,
            "status": "async_launched",
            "agentId": sub.agent_id,
            "description": description,
            "prompt": prompt,
            "outputFile": output,
            "canReadOutputFile": True,
            "canContinueAgent": True,
        }
        inp = {
            "description": description,
            "prompt": prompt,
            "subagent_type": "general-purpose",
            "run_in_background": True,
        }
        call = _Call(
            "Agent", inp, response, self.rng.uniform(0.01, 0.05), model_text=f"Launched {sub.agent_id}"
        )

        def after(end: float) -> None:
            turn = _Turn()
            stop, last, used = self.subagent_run(turn, end + self.rng.uniform(0.2, 1.0), sub)
            note = (
                f"<task-notification>\n<task-id>{sub.agent_id}</task-id>\n<output-file>{output}</output-file>\n"
                f'<status>completed</status>\n<summary>Agent "{description}" finished</summary>\n'
                f"<result>{last}</result>\n<usage><tool_uses>{used}</tool_uses>"
                f"<duration_ms>{int((stop - end) * 1000)}</duration_ms></usage>\n</task-notification>"
            )
            world.deliver("main", (stop, sub.agent_id, description, note, "task"))
            world.spawn(turn.drain())

        call.after = after
        return call

    def spawn_teammate(self, name: str) -> _Call:
        world = self.world
        agent_id = world.teammate_ids[name]
        prompt = f"You are the {name} on this team. {GOAL} Coordinate with the others through SendMessage."
        response = {
            "status": "teammate_spawned",
            "prompt": prompt,
            "agentId": agent_id,
            "resolvedModel": CLAUDE_VERSION_MODEL,
            "teammate_id": f"{name}@{world.team_name}",
            "agent_id": agent_id,
            "agent_type": "general-purpose",
            "model": CLAUDE_VERSION_MODEL,
            "name": name,
            "color": world.colors[name],
            "tmux_session_name": "in-process",
            "tmux_window_name": "in-process",
            "tmux_pane_id": "in-process",
            "team_name": world.team_name,
            "is_splitpane": False,
            "plan_mode_required": False,
            "outputFile": f"{world.tasks_dir(self.session_id)}/{agent_id}.output",
        }
        inp = {
            "description": f"{name.capitalize()} teammate",
            "prompt": prompt,
            "subagent_type": "general-purpose",
            "name": name,
        }

        def after(end: float) -> None:
            world.spawn(_teammate(world, name, end + self.rng.uniform(0.5, 2.5)))

        return _Call(
            "Agent",
            inp,
            response,
            self.rng.uniform(0.1, 0.4),
            model_text=f"Spawned teammate {name}",
            after=after,
        )


# --- agent processes: infinite (or finite) streams of (time, payload) -------------------------


def _lead(world: _World) -> Iterator[Event]:
    rng = world.rng
    lead = _Agent(world, "main", session_id=world.session_id)
    turn = _Turn()
    turn.add(0.0, lead.payload("SessionStart", mode=False, source="startup", model=CLAUDE_VERSION_MODEL))
    turn.add(
        rng.uniform(0.01, 0.1),
        lead.payload(
            "InstructionsLoaded", mode=False, file_path=world.path("CLAUDE.md"), memory_type="Project",
            load_reason="session_start",
        ),
    )  # fmt: skip
    # First turn: the user states the goal; the lead explores, plans and builds the team.
    t = rng.uniform(2.0, 6.0)
    lead.new_prompt()
    turn.add(t, lead.payload("UserPromptSubmit", prompt=GOAL))
    t += lead.think()
    explore = lead.agent_foreground(
        "Explore", "Map the payments code", "Find where the payments client sends requests and maps errors."
    )
    t = lead.step(turn, t, [explore, lead.read()])
    creates = [c for c in (lead.task_create() for _ in range(4)) if c is not None]
    t = lead.step(turn, t, creates)
    if world.teammates:
        t = lead.step(turn, t, [lead.spawn_teammate(name) for name in world.teammates])
    turn.add(t, _stop(lead, "The team is up: " + ", ".join(world.teammates or ["(no teammates)"]) + "."))
    yield from turn.drain()
    turns = 1
    while True:
        turn = _Turn()
        t = _lead_turn(world, lead, turn, t, turns)
        turns += 1
        yield from turn.drain()


def _stop(agent: _Agent, message: str, *, team: bool = True) -> Json:
    """The lead's Stop; its background tasks are the running teammates."""
    tasks = [
        {
            "id": f"t{_b62(agent.rng, 8).lower()}",
            "type": "teammate",
            "status": "running",
            "description": f"{n} teammate",
        }
        for n in (agent.world.teammates if team else ())
    ]
    return agent.payload(
        "Stop",
        stop_hook_active=False,
        last_assistant_message=message,
        background_tasks=tasks,
        session_crons=[],
    )


def _lead_turn(world: _World, lead: _Agent, turn: _Turn, t: float, turns: int) -> float:
    rng = world.rng
    wake, mails = world.take_mail("main", t, rng.uniform(20.0, 90.0))
    mail = mails[0] if mails else None
    if mails:
        start = max(t + rng.uniform(0.3, 2.0), wake + rng.uniform(0.2, 1.5))
    else:
        start = t + rng.uniform(15.0, 90.0)
    if start - t > 60.0:
        idle = lead.payload(
            "Notification",
            mode=False,
            message="Claude is waiting for your input",
            notification_type="idle_prompt",
        )
        turn.add(t + 60.0, idle)
    if rng.random() < 0.03 and turns > 3:
        start = _compact(lead, turn, start)
    if turns % 9 == 4 and rng.random() < 0.7:
        world.spawn(_side_session(world, start + rng.uniform(1.0, 20.0)))
    lead.new_prompt()
    if not mails:
        prompt = rng.choice(USER_PROMPTS)
    else:  # queued messages and task notifications arrive together, as one turn
        prompt = "\n".join(
            m[3] if m[4] == "task" else f'<agent-message from="{m[1]}">\n{m[3]}\n</agent-message>'
            for m in mails
        )
    turn.add(start, lead.payload("UserPromptSubmit", prompt=prompt))
    t = start + lead.think()
    for _ in range(rng.randint(1, 3)):
        calls: list[_Call] = []
        r = rng.random()
        if r < 0.3 and world.teammates:
            to = (
                mail[1]
                if mail and mail[1] in world.teammate_ids and rng.random() < 0.5
                else rng.choice(world.teammates)
            )
            summary, message = rng.choice(LEAD_NOTES)
            calls.append(lead.send(to, summary, message))
        elif r < 0.36 and world.teammates:
            calls.append(lead.send("*", "Heads up", "Rebasing feature/payment-retries on main in 5 minutes."))
        elif r < 0.48:
            owned = [tid for tid, (_, _, owner) in world.tasks.items() if owner]
            created = lead.task_create() if len(world.tasks) < 3 or not owned else None
            if created is not None:
                calls.append(created)
            elif owned:
                calls.append(lead.task_update(rng.choice(owned), "completed"))
        elif r < 0.58:
            calls.append(
                lead.agent_foreground(
                    "Explore", "Find refund call sites", "List every place that creates a refund."
                )
            )
        elif r < 0.63:
            calls.append(
                lead.agent_background(
                    "Audit error mapping", "Check every gateway error maps to a PaymentError subclass."
                )
            )
        elif r < 0.68:
            calls.append(lead.web_fetch())
        if not calls or rng.random() < 0.4:
            calls.extend(lead.work_call() for _ in range(rng.choice((1, 1, 2))))
        t = lead.step(turn, t, calls)
    if rng.random() < 0.02:
        turn.add(
            t,
            lead.payload(
                "StopFailure", error="rate_limit", error_details="429 rate_limit_error",
                last_assistant_message="API Error: Rate limit reached",
            ),
        )  # fmt: skip
    else:
        handled = f"{mail[1]}: {mail[2]}. " if mail is not None and mail[4] == "message" else ""
        turn.add(t, _stop(lead, handled + rng.choice(LEAD_REPLIES)))
    return t


def _compact(lead: _Agent, turn: _Turn, t: float) -> float:
    """Auto-compaction: PreCompact, the internal summarizer's SubagentStop, SessionStart, PostCompact."""
    rng = lead.rng
    turn.add(t, lead.payload("PreCompact", mode=False, trigger="auto", custom_instructions=""))
    t += rng.uniform(8.0, 25.0)
    agent_id = "a" + _hex(rng, 16)
    stop = lead.payload(
        "SubagentStop",
        agent_id=agent_id,
        agent_type="",
        stop_hook_active=False,
        agent_transcript_path=lead.world.transcript(lead.session_id).removesuffix(".jsonl")
        + f"/subagents/agent-{agent_id}.jsonl",
        last_assistant_message="Summary of the conversation so far.",
        background_tasks=[],
        session_crons=[],
    )
    turn.add(t, stop)
    turn.add(t + 0.05, lead.payload("SessionStart", mode=False, source="compact", model=CLAUDE_VERSION_MODEL))
    summary = "Team is adding retries and idempotent refunds; tests in progress."
    turn.add(t + 0.1, lead.payload("PostCompact", mode=False, trigger="auto", compact_summary=summary))
    return t + rng.uniform(0.5, 2.0)


def _teammate(world: _World, name: str, t: float) -> Iterator[Event]:
    rng = world.rng
    me = _Agent(
        world,
        name,
        session_id=world.session_id,
        agent_id=world.teammate_ids[name],
        agent_type=name,
        role=name,
    )
    while True:
        turn = _Turn()
        me.new_prompt()
        if not me.task:
            free = [tid for tid, (_, _, owner) in world.tasks.items() if not owner]
            mine = [tid for tid in free if world.tasks[tid][0].startswith(ROLE_TASKS.get(name, ("-",)))]
            if mine or (free and rng.random() < 0.3):
                me.task = rng.choice(mine or free)
                t = me.step(turn, t, [me.task_update(me.task, "in_progress")])
        for _ in range(rng.randint(2, 6)):
            t = me.step(turn, t, me.work_calls())
        if me.task not in world.tasks:  # the lead closed it
            me.task = ""
        if me.task and rng.random() < 0.35:
            t = me.step(turn, t, [me.task_update(me.task, "completed")])
            me.task = ""
        peers = [n for n in world.teammates if n != name]
        last = "Nothing new to report; waiting for messages."
        if peers and rng.random() < 0.35:
            summary, message = PEER_NOTES.get(name, GENERIC_REPORTS[0])
            target = PEER_TARGETS.get(name, "")
            t = me.step(
                turn, t, [me.send(target if target in peers else rng.choice(peers), summary, message)]
            )
            last = message
        if rng.random() < 0.7:
            summary, message = rng.choice(REPORTS.get(name, GENERIC_REPORTS))
            t = me.step(turn, t, [me.send("main", summary, message)])
            last = f"Reported to the lead: {message}"
        stop = me.payload(
            "SubagentStop",
            stop_hook_active=False,
            agent_transcript_path=world.transcript(world.session_id).removesuffix(".jsonl")
            + f"/subagents/agent-{me.agent_id}.jsonl",
            last_assistant_message=last,
            background_tasks=[],
            session_crons=[],
        )
        turn.add(t, stop)
        turn.add(t + 0.02, me.payload("TeammateIdle", teammate_name=name, team_name=world.team_name))
        yield from turn.drain()
        wake, mails = world.take_mail(name, t, rng.uniform(20.0, 120.0))
        t = wake + rng.uniform(0.5, 3.0) if mails else t + rng.uniform(20.0, 120.0)


def _side_session(world: _World, t: float) -> Iterator[Event]:
    """A short session in another terminal on the same host: start, one prompt, end."""
    rng = world.rng
    me = _Agent(world, "main", session_id=_uuid(rng))
    turn = _Turn()
    turn.add(t, me.payload("SessionStart", mode=False, source="startup", model=CLAUDE_VERSION_MODEL))
    me.new_prompt()
    t += rng.uniform(3.0, 15.0)
    turn.add(t, me.payload("UserPromptSubmit", prompt=rng.choice(SIDE_PROMPTS)))
    t += me.think()
    for _ in range(rng.randint(1, 3)):
        t = me.step(turn, t, [me.read() if rng.random() < 0.6 else me.grep()])
    turn.add(
        t,
        _stop(me, "It retries nothing yet; the team is adding that on feature/payment-retries.", team=False),
    )
    turn.add(t + rng.uniform(5.0, 40.0), me.payload("SessionEnd", mode=False, reason="prompt_input_exit"))
    yield from turn.drain()


# --- public API ---------------------------------------------------------------------------------


def encode_event(
    payload: Json,
    environ: Mapping[str, str],
    *,
    host: str = DEMO_HOST,
    max_payload: int = DEFAULT_MAX_PAYLOAD,
    now: float | None = None,
) -> list[Message]:
    """The messages the hook would publish for `payload`, exactly: its event envelope first, then a
    `genie.msg.*` companion for a delivered SendMessage. Stamped `now` (default: the current time)."""
    raw = dumpb(payload)
    return [
        (subject, env["id"], encode_envelope(env, max_payload))
        for subject, env in envelopes_from_stdin(raw, environ, host=host, now=now)
    ]


class TeamSimulator:
    """Seeded simulator of a Claude Code agent team: a lead with `teammates` teammates and subagents.

    `events()` yields (simulated seconds since the start, hook payload) in time order, without end;
    the same seed gives the same payloads. `team` becomes GENIE_TEAM for the envelopes (None: the
    session's implicit team, `session-<8 hex>`).
    """

    def __init__(
        self, seed: int | None = None, teammates: int = DEFAULT_TEAMMATES, team: str | None = DEFAULT_TEAM
    ) -> None:
        if not 0 <= teammates <= MAX_TEAMMATES:
            raise ValueError(f"teammates must be between 0 and {MAX_TEAMMATES}, not {teammates}")
        self.seed = seed if seed is not None else random.SystemRandom().randrange(1, 1 << 31)
        self.teammates = teammates
        self.team = team or None
        self.environ: dict[str, str] = {"GENIE_TEAM": self.team} if self.team else {}

    @property
    def team_name(self) -> str:
        """The `team` of the envelopes: the given team, else the lead session's implicit one."""
        return self.team or _World(self.seed, self.teammates).team_name

    def events(self) -> Iterator[Event]:
        world = _World(self.seed, self.teammates)
        world.spawn(_lead(world))
        return world.run()

    def messages(self, *, host: str = DEMO_HOST, max_payload: int = DEFAULT_MAX_PAYLOAD) -> Iterator[Message]:
        """(subject, id, body) of every message the hook would publish for events(), in order;
        each envelope is stamped when this iterator produces it."""
        for _, payload in self.events():
            yield from encode_event(payload, self.environ, host=host, max_payload=max_payload)


class DemoError(Exception):
    """The demo cannot publish; `code` is the exit status the command returns."""

    def __init__(self, message: str, code: int = 2) -> None:
        super().__init__(message)
        self.code = code


async def _connect(url: str, environ: Mapping[str, str]) -> Any:
    from agentwatch.bus.connect import BusUnreachable, connect

    try:
        return await connect(url, environ, name="agentwatch-demo", timeout=2)
    except (BusUnreachable, ValueError) as exc:
        raise DemoError(f"{exc}: start it with `agentwatch up` or set AGENTWATCH_NATS_URL") from None


def _say(out: TextIO | None, text: str) -> None:
    if out is not None:
        print(text, file=out, flush=True)


async def run_demo(
    url: str | None = None,
    *,
    rate: float = DEFAULT_RATE,
    count: int | None = None,
    duration: float | None = None,
    seed: int | None = None,
    agents: int = DEFAULT_TEAMMATES,
    team: str | None = DEFAULT_TEAM,
    host: str = DEMO_HOST,
    out: TextIO | None = None,
    report_every: float = REPORT_EVERY,
    stop: asyncio.Event | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Publish simulated hook events to the bus at `rate` per second (0: as fast as possible) until
    `count` events were sent, `duration` seconds passed or `stop` is set; returns the events sent
    (SendMessage companions on genie.msg.* come on top). Progress goes to `out`.

    Raises DemoError when the bus cannot be reached or goes away.
    """
    import asyncio

    environ = os.environ if environ is None else environ
    url = url or config.nats_url(environ)
    sim = TeamSimulator(seed, agents, team)
    stop = stop if stop is not None else asyncio.Event()
    nc = await _connect(url, environ)
    limit = []
    if count is not None:
        limit.append(f"{count:,} events")
    if duration is not None:
        limit.append(f"{duration:g}s")
    pace = f"{rate:g} events/s" if rate > 0 else "full speed"
    _say(
        out,
        f"agentwatch demo: publishing to {display_urls(url)} at {pace}"
        f"{' for ' + ' or '.join(limit) if limit else ', Ctrl-C to stop'}; "
        f"team {sim.team_name}: lead + {agents} teammate(s), seed {sim.seed}",
    )
    loop = asyncio.get_running_loop()
    clock = loop.time
    events = sim.events()
    max_payload = int(nc.max_payload or DEFAULT_MAX_PAYLOAD)
    sent = companions = 0
    started = clock()
    base_t, base_n = started, 0
    report_t, report_n = started, 0
    min_sleep = 0.004 if rate > 250 else 0.0
    max_burst = max(1, int(rate * 0.1)) if rate > 0 else 512
    try:
        while not stop.is_set():
            now = clock()
            if count is not None and sent >= count:
                break
            if duration is not None and now - started >= duration:
                break
            if rate > 0:
                due = base_n + int((now - base_t) * rate) + 1
                if due - sent > rate:  # more than a second behind: don't burst to catch up
                    base_t, base_n = now, sent
                    due = sent + 1
                burst = min(due - sent, max_burst)
            else:
                burst = max_burst
            if count is not None:
                burst = min(burst, count - sent)
            for _ in range(burst):
                _, payload = next(events)
                messages = encode_event(payload, sim.environ, host=host, max_payload=max_payload)
                for subject, msg_id, body in messages:
                    await nc.publish(subject, body, headers={MSG_ID_HEADER: msg_id})
                sent += 1
                companions += len(messages) - 1
            now = clock()
            if now - report_t >= report_every:
                _say(
                    out,
                    f"  {now - started:6.1f}s  {sent:,} events + {companions:,} messages  "
                    f"{(sent - report_n) / (now - report_t):,.0f} events/s",
                )
                report_t, report_n = now, sent
            if rate > 0:
                delay = max(base_t + (sent - base_n) / rate - now, min_sleep)
                if duration is not None:
                    delay = min(delay, max(0.0, started + duration - now))
                if delay > 0:
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(stop.wait(), delay)
                    continue
            await asyncio.sleep(0)
        await nc.flush(timeout=10)
    except Exception as exc:
        reason = one_line(str(exc)) or type(exc).__name__
        raise DemoError(f"publishing stopped after {sent:,} events: {reason}", code=1) from None
    finally:
        with contextlib.suppress(Exception):  # the connection is going away either way
            await nc.close()
    elapsed = max(clock() - started, 1e-9)
    _say(
        out,
        f"done: {sent:,} events + {companions:,} messages in {elapsed:.2f}s, "
        f"{sent / elapsed:,.0f} events/s (target {pace})",
    )
    return sent
