"""`agentwatch mcp`: the MCP server over stdio, with the official SDK's low-level `Server`.

The low-level server takes the tools' JSON schemas as written in ask/tools.py (the decorator
server would generate longer ones from type hints: titles, defaults, wrappers), so what a model
pays for in context is exactly what was measured. Each call runs in a worker thread: the read
side (`Reader`) blocks, and the protocol's loop must keep answering meanwhile.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio
import anyio.to_thread
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.stdio import stdio_server

from agentwatch import __version__
from agentwatch.ask import tools
from agentwatch.store.answer import HistoryError

log = logging.getLogger("agentwatch.mcp")

INSTRUCTIONS = (
    "agentwatch's record of the coding agents on this team: who is working, stuck or lost, what "
    "they cost, which alerts fire, what each did. Read-only."
)


def build(reader: tools.Reader) -> Server[Any]:
    """The server, answering every tool from `reader`."""

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(
            tools=[
                types.Tool(
                    name=name,
                    description=text,
                    input_schema=schema,
                    annotations=types.ToolAnnotations(read_only_hint=True),
                )
                for name, (text, schema) in tools.TOOLS.items()
            ]
        )

    async def call_tool(
        _ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        try:
            text = await anyio.to_thread.run_sync(tools.answer, reader, params.name, params.arguments)
        except (tools.ToolInputError, HistoryError) as exc:
            return types.CallToolResult(content=[types.TextContent(text=str(exc))], is_error=True)
        return types.CallToolResult(content=[types.TextContent(text=text)])

    return Server(
        "agentwatch",
        version=__version__,
        instructions=INSTRUCTIONS,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


def serve(reader: tools.Reader) -> None:
    """Answer MCP requests on stdin/stdout until the client closes them."""

    async def run() -> None:
        server = build(reader)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(run)
