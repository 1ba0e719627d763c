"""Reading a spec's files into a Bundle, and writing a changed Bundle back.

`Documents` parses each file at most once per content: it remembers the last bytes it parsed
for each path (and the result, a refusal included), so a transaction that re-reads unchanged
files, or a reader that sees the same bytes again, does not parse them again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from specactor.domain.airsspec import layout, planfile, specfile, statefile
from specactor.domain.airsspec.errors import NotFoundError, ValidationFailed
from specactor.domain.airsspec.model import Bundle, PlanDoc, SpecDoc, WorkflowState, initial_state

T = TypeVar("T")
Read = Callable[[str], "bytes | None"]


class Writer(Protocol):
    """The part of a storage transaction this module needs (`actors.storage.Tx` has it)."""

    def read(self, rel: str) -> bytes | None: ...

    def write(self, rel: str, data: bytes, *, durable: bool = True) -> None: ...


def decode(data: bytes, file: str) -> str:
    """Raises:
        ValidationFailed: at the line of the first byte that is not UTF-8.
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data[:err.start].count(b"\n") + 1
        raise ValidationFailed(file, line, f"not UTF-8 text (byte {err.start})") from None


class Documents:
    def __init__(self) -> None:
        # path -> (bytes parsed, result or the ValidationFailed it raised); swapped whole, so
        # worker threads can share it without a lock (the worst race parses a file twice).
        self._memo: dict[str, tuple[bytes, object]] = {}

    def _parse(self, rel: str, data: bytes, parse: Callable[[str], T]) -> T:
        seen = self._memo.get(rel)
        if seen is not None and seen[0] == data:
            result = seen[1]
        else:
            try:
                result = parse(decode(data, rel))
            except ValidationFailed as err:
                result = err
            self._memo[rel] = (data, result)
        if isinstance(result, ValidationFailed):  # a fresh exception: threads may raise it at once
            raise ValidationFailed(result.file, result.line, result.reason)
        return result  # type: ignore[return-value]

    def spec(self, spec_id: str, data: bytes) -> SpecDoc:
        rel = layout.spec_file(spec_id)
        return self._parse(rel, data, lambda text: specfile.parse(text, rel))

    def plan(self, spec_id: str, data: bytes) -> PlanDoc:
        rel = layout.plan_file(spec_id)
        return self._parse(rel, data, lambda text: planfile.parse(text, rel, spec_id))

    def state(self, spec_id: str, data: bytes) -> WorkflowState:
        rel = layout.state_file(spec_id)
        return self._parse(rel, data, lambda text: statefile.parse(text, rel, spec_id))

    def forget(self, rel: str) -> None:
        self._memo.pop(rel, None)

    def bundle(self, spec_id: str, read: Read) -> Bundle:
        """The spec's bundle from `read` (a transaction's or a plain read).

        Raises:
            NotFoundError: no `spec.md` for the id. ValidationFailed: a file does not parse.
        """
        spec_bytes = read(layout.spec_file(spec_id))
        if spec_bytes is None:
            raise NotFoundError("spec", spec_id)
        spec = self.spec(spec_id, spec_bytes)
        plan_bytes = read(layout.plan_file(spec_id))
        plan = self.plan(spec_id, plan_bytes) if plan_bytes is not None else None
        state_bytes = read(layout.state_file(spec_id))
        state = self.state(spec_id, state_bytes) if state_bytes is not None else initial_state(spec_id, spec.meta,
                                                                                                 plan)
        return Bundle(spec_id=spec_id, spec=spec, state=state, plan=plan)


def save(tx: Writer, old: Bundle | None, new: Bundle) -> list[str]:
    """Stage the files of `new` that differ from `old` (all of them for a new spec); their paths."""
    written = []
    if old is None or new.spec != old.spec:
        written.append(layout.spec_file(new.spec_id))
        tx.write(written[-1], specfile.render(new.spec).encode())
    if new.plan is not None and (old is None or new.plan != old.plan):
        written.append(layout.plan_file(new.spec_id))
        tx.write(written[-1], planfile.render(new.plan).encode())
    if old is None or new.state != old.state or tx.read(layout.state_file(new.spec_id)) is None:
        written.append(layout.state_file(new.spec_id))
        tx.write(written[-1], statefile.render(new.state).encode())
    return written
