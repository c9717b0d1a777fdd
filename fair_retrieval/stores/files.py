"""A store file saved together with its index folder, and read back consistently while others may save.

A store is saved as a JSON file (its records, id map and settings; the layout is the adapter's) and a
`FaissIndex` folder. Both change together: the store file is published in the index's own commit
(`FaissIndex.save(companions=...)`, `fair_retrieval.jsonio.Publication`), so a save killed at any point leaves the
previous store or the new one, and a load running meanwhile reads one of them: the index folder's record is read
first and names the store file of the same save (`read_companion`); a save that lands during the read makes it
start again (`retry_while_changing`).

Concurrent writers: a save takes the lock of the store file's folder before it stages anything, so saves into one
folder run one after the other and never touch each other's temporary files. A store remembers the generation it
was loaded from (`StoreGeneration`: the size and CRC-32 of its store file), and a save over a store file that
another writer replaced meanwhile is refused with `StoreConflictError` (reload, redo the change, save again).

Damage: the store file saved with an index is checked against the size and CRC-32 the index folder's record
keeps for it; a mismatch is a `DamagedFileError` (`read_companion`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from fair_retrieval.index import INDEX_FILE, FaissIndex, MultiVectorIndex
from fair_retrieval.index import META_FILE as INDEX_RECORD
from fair_retrieval.jsonio import (
    ChangedWhileReadingError,
    Publication,
    Snapshot,
    StoreConflictError,
    companion_name,
    fingerprint,
    index_record,
    lock_folder,
    read_companion,
    retry_while_changing,
    write_atomically,
    write_temporary,
)

__all__ = ["StoreConflictError", "StoreGeneration", "load_store_file", "save_store_file", "store_generation"]


@dataclass(frozen=True)
class StoreGeneration:
    """The store file a store was loaded from (or last saved to) and the `fingerprint` of the bytes it read or
    wrote there: a save into the same place refuses to replace other bytes (`save_store_file`).

    Attributes:
        store_file: the store file, as an absolute path.
        fingerprint: `jsonio.fingerprint` of its bytes.
    """

    store_file: str
    fingerprint: str


def store_generation(store_file: Path, raw: bytes) -> StoreGeneration:
    """The generation of a store loaded from the bytes `raw` of `store_file` (call it in the loader's restore)."""
    return StoreGeneration(os.path.abspath(store_file), fingerprint(raw))


T = TypeVar("T")


def save_store_file(
    store_file: Path,
    data: bytes,
    index: FaissIndex | MultiVectorIndex | None,
    index_folder: Path,
    *,
    base: StoreGeneration | None = None,
) -> StoreGeneration:
    """Write `data` to `store_file` and `index` to `index_folder`, in one commit.

    The lock of the store file's folder is taken first; then the save checks `base`, stages the store file and
    publishes it with the index (`FaissIndex.save(companions=...)`). A store without an index writes the store file
    alone; where an index folder from an earlier save is there, in a new commit of that folder that lists the store
    file (and no index file any more), so a reader never pairs the new store file with the old index. Saves into
    one folder run one after the other, and none deletes another's staged files.

    Args:
        store_file: the JSON file of the store (its folder must exist).
        data: its bytes.
        index: the store's index, or None when it has none yet.
        index_folder: the folder of the index, next to `store_file`.
        base: the generation the store was loaded from (or last saved as); when it names `store_file`, a store
            file that another writer replaced since is not overwritten. None (a store built in memory) replaces
            whatever is there.

    Returns:
        The generation this save wrote, to pass as `base` to the store's next save.

    Raises:
        StoreConflictError: (a ValueError) another writer saved `store_file` after `base`; nothing was written.
    """
    lock = lock_folder(store_file.parent)
    try:
        if base is not None and base.store_file == os.path.abspath(store_file):
            current = _current_fingerprint(store_file, index_folder)
            if current is not None and current != base.fingerprint:
                raise StoreConflictError(store_file, "store")
        _save_locked(store_file, data, index, index_folder)
    finally:
        if lock is not None:
            os.close(lock)
    return store_generation(store_file, data)


def _save_locked(
    store_file: Path, data: bytes, index: FaissIndex | MultiVectorIndex | None, index_folder: Path
) -> None:
    """`save_store_file`'s writing, with the store folder locked."""
    companion = companion_name(store_file)
    if index is not None:
        staged = write_temporary(store_file, data)
        try:
            index.save(index_folder, companions={companion: staged})
        finally:
            staged.unlink(missing_ok=True)  # moved by the save; still here only if it failed
    elif (index_folder / INDEX_RECORD).is_file():  # a store without an index replacing one with an index
        previous = index_record(index_folder / INDEX_RECORD)  # None when unreadable: this commit replaces it
        with Publication(index_folder / INDEX_RECORD, [companion, INDEX_FILE]) as publication:
            publication.stage(companion).write_bytes(data)  # fsynced by the commit
            value = previous.value if previous is not None else {}
            publication.commit({**value, "count": 0}, remove=[INDEX_FILE])
    else:
        write_atomically(store_file, data)


def _current_fingerprint(store_file: Path, index_folder: Path) -> str | None:
    """The fingerprint of the store file as a load would read it now; None when there is none."""
    record = index_record(index_folder / INDEX_RECORD)
    try:
        raw = read_companion(store_file, record)
        if raw is None:
            raw = store_file.read_bytes()
    except FileNotFoundError:
        return None
    except (OSError, ValueError, ChangedWhileReadingError):
        return "unreadable"
    return fingerprint(raw)


def load_store_file(store_file: Path, index_folder: Path, restore: Callable[[bytes], T], *, missing: str) -> T:
    """The store that `restore` makes of the bytes of `store_file`, read consistently with `index_folder`.

    Args:
        store_file: the JSON file of the store.
        index_folder: the folder of its index (which `restore` loads, when the store has one).
        restore: makes the store from the bytes of the store file saved with the index; raises OSError or
            ValueError for files that are missing, damaged or disagree.
        missing: the message of the FileNotFoundError when there is no store file (say what writes one).

    Raises:
        FileNotFoundError: no store file (`missing`), or what `restore` raises.
        ValueError: what `restore` raises, once it is clear that no save replaced the files meanwhile.
    """
    return retry_while_changing(store_file, lambda: _load_once(store_file, index_folder, restore, missing))


def _load_once(store_file: Path, index_folder: Path, restore: Callable[[bytes], T], missing: str) -> T:
    """One consistent read; ChangedWhileReadingError when a save replaced the files meanwhile."""
    record = index_record(index_folder / INDEX_RECORD)
    try:
        store = restore(_read_store_file(store_file, record, missing))
    except (OSError, ValueError) as error:
        if record is not None and not record.is_current():
            raise ChangedWhileReadingError from error
        raise
    if record is not None and not record.is_current():  # the index may come from a later save
        raise ChangedWhileReadingError
    return store


def _read_store_file(store_file: Path, record: Snapshot | None, missing: str) -> bytes:
    """The bytes of the store file saved with the index (`read_companion`), or of `store_file` when none was."""
    raw = read_companion(store_file, record)
    if raw is not None:
        return raw
    if not store_file.is_file():
        raise FileNotFoundError(missing)
    return store_file.read_bytes()
