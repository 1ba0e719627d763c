"""Public test helpers: an in-memory transport pair and the conformance fixture server."""

from specactor.testing.memory import MemoryClient, open_memory_server

__all__ = ["MemoryClient", "open_memory_server"]
