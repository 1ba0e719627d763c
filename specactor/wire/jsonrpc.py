"""JSON-RPC 2.0 frames as msgspec Structs.

An incoming frame is decoded loosely (`Frame`: every member `Any` or `Raw`) so the protocol
layer can tell a parse error from an invalid request and name what is wrong; `params`,
`result` and `error` stay `Raw` so each is decoded once, later, by a typed decoder.
"""

from __future__ import annotations

from typing import Any

import msgspec
from msgspec import UNSET, Raw, UnsetType

JSONRPC_VERSION = "2.0"


class Frame(msgspec.Struct, frozen=True):
    """One JSON-RPC object as received, before it is classified."""

    jsonrpc: Any = UNSET
    id: Any = UNSET
    method: Any = UNSET
    params: Raw = Raw()
    result: Raw = Raw()
    error: Raw = Raw()


class ErrorObject(msgspec.Struct, omit_defaults=True):
    code: int
    message: str
    data: Any | UnsetType = UNSET


class ErrorData(msgspec.Struct, omit_defaults=True):
    """A peer's error reply to one of our requests, decoded from `Frame.error`."""

    code: int
    message: str = ""
    data: Any = None


class ResultResponse(msgspec.Struct):
    jsonrpc: str
    id: int | str
    result: Any


class ErrorResponse(msgspec.Struct, omit_defaults=True, kw_only=True):
    """An error reply. `id` is left out when the request's id could not be read: the MCP
    schemas (2025-11-25 on) make it optional and do not allow JSON-RPC's `null`."""

    jsonrpc: str
    id: int | str | UnsetType = UNSET
    error: ErrorObject


class Notification(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    method: str
    params: Any | UnsetType = UNSET


class Request(msgspec.Struct, omit_defaults=True):
    jsonrpc: str
    id: int | str
    method: str
    params: Any | UnsetType = UNSET
