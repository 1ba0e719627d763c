"""The sans-I/O MCP core: frames in, replies and effects out.

Nothing here imports trio, httpx or hypercorn. Handlers are coroutines that await the
abstract `Peer` and service handles the actors pass in; the actors own every byte of I/O.
"""
