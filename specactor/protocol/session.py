"""Per-connection protocol state: era, negotiated version, client facts, log level, subscriptions.

A stdio process has one session; each HTTP session (legacy era) has its own. Modern-era
requests carry everything in `_meta`, so their session holds only the era lock.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import msgspec

Era = Literal["new", "legacy", "modern"]


class Session(msgspec.Struct):
    id: str = msgspec.field(default_factory=lambda: uuid.uuid4().hex)
    era: Era = "new"
    protocol_version: str | None = None
    client_info: dict[str, Any] | None = None
    client_capabilities: dict[str, Any] = msgspec.field(default_factory=dict)
    initialized: bool = False
    log_level: str = "info"
    subscriptions: set[str] = msgspec.field(default_factory=set)

    @property
    def client_name(self) -> str | None:
        name = (self.client_info or {}).get("name")
        return name if isinstance(name, str) else None
