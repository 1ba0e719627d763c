"""`specactor hook`: the seed's context-injection hooks as a command a client runs (`run.py`),
answering in each client's output contract (`formats.py`)."""
