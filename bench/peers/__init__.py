"""The comparison servers the bench drives next to specactor.

- `sdk_server`: the official MCP Python SDK (`MCPServer`) exposing the same `echo`/`add` tools;
- `ts/`: the official TypeScript MCP SDK (`McpServer`, Node 22 from npm) with the same tools and
  replies, over stdio and over Streamable HTTP (sessions, or stateless: a server per request);
- `floor`: the smallest trio + msgspec stdio loop that can answer `initialize` and `tools/call`
  echo; it bounds from below what any trio/msgspec server can achieve on this machine.
"""
