"""Protocol-frame fuzzing of a live stdio server.

Fuzzing: `test_live_stdio.py` starts one real `python -m specactor serve` per protocol era
(2025-11-25, 2025-03-26 with batches, 2026-07-28) and keeps it for the whole run. Each
hypothesis example writes a generated run of frames (`frames.py`: requests of every method
with tool arguments from each inputSchema or mutated, URIs with `../`, the `_meta` envelope,
cancels of in-flight ids, floods past the pending bound, odd ids, batches, invalid UTF-8, NUL,
lone CR, truncation, deep nesting, lines of a few MB), split into arbitrary writes, then a
probe (ping or server/discover, and a real tools/call). `oracle.py` decides what the bytes
must earn, and every example checks: the process is alive, each request id is answered exactly
once within the deadline and notifications never, every stdout line is one complete JSON-RPC
message, no internal error and no error-level log line. `just test` runs 60 examples an era
(a few seconds); `just fuzz` (SPECACTOR_FUZZ=1) runs 2000 an era after tests/properties and
keeps failing examples in `.hypothesis/`. A finding becomes a plain test in
`test_regressions.py`, named for the bug and citing the frame.
"""
