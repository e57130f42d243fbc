"""agentwatch: event-bus observability for teams of AI coding agents."""

__version__ = "0.1.0"
