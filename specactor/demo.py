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
                                   cwd=str(workspace), env={"SPECACTOR_LOG_LEVEL": "warning",
                                                            "SPECACTOR_MEMORY_DB": str(workspace / ".memory.db")})
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
        _show(f"resources/list → {len(resources)} resources", [str(r.uri) for r in resources][:12])
        await _airsspec(client)
        await _memory(client)

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


async def _call(client: Any, tool: str, arguments: dict[str, Any]) -> Any:
    """Call a tool; show and return its envelope."""
    result = await client.call_tool(tool, arguments)
    envelope = result.structured_content
    _show(f"tools/call {tool} {json.dumps(arguments)[:90]}", envelope)
    return envelope


async def _airsspec(client: Any) -> None:
    """The AirsSpec lifecycle: specs, a dependency that blocks a build, a plan, progress."""
    base = await _call(client, "spec_create", {"title": "Database setup", "description": "Tables for users"})
    base_id = base["data"]["spec_id"]
    auth = await _call(client, "spec_create", {
        "title": "User authentication", "description": "Login and logout for users",
        "dependencies": [{"spec_id": base_id, "kind": "hard"}]})
    auth_id = auth["data"]["spec_id"]
    steps = [{"title": "Hash passwords", "description": "bcrypt", "complexity": "simple"},
             {"title": "Issue tokens", "description": "JWT", "complexity": "moderate"}]
    await _call(client, "plan_create", {"spec_id": auth_id, "approach": "JWT with bcrypt", "steps": steps})
    await _call(client, "build_start", {"spec_id": auth_id})  # refused: its hard dependency is not done
    await _call(client, "plan_create", {"spec_id": base_id, "approach": "One migration",
                                        "steps": [{"title": "Create tables", "description": "users"}]})
    await _call(client, "build_start", {"spec_id": base_id})
    await _call(client, "build_complete", {"spec_id": base_id, "summary": "Tables created"})
    await _call(client, "build_start", {"spec_id": auth_id})
    await _call(client, "plan_step_complete", {"spec_id": auth_id, "step_index": 0})
    await _call(client, "spec_status", {"spec_id": auth_id})
    state = (await client.read_resource(f"airsspec:///{auth_id}/state")).contents[0]
    _show(f"resources/read airsspec:///{auth_id}/state (TOON)", getattr(state, "text", ""))
    await _call(client, "spec_transition", {"spec_id": base_id, "to_state": "active"})  # done → active: invalid


async def _memory(client: Any) -> None:
    """Layered memory: remember, search (FTS5 BM25 scored into [0, 1]), forget."""
    added = await _call(client, "memory_add", {"content": "We deploy the API with blue-green releases on Fridays",
                                               "tags": ["deploy"]})
    await _call(client, "memory_search", {"query": "how do we deploy the API", "threshold": 0.3})
    await _call(client, "memory_delete", {"memoryId": added["data"]["memoryId"]})


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
