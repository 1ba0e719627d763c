"""The memory toolset's five actors as one handle: the store, the embeddings client, the searcher
(which serves `memory_search` in batches over those two), the knowledge reader and the knowledge
sync. The app builds it (no I/O) and puts it on `Services.memory`; the toolset starts each actor on
first use, under the app's supervisor.
"""

from __future__ import annotations

from pathlib import Path

from specactor.actors.change_feed import ChangeFeed
from specactor.actors.embeddings import EmbeddingsClient
from specactor.actors.knowledge_reader import KnowledgeReader
from specactor.actors.knowledge_sync import KnowledgeSync
from specactor.actors.memory_searcher import MemorySearcher
from specactor.actors.memory_store import MemoryStoreActor
from specactor.actors.supervisor import ChildSpec, Supervisor
from specactor.config import Config
from specactor.domain.memory.records import EmbeddingsEndpoint


class MemoryActors:
    """The memory toolset's actors, built without I/O; `up` starts them on first use.

    Each is `permanent` (`ChildSpec.restart`): none holds state a restart loses, and starting
    cannot fail, so a crash is restarted at once while the supervisor's intensity limit still
    stops a crash loop. The memory store opens its database after it started: a database that
    cannot be opened fails the calls that need it (INTERNAL, naming the file), never the start.

    Args:
        db_path, knowledge_root: the SQLite file and the knowledge repository.
        embeddings: the endpoint of the semantic and hybrid modes, or None.
        feed, workspace: where committed writes are published, naming the server's root.
        embed_pointers: whether a sync embeds its pointer memories (lexical mode does not: nothing
            would read the vectors).
    """

    def __init__(self, db_path: Path, knowledge_root: Path, *, embeddings: EmbeddingsEndpoint | None = None,
                 feed: ChangeFeed | None = None, workspace: str = "", embed_pointers: bool = True) -> None:
        self.store = MemoryStoreActor(db_path)
        self.embeddings = EmbeddingsClient(embeddings) if embeddings is not None else None
        self.searcher = MemorySearcher(self.store, self.embeddings)
        self.reader = KnowledgeReader(knowledge_root)
        self.sync = KnowledgeSync(self.reader, self.store, feed=feed, workspace=workspace,
                                  embeddings=self.embeddings if embed_pointers else None)

    @property
    def specs(self) -> list[ChildSpec]:
        """Every actor's, in the order they depend on each other."""
        return [a.spec for a in (self.store, self.embeddings, self.searcher, self.reader, self.sync)
                if a is not None]

    @staticmethod
    async def up(supervisor: Supervisor, *specs: ChildSpec) -> None:
        """Start `specs` (once each, under `supervisor`) unless they run already.

        Raises:
            RuntimeError: the app is not running.
        """
        for spec in specs:
            await supervisor.ensure(spec)

    @classmethod
    def from_config(cls, config: Config, feed: ChangeFeed | None = None) -> MemoryActors:
        """The actors `config` asks for: its memory database, knowledge repository and embeddings endpoint."""
        endpoint = embeddings_endpoint(config)
        mode = config.memory.mode or ("hybrid" if endpoint else "lexical")  # as the memory toolset reads it
        return cls(config.memory_db_path, config.knowledge_repo_path, embeddings=endpoint, feed=feed,
                   workspace=str(config.root_path), embed_pointers=mode != "lexical")


def embeddings_endpoint(config: Config) -> EmbeddingsEndpoint | None:
    """The embeddings endpoint `memory.embeddings` names, or None when it names no URL."""
    emb = config.memory.embeddings
    return EmbeddingsEndpoint(emb.url, emb.model, emb.api_key, emb.timeout, emb.encoding) if emb.url else None
