"""Writing one file atomically: under a temporary name in the same folder, fsynced, then renamed over the old one
(`os.replace`), so a reader, or a crash (Ctrl-C, SIGKILL, a power cut), never sees a half-written file."""

from __future__ import annotations

import json
import os
import uuid
import zlib
from pathlib import Path
from typing import IO, Any

TEMPORARY_SUFFIX = ".tmp"
_CHUNK = 1 << 20


def temporary_path(path: Path, token: str | None = None) -> Path:
    """The temporary name of `path` for a save: `<name>.<token>.tmp` in the same folder (a new token when None)."""
    return path.with_name(f"{path.name}.{token or uuid.uuid4().hex}{TEMPORARY_SUFFIX}")


def write_temporary(path: Path, data: bytes) -> Path:
    """Write `data` to a new temporary file beside `path` and fsync it; returns the temporary file, which the caller
    renames into place (or deletes).

    Raises:
        OSError: if writing fails; nothing is left behind then.
    """
    temporary = temporary_path(path)
    try:
        with temporary.open("wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    return temporary


def write_atomically(path: Path, data: bytes) -> None:
    """Write `data` to `path` through a temporary file and a rename, so readers never see a partial file.

    The temporary name is new for every write, so concurrent writers of one file do not clash (the last rename
    wins), and the folder is fsynced after the rename, so the new file survives a power cut.

    Args:
        path: destination file; its folder must exist.
        data: the complete file content.
    """
    temporary = write_temporary(path, data)
    try:
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    sync_folder(path.parent)


def json_bytes(value: Any, *, indent: int | None = 2) -> bytes:
    """`value` as strict UTF-8 JSON (no NaN/Infinity) with a final newline.

    Raises:
        ValueError: if `value` holds NaN or infinite floats (they are not valid JSON).
    """
    return (json.dumps(value, indent=indent, ensure_ascii=False, allow_nan=False) + "\n").encode("utf-8")


def write_json_atomically(path: Path, value: Any, *, indent: int | None = 2) -> None:
    """Serialise `value` as strict JSON (no NaN/Infinity) and write it atomically.

    Args:
        path: destination file.
        value: a JSON-serialisable object.
        indent: passed to `json.dumps`; None for the most compact form.

    Raises:
        ValueError: if `value` holds NaN or infinite floats (they are not valid JSON).
    """
    write_atomically(path, json_bytes(value, indent=indent))


def sync_folder(folder: Path) -> None:
    """fsync a folder, so that the renames in it survive a power cut (nothing where folders cannot be opened)."""
    try:
        descriptor = os.open(folder, os.O_RDONLY)
    except OSError:  # pragma: no cover - Windows
        return
    try:
        os.fsync(descriptor)
    except OSError:  # pragma: no cover - file systems that refuse to sync folders
        pass
    finally:
        os.close(descriptor)


def file_entry(path: Path) -> dict[str, int]:
    """{"bytes": size, "crc32": checksum} of a finished file, which is also fsynced (a folder gets {})."""
    if path.is_dir():
        return {}
    with path.open("r+b") as handle:
        size, crc = size_and_crc32(handle)
        os.fsync(handle.fileno())
    return {"bytes": size, "crc32": crc}


def size_and_crc32(handle: IO[bytes]) -> tuple[int, int]:
    """The number of bytes left to read in `handle` and their CRC-32, read to the end in 1 MiB chunks."""
    size, crc = 0, 0
    while chunk := handle.read(_CHUNK):
        size, crc = size + len(chunk), zlib.crc32(chunk, crc)
    return size, crc
