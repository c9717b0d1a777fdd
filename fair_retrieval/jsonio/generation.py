"""Optimistic concurrency for saved folders: a writer remembers the generation it read (or last wrote) and refuses
to save over a newer one, which another writer published meanwhile (`StoreConflictError`).

A *generation* is a short string that changes with every save: the publication token of a record written by
`fair_retrieval.jsonio.Publication`, or the size and CRC-32 of a file's bytes (`fingerprint`) where no record
names one. None means "nothing saved there". The check runs while the writer holds the folder lock, so no save
can land between the check and the writer's own commit.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from fair_retrieval.jsonio.paths import MAX_RECORD_BYTES, read_regular
from fair_retrieval.jsonio.snapshot import Snapshot

__all__ = ["StoreConflictError", "fingerprint", "record_generation", "refuse_replacing", "require_generation"]


class StoreConflictError(ValueError):
    """A save refused because another writer saved into the same folder after this object was loaded from it.

    Nothing was written. Load the folder again, redo the change on what it holds now, and save again (a loop of
    load → change → save that retries on this error never loses a save).

    Attributes:
        path: the file or folder that changed.
    """

    def __init__(self, path: Path, what: str, *, message: str | None = None) -> None:
        self.path = Path(path)
        super().__init__(
            message
            or f"{path} was saved by another writer after this {what} was loaded from it; nothing was written. "
            "Reload it, apply your change again and save (retry on StoreConflictError)."
        )


def refuse_replacing(path: Path, what: str, overwrite: str) -> StoreConflictError:
    """The error for a `what` built in memory (never loaded from `path`) saved where a saved one already is: it
    is not replaced silently (two writers that both start from nothing would otherwise lose a save).

    Args:
        path: the folder or file that holds the saved one.
        what: what is saved ("store", "FaissIndex").
        overwrite: how the caller asks to replace it (the argument, e.g. "overwrite=True").
    """
    return StoreConflictError(
        path,
        what,
        message=(
            f"{path} already holds a saved {what}, and this {what} was neither loaded from it nor saved there; "
            "nothing was written. Load it and apply your change to it (retry on StoreConflictError), pass "
            f"{overwrite} to replace it, or delete it first."
        ),
    )


def fingerprint(raw: bytes) -> str:
    """The generation of a file's content: its size and CRC-32 ("<bytes>:<crc32 hex>")."""
    return f"{len(raw)}:{zlib.crc32(raw):08x}"


def record_generation(record: Path) -> str | None:
    """The generation of the folder committed by `record` (a Publication's record file): its publication token,
    the `fingerprint` of its bytes when it is damaged ("unreadable" when they cannot be read), None when absent."""
    record = Path(record)
    if not record.exists() and not record.is_symlink():
        return None
    try:
        return Snapshot.read(record).token
    except (OSError, ValueError):  # damaged or crafted: its bytes (or its type) stand for its generation
        try:
            return fingerprint(read_regular(record, record.parent, max_bytes=MAX_RECORD_BYTES))
        except (OSError, ValueError):
            return "unreadable"


def require_generation(
    path: Path, expected: str | None, current: str | None, what: str, *, message: str | None = None
) -> None:
    """Refuse a save over `path` when its `current` generation is not the `expected` one the writer read.

    A folder emptied since (`current` None) is no newer generation: the save goes on.

    Args:
        path: the folder or file saved.
        expected: the generation the writer read.
        current: the generation there now.
        what: what is saved, for the message.
        message: the whole message instead (e.g. in a command line tool's words).

    Raises:
        StoreConflictError: another writer saved meanwhile.
    """
    if current is not None and current != expected:
        raise StoreConflictError(path, what, message=message)
