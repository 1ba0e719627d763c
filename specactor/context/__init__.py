"""The session context outside the server: `get_session_context(root, budget)` and the
`specactor context` command, read straight from the stores without trio (`reader.py`)."""

from specactor.context.reader import get_session_context

__all__ = ["get_session_context"]
