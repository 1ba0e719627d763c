"""Wire types: msgspec Structs for JSON-RPC frames and MCP results, and their cached codecs.

Nothing here has logic or does I/O; the protocol layer decides, the actors move bytes.
"""
