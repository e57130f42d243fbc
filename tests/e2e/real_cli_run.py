"""One offline run of the real Codex CLI or Gemini CLI with agentwatch's hooks installed, for
tests/e2e/test_real_clis.py. Run inside a network namespace with loopback alone (`unshare -n`):

    python -m tests.e2e.real_cli_run codex|codex-review|gemini CLI_BINARY WORKDIR

It brings loopback up, serves a scripted stand-in for the CLI's model API on 127.0.0.1 (a shell
command, then an answer), runs `agentwatch hooks install --harness ...` into a sandbox home under
WORKDIR (for Codex: trusted through the binary's own `codex app-server`), then the CLI itself
(`codex exec` without --dangerously-bypass-hook-trust; `gemini -p --yolo`). `codex-review`: Codex
with its automatic approval reviewer (`codex exec --approve-for-me`), whose first command asks to
write outside the workspace; the reviewer, a helper thread of Codex's own with a rollout of its own
and no hook event, asks the stand-in too and is told to allow it. The hooks find no bus
in the namespace and spool their events under WORKDIR/data, which the test sends on afterwards.
It prints one JSON line: what install said, the CLI's exit code and output, the API requests seen.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

AGENTWATCH = Path(sys.executable).parent / "agentwatch"
RUN_TIMEOUT_S = 120


class StandIn(http.server.ThreadingHTTPServer):
    """Both APIs' streamed answers: the first request of a session gets a shell command to run, the
    next ones an answer; every request is counted."""

    def __init__(self, escalate: bool = False) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.requests: list[str] = []
        self.escalate = escalate


class Handler(http.server.BaseHTTPRequestHandler):
    server: StandIn

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode("utf-8", "replace")
        self.server.requests.append(self.path)
        first = "function_call_output" not in body and "functionResponse" not in body
        if "/responses" in self.path:
            review = '"risk_level"' in body and '"json_schema"' in body
            events = codex_events(first, len(self.server.requests), self.server.escalate, review)
        elif "streamGenerateContent" in self.path:
            events = gemini_events(first)
        else:  # a non-streamed Gemini request (a check it makes on the side): a plain answer
            self._reply("application/json", json.dumps(gemini_chunk("ok", final=True)).encode())
            return
        self._reply("text/event-stream", b"".join(events))

    def _reply(self, kind: str, data: bytes) -> None:
        self.send_response(200)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def codex_events(first: bool, n: int, escalate: bool = False, review: bool = False) -> list[bytes]:
    """A Responses API stream: an `exec_command` call first (`escalate`: one that asks to run
    outside the sandbox, which needs an approval), then a message; to the approval reviewer's
    request (`review`: it asks for its verdict's JSON schema), a verdict that allows it."""
    rid = f"resp_{n}"
    text = "done"
    if review:
        text = json.dumps({"risk_level": "low", "user_authorization": "high", "outcome": "allow",
                           "rationale": "writes one line beside the project"})  # fmt: skip
    if first and not review:
        command = {"cmd": "echo hooked"}
        if escalate:
            command = {"cmd": "echo reviewed > ../outside.txt", "sandbox_permissions": "require_escalated",
                       "justification": "write a file beside the project"}  # fmt: skip
        item: dict[str, Any] = {"type": "function_call", "id": f"fc_{n}", "call_id": f"call_{n}",
                                "name": "exec_command", "arguments": json.dumps(command)}  # fmt: skip
    else:
        item = {"type": "message", "id": f"msg_{n}", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": text, "annotations": []}]}  # fmt: skip
    usage = {"input_tokens": 1000 + n, "input_tokens_details": {"cached_tokens": 256}, "output_tokens": 50,
             "output_tokens_details": {"reasoning_tokens": 8}, "total_tokens": 1050 + n}  # fmt: skip
    return [
        sse("response.created", {"type": "response.created", "response": {"id": rid}}),
        sse(
            "response.output_item.added",
            {"type": "response.output_item.added", "output_index": 0, "item": item},
        ),
        sse(
            "response.output_item.done",
            {"type": "response.output_item.done", "output_index": 0, "item": item},
        ),
        sse("response.completed", {"type": "response.completed", "response": {"id": rid, "usage": usage}}),
    ]


def gemini_chunk(text: str, final: bool = False, call: dict[str, Any] | None = None) -> dict[str, Any]:
    parts: list[dict[str, Any]] = [{"functionCall": call}] if call else [{"text": text}]
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    chunk: dict[str, Any] = {"candidates": [candidate]}
    if final:
        candidate["finishReason"] = "STOP"
        chunk["usageMetadata"] = {"promptTokenCount": 900, "candidatesTokenCount": 40, "totalTokenCount": 950}
    return chunk


def gemini_events(first: bool) -> list[bytes]:
    """streamGenerateContent?alt=sse: a run_shell_command call first, then an answer in two chunks."""
    if first:
        call = {"name": "run_shell_command", "args": {"command": "echo hooked", "description": "say it"}}
        chunks = [gemini_chunk("", final=True, call=call)]
    else:
        chunks = [gemini_chunk("done, "), gemini_chunk("hooked", final=True)]
    return [f"data: {json.dumps(c)}\n\n".encode() for c in chunks]


def codex_home(work: Path, port: int) -> dict[str, str]:
    home = work / "codex-home"
    home.mkdir(parents=True)
    (home / "config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "local"\napproval_policy = "never"\n'
        'sandbox_mode = "danger-full-access"\n\n'
        f'[model_providers.local]\nname = "local"\nbase_url = "http://127.0.0.1:{port}/v1"\n'
        'wire_api = "responses"\nenv_key = "STAND_IN_KEY"\n'
        "request_max_retries = 0\nstream_max_retries = 0\n\n"
        "[features]\nplugins = false\n\n[analytics]\nenabled = false\n\n[feedback]\nenabled = false\n"
    )
    return {"CODEX_HOME": str(home), "STAND_IN_KEY": "dummy"}


def gemini_home(work: Path, port: int) -> dict[str, str]:
    home = work / "gemini-home"
    (home / ".gemini").mkdir(parents=True)
    settings = {
        "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
        "privacy": {"usageStatisticsEnabled": False},
        "telemetry": {"enabled": False},
        "general": {"disableAutoUpdate": True},
    }
    (home / ".gemini" / "settings.json").write_text(json.dumps(settings, indent=2) + "\n")
    return {
        "GEMINI_CLI_HOME": str(home),
        "GOOGLE_GEMINI_BASE_URL": f"http://127.0.0.1:{port}",
        "GEMINI_API_KEY": "stand-in-secret-key-0123456789",
        "GEMINI_CLI_NO_RELAUNCH_CHECK": "1",
    }


def run(scenario: str, binary: str, work: Path) -> dict[str, Any]:
    cli = "codex" if scenario.startswith("codex") else scenario
    subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
    server = StandIn(escalate=scenario == "codex-review")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    project = work / "project"
    project.mkdir(parents=True)
    (project / "notes.txt").write_text("hello\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AGENTWATCH_", "GENIE_"))}
    env.update(HOME=str(work / "home"), AGENTWATCH_DATA_DIR=str(work / "data"))
    env.update(AGENTWATCH_NATS_URL="nats://127.0.0.1:4", PATH=f"{Path(binary).parent}:/usr/bin:/bin")
    env.update(codex_home(work, port) if cli == "codex" else gemini_home(work, port))
    install = ["hooks", "install", "--harness", cli] + (["--codex", binary] if cli == "codex" else [])
    installed = subprocess.run(
        [str(AGENTWATCH), *install],
        env=env,
        cwd=project,
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    if scenario == "codex-review":
        command = [binary, "exec", "--json", "--skip-git-repo-check", "--approve-for-me", "write beside it"]
    elif cli == "codex":
        command = [binary, "exec", "--json", "--skip-git-repo-check", "run echo hooked"]
    else:
        command = [binary, "-m", "gemini-2.5-pro", "--yolo", "-p", "run echo hooked"]
    try:
        ran = subprocess.run(
            command, env=env, cwd=project, capture_output=True, text=True, timeout=RUN_TIMEOUT_S,
            stdin=subprocess.DEVNULL, start_new_session=True, check=False,
        )  # fmt: skip
        code, out, err = ran.returncode, ran.stdout, ran.stderr
    except subprocess.TimeoutExpired as exc:
        code, out, err = -1, str(exc.stdout or ""), f"timed out after {RUN_TIMEOUT_S}s"
    server.shutdown()
    return {
        "install": installed.stdout + installed.stderr,
        "install_code": installed.returncode,
        "code": code,
        "stdout": out[-4000:],
        "stderr": err[-4000:],
        "requests": server.requests,
        "env": {k: env[k] for k in ("AGENTWATCH_DATA_DIR", "HOME")},
    }


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1], sys.argv[2], Path(sys.argv[3]))))
