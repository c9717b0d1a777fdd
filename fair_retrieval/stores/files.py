"""A store file saved together with its index folder, and read back consistently while others may save.

A store is saved as a JSON file (its records, id map and settings; the layout is the adapter's) and a
`FaissIndex` folder. Both change together: the store file is published in the index's own commit
(`FaissIndex.save(companions=...)`, `fair_retrieval.jsonio.Publication`), so a save killed at any point leaves the
previous store or the new one, and a load running meanwhile reads one of them: the index folder's record is read
first and names the store file of the same save (`read_companion`); a save that lands during the read makes it
start again (`retry_while_changing`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from fair_retrieval.index import META_FILE as INDEX_RECORD
from fair_retrieval.index import FaissIndex, MultiVectorIndex
from fair_retrieval.jsonio import (
    ChangedWhileReadingError,
    Publication,
    Snapshot,
    companion_name,
    index_record,
    read_companion,
    retry_while_changing,
    write_atomically,
    write_temporary,
)

__all__ = ["load_store_file", "save_store_file"]

T = TypeVar("T")


def save_store_file(
    store_file: Path, data: bytes, index: FaissIndex | MultiVectorIndex | None, index_folder: Path
) -> None:
    """Write `data` to `store_file` and `index` to `index_folder`, in one commit.

    A store without an index writes the store file alone; where an index folder from an earlier save is there, in
    that folder's commit too (finishing a save that was killed), so a reader never pairs the new store file with
    the old index unnoticed. Saves into one folder run one after the other.

    Args:
        store_file: the JSON file of the store (its folder must exist).
        data: its bytes.
        index: the store's index, or None when it has none yet.
        index_folder: the folder of the index, next to `store_file`.
    """
    if index is not None:
        staged = write_temporary(store_file, data)
        try:
            index.save(index_folder, companions={companion_name(store_file): staged})
        finally:
            staged.unlink(missing_ok=True)  # moved by the save; still here only if it failed
    elif (index_folder / INDEX_RECORD).is_file():  # a store without an index replacing one with an index
        with Publication(index_folder / INDEX_RECORD, [companion_name(store_file)]):  # finishes a killed save
            write_atomically(store_file, data)
    else:
        write_atomically(store_file, data)


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
