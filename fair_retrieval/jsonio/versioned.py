"""Reading a JSON object that names its `format` and `version`, refusing, with a message that says what to do, a
file that is missing, damaged (not JSON: truncated, corrupted), of another format, newer than this code, or lacking
keys.

Every format here is plain JSON (never pickle), so loading a file cannot execute code.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DEFAULT_WRITER = "fair-retrieval"
"""What writes a file, as the errors name it, when the caller does not say."""


class DamagedFileError(ValueError):
    """A saved file that cannot be read as what it should be: truncated, corrupted, or replaced by something else.

    The message names the file, says what is wrong and what to do, on one line; `path` is the file. A file its folder
    records but that is gone (`missing=True`) is said to be missing, not damaged.
    """

    def __init__(self, path: Path, problem: str, remedy: str, *, missing: bool = False) -> None:
        self.path = Path(path)
        state = "is missing" if missing else "is damaged"
        super().__init__(" ".join(f"{path} {state}: {problem}. {remedy}".split()))


def read_versioned_json(path: Path, **checks: Any) -> dict[str, Any]:
    """Read a JSON object written by one of our `save` methods and check its header.

    Args:
        path: the JSON file.
        **checks: `parse_versioned_json`'s keyword arguments: format_name and max_version, and optionally
            required, writer, upgrade and remedy.

    Returns:
        The parsed object.

    Raises:
        FileNotFoundError: if `path` does not exist.
        DamagedFileError: (a ValueError) if it is not JSON (truncated, corrupted, empty).
        ValueError: if it is not of `format_name`, too new, or lacks a required key.
    """
    return parse_versioned_json(path, read_existing(path, checks.get("writer", DEFAULT_WRITER)), **checks)


def parse_versioned_json(
    path: Path,
    raw: bytes,
    *,
    format_name: str,
    max_version: int,
    required: Iterable[str] = (),
    writer: str = DEFAULT_WRITER,
    upgrade: str = "fair-retrieval",
    remedy: str | None = None,
) -> dict[str, Any]:
    """`read_versioned_json` for content already read: check the header of the JSON object in `raw`.

    Args:
        path: the file `raw` was read from, which the errors name.
        raw: its bytes.
        format_name: the value its `format` key must have.
        max_version: the newest `version` this code reads.
        required: keys the object must carry.
        writer: what writes such files (named in the error for a foreign file).
        upgrade: the distribution to upgrade when the file is newer than this code.
        remedy: what to do about a damaged file, for the error message (default: write it again with `writer`).

    Returns:
        The parsed object.

    Raises:
        DamagedFileError: (a ValueError) if `raw` is not JSON (truncated, corrupted, empty).
        ValueError: if it is not of `format_name`, too new, or lacks a required key.
    """
    value = parse_json(path, raw, remedy or f"Restore it from a backup, or write it again with {writer}.")
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


def read_existing(path: Path, writer: str) -> bytes:
    """The bytes of the file `path`, which `writer` writes (the error for a missing file names it).

    Raises:
        FileNotFoundError: if `path` does not exist.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; it is written by {writer}.")
    return path.read_bytes()


def parse_json(path: Path, raw: bytes, remedy: str) -> Any:
    """The JSON value in `raw`, or a DamagedFileError for bytes that are not JSON (empty, truncated, corrupted)."""
    try:
        return json.loads(raw.decode("utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        problem = "it is empty" if not raw.strip() else f"it is not valid JSON ({error})"
        raise DamagedFileError(path, problem, remedy) from None
    except RecursionError:  # nesting deeper than Python's parser takes: never written by a save
        raise DamagedFileError(path, "its JSON is nested too deep to read (crafted or corrupted)", remedy) from None
