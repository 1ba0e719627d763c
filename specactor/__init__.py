"""specactor: an MCP server for spec-driven development, built as trio actors on a msgspec core.

The package version is the server version reported in `serverInfo`.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("specactor")
except PackageNotFoundError:  # pragma: no cover - running from a source tree without install
    __version__ = "0.1.0"

SERVER_NAME = "specactor"

__all__ = ["SERVER_NAME", "__version__"]
