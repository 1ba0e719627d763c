"""The official MCP conformance suite against the fixture server: `python3 -m tests.conformance.run`."""
