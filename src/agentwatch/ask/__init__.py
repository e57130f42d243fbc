"""The MCP server agents ask (`agentwatch mcp`): read-only tools over the store's read side."""
