"""specactor: an MCP server for spec-driven development, built as trio actors on a msgspec core.

`__version__` is the one source of the version: pyproject.toml reads it, and it is the server
version reported in `serverInfo`. (A literal, because importlib.metadata costs ~18 ms at start-up.)
"""

__version__ = "0.1.0"
SERVER_NAME = "specactor"

__all__ = ["SERVER_NAME", "__version__"]
