"""Small, dependency-free file I/O shared by every on-disk format of fair-retrieval.

Two jobs, written once:

* `write_atomically` / `write_json_atomically`: write through a temporary file in the same folder and an
  `os.replace`, so a reader (or a crash) never sees a half-written file.
* `read_versioned_json`: read a JSON object that names its `format` and `version`, and refuse, with a message that
  says what to do, a file that is missing, not JSON, of another format, newer than this code, or lacking keys.

Every format here is plain JSON (never pickle), so loading a file cannot execute code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

TEMPORARY_SUFFIX = ".tmp"


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename, so readers never see a partial file.

    Args:
        path: destination file; its folder must exist.
        data: the complete file content.
    """
    temporary = path.with_name(path.name + TEMPORARY_SUFFIX)
    with temporary.open("wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)


def write_json_atomically(path: Path, value: Any, *, indent: int | None = 2) -> None:
    """Serialise `value` as strict JSON (no NaN/Infinity) and write it atomically.

    Args:
        path: destination file.
        value: a JSON-serialisable object.
        indent: passed to `json.dumps`; None for the most compact form.

    Raises:
        ValueError: if `value` holds NaN or infinite floats (they are not valid JSON).
    """
    text = json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False)
    write_atomically(path, (text + "\n").encode("utf-8"))


def read_versioned_json(
    path: Path,
    *,
    format_name: str,
    max_version: int,
    required: Iterable[str] = (),
    writer: str = "fair-retrieval",
    upgrade: str = "fair-retrieval",
) -> dict[str, Any]:
    """Read a JSON object written by one of our `save` methods and check its header.

    Args:
        path: the JSON file.
        format_name: the value its `format` key must have.
        max_version: the newest `version` this code reads.
        required: keys the object must carry.
        writer: what writes such files (named in the error for a foreign file).
        upgrade: the distribution to upgrade when the file is newer than this code.

    Returns:
        The parsed object.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: if it is not JSON, not of `format_name`, too new, or lacks a required key.
    """
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist; it is written by {writer}.")
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error
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
