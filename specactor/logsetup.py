"""structlog set up to write one JSON object per line to stderr, never stdout.

Standard-library loggers (hypercorn, httpx) are routed through the same renderer.
"""

from __future__ import annotations

import logging
import sys
from typing import Any

import msgspec
import structlog

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING, "error": logging.ERROR,
           "critical": logging.CRITICAL}

_encoder = msgspec.json.Encoder()


def _serialize(obj: Any, **_: Any) -> str:
    return _encoder.encode(obj).decode()


def configure(level: str = "info") -> None:
    """Send every log record to stderr as JSON at `level` and above."""
    numeric = _LEVELS[level]
    processors: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        structlog.processors.format_exc_info,
        structlog.processors.EventRenamer("msg"),
        structlog.processors.JSONRenderer(serializer=_serialize, default=str),
    ]
    structlog.configure(
        processors=processors,
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=True,
    )
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                    structlog.processors.JSONRenderer(serializer=_serialize, default=str)],
        foreign_pre_chain=[structlog.stdlib.add_log_level, structlog.stdlib.add_logger_name,
                           structlog.processors.TimeStamper(fmt="iso", utc=True)],
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(numeric)
