"""The story the demo tells: a team adding payment retries and idempotent refunds to a shop.

Static data only: the project's files, the code and commands agents touch, the tasks, prompts and
messages they exchange. The simulator draws from these pools with its seeded generator, so their
order is part of what a seed produces: reordering an entry changes every stream after it.
"""

from __future__ import annotations

from typing import NamedTuple

# --- the team ------------------------------------------------------------------------------------

ROLES = ("researcher", "implementer", "reviewer", "tester", "designer", "docs-writer", "security", "perf")
COLORS = ("blue", "green", "yellow", "purple", "cyan", "orange", "pink", "red")
PROJECTS = ("shop-api", "shop-backend", "shop")
CLAUDE_VERSION_MODEL = "claude-sonnet-4-5"
TMP_ROOT = "/tmp/claude-1000"  # noqa: S108 - a path inside simulated payloads, never opened

# --- the simulated project -----------------------------------------------------------------------

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

# --- shell commands ------------------------------------------------------------------------------


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

# --- the work and the conversation about it ------------------------------------------------------

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
# Which open task a teammate picks up first: role -> words of the task subject.
ROLE_TASKS = {
    "researcher": ("Survey",),
    "implementer": ("Implement", "Make"),
    "reviewer": ("Review",),
    "tester": ("Test", "Benchmark"),
    "docs-writer": ("Document",),
    "perf": ("Benchmark",),
}
# Whom a teammate tells its news first, when that teammate is on the team.
PEER_TARGETS = {
    "researcher": "implementer",
    "implementer": "reviewer",
    "reviewer": "implementer",
    "tester": "implementer",
}
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
# What an exploring subagent reports back to whoever started it.
SUBAGENT_FINDINGS = (
    "The payments client wraps httpx; errors map to PaymentError in errors.py. No retries yet.",
    "Refunds are created in src/shop/api/refunds.py; there is no uniqueness constraint on them.",
    "Found 3 call sites of client.post that need the retry policy.",
)
DENIED = (
    "The user doesn't want to proceed with this tool use. The tool use was rejected (eg. if it was a file "
    "edit, the new_string was NOT written to the file). STOP what you are doing and wait for the user to "
    "tell you how to proceed."
)
