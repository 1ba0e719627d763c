"""File access that is not an actor: the primitives the actors run on their worker threads.

Atomic writes and path checks (`files`), reads that never leave the workspace (`confined`), the
storage actor's write-ahead log format (`wal`), and each file-based toolset's view of its disk
(`openspec_fs`, `airsspec_fs`). Nothing here owns a task or a mailbox; the toolsets reach it
through the actors (`Services.runtime`, `Services.storages`), never with threads of their own.
"""
