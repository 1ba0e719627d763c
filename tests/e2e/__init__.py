"""End-to-end tests with the real clients (Claude Code, OpenCode) against stand-in model APIs on 127.0.0.1."""
