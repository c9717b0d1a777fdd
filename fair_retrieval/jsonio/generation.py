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

from fair_retrieval.jsonio.snapshot import PUBLICATION_KEY, Snapshot

__all__ = ["StoreConflictError", "fingerprint", "record_generation", "require_generation"]


class StoreConflictError(ValueError):
    """A save refused because another writer saved into the same folder after this object was loaded from it.

    Nothing was written. Load the folder again, redo the change on what it holds now, and save again (a loop of
    load → change → save that retries on this error never loses a save).

    Attributes:
        path: the file or folder that changed.
    """

    def __init__(self, path: Path, what: str) -> None:
        self.path = Path(path)
        super().__init__(
            f"{path} was saved by another writer after this {what} was loaded from it; nothing was written. "
            "Reload it, apply your change again and save (retry on StoreConflictError)."
        )


def fingerprint(raw: bytes) -> str:
    """The generation of a file's content: its size and CRC-32 ("<bytes>:<crc32 hex>")."""
    return f"{len(raw)}:{zlib.crc32(raw):08x}"


def record_generation(record: Path) -> str | None:
    """The generation of the folder committed by `record` (a Publication's record file): its publication token,
    the `fingerprint` of its bytes when it has none (an earlier release's, or a damaged one), None when absent."""
    try:
        raw = Path(record).read_bytes()
    except FileNotFoundError:
        return None
    try:
        block = Snapshot.read(record).value.get(PUBLICATION_KEY)
    except (OSError, ValueError):
        block = None
    return str(block["token"]) if block is not None else fingerprint(raw)


def require_generation(path: Path, expected: str | None, current: str | None, what: str) -> None:
    """Refuse a save over `path` when its `current` generation is not the `expected` one the writer read.

    A folder emptied since (`current` None) is no newer generation: the save goes on.

    Raises:
        StoreConflictError: another writer saved meanwhile.
    """
    if current is not None and current != expected:
        raise StoreConflictError(path, what)
