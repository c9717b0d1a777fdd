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

A store built in memory (no generation) is never saved silently over a store file that is there: that save is
refused with `StoreConflictError` unless the caller asks to replace it (`overwrite=True`), so two writers that both
start from an empty folder (load if there is a store, else build one; add; save; retry on the error) keep every
save. Generations and locks key on the resolved folder (`jsonio.paths.folder_key`), so a save through a symbolic
link to the folder is checked like one through its real path.

Damage and crafted folders: every store has a commit record (the index folder's index.json, also for a store
without vectors), which is always verified; the store file is checked against the size and CRC-32 it keeps for it
(`read_companion`); a store file without a record, a record that does not list it, an index folder that leads out
of the store's folder (a symbolic link), a store file that is a link or a FIFO: all are refused with a
`DamagedFileError` that names the file.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from fair_retrieval.index import INDEX_FILE, FaissIndex, MultiVectorIndex
from fair_retrieval.index import META_FILE as INDEX_RECORD
from fair_retrieval.index.persistence import FORMAT_NAME as INDEX_FORMAT
from fair_retrieval.index.persistence import FORMAT_VERSION as INDEX_VERSION
from fair_retrieval.jsonio import (
    ChangedWhileReadingError,
    DamagedFileError,
    Publication,
    Snapshot,
    StoreConflictError,
    companion_name,
    fingerprint,
    index_record,
    lock_folder,
    read_companion,
    retry_while_changing,
    write_temporary,
)
from fair_retrieval.jsonio.generation import refuse_replacing
from fair_retrieval.jsonio.paths import contained, folder_key, open_regular

_REMEDY = (
    "Rebuild the store and save it again, or restore the folder from a backup; edit a store through its API, not by "
    "hand."
)
_RECORD_REMEDY = "Rebuild the index and save it again (or restore the folder from a backup)."
MAX_UNRECORDED_BYTES = 1 << 30
"""The most bytes read of a store file that no record sizes (only to tell its generation before a save)."""

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
    return StoreGeneration(_file_key(store_file), fingerprint(raw))


def _file_key(store_file: Path) -> str:
    """The key of a store file: its name in its resolved folder (an alias of the folder is the same folder)."""
    return os.path.join(folder_key(Path(store_file).parent), Path(store_file).name)


T = TypeVar("T")


def save_store_file(
    store_file: Path,
    data: bytes,
    index: FaissIndex | MultiVectorIndex | None,
    index_folder: Path,
    *,
    base: StoreGeneration | None = None,
    overwrite: bool = False,
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
            file that another writer replaced since is not overwritten. None (a store built in memory), or the
            generation of another store file: a store file already there is not replaced unless `overwrite`.
        overwrite: replace a store file already there that this store was neither loaded from nor saved as (the
            caller's documented `overwrite=True`).

    Returns:
        The generation this save wrote, to pass as `base` to the store's next save.

    Raises:
        StoreConflictError: (a ValueError) another writer saved `store_file` after `base`, or a store built in
            memory would replace one that is there; nothing was written.
        DamagedFileError: (a ValueError) the index folder leads out of the store's folder (a symbolic link).
    """
    lock = lock_folder(store_file.parent)
    try:
        contained(store_file.parent, index_folder, remedy=_REMEDY)
        if (index_folder.exists() or index_folder.is_symlink()) and not index_folder.is_dir():
            raise DamagedFileError(index_folder, "it is not a folder (a file, or a link to one or to nothing)", _REMEDY)
        if store_file.is_dir() and not store_file.is_symlink():
            raise DamagedFileError(store_file, "it is a folder, not a store file", _REMEDY)
        current = _current_fingerprint(store_file, index_folder)
        if base is not None and base.store_file == _file_key(store_file):
            if current is not None and current != base.fingerprint:
                raise StoreConflictError(store_file, "store")
        elif current is not None and not overwrite:
            raise refuse_replacing(store_file, "store", "overwrite=True")
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
            index.save(index_folder, companions={companion: staged}, overwrite=True)  # the store checked its folder
        finally:
            staged.unlink(missing_ok=True)  # moved by the save; still here only if it failed
    else:  # a store without vectors: its record commits the store file alone (and drops an earlier index)
        with Publication(index_folder / INDEX_RECORD, [companion, INDEX_FILE]) as publication:
            publication.stage(companion).write_bytes(data)  # fsynced by the commit
            publication.commit({"format": INDEX_FORMAT, "version": INDEX_VERSION, "count": 0}, remove=[INDEX_FILE])


def _current_fingerprint(store_file: Path, index_folder: Path) -> str | None:
    """The fingerprint of the store file as a load would read it now; None when there is none ("unreadable" for
    one a load would refuse)."""
    record = index_record(index_folder / INDEX_RECORD)
    try:
        raw = read_companion(store_file, record)
        if raw is None:
            with open_regular(store_file, store_file.parent, max_bytes=MAX_UNRECORDED_BYTES) as handle:
                raw = handle.read()
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
    record = _store_record(store_file, index_folder, missing, restore)
    try:
        store = restore(_read_store_file(store_file, record))
    except (OSError, ValueError) as error:
        if not record.is_current():
            raise ChangedWhileReadingError from error
        raise
    if not record.is_current():  # the index may come from a later save
        raise ChangedWhileReadingError
    return store


def _store_record(store_file: Path, index_folder: Path, missing: str, restore: Callable[[bytes], T]) -> Snapshot:
    """The commit record of a store (its index folder's index.json), verified.

    Raises:
        FileNotFoundError: no store there (`missing`).
        DamagedFileError: (a ValueError) the index folder leads out of the store's folder, the record is missing
            beside a store file, or it is damaged; the message names the file.
        ValueError: what `restore` says of a store file without a record (another program's file, a folder of
            another store format): the cause is named, but nothing unverified is ever returned.
    """
    present = store_file.exists() or store_file.is_symlink()
    if not present and not (index_folder.exists() or index_folder.is_symlink()):
        raise FileNotFoundError(missing)
    contained(store_file.parent, index_folder, remedy=_REMEDY)
    record_path = index_folder / INDEX_RECORD
    try:
        return Snapshot.read(record_path, remedy=_RECORD_REMEDY)
    except FileNotFoundError:
        if not present:
            raise FileNotFoundError(missing) from None
    with open_regular(store_file, store_file.parent, max_bytes=MAX_UNRECORDED_BYTES, remedy=_REMEDY) as handle:
        raw = handle.read()
    restore(raw)  # only to name the cause: a foreign file, or a missing index folder, is refused by it, saying so
    raise DamagedFileError(
        record_path,
        f"it records the size and CRC-32 of {store_file.name}, which cannot be checked without it",
        _REMEDY,
        missing=True,
    )


def _read_store_file(store_file: Path, record: Snapshot) -> bytes:
    """The bytes of the store file saved with the index (`read_companion`), checked against `record`.

    Raises:
        DamagedFileError: (a ValueError) the record does not list the store file, or the file differs from it.
    """
    raw = read_companion(store_file, record)
    if raw is None:
        others = [name for name in record.files if name.startswith("../")]
        cause = (
            f"it commits {others[0]}, not {companion_name(store_file)}: the index folder belongs to another store "
            "(moved or copied here)"
            if others
            else f"it commits a bare index, no store file {companion_name(store_file)}"
        )
        raise DamagedFileError(record.path, cause, _REMEDY)
    return raw
