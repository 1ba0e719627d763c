"""`specactor install <client>` and `specactor uninstall <client>`: the MCP entry, hooks and plugin
that make an assistant start specactor and receive its session context by itself.

`clients.py` says what each client gets, `merge.py` merges it into the client's files (JSONC by
text splicing, `jsonc.py`; Codex's TOML as a marked block, `toml_block.py`), `command.py` reads,
shows and writes. `python -m specactor.install install|uninstall <client> …` runs it directly.
"""

from specactor.install.command import install_main, uninstall_main

__all__ = ["install_main", "uninstall_main"]
