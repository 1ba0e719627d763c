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
    from specactor.testing.emergent import EmergentDouble

    double = EmergentDouble()  # Emergent's contract double: graph sync needs a server, and none runs offline
    async with trio.open_nursery() as nursery:
        await nursery.start(double.serve)
        await _drive(workspace, double)
        nursery.cancel_scope.cancel()


async def _drive(workspace: Path, double: Any) -> None:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    from specactor.testing.emergent import PROJECT_ID

    params = StdioServerParameters(command=sys.executable, args=["-m", "specactor", "serve", "--root", str(workspace)],
                                   cwd=str(workspace), env={
                                       "SPECACTOR_LOG_LEVEL": "warning",
                                       "SPECACTOR_MEMORY_DB": str(workspace / ".memory.db"),
                                       "SPECACTOR_TOOLSETS": "openspec,airsspec,memory,graph",
                                       "SPECACTOR_GRAPH_WORKSPACE_ID": "demo/workspace",
                                       "EMERGENT_URL": double.url, "EMERGENT_API_KEY": "standalone-key",
                                       "EMERGENT_PROJECT_ID": PROJECT_ID})
    print(f"specactor demo: workspace {workspace}")
    print(f"server command: {params.command} {' '.join(params.args)}")
    print(f"Emergent (the contract double, specactor.testing.emergent): {double.url}")

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
        auth_id = await _airsspec(client)
        await _graph(client, double, auth_id)
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


async def _airsspec(client: Any) -> str:
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
    return str(auth_id)


def _in_graph(double: Any, prefix: str) -> list[dict[str, Any]]:
    from specactor.testing.emergent import PROJECT_ID

    return [{"type": o["type"], "key": o["key"], "version": o["version"], "status": o.get("status"),
             **({"step status": o["properties"].get("status")} if o["type"] == "Task" else {})}
            for o in sorted(double.objects(PROJECT_ID), key=lambda o: o["key"]) if o["key"].startswith(prefix)]


async def _graph(client: Any, double: Any, auth_id: str) -> None:
    """Graph sync: what the tools wrote is mirrored into the Emergent graph, without any tool waiting."""
    await _call(client, "graph_sync", {})
    prefix = f"demo/workspace/airsspec:{auth_id}"
    _show("the double's graph now holds the spec as a Change, with its proposal, plan and steps", _in_graph(
        double, prefix))
    await _call(client, "plan_step_complete", {"spec_id": auth_id, "step_index": 1})
    await _call(client, "graph_sync", {})
    _show("after plan_step_complete: the second step's Task is a new version, completed",
          [o for o in _in_graph(double, prefix) if o["type"] == "Task"])
    await _call(client, "graph_get", {"key": f"airsspec:{auth_id}", "depth": 1})
    await _call(client, "graph_status", {})


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
