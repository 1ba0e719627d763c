"""Layered memory, pure: layers and identifiers, the tool Structs, query words and scores.

Nothing here does I/O; `specactor.actors.memory_store` runs it against SQLite.
"""
