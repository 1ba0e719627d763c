"""Structured logs: structlog writing one JSON object per line to stderr, never stdout.

structlog is imported on first use, not at start-up: its import costs ~60 ms here (it pulls
in asyncio), a third of the budget for a first reply. Modules take a logger from
`get_logger(name)`, which resolves to the structlog logger when it is first used. The server
announces itself after its first reply, having imported structlog on a worker thread meanwhile.
Standard-library loggers (hypercorn, httpx) are routed through the same JSON renderer.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
           "critical": logging.CRITICAL}
_pending: str | None = None  # a level asked for by `configure`, applied when structlog loads


def configure(level: str = "info") -> None:
    """Send every log record to stderr as JSON at `level` and above (applied on first use)."""
    global _pending
    _pending = level
    logging.getLogger().setLevel(_LEVELS[level])


def preload() -> None:
    """Import and configure structlog now (call it on a worker thread to keep the loop free)."""
    _structlog()


def _structlog() -> Any:
    global _pending
    import structlog

    if _pending is not None:
        level, _pending = _pending, None
        _apply(structlog, level)
    return structlog


def _apply(structlog: Any, level: str) -> None:
    import msgspec

    encoder = msgspec.json.Encoder()

    def serialize(obj: Any, **_: Any) -> str:
        return encoder.encode(obj).decode()

    numeric = _LEVELS[level]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            structlog.processors.EventRenamer("msg"),
            structlog.processors.JSONRenderer(serializer=serialize, default=str),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.JSONRenderer(serializer=serialize, default=str)],
        foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name,
                           structlog.processors.TimeStamper(fmt="iso", utc=True)],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)


class LazyLogger:
    """A named logger that becomes structlog's on first use."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __getattr__(self, method: str) -> Any:
        return getattr(_structlog().get_logger(self.name), method)


def get_logger(name: str) -> Any:
    return LazyLogger(name)
