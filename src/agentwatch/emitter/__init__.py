"""The hook side: `agentwatch-emit`, its wire client, spool and sequence numbers, and its
registration in Claude Code's settings. Standard library only."""

from agentwatch.emitter.hook import main

__all__ = ["main"]
