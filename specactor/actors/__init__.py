"""Actors: the only code that does I/O or owns shared mutable state. One actor per file.

Actors talk through `Mailbox`es (`call` with a timeout, `cast` fire-and-forget) and are run
by the `Supervisor`, which restarts a crashed actor and logs its one root cause.
"""
