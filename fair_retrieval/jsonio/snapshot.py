"""Reading a set of files published together (`fair_retrieval.jsonio.publication`) as one consistent generation.

A reader (`Snapshot`) reads the record, then each file it lists: under its temporary name while that exists (a
publication between its commit and its renames, or one whose writer was killed there), under its final name
otherwise, and compares it with the size and CRC-32 recorded. A mismatch while the record has changed since it was
read means a later save replaced the file: read again (`retry_while_changing`). A mismatch under an unchanged record
means the file is damaged (or, for a JSON file, edited by hand). Records without "publication" (written by earlier
releases) are read as before, from the final names; earlier releases read new folders the same way, and ignore the
new key.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

from fair_retrieval.jsonio.atomic import size_and_crc32, temporary_path
from fair_retrieval.jsonio.versioned import (
    DEFAULT_WRITER,
    DamagedFileError,
    parse_json,
    parse_versioned_json,
    read_existing,
)

logger = logging.getLogger(__name__)

T = TypeVar("T")

PUBLICATION_KEY = "publication"
"""The key of a record that lists the files published with it (see `fair_retrieval.jsonio.publication`)."""
READ_ATTEMPTS = 20
"""How often `retry_while_changing` reads again a folder that saves keep replacing, before it gives up."""
_TOKEN = re.compile(r"[0-9a-f]{32}")
RECORD_CRC_KEY = "record_crc32"
"""The key, in a record's publication entry, of the CRC-32 of the record's other content (`record_crc32`)."""


def record_crc32(value: dict[str, Any]) -> int:
    """The CRC-32 of a record's content other than its publication entry, in a canonical JSON form (sorted keys,
    no spaces), so it does not depend on how the file was indented."""
    rest = {key: item for key, item in value.items() if key != PUBLICATION_KEY}
    canonical = json.dumps(rest, sort_keys=True, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return zlib.crc32(canonical.encode("utf-8"))


class ChangedWhileReadingError(Exception):
    """A reader found its record replaced by a concurrent save while it read the files; `retry_while_changing`
    reads again."""


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
            **checks: `parse_versioned_json`'s keyword arguments (format_name, max_version, …); without them any
                JSON object is taken.

        Raises:
            FileNotFoundError: if `path` does not exist.
            ValueError: (DamagedFileError for bytes that are not JSON) as `read_versioned_json`, or for a malformed
                "publication" entry.
        """
        raw = read_existing(path, checks.get("writer", DEFAULT_WRITER))
        if checks:
            value = parse_versioned_json(path, raw, **checks)
        else:
            value = parse_json(path, raw, "Restore it from a backup, or write it again.")
            if not isinstance(value, dict):
                raise ValueError(f"{path} holds a JSON {type(value).__name__}, not an object fair-retrieval writes.")
        block = value.get(PUBLICATION_KEY)
        if block is not None and not _valid_block(block):
            raise DamagedFileError(path, f"its {PUBLICATION_KEY!r} entry is malformed", "Write the folder again.")
        if block is not None and RECORD_CRC_KEY in block:
            try:
                found = record_crc32(value)
            except ValueError:  # NaN or infinity: never written by a save
                found = None
            if found != block[RECORD_CRC_KEY]:
                raise DamagedFileError(
                    path,
                    "its content differs from the CRC-32 it records (corrupted or edited by hand)",
                    checks.get("remedy") or "Write the folder again, or restore it from a backup.",
                )
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
        size, crc = size_and_crc32(handle)
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
    """Whether a record's "publication" entry has a 32-hex-digit token and a name → entry mapping of files."""
    return (
        isinstance(block, dict)
        and isinstance(block.get("token"), str)
        and _TOKEN.fullmatch(block["token"]) is not None
        and isinstance(block.get("files"), dict)
        and all(isinstance(name, str) and isinstance(entry, dict) for name, entry in block["files"].items())
    )
