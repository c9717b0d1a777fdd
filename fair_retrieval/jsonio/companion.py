"""A store file published with the index folder beside it (`FaissIndex.save(companions=...)`): its name in the index
folder's record, and reading it as that record has it, so a store and its index are loaded from one generation."""

from __future__ import annotations

import logging
from pathlib import Path

from fair_retrieval.jsonio.snapshot import ChangedWhileReadingError, Snapshot
from fair_retrieval.jsonio.versioned import DamagedFileError

logger = logging.getLogger(__name__)

STORE_REMEDY = (
    "Rebuild the store and save it again, or restore the folder from a backup; edit a store through its API, not by "
    "hand."
)


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

    A store file that differs from the size and CRC-32 an unchanged record keeps for it was damaged (a flipped
    byte, rows swapped, an edit by hand, a truncation) and is refused.

    Raises:
        ChangedWhileReadingError: when a save replaced the record meanwhile.
        DamagedFileError: (a ValueError) the file differs from what the record keeps for it, or is missing (said so).
    """
    name = companion_name(store_file)
    if record is None or not record.lists(name):
        return None
    try:
        with record.open(name, STORE_REMEDY) as handle:
            problem, raw = record.mismatch(name, handle), handle.read()
    except FileNotFoundError:
        if not record.is_current():
            raise ChangedWhileReadingError from None
        raise DamagedFileError(
            store_file,
            f"{record.path.parent.name}/ records it, and the two are saved together",
            STORE_REMEDY,
            missing=True,
        ) from None
    except DamagedFileError:  # a link, a FIFO, another size: unless a save replaced the record meanwhile
        if not record.is_current():
            raise ChangedWhileReadingError from None
        raise
    if problem is not None and not record.is_current():
        raise ChangedWhileReadingError
    if problem is not None:
        raise DamagedFileError(
            store_file,
            f"{problem} (truncated, corrupted or edited since it was saved with {record.path.parent.name}/)",
            STORE_REMEDY,
        )
    return raw
