"""The TypeScript MCP SDK peer: `server.mjs` (stdio, or Streamable HTTP with sessions or stateless), its
pinned npm project (`package.json`, `package-lock.json`) and `project.py`, which installs it with Node 22
from npm into `DIR`. The paths below are where the installed peer runs from (no install on import)."""

from pathlib import Path

SOURCE = Path(__file__).resolve().parent
DIR = SOURCE.parents[2] / ".bench" / "ts-peer"
NODE = DIR / "node_modules" / ".bin" / "node"
SERVER = DIR / "server.mjs"
