"""A request body the actors send (`actors/http_body.py`) arrives whole, and leaves no async generator
behind: httpx's own does, and trio warns when a request cancelled mid-send leaves it unexhausted."""

from __future__ import annotations

import inspect

import httpx
import trio

from specactor.actors.http_body import Body, send


async def test_a_body_arrives_whole_with_its_length_and_the_client_defaults() -> None:
    seen: list[httpx.Request] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        await request.aread()
        seen.append(request)
        return httpx.Response(200, content=b"ok")

    async with httpx.AsyncClient(transport=httpx.MockTransport(answer), headers={"x-team": "t"}) as http:
        with trio.fail_after(10):
            reply = await send(http, "POST", "http://h/v1/embeddings", b'{"input": ["a"]}',
                               headers={"content-type": "application/json"}, params=(("q", "1"),))
            empty = await send(http, "GET", "http://h/items", None)
    assert reply.content == b"ok" and empty.status_code == 200
    posted = seen[0]
    assert posted.content == b'{"input": ["a"]}' and posted.headers["content-length"] == "16"
    assert posted.headers["x-team"] == "t" and posted.url.params["q"] == "1"
    assert seen[1].method == "GET" and seen[1].content == b""


async def test_a_body_is_an_iterator_object_each_time_never_a_generator() -> None:
    body = Body(b"abc")
    for _ in range(2):  # a resend (a redirect, a retry) reads it again
        it = body.__aiter__()
        assert not inspect.isasyncgen(it)
        assert [chunk async for chunk in it] == [b"abc"]
