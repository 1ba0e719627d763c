"""specactor's benchmark harness: `python -m bench` (`just bench`); see bench/README.md.

It runs specactor's fixture server, an official-SDK peer and a minimal trio + msgspec floor
side by side in one run, over one transport (stdio today), and reports ratios and gates.
"""
