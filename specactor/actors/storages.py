"""The storage actors, one per workspace root: the server root's, started with the app, and one
for each other root a toolset writes to (an AirsSpec workspace above the server root, an
OpenSpec project under OPENSPEC_ROOT), started on demand under the supervisor.

`get(root)` returns the root's actor, started once (`Supervisor.ensure`, keyed by the root) in
the app's root nursery. Each is `permanent`: it holds no state a restart loses (its write-ahead
log is on disk and re-read under the lock), and a crash fails only the calls it held, so it
comes back at once for the next write; crashing more often than the supervisor's intensity
limit stops the app, as the server root's storage does.
"""

from __future__ import annotations

from pathlib import Path

from specactor.actors.change_feed import ChangeFeed
from specactor.actors.storage import StorageActor
from specactor.actors.supervisor import ChildSpec, Restart, Supervisor

RESTART: Restart = "permanent"


class Storages:
    """Args:
        server: the server root's storage actor (started by the app, not here).
        supervisor: starts the others, in the nursery attached to it.
        feed: where every actor publishes its committed transactions.
    """

    def __init__(self, server: StorageActor, supervisor: Supervisor, feed: ChangeFeed | None) -> None:
        self.server = server
        self.supervisor = supervisor
        self.feed = feed
        self._actors: dict[Path, StorageActor] = {server.root: server}

    async def get(self, root: Path) -> StorageActor:
        """The storage actor of `root` (an absolute, resolved path), started if it is not running.

        Raises:
            RuntimeError: the app is not running (no nursery to start it in).
            SupervisorGaveUp: it could not be started.
        """
        if root == self.server.root:
            return self.server
        actor = self._actors.get(root)
        if actor is None:
            actor = self._actors[root] = StorageActor(root, use_log=self.server.use_log, feed=self.feed)
        name = self.name(root)
        await self.supervisor.ensure(ChildSpec(name, actor.run, restart=RESTART))
        return actor

    @staticmethod
    def name(root: Path) -> str:
        """The supervisor's name for the storage actor of `root`."""
        return f"storage:{root}"

    def roots(self) -> list[Path]:
        """Every root with a storage actor, the server's first."""
        return list(self._actors)
