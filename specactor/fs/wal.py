"""The storage actor's write-ahead log: one `fdatasync` makes a commit durable.

Without it a commit costs two rounds of fsyncs (the staged files, then their directories) and a
rename over each file, which on ext4 flushes the new file's data (`auto_da_alloc`). With it a
commit logs the files' new contents in one record, syncs that (an overwrite inside a zero-filled
region: data only, no journal commit), and then installs the files as before but without
fsyncs, swapping each into place with `renameat2(RENAME_EXCHANGE)`. The files stay the record a
reader reads; the log only makes them survive a crash of the machine:

- A *checkpoint* fsyncs every file the log names and its directories, then starts a new
  generation (records of an older one are ignored). It runs when the log is full, when the
  storage actor is idle for `IDLE_CHECKPOINT_S`, when it stops, and before anything moves files
  around the storage (an OpenSpec archive).
- A process that finds records when it takes the workspace lock *restores* the ones whose files
  may not be what they say: records written before the machine last booted (the page cache that
  held their files is gone), and records whose writer died between logging and installing them.
  A file is restored only if it is not newer than its record (or missing, in a folder not
  newer than the record), so an edit or a delete made after the record, by hand or by git, is
  kept.

"Newer" is on the filesystem's own clock: a record's time is the newest timestamp the
filesystem gave the files it staged (`WriteAheadLog.stamp`), never `time.time()`, which runs
ahead of the coarse clock the kernel stamps files with (a folder changed right after a record
was seen up to 2.9 ms "before" it, and the file deleted by hand came back). Within one tick of
that clock (1-10 ms) a later change carries the record's very time and cannot be told from the
record's own files, so a tie is restored over: keeping it would leave unrepaired the very files
the log exists for (installed, their data lost with the page cache, stamped in the record's
tick), while restoring it costs only a change made within one tick of an acknowledged commit,
and only after a machine crash.

Everything here runs on the storage actor's worker thread, under the workspace lock. This is
part of the storage actor (no task of its own): the log's format and its file.
"""

from __future__ import annotations

import os
import stat
import struct
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

import msgspec

from specactor.fs.files import fsync_dir, read_file, sync_filesystems

# Header at offset 0: magic, generation, crc32 of the generation. Records start at HEADER_SIZE.
HEADER = struct.Struct("<8sQI")
HEADER_MAGIC = b"SPECWAL1"
HEADER_SIZE = 64
# A record: magic, generation, payload length, crc32 (generation, length, payload), state flag.
RECORD = struct.Struct("<4sQIIB3x")
RECORD_MAGIC = b"WREC"
STATE_AT = 20  # offset of the state flag inside a record header
LOGGED, INSTALLED, VOID = 0, 1, 2  # its files not yet installed; installed; never to be restored
REGION = 2 * 1024 * 1024  # the zero-filled log: ~250 commits of a few KB before a checkpoint
MAX_RECORDS = 256  # a checkpoint fsyncs at most this many commits' files
IDLE_CHECKPOINT_S = 1.0  # the storage actor checkpoints after this long without a write
WAL_NAME = "wal"


class Record(msgspec.Struct, array_like=True, frozen=True):
    boot: str  # the kernel's boot id when it was written
    time: int | float  # ns, `WriteAheadLog.stamp` (a float: seconds of time.time(), an older specactor's)
    writes: list[tuple[str, bytes | None]]  # workspace-relative path -> contents (None: deleted)

    @property
    def time_ns(self) -> int:
        return self.time if isinstance(self.time, int) else int(self.time * 1e9)


_encode = msgspec.msgpack.Encoder().encode
_decode = msgspec.msgpack.Decoder(Record).decode


class Found(msgspec.Struct, frozen=True):
    """A record read back from the log."""

    offset: int
    record: Record
    state: int  # LOGGED, INSTALLED or VOID

    @property
    def applied(self) -> bool:
        return self.state == INSTALLED


class LogFull(Exception):
    """The record does not fit in what is left of the log (checkpoint, then try again)."""


def boot_id() -> str | None:
    """The kernel's id for this boot (Linux), or None where there is none: no log then."""
    try:
        with open("/proc/sys/kernel/random/boot_id", "rb") as f:
            return f.read().decode().strip() or None
    except OSError:
        return None


def _crc(generation: int, payload: bytes) -> int:
    return zlib.crc32(payload, zlib.crc32(struct.pack("<QI", generation, len(payload))))


def _header(generation: int) -> bytes:
    return HEADER.pack(HEADER_MAGIC, generation, zlib.crc32(struct.pack("<Q", generation))).ljust(HEADER_SIZE, b"\0")


def ancestors(root: Path, paths: Iterable[Path]) -> set[Path]:
    """Every directory from each path's parent up to `root`, inclusive."""
    found: set[Path] = set()
    for path in paths:
        for parent in path.parents:
            if parent in found:
                break
            found.add(parent)
            if parent == root:
                break
    return found


class WriteAheadLog:
    """The log file `<dir>/wal` of one workspace. Call every method under the workspace lock."""

    def __init__(self, directory: Path, boot: str) -> None:
        self.path = directory / WAL_NAME
        self.boot = boot
        self.fd = -1
        self.generation = 0
        self.end = HEADER_SIZE  # where the next record goes
        self.count = 0  # records in this generation
        self.dirty: set[str] = set()  # paths the records of this generation wrote

    # ------------------------------------------------------------------ opening and reading

    def open(self) -> None:
        """Open the log, creating it (zero-filled, synced, then renamed into place) if missing."""
        if not self.path.exists():
            self._create()
        self.fd = os.open(self.path, os.O_RDWR)
        if os.fstat(self.fd).st_size < REGION:  # not ours, or cut short: start a fresh log
            os.close(self.fd)
            self._create()
            self.fd = os.open(self.path, os.O_RDWR)

    def _create(self) -> None:
        directory = self.path.parent
        directory.mkdir(parents=True, exist_ok=True)
        ignore = directory / ".gitignore"
        if not ignore.exists():  # runtime state, never a repository's business
            ignore.write_text("wal\nwal.new\nworkspace.lock\n")
        tmp = directory / f"{WAL_NAME}.new"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            zeros = bytes(256 * 1024)  # written, not fallocated: later overwrites change no metadata
            for offset in range(0, REGION, len(zeros)):
                os.pwrite(fd, zeros, offset)
            os.pwrite(fd, _header(1), 0)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        fsync_dir(directory)  # the log's entry
        fsync_dir(directory.parent)  # and its folder's

    def read_generation(self) -> int | None:
        magic, generation, crc = HEADER.unpack(os.pread(self.fd, HEADER.size, 0))
        if magic != HEADER_MAGIC or crc != zlib.crc32(struct.pack("<Q", generation)):
            return None
        return int(generation)

    def catch_up(self) -> list[Found]:
        """The records other writers added since this process last looked (all of them when a
        checkpoint started a new generation meanwhile). A torn header means a checkpoint was
        being written, so every file was already synced: the log starts afresh."""
        generation = self.read_generation()
        if generation is None:
            # A fresh number no record in the region can carry: counting on from 1 could make an
            # old generation's records, still further on in the region, look current again.
            generation = int.from_bytes(os.urandom(6), "little") << 16
            self._write_header(generation)
        if generation != self.generation:
            self.generation, self.end, self.count = generation, HEADER_SIZE, 0
            self.dirty.clear()
        found: list[Found] = []
        while True:
            one = self._read_at(self.end)
            if one is None:
                return found
            found.append(one[0])
            self.end = one[1]
            self.count += 1
            self.dirty.update(rel for rel, _ in one[0].record.writes)

    def _read_at(self, offset: int) -> tuple[Found, int] | None:
        if offset + RECORD.size > REGION:
            return None
        magic, generation, length, crc, state = RECORD.unpack(os.pread(self.fd, RECORD.size, offset))
        if magic != RECORD_MAGIC or generation != self.generation or offset + RECORD.size + length > REGION:
            return None
        payload = os.pread(self.fd, length, offset + RECORD.size)
        if len(payload) != length or crc != _crc(generation, payload):
            return None  # torn: its writer died before syncing it, so it was never acknowledged
        try:
            record = _decode(payload)
        except msgspec.DecodeError:
            return None
        return Found(offset, record, state), offset + RECORD.size + length

    # ------------------------------------------------------------------ writing

    def capacity(self) -> int:
        """The largest payload an empty log holds."""
        return REGION - HEADER_SIZE - RECORD.size

    def stamp(self, touched: Iterable[Path]) -> int:
        """A record's time in ns, on the filesystem's clock: the newest modification time among
        `touched` (the temp files the record staged, and the files it deletes), so none of its
        own files is newer than the record and, the clock never running back, nothing changed
        after it is older. With nothing there (it deletes only missing files) the log's own
        time, from its last write."""
        newest = 0
        for path in touched:
            try:
                newest = max(newest, os.lstat(path).st_mtime_ns)
            except OSError:  # a delete of a file that is not there
                pass
        return newest or os.fstat(self.fd).st_mtime_ns

    def append(self, writes: list[tuple[str, bytes | None]], touched: Iterable[Path]) -> int:
        """Log `writes` durably (one pwrite, one fdatasync); the record's offset. `touched`: the
        temp files staged for `writes` and the files they delete (see `stamp`).

        Raises:
            LogFull: no room, or the generation's record budget is spent.
        """
        payload = _encode(Record(self.boot, self.stamp(touched), writes))
        size = RECORD.size + len(payload)
        if self.count >= MAX_RECORDS or self.end + size > REGION:
            raise LogFull
        head = RECORD.pack(RECORD_MAGIC, self.generation, len(payload), _crc(self.generation, payload), 0)
        data = head + payload
        view = memoryview(data)
        offset = self.end
        try:
            while view:
                view = view[os.pwrite(self.fd, view, offset + len(data) - len(view)):]
            os.fdatasync(self.fd)
        except BaseException:  # not acknowledged: it must not be taken for a live record
            os.pwrite(self.fd, bytes([VOID]), offset + STATE_AT)
            raise
        self.end += size
        self.count += 1
        self.dirty.update(rel for rel, _ in writes)
        return offset

    def mark_applied(self, offset: int) -> None:
        """Its files are installed (page cache is enough: this only matters within one boot)."""
        os.pwrite(self.fd, bytes([INSTALLED]), offset + STATE_AT)

    def void(self, offset: int) -> None:
        """Its files could not all be installed: it must never be restored. The record stays in
        place (so the ones after it are still found), marked, and the mark synced."""
        os.pwrite(self.fd, bytes([VOID]), offset + STATE_AT)
        os.fdatasync(self.fd)

    def checkpoint(self, root: Path, resolve: Callable[[str], Path | None],
                   sync: Callable[[list[Path]], None]) -> None:
        """Make every file this generation wrote durable (files, then their directories up to
        `root`), then start the next generation. Many files: one `syncfs` per file system
        instead (`sync_filesystems`), where the kernel has one that reports errors."""
        if self.count:
            paths = [p for p in map(resolve, sorted(self.dirty)) if p is not None]
            folders = ancestors(root, paths)
            if not sync_filesystems([*paths, *folders]):
                sync([p for p in paths if os.path.isfile(p)])
                sync([d for d in folders if os.path.isdir(d)])
        self._write_header(self.generation + 1)
        self.generation, self.end, self.count = self.generation + 1, HEADER_SIZE, 0
        self.dirty.clear()

    def _write_header(self, generation: int) -> None:
        os.pwrite(self.fd, _header(generation), 0)
        os.fdatasync(self.fd)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


def restorable(record_ns: int, root: Path, path: Path, data: bytes | None, *,
               rolling_forward: bool = False) -> bool:
    """Whether a logged write must be redone, judged by modification times in ns on the
    filesystem's clock (`WriteAheadLog.stamp`). A file the record wrote is never newer than the
    record, and neither is the directory its temp file was made in; ext4 commits metadata in
    order, so a change made after the record that reached the disk means the record's own
    changes did too. Equal is not newer: a tie is restored (see the module docstring).

    - a file that exists: redo if it is not newer than the record and holds other bytes (or, for
      a delete, at all); a newer one was changed after it, by hand or by git: keep it;
    - a file that is missing: redo a write only if the nearest folder that exists is not newer
      than the record either; a newer folder saw a later change (the file deleted on purpose).
      Except when `rolling_forward` a record of this boot whose writer died while installing
      it: its own installs made the folder newer, and nobody has seen the rest yet."""
    try:
        st = os.lstat(path)
    except (FileNotFoundError, NotADirectoryError):
        return data is not None and (rolling_forward or not _folder_changed_since(root, path, record_ns))
    if stat.S_ISDIR(st.st_mode) or st.st_mtime_ns > record_ns:
        return False
    if data is None:
        return True
    if st.st_size == len(data):
        try:
            return read_file(path) != data
        except OSError:
            return True
    return True


def _folder_changed_since(root: Path, path: Path, record_ns: int) -> bool:
    for folder in path.parents:
        try:
            return os.stat(folder).st_mtime_ns > record_ns
        except (FileNotFoundError, NotADirectoryError):
            if folder == root:
                return False
    return False
