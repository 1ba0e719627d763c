"""specactor inside the caller's process: the whole server (registry, actors, storage) on a trio loop
in a daemon thread, spoken to in memory, for code that is not on trio (sync callers, any asyncio loop).

The same interface as `mcp_link.SpecactorLink` (list_tools, call, acall, read_resource, close), with
no child process and no socket: frames go straight into the server's dispatcher, the path stdio and
HTTP take, so a tool answers exactly what it answers over MCP. The loop starts on first use (with
`initialize`, as a client's session), requests from any number of threads are matched to their
replies by id, and `close` stops the actors (the storage's writes are committed before their calls
return, as always). Settings are `specactor serve --root root`'s (file, environment), or `config`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import threading  # noqa: TID251 - the server's trio loop runs in a thread of its own, beside the caller's
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec
import trio  # noqa: TID251 - like cli.py, it runs the app: the server's loop, in a thread of its own
from mcp.types import CallToolResult, Tool

from specactor import app as application
from specactor.adapters.mcp_link import DEFAULT_TIMEOUT, LinkError, envelope
from specactor.concurrency.peer import PeerLink
from specactor.config import Config, load
from specactor.protocol.frames import Reply
from specactor.protocol.session import Session
from specactor.protocol.versions import LATEST_LEGACY

_decode = msgspec.json.Decoder().decode
_encode = msgspec.json.Encoder().encode
METHOD_NOT_FOUND = -32601


class _Connection:
    """The dispatcher's view of the caller: what the server sends goes to `deliver`."""

    def __init__(self, link: InProcessLink) -> None:
        self.session = Session()
        self.peer = PeerLink(self.send)
        self._link = link

    async def send(self, data: bytes) -> None:
        await self._link._deliver(data)

    async def reply(self, reply: Reply) -> None:
        await self._link._deliver(reply.data)

    def abandon(self, ident: int | str | None) -> None:
        self._link._abandoned(ident)


class InProcessLink:
    """specactor served in this process.

    Args:
        root: the workspace (default: the current directory).
        config: the settings (default: those `specactor serve --root root` would use).
        timeout: seconds for starting and for each call.

    Raises (from each call):
        LinkError: the server could not start, refused the request, or did not answer in time.
    """

    def __init__(self, root: str | Path | None = None, *, config: Config | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.root = Path(root) if root is not None else Path.cwd()
        self.config = config
        self.timeout = timeout
        self._lock = threading.Lock()  # starting and stopping
        self._pending_lock = threading.Lock()
        self._pending: dict[int, concurrent.futures.Future[dict[str, Any]]] = {}
        self._ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self._app: application.App | None = None
        self._conn: _Connection | None = None

    # ------------------------------------------------------------------ the calls

    def list_tools(self) -> list[Tool]:
        """Every tool the server lists (all pages)."""
        tools: list[Tool] = []
        cursor: str | None = None
        while True:
            page = self._request("tools/list", {"cursor": cursor} if cursor else {})
            tools += [Tool.model_validate(t) for t in page.get("tools", [])]
            cursor = page.get("nextCursor")
            if not cursor:
                return tools

    def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Call the tool `name`; its envelope (`{"success": …}`), a failure's included."""
        result = self._request("tools/call", {"name": name, "arguments": dict(arguments)})
        return envelope(CallToolResult.model_validate(result))

    async def acall(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """`call`, awaited on the caller's asyncio loop (a thread waits for the answer)."""
        return await asyncio.to_thread(self.call, name, arguments)

    def read_resource(self, uri: str) -> str:
        """The text of the resource `uri`."""
        result = self._request("resources/read", {"uri": uri})
        return "".join(c.get("text", "") for c in result.get("contents", []))

    def close(self) -> None:
        """Stop the server (its actors end; committed writes are on disk). Used again, it starts again."""
        with self._lock:
            thread, token, stop = self._thread, self._token, self._stop
            self._thread = self._token = self._stop = self._app = self._conn = None
        if thread is not None and token is not None and stop is not None:
            try:
                trio.from_thread.run_sync(stop.set, trio_token=token)
            except trio.RunFinishedError:
                pass
            thread.join(self.timeout)
        self._fail_pending("specactor was closed during the call")

    def __enter__(self) -> InProcessLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ requests and replies

    def _request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        token, app, conn = self._started()
        return self._exchange(token, app, conn, method, params)

    def _exchange(self, token: trio.lowlevel.TrioToken, app: application.App, conn: _Connection, method: str,
                  params: dict[str, Any]) -> dict[str, Any]:
        ident = next(self._ids)
        waiting: concurrent.futures.Future[dict[str, Any]] = concurrent.futures.Future()
        with self._pending_lock:
            self._pending[ident] = waiting
        frame = _encode({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        try:
            trio.from_thread.run(app.dispatcher.feed, conn, frame, time.time(), trio_token=token)
            message = waiting.result(self.timeout)
        except concurrent.futures.TimeoutError as err:
            raise LinkError(f"specactor did not answer {method} within {self.timeout:g} s") from err
        except trio.RunFinishedError as err:
            raise LinkError("specactor stopped") from err
        finally:
            with self._pending_lock:
                self._pending.pop(ident, None)
        error = message.get("error")
        if error is not None:
            raise LinkError(f"specactor refused {method}: {error.get('message')} (code {error.get('code')})")
        result: dict[str, Any] = message.get("result") or {}
        return result

    async def _deliver(self, data: bytes) -> None:
        """A frame from the server (on its loop): a reply settles its caller's future; a request to
        the client is refused (this client offers no capabilities); notifications are dropped."""
        message = _decode(data)
        for one in message if isinstance(message, list) else [message]:
            if "method" in one:
                if "id" in one and self._app is not None and self._conn is not None:
                    refusal = {"jsonrpc": "2.0", "id": one["id"],
                               "error": {"code": METHOD_NOT_FOUND, "message": "this client offers no such method"}}
                    await self._app.dispatcher.feed(self._conn, _encode(refusal), time.time())
                continue
            with self._pending_lock:
                waiting = self._pending.get(one.get("id"))
            if waiting is not None and not waiting.done():
                waiting.set_result(one)

    def _abandoned(self, ident: int | str | None) -> None:
        with self._pending_lock:
            waiting = self._pending.get(ident) if isinstance(ident, int) else None
        if waiting is not None and not waiting.done():
            waiting.set_exception(LinkError("specactor cancelled the request"))

    def _fail_pending(self, why: str) -> None:
        with self._pending_lock:
            pending = list(self._pending.values())
        for waiting in pending:
            if not waiting.done():
                waiting.set_exception(LinkError(why))

    # ------------------------------------------------------------------ the server's thread

    def _started(self) -> tuple[trio.lowlevel.TrioToken, application.App, _Connection]:
        with self._lock:
            if (self._thread is not None and self._thread.is_alive() and self._token is not None
                    and self._app is not None and self._conn is not None):
                return self._token, self._app, self._conn
            ready: concurrent.futures.Future[tuple[trio.lowlevel.TrioToken, trio.Event]] = concurrent.futures.Future()
            thread = threading.Thread(target=self._run, args=(ready,), daemon=True, name="specactor-in-process")
            thread.start()
            try:
                token, stop = ready.result(self.timeout)
            except concurrent.futures.TimeoutError as err:
                raise LinkError(f"specactor did not start within {self.timeout:g} s ({self.root})") from err
            except Exception as err:
                raise LinkError(f"specactor could not start ({self.root}): {err}") from err
            assert self._app is not None and self._conn is not None
            self._thread, self._token, self._stop = thread, token, stop
            self._exchange(token, self._app, self._conn, "initialize", {
                "protocolVersion": LATEST_LEGACY, "capabilities": {},
                "clientInfo": {"name": "specactor-in-process", "version": "1"}})
            notice = _encode({"jsonrpc": "2.0", "method": "notifications/initialized"})
            trio.from_thread.run(self._app.dispatcher.feed, self._conn, notice, time.time(), trio_token=token)
            return token, self._app, self._conn

    def _run(self, ready: concurrent.futures.Future[tuple[trio.lowlevel.TrioToken, trio.Event]]) -> None:
        try:
            trio.run(self._serve, ready)
        except BaseException as err:
            if not ready.done():
                ready.set_exception(err if isinstance(err, Exception) else LinkError(repr(err)))
        finally:
            self._fail_pending("specactor stopped")

    async def _serve(self, ready: concurrent.futures.Future[tuple[trio.lowlevel.TrioToken, trio.Event]]) -> None:
        config = self.config if self.config is not None else load({"root": str(self.root)})
        built = application.build(config)
        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            await application.start_actors(built, nursery)
            conn = _Connection(self)
            application.notify_changes(built, nursery, lambda: [conn])
            self._app, self._conn = built, conn
            ready.set_result((trio.lowlevel.current_trio_token(), stop))
            await stop.wait()
            with trio.move_on_after(self.timeout):
                await application.drain(built)
            nursery.cancel_scope.cancel()
