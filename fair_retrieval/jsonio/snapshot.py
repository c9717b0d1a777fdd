"""Reading a set of files published together (`fair_retrieval.jsonio.publication`) as one consistent generation.

A reader (`Snapshot`) reads the record, then each file it lists: under its temporary name while that exists (a
publication between its commit and its renames, or one whose writer was killed there), under its final name
otherwise, and compares it with the size and CRC-32 recorded. A mismatch while the record has changed since it was
read means a later save replaced the file: read again (`retry_while_changing`). A mismatch under an unchanged record
means the file is damaged (or, for a JSON file, edited by hand).

Every record is verified: it must carry its "publication" entry (token, the files with their sizes and CRC-32s, and
the CRC-32 of everything else it holds), or it is refused, naming it; no record is read unchecked. Names it lists
must be file names of the folder (`paths.check_listed_name`), and every file is opened inside the folder as a regular
file of the recorded size (`paths.open_regular`), so a crafted record or a link cannot make a reader open a file
elsewhere, or hang on a FIFO.
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
from fair_retrieval.jsonio.paths import MAX_RECORD_BYTES, check_listed_name, open_regular, read_regular
from fair_retrieval.jsonio.versioned import (
    DEFAULT_WRITER,
    DamagedFileError,
    parse_json,
    parse_versioned_json,
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


RECORD_REMEDY = "Save the folder again (or restore it from a backup); do not edit it by hand."


def record_crc32(value: dict[str, Any]) -> int:
    """The CRC-32 of a record's whole content but the checksum itself (its publication's token and files
    included), in a canonical JSON form (sorted keys, no spaces), so it does not depend on how the file was
    indented."""
    rest = dict(value)
    block = rest.get(PUBLICATION_KEY)
    if isinstance(block, dict):
        rest[PUBLICATION_KEY] = {key: item for key, item in block.items() if key != RECORD_CRC_KEY}
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
        remedy: what the errors about its files tell the user to do.
    """

    path: Path
    value: dict[str, Any]
    raw: bytes
    remedy: str = RECORD_REMEDY

    @classmethod
    def read(cls, path: Path, **checks: Any) -> Snapshot:
        """Read the record at `path`.

        Args:
            path: the record file.
            **checks: `parse_versioned_json`'s keyword arguments (format_name, max_version, …); without
                format_name any JSON object is taken (`remedy` alone says what to do about a damaged one).

        Raises:
            FileNotFoundError: if `path` does not exist.
            ValueError: (DamagedFileError for bytes that are not JSON) as `read_versioned_json`; DamagedFileError
                for a record that is not a regular file in its folder, lacks its "publication" entry, has a
                malformed one, differs from its own CRC-32 or lists a name that is not a file of its folder.
        """
        path = Path(path)
        remedy = checks.get("remedy") or RECORD_REMEDY
        try:
            raw = read_regular(path, path.parent, max_bytes=MAX_RECORD_BYTES, remedy=remedy)
        except FileNotFoundError:
            raise FileNotFoundError(
                f"{path} does not exist; it is written by {checks.get('writer', DEFAULT_WRITER)}."
            ) from None
        if "format_name" in checks:
            value = parse_versioned_json(path, raw, **checks)
        else:
            value = parse_json(path, raw, remedy)
            if not isinstance(value, dict):
                raise ValueError(f"{path} holds a JSON {type(value).__name__}, not an object fair-retrieval writes.")
        block = value.get(PUBLICATION_KEY)
        if block is None:
            raise DamagedFileError(
                path,
                f"it has no {PUBLICATION_KEY!r} entry (the sizes and CRC-32s of the files it commits), so nothing "
                "in its folder can be checked",
                remedy,
            )
        if not _valid_block(block):
            raise DamagedFileError(path, f"its {PUBLICATION_KEY!r} entry is malformed", remedy)
        try:
            found = record_crc32(value)
        except ValueError:  # NaN or infinity: never written by a save
            found = None
        if found != block[RECORD_CRC_KEY]:
            raise DamagedFileError(
                path, "its content differs from the CRC-32 it records (corrupted or edited by hand)", remedy
            )
        for name in block["files"]:
            check_listed_name(path, name, remedy=remedy)
        return cls(path, value, raw, remedy)

    @property
    def files(self) -> dict[str, dict[str, Any]]:
        """The files published with this record (name relative to its folder → {"bytes", "crc32"})."""
        return dict(self.value[PUBLICATION_KEY]["files"])

    @property
    def token(self) -> str:
        """The publication token of this record: the generation it commits."""
        return str(self.value[PUBLICATION_KEY]["token"])

    def lists(self, name: str) -> bool:
        """Whether `name` (relative to the record's folder) belongs to this record's publication."""
        return name in self.files

    def root(self, name: str) -> Path:
        """The folder `name` must stay in: the record's folder, or its parent for `../<name>`."""
        return self.path.parent.parent if name.startswith("../") else self.path.parent

    def final_path(self, name: str) -> Path:
        """Where `name` lives once published (`../<name>`: in the parent of the record's folder)."""
        return self.path.parent.parent / name[3:] if name.startswith("../") else self.path.parent / name

    def open(self, name: str, remedy: str | None = None) -> IO[bytes]:
        """Open `name`, which this record must list, as the record has it: its temporary file while the
        publication is being finished, else the final one; a regular file inside the folder, of the recorded size
        (`paths.open_regular`).

        Raises:
            FileNotFoundError: if neither exists (the message names the file and this record).
            DamagedFileError: (a ValueError) the record does not list `name`, or the file leads out of the folder,
                is not a regular file, or has another size than recorded (the message ends with `remedy`, else
                the record's).
        """
        final = self.final_path(name)
        if not self.lists(name):
            raise DamagedFileError(self.path, f"it does not list {name}, a file of its folder", RECORD_REMEDY)
        expected, remedy = self.files[name].get("bytes"), remedy or self.remedy
        temporary = temporary_path(final, self.token)
        with contextlib.suppress(FileNotFoundError):  # already renamed into place (or never staged)
            return open_regular(temporary, self.root(name), expected_bytes=expected, listed_by=self.path, remedy=remedy)
        return open_regular(final, self.root(name), expected_bytes=expected, listed_by=self.path, remedy=remedy)

    def mismatch(self, name: str, handle: IO[bytes]) -> str | None:
        """How the open file `handle` of `name` differs from the size and CRC-32 recorded (None when it matches, or
        when nothing is recorded); the handle is rewound."""
        entry = self.files.get(name) or {}
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
            return read_regular(self.path, self.path.parent, max_bytes=MAX_RECORD_BYTES) == self.raw
        except (OSError, ValueError):
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
    """Whether a record's "publication" entry has a 32-hex-digit token, its own CRC-32, and a name → {"bytes",
    "crc32"} mapping of files (non-negative ints)."""
    return (
        isinstance(block, dict)
        and isinstance(block.get("token"), str)
        and _TOKEN.fullmatch(block["token"]) is not None
        and _is_count(block.get(RECORD_CRC_KEY))
        and isinstance(block.get("files"), dict)
        and all(
            isinstance(name, str)
            and isinstance(entry, dict)
            and _is_count(entry.get("bytes"))
            and _is_count(entry.get("crc32"))
            for name, entry in block["files"].items()
        )
    )


def _is_count(value: Any) -> bool:
    """Whether `value` is a non-negative int (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
