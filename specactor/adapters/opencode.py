"""The seed's `EcosystemAdapter` for OpenCode (and oh-my-opencode, which loads the same config).

OpenCode reaches specactor two ways, both written by `specactor install opencode`: the MCP server
(`opencode.json` `mcp.specactor`), whose tools OpenCode shows its model as `<server key>_<tool>`,
and the plugin (`.opencode/plugins/specactor.ts`), which pushes the session context into the
system prompt, checks written files and keeps the context through compaction. The plugin is
TypeScript and runs inside OpenCode; this class is the same adapter seen from Python: the tools
by the seed's groups as OpenCode's model sees them (name, description, the parameters OpenCode
forwards), and the exact session context the plugin pushes (`specactor context` for the root).
`tool_switches` gives the `"tools"` map of `opencode.json` (or of an agent) that turns a group on
or off. tests/e2e/test_opencode.py checks both against a real OpenCode.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from specactor.adapters import GROUPS, in_group
from specactor.adapters.definitions import parameters
from specactor.config import Config, load

SERVER_KEY: Final = "specactor"  # the key of specactor's entry under `mcp` in opencode.json


@dataclass(frozen=True)
class OpenCodeTool:
    """One of specactor's tools as OpenCode offers it to its model."""

    name: str  # as OpenCode names it: "<server key>_<tool>", e.g. "specactor_memory_add"
    tool: str  # the MCP tool's own name, e.g. "memory_add"
    description: str
    parameters: dict[str, Any]  # the inputSchema as a closed draft-07 object schema


def opencode_name(tool: str, server: str = SERVER_KEY) -> str:
    """The name OpenCode gives the MCP tool `tool` of the server configured as `server`."""
    return f"{server}_{tool}"


class OpenCodeAdapter:
    """specactor's tools and session context as OpenCode presents them.

    Args:
        root: the workspace (default: the current directory), as the plugin's `directory`.
        server: the key of specactor's entry under `mcp` in opencode.json.
        budget: the most characters of session context (default: the `context.budget` setting).
        config: the settings to build the tool list with (default: those of `specactor serve --root root`).

    Raises:
        ConfigError: the workspace's settings are invalid.
    """

    def __init__(self, root: str | Path | None = None, *, server: str = SERVER_KEY, budget: int | None = None,
                 config: Config | None = None) -> None:
        self.root = Path(root) if root is not None else Path.cwd()
        self.server = server
        self.budget = budget
        self.config = config if config is not None else load({"root": str(self.root)})
        self._tools: list[OpenCodeTool] | None = None

    def get_tools(self) -> list[OpenCodeTool]:
        """Every tool the server registers with these settings, in registration order (built once)."""
        if self._tools is None:
            from specactor.adapters.tools_command import registered_tools

            self._tools = [OpenCodeTool(opencode_name(t.name, self.server), t.name,
                                        t.description if isinstance(t.description, str) else "",
                                        parameters(t.inputSchema))
                           for t in registered_tools(self.config)]
        return list(self._tools)

    def get_memory_tools(self) -> list[OpenCodeTool]:
        return [t for t in self.get_tools() if in_group("memory", t.tool)]

    def get_knowledge_tools(self) -> list[OpenCodeTool]:
        return [t for t in self.get_tools() if in_group("knowledge", t.tool)]

    def get_sync_tools(self) -> list[OpenCodeTool]:
        return [t for t in self.get_tools() if in_group("sync", t.tool)]

    def get_session_context(self) -> str:
        """The text the plugin pushes into the system prompt (what `specactor context --root root` prints)."""
        from specactor.context.reader import get_session_context

        return get_session_context(self.root, self.budget)

    def tool_switches(self, group: str | None = None, *, enabled: bool = True) -> dict[str, bool]:
        """The `"tools"` entry of opencode.json (or of an agent's config) that turns specactor's tools
        on or off: all of them (`group` None), or one of the seed's groups ("memory", "knowledge", "sync").

        Raises:
            KeyError: an unknown group.
        """
        prefix = "" if group is None else GROUPS[group]
        return {f"{opencode_name(prefix, self.server)}*": enabled}
