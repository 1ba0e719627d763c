"""How long an HTTP `Retry-After` header asks a client to wait, for every upstream we call
(the embeddings endpoint, Emergent): delta-seconds or an HTTP-date, 1 s when absent or unreadable."""

from __future__ import annotations

import email.utils
from collections.abc import Mapping
from typing import Final

DEFAULT_RETRY_AFTER: Final = 1.0


def retry_after(headers: Mapping[str, str], now: float) -> float:
    """Seconds to wait from `headers`' Retry-After (either spelling of its name), measured from `now`."""
    raw = headers.get("retry-after") or headers.get("Retry-After")
    if raw is None:
        return DEFAULT_RETRY_AFTER
    raw = raw.strip()
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER
    return max(0.0, when.timestamp() - now)
