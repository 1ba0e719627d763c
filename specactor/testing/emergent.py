"""A contract double of the Emergent graph server (REST API v0.7.0), over real HTTP on 127.0.0.1.

`EmergentDouble` answers as the real server does (auth, project context, versioned objects,
relationship upserts, the error envelope; `emergent_routes`, `emergent_store`) and injects faults
on demand: latency, error statuses, stalls, resets, outages, and writes applied whose reply is lost.
Drive it in-process (`serve`, `running_in_thread`) or from another process (`/_double/`, the CLI).
"""

from __future__ import annotations

import argparse
import contextlib
import random
import socket
import struct
import sys
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast
from urllib.parse import parse_qs

import msgspec
import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext

from specactor.testing.emergent_routes import Handler, Request, Store, dispatch, not_found_route, route
from specactor.testing.emergent_rows import ApiError, parse_uuid

PROJECT_ID = "5e1d6c0a-7b3f-4c2e-9a8d-1f0e2d3c4b5a"
"""The one project a double has unless told otherwise."""

HEALTH_PATHS = ("/health", "/healthz", "/ready", "/api/health", "/debug")
_ERROR_CODES = {400: "bad_request", 401: "unauthorized", 403: "forbidden", 404: "not_found", 409: "conflict",
                422: "validation_error", 500: "internal_error"}
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})

Headers = list[tuple[bytes, bytes]]
Answer = tuple[int, bytes, Headers]


class Faults(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """What goes wrong, and how often. Rates are probabilities per request, drawn from the seed.

    Attributes:
        latency: seconds added to every request.
        error_rates: HTTP status → chance a request is answered with it (error envelope; 429
            carries `Retry-After`). Nothing is applied.
        retry_after: the seconds a 429's `Retry-After` asks for.
        reset_rate: chance the connection is reset (TCP RST) without a reply; nothing is applied.
        stall_rate: chance a request hangs `stall_seconds` before it is handled.
        stall_seconds: how long a stall lasts.
        down: every request, `/health` too, is reset: an outage.
        apply_then_fail_rate: chance a write (POST/PUT/PATCH/DELETE) is applied and then its
            connection reset: the lost reply a client must survive.
        paths: path prefixes the faults apply to; empty means every path but `/_double/`.
    """

    latency: float = 0.0
    error_rates: dict[int, float] = {}
    retry_after: int = 1
    reset_rate: float = 0.0
    stall_rate: float = 0.0
    stall_seconds: float = 0.0
    down: bool = False
    apply_then_fail_rate: float = 0.0
    paths: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class _Plan:
    """The dice for one request, rolled at once under the lock so a seed replays a run."""

    down: bool = False
    delay: float = 0.0
    reset: bool = False
    error: int | None = None
    lose_reply: bool = False


def _json(status: int, payload: Any, extra: Headers | None = None) -> Answer:
    return status, msgspec.json.encode(payload), [(b"content-type", b"application/json"), *(extra or [])]


def _error(error: ApiError) -> Answer:
    return _json(error.status, error.body())


class EmergentDouble:
    """An Emergent server for tests, benchmarks and the demo.

    Args:
        api_keys: standalone keys accepted in `X-API-Key` (STANDALONE_API_KEY on the server).
        tokens: project API tokens (`emt_…`, accepted only as `Authorization: Bearer`) → project id.
        projects: the project ids that exist; token projects are added.
        inverse_types: relationship type → its inverse, as the template pack's `inverseType`.
        seed: seeds the fault dice.
        host: where to listen.
        port: 0 picks a free port; `url` tells which.

    Raises:
        ValueError: a project id that is not a uuid.
    """

    def __init__(self, api_keys: Iterable[str] = ("standalone-key",), tokens: Mapping[str, str] | None = None,
                 projects: Iterable[str] = (PROJECT_ID,), inverse_types: Mapping[str, str] | None = None,
                 seed: int | None = 0, host: str = "127.0.0.1", port: int = 0) -> None:
        tokens = {token: _project(project) for token, project in (tokens or {}).items()}
        self._store = Store(api_keys=frozenset(key for key in api_keys if key), tokens=tokens,
                            projects=frozenset([*map(_project, projects), *tokens.values()]),
                            inverse_types=dict(inverse_types or {}))
        self._lock = threading.Lock()  # the store, faults, dice and counts, shared with test threads
        self._faults = Faults()
        self._random = random.Random(seed)
        self._counts: dict[tuple[str, str], int] = {}
        self._connections: dict[tuple[str, int], trio.SocketStream] = {}
        self.host = host
        self.port = port
        self.url: str | None = None

    # ------------------------------------------------------------------ faults

    @property
    def faults(self) -> Faults:
        """The faults in force."""
        with self._lock:
            return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        with self._lock:
            self._faults = faults

    def set_faults(self, **changes: Any) -> Faults:
        """Change some fault settings, keeping the rest; returns the new settings.

        Raises:
            msgspec.ValidationError: a field that does not exist or a value of the wrong type.
        """
        with self._lock:
            self._faults = msgspec.convert({**msgspec.structs.asdict(self._faults), **changes}, Faults)
            return self._faults

    def _plan(self, faults: Faults, method: str, path: str) -> _Plan:
        """Draws, in this order and only for non-zero rates: stall, reset, each error status
        (ascending), apply-then-fail."""
        in_scope = any(path.startswith(p) for p in faults.paths) if faults.paths else True
        if faults.down and (in_scope or path in HEALTH_PATHS):
            return _Plan(down=True)
        if not in_scope:
            return _Plan()
        roll = self._random.random
        delay = faults.latency + (faults.stall_seconds if faults.stall_rate and roll() < faults.stall_rate else 0.0)
        reset = bool(faults.reset_rate) and roll() < faults.reset_rate
        error = next((s for s, rate in sorted(faults.error_rates.items()) if rate and roll() < rate), None)
        lose = method in _WRITES and bool(faults.apply_then_fail_rate) and roll() < faults.apply_then_fail_rate
        return _Plan(delay=delay, reset=reset, error=error, lose_reply=lose)

    # ------------------------------------------------------------------ inspection

    def objects(self, project: str = PROJECT_ID, include_deleted: bool = False) -> list[dict[str, Any]]:
        """The HEAD version of every object, oldest first."""
        with self._lock:
            heads = sorted(self._store.graph(_project(project)).heads.values(), key=lambda r: (r.created_us, r.id))
            return _copy([r.to_json() for r in heads if include_deleted or r.deleted_us is None])

    def all_versions(self, project: str = PROJECT_ID) -> list[dict[str, Any]]:
        """Every object row, every version, in the order they were written."""
        with self._lock:
            rows = sorted(self._store.graph(_project(project)).rows.values(), key=lambda r: (r.created_us, r.id))
            return _copy([r.to_json() for r in rows])

    def relationships(self, project: str = PROJECT_ID, include_deleted: bool = False) -> list[dict[str, Any]]:
        """The HEAD version of every relationship, oldest first."""
        with self._lock:
            heads = sorted(self._store.graph(_project(project)).rel_heads.values(), key=lambda r: (r.created_us, r.id))
            return _copy([r.to_json() for r in heads if include_deleted or r.deleted_us is None])

    def duplicate_keys(self, project: str = PROJECT_ID) -> list[tuple[str, str]]:
        """(type, key) pairs that more than one live object shares (the server allows it)."""
        with self._lock:
            return self._store.graph(_project(project)).duplicate_keys()

    @property
    def request_counts(self) -> dict[tuple[str, str], int]:
        """Requests received by (method, route template), faulted ones included, `/_double/` not."""
        with self._lock:
            return dict(self._counts)

    def reset(self) -> None:
        """Forget every object, relationship and request count (faults stay)."""
        with self._lock:
            self._store.clear()
            self._counts.clear()

    def _state(self, project: str, include_deleted: bool) -> dict[str, Any]:
        counts = {f"{m} {t}": n for (m, t), n in self.request_counts.items()}
        return {"project": project, "objects": self.objects(project, include_deleted),
                "relationships": self.relationships(project, include_deleted),
                "duplicates": [list(pair) for pair in self.duplicate_keys(project)],
                "counts": counts, "faults": msgspec.to_builtins(self.faults)}

    # ------------------------------------------------------------------ HTTP

    async def _asgi(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body", False):
                break
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            headers.setdefault(name.decode("latin-1").lower(), value.decode("latin-1"))
        query = parse_qs(scope["query_string"].decode("latin-1"), keep_blank_values=True)
        request = Request(scope["method"], scope["path"], query, headers, bytes(body))
        answer = await self._answer(request)
        if answer is None:
            self._reset(scope["client"])
            return
        status, payload, extra = answer
        await send({"type": "http.response.start", "status": status,
                    "headers": [*extra, (b"content-length", str(len(payload)).encode())]})
        await send({"type": "http.response.body", "body": payload})

    async def _answer(self, req: Request) -> Answer | None:
        """The reply, or None to drop the connection."""
        if req.path.startswith("/_double/"):
            return self._control(req)
        template, handler, row_id, bad_id = route(req.method, req.path)
        if req.path in HEALTH_PATHS:
            template = req.path
        with self._lock:
            key = (req.method, template or "<unmatched>")
            self._counts[key] = self._counts.get(key, 0) + 1
            faults = self._faults
            plan = self._plan(faults, req.method, req.path)
        if plan.down:
            return None
        if plan.delay:
            await trio.sleep(plan.delay)
        if plan.reset:
            return None
        if plan.error is not None:
            phrase = HTTPStatus(plan.error).phrase
            code = _ERROR_CODES.get(plan.error, phrase.lower().replace(" ", "_").replace("-", "_"))
            message = "An internal error occurred" if plan.error == 500 else phrase
            extra = [(b"retry-after", str(faults.retry_after).encode())] if plan.error == 429 else []
            return _json(plan.error, {"error": {"code": code, "message": message}}, extra)
        with self._lock:
            answer = self._handle(req, template, handler, row_id, bad_id)
        return None if plan.lose_reply else answer

    def _handle(self, req: Request, template: str, handler: Handler | None, row_id: str, bad_id: str) -> Answer:
        if req.path in HEALTH_PATHS:
            if req.method != "GET":
                return _error(ApiError(405, "internal_error", "Method Not Allowed"))
            if req.path == "/healthz":
                return 200, b"OK", [(b"content-type", b"text/plain; charset=UTF-8")]
            return _json(200, {"status": "ready"} if req.path == "/ready" else
                         {"status": "healthy", "checks": {"database": {"status": "healthy"}}})
        if not req.path.startswith("/api/graph/") and req.path != "/api/graph":
            return _error(not_found_route())
        try:
            return _json(*dispatch(self._store, req, template, handler, row_id, bad_id))
        except ApiError as error:
            return _error(error)
        except Exception as error:  # a bug of the double's: the server's 500, with the cause in details
            return _json(500, {"error": {"code": "internal_error", "message": "An internal error occurred",
                                         "details": {"double": repr(error)}}})

    def _control(self, req: Request) -> Answer:
        match req.method, req.path.rstrip("/"):
            case "GET", "/_double/state":
                project = req.query.get("project", [PROJECT_ID])[0]
                include_deleted = req.query.get("include_deleted", [""])[0] == "true"
                try:
                    return _json(200, self._state(project, include_deleted))
                except ValueError as error:
                    return _error(ApiError(400, "bad_request", str(error)))
            case "PUT", "/_double/faults":
                try:
                    self.faults = msgspec.json.decode(req.body or b"{}", type=Faults)
                except msgspec.DecodeError as error:
                    return _error(ApiError(400, "bad_request", str(error)))
                return _json(200, msgspec.to_builtins(self.faults))
            case "POST", "/_double/reset":
                self.reset()
                return _json(200, {"status": "reset"})
        return _error(not_found_route())

    def _reset(self, peer: tuple[str, int]) -> None:
        """Drop the connection of `peer` with an RST and no reply (SO_LINGER 0, then close)."""
        stream = self._connections.pop(peer, None)
        if stream is not None:
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            stream.socket.close()  # the connection's reader wakes with ClosedResourceError and ends

    async def _connection(self, stream: trio.SocketStream, config: HypercornConfig, context: Any) -> None:
        try:
            peer = stream.socket.getpeername()[:2]
        except OSError:  # gone before we looked
            await stream.aclose()
            return
        self._connections[peer] = stream
        try:
            # hypercorn's annotations name its own ASGI types and an SSL stream; a plain
            # SocketStream is what its `serve` hands this class too.
            app = ASGIWrapper(cast(Any, self._asgi))
            await TCPServer(app, config, context, {}, cast(Any, stream)).run()
        finally:
            self._connections.pop(peer, None)

    async def serve(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        """Serve until cancelled; `task_status.started` (and `self.url`) gives the base URL.

        Hypercorn's own `serve` owns its sockets; this runs hypercorn's per-connection server on
        our listener instead, so a fault can reset one connection (an ASGI app cannot: an app that
        raises before replying gets a 500).

        Raises:
            OSError: the host and port cannot be bound.
        """
        config = HypercornConfig()
        config.accesslog = None
        config.errorlog = None
        config.keep_alive_max_requests = 1_000_000  # the default (1,000) would recycle a bench's connections
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        with trio.socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            await sock.bind((self.host, self.port))
            sock.listen(256)
            host = f"[{self.host}]" if family == socket.AF_INET6 else self.host
            self.url = f"http://{host}:{sock.getsockname()[1]}"
            context = WorkerContext(None)

            async def handle(stream: trio.SocketStream) -> None:
                await self._connection(stream, config, context)

            async with trio.open_nursery() as nursery:
                await nursery.start(trio.serve_listeners, handle, [trio.SocketListener(sock)])
                task_status.started(self.url)

    @contextlib.contextmanager
    def running_in_thread(self, start_timeout: float = 10.0) -> Iterator[str]:
        """Serve from a background thread (its own `trio.run`) while the block runs; yields the URL.

        Raises:
            RuntimeError: the server did not start within `start_timeout` seconds.
        """
        ready = threading.Event()
        box: dict[str, Any] = {}

        async def main() -> None:
            with trio.CancelScope() as scope:
                box["scope"], box["token"] = scope, trio.lowlevel.current_trio_token()
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.serve)
                    ready.set()

        def run() -> None:
            try:
                trio.run(main)
            except BaseException as exc:  # handed to the caller's thread
                box["error"] = exc
            finally:
                ready.set()

        thread = threading.Thread(target=run, name="emergent-double", daemon=True)
        thread.start()
        if not ready.wait(start_timeout) or "error" in box or self.url is None:
            raise RuntimeError("the Emergent double did not start") from box.get("error")
        try:
            yield self.url
        finally:
            with contextlib.suppress(trio.RunFinishedError):
                trio.from_thread.run_sync(box["scope"].cancel, trio_token=box["token"])
            thread.join(start_timeout)


def _project(text: str) -> str:
    project = parse_uuid(text)
    if project is None:
        raise ValueError(f"a project id is a uuid, not {text!r}")
    return project


def _copy(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A deep copy the caller may keep and change (the store's dicts are live)."""
    return msgspec.json.decode(msgspec.json.encode(rows), type=list[dict[str, Any]])


# ---------------------------------------------------------------------- CLI


def _pairs(values: Sequence[str], flag: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for value in values:
        name, sep, target = value.partition("=")
        if not sep or not name or not target:
            raise SystemExit(f"{flag} takes NAME=VALUE, not {value!r}")
        out[name] = target
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m specactor.testing.emergent`: serve a double until killed; print its URL."""
    parser = argparse.ArgumentParser(prog="python -m specactor.testing.emergent", description=main.__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0 (the default) picks a free port")
    parser.add_argument("--api-key", action="append", default=[], help="a standalone X-API-Key (repeatable)")
    parser.add_argument("--token", action="append", default=[], help="emt_TOKEN=PROJECT_ID (repeatable)")
    parser.add_argument("--project", action="append", default=[], help=f"a project id (default {PROJECT_ID})")
    parser.add_argument("--inverse", action="append", default=[], help="TYPE=INVERSE_TYPE (repeatable)")
    parser.add_argument("--latency-ms", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--port-file", help="write the URL here (atomically) once serving")
    args = parser.parse_args(argv)
    double = EmergentDouble(api_keys=args.api_key or ("standalone-key",), tokens=_pairs(args.token, "--token"),
                            projects=args.project or (PROJECT_ID,), inverse_types=_pairs(args.inverse, "--inverse"),
                            seed=args.seed, host=args.host, port=args.port)
    double.set_faults(latency=args.latency_ms / 1000)

    async def serve() -> None:
        async with trio.open_nursery() as nursery:
            url = await nursery.start(double.serve)
            if args.port_file:
                partial = trio.Path(f"{args.port_file}.partial")
                await partial.write_text(url + "\n")
                await partial.rename(args.port_file)  # readers never see half a URL
            print(url, flush=True)  # after the file: a reader of stdout may go straight to it

    with contextlib.suppress(KeyboardInterrupt):
        trio.run(serve)
    return 0


if __name__ == "__main__":
    sys.exit(main())
