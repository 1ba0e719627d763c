"""What a handler sees of its request: the session, progress, logging, and the peer.

`Peer` is implemented by each transport's connection (in `actors/`); the protocol layer only
awaits it, so this module stays free of trio.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import msgspec

from specactor.protocol.errors import INTERNAL_ERROR, MISSING_CLIENT_CAPABILITY, ProtocolError
from specactor.protocol.input_required import InputRequired

if TYPE_CHECKING:
    from specactor.protocol.session import Session

T = TypeVar("T")

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_RANK = {name: i for i, name in enumerate(LOG_LEVELS)}


class Peer(Protocol):
    """The other end of one connection, as a handler may use it."""

    async def notify(self, method: str, params: Any) -> None: ...

    async def request(self, method: str, params: Any, timeout: float) -> Any: ...


class Runtime(Protocol):
    """The few effects a handler may need that are not the peer's: time and threads."""

    async def sleep(self, seconds: float) -> None: ...

    async def run_sync(self, fn: Callable[..., T], *args: Any) -> T: ...

    async def sleep_forever(self) -> None: ...


_NONE: dict[str, Any] = {}  # shared, never mutated: most requests carry no capabilities or answers


class RequestContext(msgspec.Struct):
    """Per-request context handed to every tool, resource and prompt handler."""

    session: Session
    peer: Peer
    runtime: Runtime
    request_id: int | str
    method: str
    progress_token: int | str | None = None
    log_level: str | None = None
    client_capabilities: dict[str, Any] = msgspec.field(default_factory=lambda: _NONE)
    input_responses: dict[str, Any] = msgspec.field(default_factory=lambda: _NONE)
    request_state: Any = None
    _last_progress: float = float("-inf")

    async def report_progress(self, progress: float, total: float | None = None,
                              message: str | None = None) -> None:
        """Send `notifications/progress` if the client asked for it; progress must increase."""
        if self.progress_token is None or progress <= self._last_progress:
            return
        self._last_progress = progress
        params: dict[str, Any] = {"progressToken": self.progress_token, "progress": progress}
        if total is not None:
            params["total"] = total
        if message is not None:
            params["message"] = message
        await self.peer.notify("notifications/progress", params)

    async def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send `notifications/message` when `level` reaches the level the client asked for."""
        if self.log_level is None or _RANK.get(level, 0) < _RANK[self.log_level]:
            return
        params: dict[str, Any] = {"level": level, "data": data}
        if logger is not None:
            params["logger"] = logger
        await self.peer.notify("notifications/message", params)

    def require_client_capability(self, name: str) -> None:
        """Raise -32021 naming `name` when the client did not declare it."""
        if name not in self.client_capabilities:
            raise ProtocolError(MISSING_CLIENT_CAPABILITY, f"this request needs the client capability '{name}'",
                                {"requiredCapabilities": {name: {}}})

    async def request_client(self, method: str, params: Any, timeout: float = 60.0) -> Any:
        """Send a server-to-client request (sampling, elicitation, roots) and await its result.

        Raises:
            ProtocolError: in the 2026-07-28 era, which forbids server-to-client requests; handlers
                use `ask`, which turns into an input-required result there.
        """
        if self.modern:
            raise ProtocolError(INTERNAL_ERROR, f"{method} cannot be sent in protocol version 2026-07-28; "
                                "the handler must ask through an input-required result")
        return await self.peer.request(method, params, timeout)

    @property
    def modern(self) -> bool:
        return self.session.era == "modern"

    async def ask(self, requests: dict[str, tuple[str, dict[str, Any]]], state: Any = None) -> dict[str, Any]:
        """The client's answers to `requests` ({key: (method, params)}), in either era.

        Legacy sessions get real server-to-client requests, one after another. In the 2026-07-28
        era, answers the client already sent (`inputResponses`) are used, and any still missing
        end this call with an input-required result carrying `state` (signed) for the next round.
        """
        if not self.modern:
            return {key: await self.request_client(method, params) for key, (method, params) in requests.items()}
        missing = {key: {"method": method, "params": params} for key, (method, params) in requests.items()
                   if key not in self.input_responses}
        if missing:
            raise InputRequired(missing, state)
        return {key: self.input_responses[key] for key in requests}


Completer = Callable[[str, dict[str, str], RequestContext], Awaitable[list[str]]]
