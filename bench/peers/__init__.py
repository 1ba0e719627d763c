"""The comparison servers the bench drives next to specactor.

- `sdk_server`: the official MCP Python SDK (`MCPServer`) exposing the same `echo`/`add` tools;
- `floor`: the smallest trio + msgspec stdio loop that can answer `initialize` and `tools/call`
  echo; it bounds from below what any trio/msgspec server can achieve on this machine.
"""
