"""`python -m agentwatch`: the same as the `agentwatch` command."""

from agentwatch.cli import main

raise SystemExit(main())
