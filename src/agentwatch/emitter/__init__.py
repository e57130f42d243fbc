"""The hook side: `agentwatch-emit`, its wire client and its spool. Standard library only."""

from agentwatch.emitter.hook import main

__all__ = ["main"]
