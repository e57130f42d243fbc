"""Tool calls on the code base: Bash, Read, Edit, Write, Grep, Glob, WebFetch and WebSearch.

Each builder draws one plausible call for an agent (input, response, duration, failure) from the
scenario; `work_calls` picks them in the mix that suits the agent's role.
"""

from __future__ import annotations

from collections.abc import Callable

from agentwatch.demo.agent import Agent
from agentwatch.demo.scenario import (
    ALL_FILES,
    BASH_ASK,
    BASH_CHECK,
    BASH_GIT,
    BASH_LONG,
    BASH_SEARCH,
    CODE_LINES,
    EDITS,
    GLOB_PATTERNS,
    GREP_PATTERNS,
    NEW_FILES,
    SEARCHES,
    SOURCE_FILES,
    TEST_FILES,
    URLS,
    BashSpec,
)
from agentwatch.demo.world import Json, ToolCall, random_b62

Builder = Callable[[Agent], ToolCall]


def bash(agent: Agent, spec: BashSpec, *, ask: bool = False) -> ToolCall:
    rng = agent.rng
    inp: Json = {"command": spec.command, "description": spec.description}
    if spec.seconds[1] >= 60:
        inp["timeout"] = 600000
    call = ToolCall("Bash", inp, seconds=rng.uniform(*spec.seconds), ask=ask)
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


def bash_from(agent: Agent, specs: tuple[BashSpec, ...]) -> ToolCall:
    """One of `specs`; the permission mode asks about the BASH_ASK commands."""
    return bash(agent, agent.rng.choice(specs), ask=specs is BASH_ASK)


def curl_with_token(agent: Agent) -> ToolCall:
    """A secret in a command: the envelope shows it redacted, as the hook would."""
    token = "sk_test_" + random_b62(agent.rng, 24)
    spec = BashSpec(
        f"curl -s -H 'Authorization: Bearer {token}' http://localhost:8089/v1/refunds?limit=3",
        "Query the gateway stub",
        '{"data":[{"id":"re_3","status":"succeeded"}],"has_more":false}',
        (0.1, 0.6),
        0.2,
        "Exit code 7\ncurl: (7) Failed to connect to localhost port 8089: Connection refused",
    )
    return bash(agent, spec)


def read(agent: Agent) -> ToolCall:
    rng = agent.rng
    path = agent.world.path(rng.choice(ALL_FILES))
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
    return ToolCall("Read", {"file_path": path}, response, rng.uniform(0.005, 0.06), model_text=numbered)


def edit(agent: Agent) -> ToolCall:
    rng = agent.rng
    path = agent.world.path(rng.choice(SOURCE_FILES + TEST_FILES))
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
    return ToolCall(
        "Edit", inp, response, rng.uniform(0.005, 0.05), model_text=f"The file {path} has been updated."
    )


def write(agent: Agent) -> ToolCall:
    """A new file of the agent's role; now and then the user is asked to accept edits."""
    rng = agent.rng
    path = agent.world.path(rng.choice(NEW_FILES.get(agent.role, NEW_FILES[""])))
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
    return ToolCall(
        "Write",
        {"file_path": path, "content": content},
        response,
        rng.uniform(0.005, 0.04),
        ask=ask,
        model_text=f"File created successfully at: {path}",
        suggestion={"type": "setMode", "mode": "acceptEdits", "destination": "session"} if ask else None,
    )


def grep(agent: Agent) -> ToolCall:
    rng = agent.rng
    pattern = rng.choice(GREP_PATTERNS)
    files = sorted(rng.sample(SOURCE_FILES + TEST_FILES, rng.randint(0, 4)))
    inp: Json = {"pattern": pattern, "output_mode": "files_with_matches"}
    if rng.random() < 0.5:
        inp["path"] = agent.world.path("src")
    response = {"mode": "files_with_matches", "numFiles": len(files), "filenames": files}
    text = f"Found {len(files)} files\n" + "\n".join(files) if files else "No files found"
    return ToolCall("Grep", inp, response, rng.uniform(0.02, 0.4), model_text=text)


def glob(agent: Agent) -> ToolCall:
    rng = agent.rng
    pattern = rng.choice(GLOB_PATTERNS)
    files = [agent.world.path(f) for f in sorted(rng.sample(ALL_FILES, rng.randint(1, 8)))]
    ms = rng.randint(3, 90)
    response = {"filenames": files, "durationMs": ms, "numFiles": len(files), "truncated": False}
    return ToolCall("Glob", {"pattern": pattern}, response, ms / 1000, model_text="\n".join(files))


def web_fetch(agent: Agent) -> ToolCall:
    """A page of the references; sometimes the domain needs permission, sometimes the fetch fails."""
    rng = agent.rng
    url, prompt = rng.choice(URLS)
    seconds = rng.uniform(0.8, 6.0)
    ask = rng.random() < 0.2
    call = ToolCall("WebFetch", {"url": url, "prompt": prompt}, seconds=seconds, ask=ask)
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


def web_search(agent: Agent) -> ToolCall:
    rng = agent.rng
    query = rng.choice(SEARCHES)
    seconds = rng.uniform(1.5, 7.0)
    hits = [
        {"title": "Exponential Backoff And Jitter", "url": "https://aws.amazon.com/blogs/architecture/"},
        {"title": "Idempotent requests", "url": "https://docs.stripe.com/api/idempotent_requests"},
    ]
    response = {
        "query": query,
        "results": [{"tool_use_id": f"srvtoolu_01{random_b62(rng, 22)}", "content": hits}],
        "durationSeconds": round(seconds, 3),
    }
    return ToolCall(
        "WebSearch", {"query": query}, response, seconds, model_text="\n".join(h["url"] for h in hits)
    )


# --- which tools each role reaches for ---------------------------------------------------------


def _shell(specs: tuple[BashSpec, ...]) -> Builder:
    """A builder that runs one of `specs`."""

    def build(agent: Agent) -> ToolCall:
        return bash_from(agent, specs)

    return build


# role -> (builder, weight): the mix of calls an agent of that role makes.
ROLE_TOOLS: dict[str, tuple[tuple[Builder, int], ...]] = {
    "researcher": (
        (read, 4), (grep, 3), (glob, 2), (web_fetch, 3), (web_search, 1), (_shell(BASH_SEARCH), 2),
        (curl_with_token, 1),
    ),
    "implementer": (
        (read, 3), (edit, 5), (write, 1), (_shell(BASH_CHECK), 3), (grep, 1), (_shell(BASH_ASK), 1),
    ),
    "reviewer": ((read, 4), (_shell(BASH_GIT), 3), (grep, 2), (_shell(BASH_CHECK), 1)),
    "tester": (
        (read, 2), (write, 2), (edit, 1), (_shell(BASH_CHECK), 3), (_shell(BASH_LONG), 2),
        (_shell(BASH_ASK), 1),
    ),
    "Explore": ((glob, 2), (grep, 3), (read, 4), (_shell(BASH_SEARCH), 1)),
    "lead": ((read, 3), (grep, 2), (_shell(BASH_GIT), 3)),
}  # fmt: skip
# Every other role: a generalist.
OTHER_ROLE_TOOLS: tuple[tuple[Builder, int], ...] = (
    (read, 3), (grep, 2), (edit, 1), (_shell(BASH_CHECK), 1), (_shell(BASH_LONG), 1), (web_fetch, 1),
)  # fmt: skip


def work_call(agent: Agent) -> ToolCall:
    """One tool call typical of the agent's role."""
    choices = ROLE_TOOLS.get(agent.role, OTHER_ROLE_TOOLS)
    make = agent.rng.choices([c for c, _ in choices], [w for _, w in choices])[0]
    return make(agent)


def work_calls(agent: Agent) -> list[ToolCall]:
    """The calls of one model step: mostly one, sometimes two or three in parallel."""
    n = agent.rng.choices((1, 2, 3), (6, 3, 1))[0]
    return [work_call(agent) for _ in range(n)]
