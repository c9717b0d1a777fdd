"""Small, dependency-free file I/O shared by every on-disk format of fair-retrieval.

Three jobs, written once:

* `write_atomically` / `write_json_atomically`: one file, written under a temporary name in the same folder, fsynced,
  and renamed over the old one (`os.replace`), so a reader, or a crash (Ctrl-C, SIGKILL, a power cut), never sees
  a half-written file.
* `read_versioned_json`: read a JSON object that names its `format` and `version`, and refuse, with a message that
  says what to do, a file that is missing, damaged (not JSON: truncated, corrupted), of another format, newer than
  this code, or lacking keys.
* `Publication` / `Snapshot`: several files that must change together, published atomically as a whole (a
  FaissIndex's index.faiss + index.json; a LangChain store's index/ + store.json; the CLI's index folder).

The protocol of `Publication` keeps every file under its usual name (so folders look as they always did) and makes
one small JSON file, the *record* (index.json for the formats above), the commit point: written last, read first.

1. A writer locks the record's folder (`flock` on the folder itself, where the OS has it), so saves into one folder
   run one after the other. It finishes the publication of a writer that was killed after its commit (step 4), then
   deletes the temporary files that killed writers left.
2. It writes every new file under a temporary name next to its final one, `<name>.<token>.tmp` (the token: 32 hex
   digits, new for each save), and fsyncs it. Nothing published has changed yet: readers, and a kill, see the
   previous generation.
3. It commits by replacing the record atomically. The record carries, under the key "publication", the token and
   the size and CRC-32 of every file of the new generation.
4. It renames every temporary file to its final name, and fsyncs the folders.

A reader (`Snapshot`) reads the record, then each file it lists: under its temporary name while that exists (a
publication between steps 3 and 4, or one whose writer was killed there), under its final name otherwise, and
compares it with the size and CRC-32 recorded. A mismatch while the record has changed since it was read means a
later save replaced the file: read again (`retry_while_changing`). A mismatch under an unchanged record means the
file is damaged (or, for a JSON file, edited by hand). Records without "publication" (written by earlier releases)
are read as before, from the final names; earlier releases read new folders the same way, and ignore the new key.

Renaming over a file that a reader has open is POSIX behaviour (the reader keeps the old content); on Windows a
save fails while a load holds the file.

Every format here is plain JSON (never pickle), so loading a file cannot execute code.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import time
import uuid
import zlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: saves into one folder are not serialised
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

T = TypeVar("T")

TEMPORARY_SUFFIX = ".tmp"
PUBLICATION_KEY = "publication"
"""The key of a record that lists the files published with it (see the module docstring)."""
READ_ATTEMPTS = 20
"""How often `retry_while_changing` reads again a folder that saves keep replacing, before it gives up."""
IN_USE_FILE = ".in-use.lock"
"""The file a staging folder's holder keeps locked (`held_folder`); it is not part of what is published."""
_TOKEN = re.compile(r"[0-9a-f]{32}")
_CHUNK = 1 << 20


class DamagedFileError(ValueError):
    """A saved file that cannot be read as what it should be: truncated, corrupted, or replaced by something else.

    The message names the file, says what is wrong and what to do, on one line; `path` is the file.
    """

    def __init__(self, path: Path, problem: str, remedy: str) -> None:
        self.path = Path(path)
        super().__init__(" ".join(f"{path} is damaged: {problem}. {remedy}".split()))


class ChangedWhileReadingError(Exception):
    """A reader found its record replaced by a concurrent save while it read the files; `retry_while_changing`
    reads again."""


# ---------------------------------------------------------------------------------------------------- one file


def temporary_path(path: Path, token: str | None = None) -> Path:
    """The temporary name of `path` for a save: `<name>.<token>.tmp` in the same folder (a new token when None)."""
    return path.with_name(f"{path.name}.{token or uuid.uuid4().hex}{TEMPORARY_SUFFIX}")


def write_temporary(path: Path, data: bytes) -> Path:
    """Write `data` to a new temporary file beside `path` and fsync it; returns the temporary file, which the caller
    renames into place (or deletes).

    Raises:
        OSError: if writing fails; nothing is left behind then.
    """
    temporary = temporary_path(path)
    try:
        with temporary.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename, so readers never see a partial file.

    The temporary name is new for every write, so concurrent writers of one file do not clash (the last rename
    wins), and the folder is fsynced after the rename, so the new file survives a power cut.

    Args:
        path: destination file; its folder must exist.
        data: the complete file content.
    """
    temporary = write_temporary(path, data)
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


def json_bytes(value: Any, *, indent: int | None = 2) -> bytes:
    """`value` as strict UTF-8 JSON (no NaN/Infinity) with a final newline.

    Raises:
        ValueError: if `value` holds NaN or infinite floats (they are not valid JSON).
    """
    return (json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_json_atomically(path: Path, value: Any, *, indent: int | None = 2) -> None:
    """Serialise `value` as strict JSON (no NaN/Infinity) and write it atomically.

    Args:
        path: destination file.
        value: a JSON-serialisable object.
        indent: passed to `json.dumps`; None for the most compact form.

    Raises:
        ValueError: if `value` holds NaN or infinite floats (they are not valid JSON).
    """
    write_atomically(path, json_bytes(value, indent=indent))


def sync_folder(folder: Path) -> None:
    """fsync a folder, so that the renames in it survive a power cut (nothing where folders cannot be opened)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(descriptor)
    except OSError:  # pragma: no cover - file systems that refuse to sync folders
        pass
    finally:
        os.close(descriptor)


def file_entry(path: Path) -> dict[str, int]:
    """{"bytes": size, "crc32": checksum} of a finished file, which is also fsynced (a folder gets {})."""
    if path.is_dir():
        return {}
    size, crc = 0, 0
    with path.open("r+b") as handle:
        while chunk := handle.read(_CHUNK):
            size, crc = size + len(chunk), zlib.crc32(chunk, crc)
        os.fsync(handle.fileno())
    return {"bytes": size, "crc32": crc}


# ---------------------------------------------------------------------------------------------------- versioned JSON


def read_versioned_json(
    path: Path,
    *,
    format_name: str,
    max_version: int,
    required: Iterable[str] = (),
    writer: str = "fair-retrieval",
    upgrade: str = "fair-retrieval",
    remedy: str | None = None,
) -> dict[str, Any]:
    """Read a JSON object written by one of our `save` methods and check its header.

    Args:
        path: the JSON file.
        format_name: the value its `format` key must have.
        max_version: the newest `version` this code reads.
        required: keys the object must carry.
        writer: what writes such files (named in the error for a foreign file).
        upgrade: the distribution to upgrade when the file is newer than this code.
        remedy: what to do about a damaged file, for the error message (default: write it again with `writer`).

    Returns:
        The parsed object.

    Raises:
        FileNotFoundError: if `path` does not exist.
        DamagedFileError: (a ValueError) if it is not JSON (truncated, corrupted, empty).
        ValueError: if it is not of `format_name`, too new, or lacks a required key.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; it is written by {writer}.")
    return parse_versioned_json(
        path,
        path.read_bytes(),
        format_name=format_name,
        max_version=max_version,
        required=required,
        writer=writer,
        upgrade=upgrade,
        remedy=remedy,
    )


def parse_versioned_json(
    path: Path,
    raw: bytes,
    *,
    format_name: str,
    max_version: int,
    required: Iterable[str] = (),
    writer: str = "fair-retrieval",
    upgrade: str = "fair-retrieval",
    remedy: str | None = None,
) -> dict[str, Any]:
    """`read_versioned_json` for content already read (`raw`, the bytes of `path`, which names it in errors)."""
    value = _parse_json(path, raw, remedy or f"Restore it from a backup, or write it again with {writer}.")
    if not isinstance(value, dict) or value.get("format") != format_name:
        raise ValueError(f"{path} was not written by {writer} (no format={format_name!r}).")
    try:
        version = int(value.get("version", 0))
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path} has a malformed version {value.get('version')!r}.") from error
    if version > max_version:
        raise ValueError(
            f"{path} has format version {version}, newer than this code reads ({max_version}); upgrade {upgrade}."
        )
    missing = [key for key in required if key not in value]
    if missing:
        raise ValueError(f"{path} lacks {missing}.")
    return value


def _parse_json(path: Path, raw: bytes, remedy: str) -> Any:
    """The JSON value in `raw`, or a DamagedFileError for bytes that are not JSON (empty, truncated, corrupted)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        problem = "it is empty" if not raw.strip() else f"it is not valid JSON ({error})"
        raise DamagedFileError(path, problem, remedy) from None


# ------------------------------------------------------------------------------------------------ reading a publication


@dataclass(frozen=True)
class Snapshot:
    """One reading of a record file, and access to the files it lists as of that reading (see the module docstring).

    Attributes:
        path: the record file.
        value: its parsed content.
        raw: its bytes, to tell later whether it changed (`is_current`).
    """

    path: Path
    value: dict[str, Any]
    raw: bytes

    @classmethod
    def read(cls, path: Path, **checks: Any) -> Snapshot:
        """Read the record at `path`.

        Args:
            path: the record file.
            **checks: `read_versioned_json`'s keyword arguments (format_name, max_version, …); without them any
                JSON object is taken.

        Raises:
            FileNotFoundError: if `path` does not exist.
            ValueError: (DamagedFileError for bytes that are not JSON) as `read_versioned_json`, or for a malformed
                "publication" entry.
        """
        if not path.is_file():
            writer = checks.get("writer", "fair-retrieval")
            raise FileNotFoundError(f"{path} does not exist; it is written by {writer}.")
        raw = path.read_bytes()
        if checks:
            value = parse_versioned_json(path, raw, **checks)
        else:
            value = _parse_json(path, raw, "Restore it from a backup, or write it again.")
            if not isinstance(value, dict):
                raise ValueError(f"{path} holds a JSON {type(value).__name__}, not an object fair-retrieval writes.")
        block = value.get(PUBLICATION_KEY)
        if block is not None and not _valid_block(block):
            raise DamagedFileError(path, f"its {PUBLICATION_KEY!r} entry is malformed", "Write the folder again.")
        return cls(Path(path), value, raw)

    @property
    def files(self) -> dict[str, dict[str, Any]] | None:
        """The files published with this record (name relative to its folder → {"bytes", "crc32"}), or None for a
        record written before publications (its files are read under their final names, unchecked)."""
        block = self.value.get(PUBLICATION_KEY)
        return dict(block["files"]) if block is not None else None

    def lists(self, name: str) -> bool:
        """Whether `name` (relative to the record's folder) belongs to this record's publication."""
        files = self.files
        return files is not None and name in files

    def final_path(self, name: str) -> Path:
        """Where `name` lives once published."""
        return self.path.parent / name

    def open(self, name: str) -> IO[bytes]:
        """Open `name` as this record has it: its temporary file while the publication is being finished, else the
        final one.

        Raises:
            FileNotFoundError: if neither exists.
        """
        final = self.final_path(name)
        if self.lists(name):
            token = self.value[PUBLICATION_KEY]["token"]
            with contextlib.suppress(FileNotFoundError):  # already renamed into place (or never staged)
                return temporary_path(final, token).open("rb")
        return final.open("rb")

    def mismatch(self, name: str, handle: IO[bytes]) -> str | None:
        """How the open file `handle` of `name` differs from the size and CRC-32 recorded (None when it matches, or
        when nothing is recorded); the handle is rewound."""
        entry = (self.files or {}).get(name) or {}
        if "bytes" not in entry or "crc32" not in entry:
            return None
        size, crc = 0, 0
        while chunk := handle.read(_CHUNK):
            size, crc = size + len(chunk), zlib.crc32(chunk, crc)
        handle.seek(0)
        if size != entry["bytes"]:
            return f"it holds {size} bytes where {self.path.name} records {entry['bytes']}"
        if crc != entry["crc32"]:
            return f"its CRC-32 is {crc:08x} where {self.path.name} records {int(entry['crc32']):08x}"
        return None

    def is_current(self) -> bool:
        """Whether the record file still holds what this snapshot read (no save has committed since)."""
        try:
            return self.path.read_bytes() == self.raw
        except OSError:
            return False


def retry_while_changing(path: Path, attempt: Callable[[], T], attempts: int = READ_ATTEMPTS) -> T:
    """Call `attempt` (one consistent read of the folder of record `path`) until it does not raise
    ChangedWhileReadingError.

    Raises:
        ValueError: if saves replaced the record `attempts` times in a row while it was being read.
    """
    for number in range(1, attempts + 1):
        try:
            return attempt()
        except ChangedWhileReadingError:
            logger.debug("%s was replaced while it was read (attempt %d); reading again.", path, number)
    raise ValueError(
        f"{path} was replaced {attempts} times while it was being read: saves into its folder keep running. "
        "Load it again when they pause."
    )


def _valid_block(block: Any) -> bool:
    return (
        isinstance(block, dict)
        and isinstance(block.get("token"), str)
        and _TOKEN.fullmatch(block["token"]) is not None
        and isinstance(block.get("files"), dict)
        and all(isinstance(name, str) and isinstance(entry, dict) for name, entry in block["files"].items())
    )


# ------------------------------------------------------------------------------------------------ writing a publication


class Publication:
    """Publish files that belong together atomically as a whole, committed by one record file (module docstring).

    Usage::

        with Publication(folder / "index.json", ["index.faiss"]) as publication:
            write_the_index(publication.stage("index.faiss"))  # the temporary file to write
            publication.add("../store.json", finished_file)  # a finished file, moved in
            publication.commit({"format": ..., "version": ...})  # the record; then the files move into place

    Leaving the block without `commit` (an exception) deletes the temporary files and changes nothing. The lock is
    not reentrant: do not open a second Publication on the same folder inside the first.

    Args:
        record: the record file (written last, read first); its folder is created.
        names: every file (relative to the record's folder) the format may write, so that the temporary files of
            killed writers are found and removed.
        keep: files the caller will `add` that look like such leftovers (its own temporary files): not removed.
    """

    def __init__(self, record: Path, names: Iterable[str] = (), keep: Iterable[Path] = ()) -> None:
        self.record = Path(record)
        self.folder = self.record.parent
        self.token = uuid.uuid4().hex
        self._names = list(dict.fromkeys([*names, self.record.name]))
        self._keep = {os.path.abspath(path) for path in keep}
        self._staged: dict[str, Path] = {}
        self._lock: int | None = None
        self._committed = False

    def __enter__(self) -> Publication:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = lock_folder(self.folder)
        try:
            self._finish_interrupted()
            self._remove_leftovers()
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if not self._committed:
                for staged in self._staged.values():
                    _remove(staged)
        finally:
            self._unlock()

    def stage(self, name: str) -> Path:
        """The temporary file to write the new `name` to (relative to the record's folder)."""
        staged = temporary_path(self.folder / name, self.token)
        self._staged[name] = staged
        return staged

    def add(self, name: str, source: Path) -> None:
        """Move the finished file (or folder) `source`, on the same file system, to the temporary name of `name`."""
        os.replace(source, self.stage(name))

    def commit(
        self,
        value: Mapping[str, Any],
        *,
        entries: Mapping[str, Mapping[str, Any]] | None = None,
        remove: Iterable[str] = (),
    ) -> None:
        """Write the record (`value` plus the publication entry): the new generation replaces the old one here. Then
        rename the temporary files into place and delete the `remove` files, which the new generation lacks.

        Args:
            value: the record's JSON content (its own format, version, …).
            entries: sizes and CRC-32s already known (by name), so large files are not read again.
            remove: files of the previous generation that this one does not have.
        """
        given = entries or {}
        files = {name: dict(given.get(name) or file_entry(staged)) for name, staged in self._staged.items()}
        record = {key: item for key, item in value.items() if key != PUBLICATION_KEY}
        record[PUBLICATION_KEY] = {"token": self.token, "files": files}
        write_json_atomically(self.record, record)
        self._committed = True
        for name, staged in self._staged.items():
            _move_into_place(staged, self.folder / name)
        for name in remove:
            if name not in self._staged:
                _remove(self.folder / name)
        for folder in {(self.folder / name).parent for name in self._names}:
            sync_folder(folder)

    def _finish_interrupted(self) -> None:
        """Rename into place the files of a committed publication whose writer was killed before it did."""
        try:
            snapshot = Snapshot.read(self.record)
        except (OSError, ValueError):
            return  # no record yet, or one that this save replaces anyway
        block = snapshot.value.get(PUBLICATION_KEY)
        if block is None:
            return
        for name in block["files"]:
            staged = temporary_path(self.folder / name, block["token"])
            if staged.exists():
                logger.info("Finishing the interrupted save of %s: moving %s into place.", self.record, staged)
                _move_into_place(staged, self.folder / name)

    def _remove_leftovers(self) -> None:
        """Delete the temporary files of saves that were killed before their commit (and of earlier releases)."""
        for name in self._names:
            final = self.folder / name
            if not final.parent.is_dir():
                continue
            pattern = re.compile(re.escape(final.name) + r"\.(?:[0-9a-f]{32}\.)?" + re.escape(TEMPORARY_SUFFIX[1:]))
            for entry in final.parent.iterdir():
                if pattern.fullmatch(entry.name) and os.path.abspath(entry) not in self._keep:
                    logger.info("Removing %s, left by an interrupted save.", entry)
                    _remove(entry)

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def lock_folder(folder: Path, *, wait: bool = True) -> int | None:
    """Take the exclusive `flock` of `folder` (released when the returned descriptor is closed, or the process dies).

    Returns:
        The open descriptor; None where the OS or file system has no flock (nothing is locked then), and, with
        `wait=False`, when another process holds the lock.
    """
    return _flock(folder, os.O_RDONLY, wait)


def remove_abandoned(folders: Iterable[Path], min_age_s: float = 60.0) -> None:
    """Delete the staging folders in `folders` that no running process holds (`held_folder`) and that are older
    than `min_age_s` (a folder just created may not be held yet).

    A holder keeps its staging folder's `IN_USE_FILE` locked for as long as it uses it; the lock dies with its
    process, so the folder of a killed run is free.
    """
    if fcntl is None:  # pragma: no cover - Windows: no way to tell an abandoned folder from one in use
        return
    for folder in folders:
        try:
            if time.time() - folder.stat().st_mtime < min_age_s:
                continue
            descriptor = _flock(folder / IN_USE_FILE, os.O_RDWR | os.O_CREAT, wait=False)
        except OSError:
            continue
        if descriptor is None:
            continue
        try:
            logger.info("Removing %s, left by an interrupted run.", folder)
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(descriptor)


@contextlib.contextmanager
def held_folder(folder: Path) -> Iterator[None]:
    """Hold `folder` (a staging folder) for the block, so that `remove_abandoned` leaves it alone.

    The lock is on the file `IN_USE_FILE` inside it, not on the folder, so a `Publication` into the folder does not
    wait for it.
    """
    descriptor = _flock(folder / IN_USE_FILE, os.O_RDWR | os.O_CREAT, wait=False)
    try:
        yield
    finally:
        if descriptor is not None:
            os.close(descriptor)


def _flock(path: Path, flags: int, wait: bool) -> int | None:
    if fcntl is None:  # pragma: no cover - Windows
        return None
    descriptor = os.open(path, flags)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError when held; other errors: a file system without flock
        os.close(descriptor)
        return None
    return descriptor


def _move_into_place(staged: Path, final: Path) -> None:
    if staged.is_dir() and final.is_dir():  # folders cannot be renamed over non-empty ones
        shutil.rmtree(final)
    os.replace(staged, final)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def companion_name(store_file: Path) -> str:
    """A store file's name as the record of the index folder beside it lists it (`FaissIndex.save(companions=...)`)."""
    return f"../{store_file.name}"


def index_record(path: Path) -> Snapshot | None:
    """An index folder's record (its index.json at `path`), which names the files saved with the index; None when
    there is none (a store without vectors, or one of an earlier release) or it is unreadable (`FaissIndex.load`
    then says why)."""
    try:
        return Snapshot.read(path)
    except (OSError, ValueError):
        return None


def read_companion(store_file: Path, record: Snapshot | None) -> bytes | None:
    """The bytes of `store_file` as `record` names it (its temporary file while a save is being finished); None when
    the record does not name it, so the caller reads the file itself (or says it is missing).

    A store file that differs from what an unchanged record says was rewritten without its index (a store without
    vectors saved over one with vectors) or edited by hand: it is read as it is, and checked afterwards.

    Raises:
        ChangedWhileReadingError: when a save replaced the record meanwhile.
    """
    name = companion_name(store_file)
    if record is None or not record.lists(name):
        return None
    try:
        with record.open(name) as handle:
            problem, raw = record.mismatch(name, handle), handle.read()
    except FileNotFoundError:
        problem, raw = "it is missing", None
    if problem is not None and not record.is_current():
        raise ChangedWhileReadingError
    if problem is not None:
        logger.debug("%s differs from what %s records (%s); reading it as it is.", store_file, record.path, problem)
    return raw
