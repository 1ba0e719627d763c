"""Knowledge items (ADRs, policies, patterns, specs), pure: parsing, constraint checks, queries, sync plans.

Nothing here does I/O; `specactor.actors.memory_store` reads the git repository and applies plans.
"""
