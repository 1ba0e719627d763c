"""The base of every tool's arguments Struct, for the registry and the domain alike.

A tool's `arguments` are wire data: keyword-only fields, and an unknown argument is an error
rather than silently ignored. A subclass may add options of its own (`rename="camel"`).
"""

from __future__ import annotations

import msgspec


class ToolInput(msgspec.Struct, kw_only=True, forbid_unknown_fields=True):
    """Base for tool inputs: keyword-only, and an unknown argument is an error, not ignored."""
