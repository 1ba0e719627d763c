"""Requests with a body, sent by the actors that speak HTTP (the embeddings client, the Emergent client),
so that a request cancelled while its body is being sent leaves nothing for trio to warn about.

httpx hands its transport a request body (`httpx._content.ByteStream`) whose `__aiter__` is an async
generator. A request cancelled mid-send (a searcher cancelling an embeddings request nobody waits for,
a server shutting down) leaves that generator unexhausted, and trio, finalizing it, warns with a
ResourceWarning (encode/httpx#3686; the fix, encode/httpx#3777, is unreleased in httpx 0.28). Here the
body is an iterator object instead, with nothing to finalize. Imported on the first request, with httpx.
"""

from __future__ import annotations

from collections.abc import Mapping

import httpx


class _Once:
    def __init__(self, data: bytes) -> None:
        self._data: bytes | None = data

    def __aiter__(self) -> _Once:
        return self

    async def __anext__(self) -> bytes:
        if self._data is None:
            raise StopAsyncIteration
        data, self._data = self._data, None
        return data


class Body(httpx.AsyncByteStream):
    """`data` as a request body, each iteration an iterator object of its own (not a generator)."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def __aiter__(self) -> _Once:  # type: ignore[override]  # an iterator object, where httpx's is a generator
        return _Once(self.data)


async def send(http: httpx.AsyncClient, method: str, url: str, content: bytes | None, *,
               headers: Mapping[str, str] | None = None,
               params: tuple[tuple[str, str], ...] = ()) -> httpx.Response:
    """`http.request(method, url, content=content, ...)`, the body (if any) as a `Body`.

    Raises:
        httpx.HTTPError: as `http.request` does.
    """
    request = http.build_request(method, url, content=content, headers=headers, params=params)
    if content is not None:
        request.stream = Body(content)  # Content-Length is set by build_request already
    return await http.send(request)
