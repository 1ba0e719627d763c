"""The `graph` toolset: graph_status, graph_sync, graph_search, graph_get and the resource
`specactor://graph/status`, as glue over the graph-sync actor (`actors/graph_sync.py`).

The tools are registered when the `graph` toolset is chosen; the actor runs whenever graph sync
is on (`graph.enabled` or this toolset), started after the first reply. Query tools ask Emergent
directly and answer PROVIDER_ERROR, naming the server, when it cannot be reached; they never
wait for the outbox, and no other tool ever waits for Emergent.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import msgspec

from specactor.domain.graph import api as g
from specactor.domain.graph.emergent import EmergentError
from specactor.protocol.context import RequestContext
from specactor.protocol.errors import NotFound, ProviderError, RateLimited, ToolError
from specactor.protocol.registry import Registry

if TYPE_CHECKING:
    from specactor.actors.graph_sync import GraphSync
    from specactor.toolsets import Services

TOOLSET = "graph"
MAX_NEIGHBOURS = 200  # graph_get's answer stays readable; `truncated` says when there was more


def tool_error(err: EmergentError, url: str) -> ToolError:
    """Emergent's failure as the tool's error: the code kept, the server named."""
    details: dict[str, Any] = {"url": url, "status": err.status, "serverCode": err.server_code}
    if err.code == "RATE_LIMITED":
        return RateLimited(f"Emergent at {url} asks us to slow down: {err.message}", err.retry_after or 1.0, details)
    if err.code == "UNAUTHORIZED":
        return ToolError("UNAUTHORIZED", f"Emergent at {url} refused the credentials (EMERGENT_API_KEY / "
                         f"EMERGENT_PROJECT_ID): {err.message}", details)
    if err.code == "NOT_FOUND":
        return ToolError("NOT_FOUND", f"Emergent at {url} has no such object: {err.message}", details)
    if err.code == "REFUSED":
        return ToolError("PROVIDER_ERROR", f"Emergent at {url} refused the request: {err.message}", details,
                         retryable=False)
    return ProviderError(f"Emergent at {url} is unreachable or failing: {err.message}", details)


def register(registry: Registry, services: Services) -> None:
    if not registry.wants(TOOLSET):
        return
    url = services.config.emergent.url

    async def actor() -> GraphSync:
        graph = services.graph
        await services.supervisor.ensure(graph.spec)
        return graph

    @registry.tool("graph_status", description="Graph sync's state: whether Emergent answers, the last success and "
                   "error, the outbox's depth and oldest pending age, and the dead letters (items Emergent refused).",
                   input=g.GraphStatusIn, output=g.GraphStatusOut, toolset=TOOLSET,
                   annotations={"readOnlyHint": True})
    async def graph_status(args: g.GraphStatusIn, ctx: RequestContext) -> g.GraphStatusOut:
        return await (await actor()).status()

    @registry.resource("specactor://graph/status", name="graph-status", mime_type="application/json",
                       toolset=TOOLSET, description="The same as the graph_status tool: graph sync's connection, "
                       "outbox and dead letters.")
    async def status_resource(uri: str, params: dict[str, str], ctx: RequestContext) -> str:
        return msgspec.json.encode(await (await actor()).status()).decode()

    @registry.tool("graph_sync", description="Reconcile the workspace with the Emergent graph now and wait for the "
                   "outbox to drain (at most graph.sync_timeout). force: also list the graph's objects of this "
                   "workspace and repair what differs. Returns the counts created, updated, deleted and unchanged.",
                   input=g.GraphSyncIn, output=g.GraphSyncOut, toolset=TOOLSET)
    async def graph_sync(args: g.GraphSyncIn, ctx: RequestContext) -> g.GraphSyncOut:
        graph = await actor()
        from specactor.actors.graph_sync import GraphUnavailable

        try:
            return await graph.sync(force=args.force, timeout=services.config.graph.sync_timeout)
        except EmergentError as err:
            raise tool_error(err, url) from None
        except GraphUnavailable as err:
            raise ToolError("INTERNAL", str(err), {"path": str(services.config.graph_db_path)}) from None

    @registry.tool("graph_search", description="Hybrid (text and vector) search in the Emergent project's graph: "
                   "specs, requirements, scenarios, changes and tasks of every repository syncing into it "
                   "(workspaceOnly: this one only). types narrows to object types such as Change, Requirement, Task.",
                   input=g.GraphSearchIn, output=g.GraphSearchOut, toolset=TOOLSET,
                   annotations={"readOnlyHint": True})
    async def graph_search(args: g.GraphSearchIn, ctx: RequestContext) -> g.GraphSearchOut:
        graph = services.graph
        labels = [graph.label] if args.workspaceOnly else None
        async with graph.query_client() as client:
            try:
                hits = await client.hybrid_search(args.query, types=args.types, labels=labels, limit=args.limit)
            except EmergentError as err:
                raise tool_error(err, url) from None
        out = []
        for hit in hits.hits:
            obj = hit.get("object") if isinstance(hit.get("object"), dict) else None
            if obj is None:
                continue
            score = hit.get("score")
            out.append(g.SearchHit(object=g.graph_object(obj),
                                   score=float(score) if isinstance(score, int | float) else None))
        return g.GraphSearchOut(query=args.query, hits=out)

    @registry.tool("graph_get", description="One object of the Emergent graph, by key (this workspace's keys may be "
                   "given without the workspace prefix) or by id, with its neighbours up to depth relationships "
                   "away (default 1, at most 3).", input=g.GraphGetIn, output=g.GraphGetOut, toolset=TOOLSET,
                   annotations={"readOnlyHint": True})
    async def graph_get(args: g.GraphGetIn, ctx: RequestContext) -> g.GraphGetOut:
        if args.key is None and args.id is None:
            # Schema-valid input is never INVALID_INPUT: nothing named, nothing found.
            raise ToolError("NOT_FOUND", "graph_get needs the key or the id of an object; neither was given",
                            {"kind": "object", "id": "", "field": "key"})
        graph = services.graph
        async with graph.query_client() as client:
            try:
                return await _get(client, graph.workspace, args)
            except EmergentError as err:
                raise tool_error(err, url) from None


async def _get(client: Any, workspace: str, args: g.GraphGetIn) -> g.GraphGetOut:
    root: dict[str, Any] | None = None
    if args.id is not None:
        try:
            root = await client.get_object(args.id, resolve_head=True)
        except EmergentError as err:
            if err.code != "NOT_FOUND":
                raise
    else:
        assert args.key is not None
        for key in dict.fromkeys([args.key, f"{workspace}/{args.key.lstrip('/')}"]):
            page = await client.search_objects(key=key, limit=50)
            live = sorted((o for o in page.items if not o.get("deleted_at")),
                          key=lambda o: str(o.get("canonical_id") or o.get("id")))
            if live:
                root = live[0]
                break
    if root is None or root.get("deleted_at"):
        raise NotFound("graph object", args.id or args.key or "")
    seen = {str(root.get("canonical_id") or root.get("id"))}
    neighbours: list[g.Neighbour] = []
    queue: deque[tuple[str, int]] = deque([(next(iter(seen)), 0)])
    truncated = False
    while queue:
        current, depth = queue.popleft()
        if depth >= args.depth:
            continue
        edges = await client.object_edges(current)
        for direction, rels, other in (("out", edges.outgoing, "dst_id"), ("in", edges.incoming, "src_id")):
            for rel in rels:
                target = str(rel.get(other) or "")
                if not target or target in seen:
                    continue
                if len(neighbours) >= MAX_NEIGHBOURS:
                    truncated = True
                    continue
                try:
                    obj = await client.get_object(target, resolve_head=True)
                except EmergentError as err:
                    if err.code == "NOT_FOUND":
                        continue
                    raise
                if obj.get("deleted_at"):
                    continue
                canonical = str(obj.get("canonical_id") or obj.get("id"))
                seen.update({target, canonical})
                neighbours.append(g.Neighbour(relationship=str(rel.get("type", "")), direction=direction,
                                              depth=depth + 1, object=g.graph_object(obj), via=current))
                queue.append((canonical, depth + 1))
    return g.GraphGetOut(object=g.graph_object(root), neighbours=neighbours, truncated=truncated)
