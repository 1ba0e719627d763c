"""One MCP connection to specactor for code that is not on trio: sync callers and any asyncio loop.

The official `mcp` client (2.x) runs on an asyncio loop of its own, in a daemon thread, connected
on first use: `call` blocks the calling thread until the answer, `acall` awaits it from the
caller's loop. So one link serves `invoke` and `ainvoke` alike and outlives any one
`asyncio.run`; a link whose connection died reconnects on the next call. By stdio (`specactor
serve` as a child process, which ends when its stdin closes, with this process at the latest) or
Streamable HTTP to a running server. Answers are specactor's envelope, as a dict.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import os  # noqa: TID251 - the child server inherits this process's environment (SPECACTOR_* settings)
import sys
import threading  # noqa: TID251 - the client's event loop runs in a thread of its own, outside the caller's
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any, Protocol, TypeVar

from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import CallToolResult, TextContent, TextResourceContents, Tool

T = TypeVar("T")
DEFAULT_TIMEOUT = 60.0  # seconds for one call; a knowledge sync of a large repository takes this long at worst


class LinkError(RuntimeError):
    """specactor could not be reached, or did not answer in time."""


class Link(Protocol):
    """What the adapters use of a connection to specactor: `SpecactorLink` (MCP, by stdio or HTTP)
    or `in_process.InProcessLink` (the server in this process)."""

    def list_tools(self) -> list[Tool]: ...

    def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]: ...

    async def acall(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]: ...

    def read_resource(self, uri: str) -> str: ...

    def close(self) -> None: ...


class SpecactorLink:
    """A lazily connected MCP client session to one specactor server.

    Args:
        server: `StdioServerParameters` (a child process) or the URL of a server's `/mcp` endpoint.
        headers: HTTP headers (a bearer token); HTTP only.
        timeout: seconds for connecting and for each call.
    """

    def __init__(self, server: StdioServerParameters | str, *, headers: Mapping[str, str] | None = None,
                 timeout: float = DEFAULT_TIMEOUT) -> None:
        self.server = server
        self.headers = dict(headers or {})
        self.timeout = timeout
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._client: Client | None = None
        self._stop: asyncio.Event | None = None

    @classmethod
    def stdio(cls, root: str | Path | None = None, *, command: Sequence[str] | None = None,
              env: Mapping[str, str] | None = None, timeout: float = DEFAULT_TIMEOUT) -> SpecactorLink:
        """A link to `specactor serve --root root` (default: `python -m specactor serve`) as a child process,
        in this process's environment plus `env`; its logs go to stderr at warning level unless set."""
        argv = list(command or [sys.executable, "-m", "specactor", "serve"])
        if root is not None:
            argv += ["--root", str(root)]
        environ = {"SPECACTOR_LOG_LEVEL": "warning", **os.environ, **(env or {})}
        return cls(StdioServerParameters(command=argv[0], args=argv[1:], env=environ,
                                         cwd=str(root) if root is not None else None), timeout=timeout)

    @classmethod
    def http(cls, url: str, *, token: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> SpecactorLink:
        """A link to a running `specactor serve --http` at `url` (…/mcp), with its bearer `token` if it has one."""
        return cls(url, headers={"Authorization": f"Bearer {token}"} if token else None, timeout=timeout)

    # ------------------------------------------------------------------ the calls

    def list_tools(self) -> list[Tool]:
        """Every tool the server lists (all pages).

        Raises:
            LinkError: the server cannot be reached or did not answer in time.
        """
        return self._wait(self._submit(lambda c: _all_tools(c)))

    def call(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """Call the tool `name`; its envelope (`{"success": …}`), a failure's included.

        Raises:
            LinkError: the server cannot be reached or did not answer in time.
        """
        return envelope(self._wait(self._submit(lambda c: c.call_tool(name, dict(arguments)))))

    async def acall(self, name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """`call`, awaited on the caller's asyncio loop (the link's own loop does the work)."""
        future = await asyncio.to_thread(self._submit, lambda c: c.call_tool(name, dict(arguments)))
        try:
            result = await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        except TimeoutError as err:
            raise LinkError(f"specactor did not answer {name} within {self.timeout:g} s") from err
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if future.cancelled() and task is not None and not task.cancelling():  # the link's loop ended
                raise LinkError(f"the connection to specactor ended during {name}") from None
            raise
        return envelope(result)

    def read_resource(self, uri: str) -> str:
        """The text of the resource `uri`.

        Raises:
            LinkError: the server cannot be reached or did not answer in time.
        """
        result = self._wait(self._submit(lambda c: c.read_resource(uri)))
        return "".join(c.text for c in result.contents if isinstance(c, TextResourceContents))

    def close(self) -> None:
        """End the connection (and a stdio server); the link connects again if used after."""
        with self._lock:
            loop, stop, thread = self._loop, self._stop, self._thread
            self._loop = self._client = self._stop = self._thread = None
        if loop is not None and stop is not None and thread is not None:
            try:
                loop.call_soon_threadsafe(stop.set)
            except RuntimeError:  # the loop has ended already
                pass
            thread.join(self.timeout)

    def __enter__(self) -> SpecactorLink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the loop thread

    def _submit(self, make: Callable[[Client], Awaitable[T]]) -> concurrent.futures.Future[T]:
        loop, client = self._connected()

        async def run() -> T:
            return await make(client)

        return asyncio.run_coroutine_threadsafe(run(), loop)

    def _wait(self, future: concurrent.futures.Future[T]) -> T:
        try:
            return future.result(self.timeout)
        except concurrent.futures.TimeoutError as err:
            future.cancel()
            raise LinkError(f"specactor did not answer within {self.timeout:g} s") from err
        except concurrent.futures.CancelledError as err:  # the link's loop ended: the connection died
            raise LinkError("the connection to specactor ended during the call") from err

    def _connected(self) -> tuple[asyncio.AbstractEventLoop, Client]:
        with self._lock:
            loop, client = self._loop, self._client
            if self._thread is not None and self._thread.is_alive() and loop is not None and client is not None:
                return loop, client
            ready: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, Client, asyncio.Event]] = (
                concurrent.futures.Future())
            thread = threading.Thread(target=asyncio.run, args=(self._serve(ready),), daemon=True,
                                      name="specactor-mcp-link")
            thread.start()
            try:
                self._loop, self._client, self._stop = ready.result(self.timeout)
            except concurrent.futures.TimeoutError as err:
                raise LinkError(f"specactor did not connect within {self.timeout:g} s ({self._where()})") from err
            except Exception as err:
                raise LinkError(f"specactor could not be reached ({self._where()}): {err}") from err
            self._thread = thread
            return self._loop, self._client

    async def _serve(self, ready: concurrent.futures.Future[tuple[asyncio.AbstractEventLoop, Client,
                                                                  asyncio.Event]]) -> None:
        stop = asyncio.Event()
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(Client(await self._transport(stack),
                                                                read_timeout_seconds=self.timeout))
                ready.set_result((asyncio.get_running_loop(), client, stop))
                await stop.wait()
        except BaseException as err:
            if not ready.done():
                ready.set_exception(err if isinstance(err, Exception) else LinkError(repr(err)))
            elif not isinstance(err, Exception):
                raise

    async def _transport(self, stack: AsyncExitStack) -> Any:
        if isinstance(self.server, StdioServerParameters) or not self.headers:
            return self.server
        import httpx2
        from mcp.client.streamable_http import streamable_http_client

        http = await stack.enter_async_context(httpx2.AsyncClient(
            headers=self.headers, timeout=httpx2.Timeout(30.0, read=300.0)))  # the SDK's own defaults
        return streamable_http_client(self.server, http_client=http)

    def _where(self) -> str:
        if isinstance(self.server, str):
            return self.server
        return " ".join([self.server.command, *self.server.args])


async def _all_tools(client: Client) -> list[Tool]:
    tools: list[Tool] = []
    cursor: str | None = None
    while True:
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if not cursor:
            return tools


def envelope(result: CallToolResult) -> dict[str, Any]:
    """specactor's envelope from a tool result: its structured content, else its text as JSON, else
    the text wrapped as one (a server that is not specactor)."""
    if isinstance(result.structured_content, dict):
        return dict(result.structured_content)
    text = "".join(c.text for c in result.content if isinstance(c, TextContent))
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict) and "success" in parsed:
        return parsed
    if result.is_error:
        return {"success": False, "error": {"code": "TOOL_ERROR", "message": text, "retryable": False}}
    return {"success": True, "data": text}
