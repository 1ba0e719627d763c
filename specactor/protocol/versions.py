"""Protocol versions and the two eras.

Legacy (handshake) versions are negotiated by `initialize`; the modern version is named on
every request in `_meta`. The first request on a connection decides its era, once.
"""

from __future__ import annotations

from typing import Final

LEGACY_VERSIONS: Final = ("2025-03-26", "2025-06-18", "2025-11-25")
MODERN_VERSIONS: Final = ("2026-07-28",)
SUPPORTED_VERSIONS: Final = LEGACY_VERSIONS + MODERN_VERSIONS
LATEST_LEGACY: Final = LEGACY_VERSIONS[-1]
LATEST_MODERN: Final = MODERN_VERSIONS[-1]

META_PROTOCOL_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CLIENT_CAPABILITIES: Final = "io.modelcontextprotocol/clientCapabilities"
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"


def negotiate_legacy(requested: str) -> str:
    """The version to answer `initialize` with: the requested one if we speak it, else our latest."""
    return requested if requested in LEGACY_VERSIONS else LATEST_LEGACY


def has_structured_output(version: str) -> bool:
    """`outputSchema`/`structuredContent`, tool titles: 2025-06-18 and later."""
    return version != "2025-03-26"


def accepts_batches(version: str) -> bool:
    """JSON-RPC batches were required in 2025-03-26 and removed in 2025-06-18."""
    return version == "2025-03-26"
