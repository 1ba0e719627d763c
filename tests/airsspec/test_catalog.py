"""The read model: parsed specs are reused until their files change, writes are picked up through
the journal without a directory scan, and hand edits show by the next sweep at the latest."""

from __future__ import annotations

from pathlib import Path

from specactor.actors.storage import StorageActor, Tx
from specactor.domain.airsspec import layout, transactions, workflow
from specactor.domain.airsspec.catalog import Catalog, Summary
from specactor.domain.airsspec.documents import Documents
from specactor.fs.airsspec_fs import OsFiles

NOW = "2026-01-24T10:00:00Z"


class CountingFiles(OsFiles):
    """Real files, a hand-driven clock, and counters for what the catalog looked at."""

    def __init__(self, root: Path) -> None:
        super().__init__(root)
        self.clock = 0.0
        self.scans = 0
        self.reads: list[str] = []

    def spec_dirs(self) -> list[str]:
        self.scans += 1
        return super().spec_dirs()

    def read(self, rel: str) -> bytes | None:
        self.reads.append(rel)
        return super().read(rel)

    def monotonic(self) -> float:
        return self.clock


def write(root: Path, fn: object) -> object:
    """Run a transaction the way the storage actor commits it, without an event loop."""
    return StorageActor(root)._run_tx(fn)  # type: ignore[arg-type]


def create(root: Path, docs: Documents, title: str, seconds: int) -> str:
    def tx(t: Tx) -> str:
        return transactions.create(t, docs, title=title, description="", category=None, content=None,
                                   dependencies=[], unix_seconds=seconds, now=NOW, default_name="w").spec_id
    return str(write(root, tx))


def titles(catalog: Catalog, files: CountingFiles) -> list[str]:
    return [e.title for e in catalog.entries(files) if isinstance(e, Summary)]


def test_writes_from_any_process_show_in_the_index_through_the_journal_without_a_rescan(tmp_path: Path) -> None:
    writer_docs = Documents()  # another process: its own parse memo
    a = create(tmp_path, writer_docs, "Alpha", 1)
    files = CountingFiles(tmp_path)
    catalog = Catalog(sweep_interval=60)
    assert titles(catalog, files) == ["Alpha"] and files.scans == 1
    version = catalog.version
    assert titles(catalog, files) == ["Alpha"] and files.scans == 1 and catalog.version == version
    files.reads.clear()
    create(tmp_path, writer_docs, "Beta", 2)
    write(tmp_path, lambda t: transactions.update(t, writer_docs, a, lambda b: workflow.update_spec(
        b, title="Alpha two", description=None, content=None, category=None, now="2026-01-24T11:00:00Z")))
    assert titles(catalog, files) == ["Alpha two", "Beta"] and files.scans == 1
    assert set(files.reads) == {layout.JOURNAL, layout.spec_file(a), layout.state_file(a),
                                layout.spec_file("2-beta"), layout.state_file("2-beta")}


def test_a_hand_edit_shows_in_one_spec_at_once_and_in_the_index_by_the_next_sweep(tmp_path: Path) -> None:
    a = create(tmp_path, Documents(), "Alpha", 1)
    files = CountingFiles(tmp_path)
    catalog = Catalog(sweep_interval=2.0)
    assert titles(catalog, files) == ["Alpha"]
    spec = tmp_path / layout.spec_file(a)
    spec.write_text(spec.read_text().replace("title: Alpha", "title: Edited by hand"))
    assert catalog.bundle(files, a).spec.meta.title == "Edited by hand"
    assert titles(catalog, files) == ["Edited by hand"]  # what bundle() saw, the index shows
    spec.write_text(spec.read_text().replace("title: Edited by hand", "title: Edited again"))
    (tmp_path / layout.SPECS / "junk").mkdir()
    files.clock = 1.9
    assert titles(catalog, files) == ["Edited by hand"] and files.scans == 1  # no scan per call
    files.clock = 2.5
    entries = catalog.entries(files)
    assert files.scans == 2 and titles(catalog, files) == ["Edited again"]
    assert [e.id for e in entries] == [a, "junk"] and not isinstance(entries[1], Summary)


def test_an_unchanged_file_is_not_read_or_parsed_again(tmp_path: Path) -> None:
    a = create(tmp_path, Documents(), "Alpha", 1)
    files = CountingFiles(tmp_path)
    catalog = Catalog()
    first = catalog.bundle(files, a)
    files.reads.clear()
    assert catalog.bundle(files, a) is not first and catalog.bundle(files, a) == first
    assert files.reads == []
