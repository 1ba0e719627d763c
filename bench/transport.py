"""The transport abstraction: how the harness reaches a server, whatever the wire.

The harness speaks JSON-RPC messages (encoded bytes, one per request) and needs only four
things from a transport: start a server (`Transport.open`, which notes when it spawned the
process), send a batch of requests at once and collect every reply with its arrival time
(`Connection.request_many`), send a notification, and close. The process id is exposed so
that `procstat` can read memory and CPU from /proc whatever the transport.

`stdio` (`stdio_driver.StdioTransport`) is the only `Transport`. Streamable HTTP is measured
differently (closed loops of many keep-alive connections at several concurrencies, not one
pipe), so it has its own client and sequence: `http_driver` and `http_harness`; a
`ServerSpec` says how to start a server for it (`http_argv`, empty when it cannot).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol


class HarnessError(RuntimeError):
    """The harness itself could not measure (a server died, hung or answered wrongly)."""


@dataclass(frozen=True)
class ServerSpec:
    """A server under test. `argv` may contain "{root}", replaced by the fresh work directory."""

    key: str
    label: str
    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    http_argv: tuple[str, ...] = ()  # serves Streamable HTTP on a free port, announced on stderr

    def command(self, root: Path, *, http: bool = False) -> list[str]:
        return [arg.replace("{root}", str(root)) for arg in (self.http_argv if http else self.argv)]


@dataclass(frozen=True)
class Reply:
    """One reply, timed with `time.perf_counter_ns` on the client."""

    id: int
    sent_ns: int
    received_ns: int
    body: bytes
    error: bytes | None  # the raw JSON-RPC error object, when the reply is one

    @property
    def latency_ns(self) -> int:
        return self.received_ns - self.sent_ns


class Connection(Protocol):
    pid: int
    spawned_ns: int  # perf_counter_ns just before the process was started

    def request_many(self, messages: Sequence[tuple[int, bytes]], timeout: float) -> list[Reply]:
        """Send every (id, message) at once and wait for all their replies (arrival order)."""
        ...

    def notify(self, message: bytes) -> None: ...

    def stderr_tail(self) -> str:
        """The last few lines the server wrote to stderr, for error reports."""
        ...

    def close(self, timeout: float) -> int | None:
        """Ask the server to exit (EOF for stdio), kill it if it will not; the exit code."""
        ...


class Transport(Protocol):
    name: str

    def open(self, spec: ServerSpec, workdir: Path) -> Connection: ...


def _stdio() -> Transport:
    from bench.stdio_driver import StdioTransport

    return StdioTransport()


TRANSPORTS: dict[str, Callable[[], Transport]] = {"stdio": _stdio}
