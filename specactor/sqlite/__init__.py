"""SQLite statements and transactions, run on worker threads by the actors that own the
connections (`specactor.actors.memory_store`). Nothing here touches the event loop."""
