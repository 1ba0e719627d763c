"""AirsSpec: the spec → plan → build workflow, as pure code.

Parsing and rendering of the workspace files (`spec.md`, `plan.md`, `state.toon`, `config.toml`),
the lifecycle table, progress, dependency checks and the operations that plan a change. No
module here does I/O or imports trio; `specactor.toolsets.airsspec` applies the plans to disk
through the storage actor.
"""
