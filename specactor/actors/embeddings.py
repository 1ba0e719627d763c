"""The embeddings client: vectors from an OpenAI-compatible `/embeddings` endpoint, over httpx.

Calls queue in the mailbox; the texts of all the calls queued when the client looks (a burst of
searches in one scheduler tick) go out in one request of at most EMBED_BATCH texts, sent by a
task of its own, so a lone call waits no longer and a hundred concurrent ones cost one POST.
Vectors are asked for as `endpoint.encoding` (base64 by default); an endpoint that refuses
base64 by name is asked again for floats, and for floats from then on (logged once).
A failed request fails each of its calls with the same error, classified by
`domain/memory/embeddings.py`: RATE_LIMITED, a retryable PROVIDER_ERROR, or a final one. The
retries are the tool layer's (`protocol/registry.call_with_retries`, tenacity), not made here.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import trio

from specactor.actors.mailbox import Letter, Mailbox
from specactor.actors.supervisor import ChildSpec
from specactor.domain.memory import embeddings as emb
from specactor.domain.memory.records import EmbeddingsEndpoint
from specactor.logsetup import get_logger
from specactor.protocol.errors import ProviderError, RateLimited, ToolError

if TYPE_CHECKING:
    import httpx

log = get_logger("specactor.embeddings")

EMBED_BATCH = 256  # texts per embeddings request at most (OpenAI takes 2,048)
# One letter per call waiting for its vectors: a burst of concurrent searches and adds.
QUEUE = 256


@dataclass(frozen=True)
class Embed:
    texts: Sequence[str]


class EmbeddingsClient:
    """Args:
        endpoint: where to POST, with which model, key and timeout.
    """

    def __init__(self, endpoint: EmbeddingsEndpoint) -> None:
        self.endpoint = endpoint
        self.encoding: emb.Encoding = endpoint.encoding  # "float" once the endpoint refused base64
        self.mailbox: Mailbox[Embed] = Mailbox("embeddings", QUEUE)
        # httpx bounds each phase of a request (pool, connect, write, read) by the timeout.
        self.call_timeout = 4 * endpoint.timeout
        # Permanent: a restart loses only idle pooled connections.
        self.spec = ChildSpec("embeddings", self.run, restart="permanent")

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors from the endpoint, one per text.

        Raises:
            RateLimited: a 429 (with Retry-After). ProviderError: a transient failure.
            ToolError: PROVIDER_ERROR, not retryable: the endpoint refused or answered nonsense.
        """
        vectors: list[list[float]] = await self.mailbox.call(Embed(texts), self.call_timeout)
        return vectors

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Send the queued calls' texts in batches until cancelled."""
        import httpx  # here, not at the top: only a server with an endpoint pays for the import

        http = httpx.AsyncClient(timeout=self.endpoint.timeout)
        try:
            async with trio.open_nursery() as nursery:
                task_status.started()
                carried: Letter[Embed] | None = None
                while True:
                    letter: Letter[Embed] | None = carried or await self.mailbox.receive()
                    batch: list[Letter[Embed]] = []
                    size, carried = 0, None
                    with contextlib.ExitStack() as held:  # a crash while batching tells the batch at once
                        while letter is not None:  # take what is queued, one letter at a time
                            held.enter_context(letter)
                            if not isinstance(letter.body, Embed):  # a sender's bug: crash, be restarted
                                raise TypeError(f"the embeddings client got a message it does not know: "
                                                f"{letter.body!r}")
                            if batch and size + len(letter.body.texts) > EMBED_BATCH:
                                carried = letter  # it opens the next request
                                break
                            batch.append(letter)
                            size += len(letter.body.texts)
                            try:
                                letter = self.mailbox.receive_nowait()
                            except trio.WouldBlock:
                                letter = None
                        nursery.start_soon(self._send, http, batch)
                        held.pop_all()  # the batch's task answers them now
        finally:
            with trio.CancelScope(shield=True):
                await http.aclose()

    async def _send(self, http: httpx.AsyncClient, batch: list[Letter[Embed]]) -> None:
        with contextlib.ExitStack() as held:
            for letter in batch:
                held.enter_context(letter)
            try:
                vectors = await self._request(http, [text for letter in batch for text in letter.body.texts])
            except Exception as exc:  # the same error for every caller of the request
                for letter in batch:
                    letter.fail(exc)
                return
            start = 0
            for letter in batch:
                letter.reply(vectors[start:start + len(letter.body.texts)])
                start += len(letter.body.texts)

    async def _post(self, http: httpx.AsyncClient, texts: Sequence[str], encoding: emb.Encoding) -> httpx.Response:
        import httpx

        from specactor.actors import http_body

        cfg = self.endpoint
        headers = {"content-type": "application/json"}
        if cfg.api_key:
            headers["authorization"] = f"Bearer {cfg.api_key}"
        try:
            return await http_body.send(http, "POST", cfg.url.rstrip("/") + "/embeddings",
                                        emb.request_body(cfg.model, texts, encoding), headers=headers)
        except httpx.HTTPError as err:
            raise ProviderError(f"the embeddings endpoint is unreachable: {type(err).__name__}: {err}",
                                {"url": cfg.url}) from None

    async def _request(self, http: httpx.AsyncClient, texts: Sequence[str]) -> list[list[float]]:
        cfg = self.endpoint
        encoding = self.encoding
        reply = await self._post(http, texts, encoding)
        if encoding == "base64" and emb.refuses_base64(reply.status_code, reply.content):
            if self.encoding == "base64":  # not already switched by a request sent beside this one
                log.warning("the embeddings endpoint refuses encoding_format base64; asking for floats",
                            url=cfg.url, status=reply.status_code)
                self.encoding = "float"
            reply = await self._post(http, texts, "float")
        failure: emb.Failure | list[list[float]]
        if reply.status_code >= 400:
            failure = emb.classify(reply.status_code, reply.headers, reply.content, time.time())
        else:
            failure = emb.parse_reply(reply.content, len(texts))
        if not isinstance(failure, emb.Failure):
            return failure
        details = {"url": cfg.url, "status": failure.status}
        if failure.kind == "rate_limited":
            raise RateLimited(failure.message, failure.retry_after, details)
        if failure.kind == "transient":
            raise ProviderError(failure.message, details)
        raise ToolError("PROVIDER_ERROR", failure.message, details, retryable=False)
