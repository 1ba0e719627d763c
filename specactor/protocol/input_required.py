"""Input-required results (2026-07-28, SEP-2322): a handler that needs the client's input
answers `{resultType: "input_required", inputRequests, requestState}` and is called again with
`inputResponses` and the echoed state.

`requestState` is attacker-controlled on the way back, so it is signed: HMAC-SHA256 over the
method, the tool or prompt name and the state, with a per-process key and an expiry. A state
that fails the check is a JSON-RPC error, never trusted.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from typing import Any, Final

import msgspec

from specactor.protocol.errors import INVALID_PARAMS, MISSING_CLIENT_CAPABILITY, ProtocolError
from specactor.wire.mcp import Result

STATE_TTL: Final = 3600.0  # seconds a requestState stays valid
# The client capability each input method needs.
CAPABILITY: Final = {"elicitation/create": "elicitation", "sampling/createMessage": "sampling",
                     "roots/list": "roots"}
ALLOWED_METHODS: Final = frozenset({"tools/call", "prompts/get", "resources/read"})


class InputRequired(Exception):
    """Raised by a handler (through `RequestContext.ask`) to ask the client for input."""

    def __init__(self, requests: dict[str, dict[str, Any]], state: Any = None) -> None:
        super().__init__(f"input required: {', '.join(requests)}")
        self.requests = requests
        self.state = state


class InputRequiredResult(Result, kw_only=True, omit_defaults=True):
    inputRequests: dict[str, Any]
    requestState: str | msgspec.UnsetType = msgspec.UNSET


class _Sealed(msgspec.Struct, array_like=True):
    scope: str
    issued: float
    state: Any


_encoder = msgspec.json.Encoder()
_sealed = msgspec.json.Decoder(_Sealed)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class StateSigner:
    """Seals and opens `requestState` values. One key per process unless one is given."""

    def __init__(self, key: bytes | None = None) -> None:
        self.key = key or secrets.token_bytes(32)

    def seal(self, scope: str, state: Any) -> str:
        payload = _encoder.encode(_Sealed(scope, time.time(), state))
        mac = hmac.new(self.key, payload, hashlib.sha256).digest()
        return f"{_b64(payload)}.{_b64(mac)}"

    def open(self, scope: str, token: str) -> Any:
        """The state sealed for `scope`.

        Raises:
            ProtocolError: -32602 when the token was altered, is for another request, or expired.
        """
        try:
            payload_b64, mac_b64 = token.split(".", 1)
            payload, mac = _unb64(payload_b64), _unb64(mac_b64)
        except ValueError:
            raise ProtocolError(INVALID_PARAMS, "requestState is malformed") from None
        if not hmac.compare_digest(mac, hmac.new(self.key, payload, hashlib.sha256).digest()):
            raise ProtocolError(INVALID_PARAMS, "requestState failed its integrity check (altered or foreign)")
        sealed = _sealed.decode(payload)
        if sealed.scope != scope:
            raise ProtocolError(INVALID_PARAMS, "requestState belongs to a different request")
        if time.time() - sealed.issued > STATE_TTL:
            raise ProtocolError(INVALID_PARAMS, "requestState has expired; start the request again")
        return sealed.state


def check_capabilities(requests: dict[str, dict[str, Any]], capabilities: dict[str, Any]) -> None:
    """-32021 naming every capability the input requests need and the client did not declare."""
    missing: dict[str, Any] = {CAPABILITY[r["method"]]: {} for r in requests.values()
               if r.get("method") in CAPABILITY and CAPABILITY[r["method"]] not in capabilities}
    if missing:
        raise ProtocolError(MISSING_CLIENT_CAPABILITY, f"this request needs the client capabilities "
                            f"{', '.join(sorted(missing))}", {"requiredCapabilities": missing})


def scope_of(method: str, params: Any) -> str:
    """What a state is bound to: the method and the tool, prompt or resource it names."""
    return f"{method}:{getattr(params, 'name', None) or getattr(params, 'uri', '')}"
