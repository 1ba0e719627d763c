"""The refusals the OpenSpec core raises, in a module light enough to import at start-up."""

from __future__ import annotations

from specactor.domain.openspec.model import Diagnostic


class Blocked(Exception):
    """A command refuses; `diagnostic` is the CLI's `status` entry (code, message, fix)."""

    def __init__(self, code: str, message: str, fix: str | None = None) -> None:
        super().__init__(message)
        self.diagnostic = Diagnostic("error", code, message) if fix is None else Diagnostic("error", code, message, fix)


class Missing(LookupError):
    """A resource names nothing; the message says what was looked for."""


class EditRefused(Exception):
    """A write the workspace refuses; `code` is "exists", "missing" or "invalid"."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
