"""`specactor demo`: start `specactor serve` on a temporary workspace, drive it with the official
MCP client (`mcp`, from the `[dev]` extra) and print a readable transcript.

The transcript grows as toolsets land: each step is a short story of one request and its reply.
"""

from __future__ import annotations

import json
import sys
import tempfile
import textwrap
import warnings
from pathlib import Path
from typing import Any

import trio


def _show(title: str, body: Any) -> None:
    text = body if isinstance(body, str) else json.dumps(body, indent=2, default=str)
    print(f"\n── {title}")
    print(textwrap.indent(text if len(text) < 1800 else text[:1800] + "\n…", "   "))


async def _run(workspace: Path) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=sys.executable, args=["-m", "specactor", "serve", "--root", str(workspace)],
                                   cwd=str(workspace), env={"SPECACTOR_LOG_LEVEL": "warning"})
    print(f"specactor demo: workspace {workspace}")
    print(f"server command: {params.command} {' '.join(params.args)}")

    async with Client(params, mode="legacy") as client:
        info = client.server_info
        _show("initialize (the 2025-11-25 handshake)",
              {"protocolVersion": client.protocol_version,
               "serverInfo": info.model_dump(exclude_none=True, by_alias=True) if info else None,
               "capabilities": client.server_capabilities.model_dump(exclude_none=True, by_alias=True)})
        with warnings.catch_warnings():  # the client warns that ping is legacy-only; this is legacy mode
            warnings.simplefilter("ignore")
            await client.send_ping()
        _show("ping", "pong")
        tools = (await client.list_tools()).tools
        _show(f"tools/list → {len(tools)} tools", [t.name for t in tools] or "(no toolset tools are installed yet)")
        resources = (await client.list_resources()).resources
        _show(f"resources/list → {len(resources)} resources", [str(r.uri) for r in resources])

    async with Client(params) as client:
        _show("auto mode: server/discover picks the 2026-07-28 era", {"protocolVersion": client.protocol_version})
        try:
            await client.read_resource("specactor://no-such-resource")
        except Exception as err:  # the client raises the server's JSON-RPC error
            _show("resources/read of an unknown URI → a clear error", f"{type(err).__name__}: {err}")
        metrics = (await client.read_resource("specactor://metrics")).contents[0]
        data = json.loads(getattr(metrics, "text", "{}"))
        counts = {f"{c['labels']['method']}": c["value"] for c in data["counters"]["mcp.requests.total"]}
        _show("specactor://metrics → requests served by this process so far", counts)

    logs = sorted((workspace / ".specactor" / "logs").glob("*.jsonl"))
    _show("session logs (JSONL, one line per request and response)", [str(p.relative_to(workspace)) for p in logs])
    if logs:
        first = logs[0].read_text().splitlines()[0]
        _show("first log line", json.loads(first))
    print("\ndemo finished: the server answered every request over stdio.")


def main() -> int:
    try:
        import mcp  # noqa: F401
    except ModuleNotFoundError:
        print("specactor demo drives the server with the official MCP client: pip install -e '.[dev]'",
              file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="specactor-demo-") as tmp:
        trio.run(_run, Path(tmp))
    return 0
