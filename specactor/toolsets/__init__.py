"""Toolsets: thin glue that declares tools, resources and prompts over domain code and actors.

Each toolset module has `register(registry, services)`. The registry skips definitions of
toolsets the configuration has switched off, so an assistant sees only what it needs.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from importlib import import_module
from types import ModuleType
from typing import TYPE_CHECKING

import msgspec

from specactor.actors.cache_invalidator import CacheInvalidator
from specactor.actors.change_feed import ChangeFeed
from specactor.actors.metrics import MetricsActor
from specactor.actors.runtime import TrioRuntime
from specactor.actors.storage import StorageActor
from specactor.actors.storages import Storages
from specactor.actors.supervisor import Supervisor
from specactor.config import Config
from specactor.protocol.registry import Registry

if TYPE_CHECKING:
    from specactor.actors.graph_sync import GraphSync
    from specactor.actors.memory_actors import MemoryActors
    from specactor.actors.worker_pool import WorkerPool


class Services(msgspec.Struct, frozen=True, dict=True):
    """The actor handles a toolset may use, passed explicitly (no ambient registry).

    `feed` is where every committed write is published; `supervisor.ensure` starts an actor on
    demand, under supervision, in the app's root nursery. `storage` is the server root's storage
    actor; `storages.get(root)` is any workspace root's (the server's, or one started on demand).
    `caches.register(fn)` has the feed's changes reach a toolset's cache.
    `graph` is the graph-sync actor, built on first use like `memory`.
    `memory` is the memory toolset's actors, built on first use (their modules cost ~60 ms of
    imports, which must not stand before the first reply); they start on their own first use.
    """

    config: Config
    storage: StorageActor
    metrics: MetricsActor
    runtime: TrioRuntime
    feed: ChangeFeed
    supervisor: Supervisor
    storages: Storages
    caches: CacheInvalidator

    @cached_property
    def memory(self) -> MemoryActors:
        from specactor.actors.memory_actors import MemoryActors

        return MemoryActors.from_config(self.config, self.feed)

    @cached_property
    def pool(self) -> WorkerPool:
        """The worker pool for CPU-heavy tasks (started on first use: `supervisor.ensure(pool.spec)`)."""
        from specactor.actors.worker_pool import WorkerPool

        cfg = self.config.pool
        return WorkerPool(cfg.worker_count, self.runtime, idle_timeout=cfg.idle_timeout, queue=cfg.queue)

    @cached_property
    def graph(self) -> GraphSync:
        """The graph-sync actor (started by the app when graph sync is on; `supervisor.ensure(graph.spec)`)."""
        from specactor.actors.graph_sync import GraphSync

        return GraphSync(self.config, self.feed)


# toolset name -> module with `register(registry, services)`; a toolset whose module does not
# exist yet registers nothing.
MODULES: dict[str, str] = {
    "core": "specactor.toolsets.core",
    "openspec": "specactor.toolsets.openspec",
    "airsspec": "specactor.toolsets.airsspec",
    "memory": "specactor.toolsets.memory",
    "graph": "specactor.toolsets.graph",
}


def toolset_modules(registry: Registry) -> list[ModuleType]:
    """Import the modules of the toolsets `registry` wants (a toolset not written yet is skipped).

    Safe on a worker thread: it only imports; registering happens on the event loop.
    """
    modules = []
    for name, module_name in MODULES.items():
        if not registry.wants(name):
            continue
        try:
            modules.append(import_module(module_name))
        except ModuleNotFoundError as err:
            if err.name != module_name:
                raise
    return modules


def register_toolsets(registry: Registry, services: Services, modules: list[ModuleType]) -> None:
    for module in modules:
        register: Callable[[Registry, Services], None] = module.register
        register(registry, services)


def build_registry(services: Services) -> Registry:
    registry = Registry(services.config.toolsets)
    register_toolsets(registry, services, toolset_modules(registry))
    return registry
