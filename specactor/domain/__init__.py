"""Pure cores, no I/O and no trio: OpenSpec, AirsSpec, memory and knowledge.

Each parses, validates and plans a change; an actor applies the plan to disk.
"""
