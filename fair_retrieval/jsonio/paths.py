"""Keeping every file a loader or saver opens inside the folder it was given, and reading only regular files.

A saved folder can be crafted: a record may list `../settings.json`, a subfolder may be a symbolic link to a
folder elsewhere, a data file may be a link to /dev/zero or a FIFO. So every path opened here is resolved
(`os.path.realpath`, links followed) and must stay inside the folder (`contained`); names taken from a record must
be plain file names, or `../<plain name>` for the one store file an index folder's record lists next to it
(`check_listed_name`); and a file is read only when it is a regular file whose size is known before reading
(`open_regular`: opened without blocking and without following a final link, so a FIFO or a device never makes a
load hang). Folder keys (locks, conflict checks) are the resolved folder (`folder_key`), so aliases of one folder
are one folder.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import IO

from fair_retrieval.jsonio.versioned import DamagedFileError

MAX_RECORD_BYTES = 16 << 20
"""The largest record file (index.json) read: records hold names, sizes and settings, never data."""
_REMEDY = "Restore the folder from a backup, or save it again; do not place links or other files in it."


def folder_key(folder: str | os.PathLike[str]) -> str:
    """The key of a folder for locks and conflict checks: its resolved absolute path, so every alias (a symbolic
    link, `..` segments) of one folder gives one key."""
    return os.path.realpath(folder)


def is_inside(root: Path, path: Path) -> bool:
    """Whether `path`, resolved, is `root` (resolved) or lies below it."""
    real_root, real = Path(os.path.realpath(root)), Path(os.path.realpath(path))
    return real == real_root or real_root in real.parents


def contained(root: Path, path: Path, *, remedy: str = _REMEDY) -> Path:
    """`path` resolved, refused when it leads out of `root` (through `..`, an absolute name or a symbolic link).

    Raises:
        DamagedFileError: (a ValueError) `path` resolves outside `root`; the message names `path`.
    """
    if not is_inside(root, path):
        raise DamagedFileError(
            path, f"it leads out of {root} (to {os.path.realpath(path)}), through a symbolic link or a '..'", remedy
        )
    return Path(os.path.realpath(path))


def check_listed_name(record: Path, name: object, *, remedy: str = _REMEDY) -> str:
    """A file name as a record lists it, checked: a plain name, or `../<plain name>` (the store file saved next to
    an index folder). Never absolute, never deeper, never `.` or `..` alone.

    Raises:
        DamagedFileError: (a ValueError) a malformed name; the message names the record and the name.
    """
    text = name if isinstance(name, str) else ""
    plain = text.removeprefix("../")
    if not plain or plain in (".", "..") or any(mark in plain for mark in ("/", "\\", "\0")) or plain.startswith("~"):
        raise DamagedFileError(
            record, f"it lists the file {name!r}, which is not a file name of a saved folder (outside it?)", remedy
        )
    return text


def open_regular(
    path: Path,
    root: Path,
    *,
    expected_bytes: int | None = None,
    max_bytes: int | None = None,
    listed_by: Path | None = None,
    remedy: str = _REMEDY,
) -> IO[bytes]:
    """Open `path` for reading once it is known to be a regular file inside `root` of a size read may take.

    The path is resolved and must lie in `root` (`contained`); the file is opened without following a final link
    and without blocking (a FIFO opens at once), then its type and size are checked on the open descriptor before
    a byte is read.

    Args:
        path: the file.
        root: the folder it must stay in.
        expected_bytes: the size a record keeps for it; another size is refused before reading.
        max_bytes: the largest size read (for files no record sizes, e.g. a record itself).
        listed_by: the record that lists the file, named in the error for a missing file.
        remedy: what the errors tell the user to do.

    Raises:
        FileNotFoundError: the file does not exist (the message names it, and the record that lists it).
        DamagedFileError: (a ValueError) it leads out of `root`, is not a regular file (a FIFO, a device, a
            folder, a dangling link), or has another size than recorded or allowed; the message names it.
        ValueError: this user may not read it (a permission error): the message names it and says so.
    """
    real = contained(root, path, remedy=remedy)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        descriptor = os.open(real, flags)
    except FileNotFoundError:
        listed = f", though {listed_by} lists it" if listed_by is not None else ""
        raise FileNotFoundError(f"{path} is missing{listed}. {remedy}") from None
    except PermissionError as error:  # the file is fine, this user may not read it: nothing to rebuild
        raise ValueError(
            f"{path} is not readable ({error.strerror}): give this user read permission on it (and on its folder), "
            "or open the folder as a user who may read it."
        ) from None
    except OSError as error:  # a link loop
        raise DamagedFileError(path, f"it cannot be opened ({error.strerror})", remedy) from None
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise DamagedFileError(path, f"it is not a regular file (it is {_kind(info.st_mode)})", remedy)
        if expected_bytes is not None and info.st_size != expected_bytes:
            by = f" where {listed_by.name} records {expected_bytes}" if listed_by is not None else ""
            raise DamagedFileError(path, f"it holds {info.st_size} bytes{by} (truncated or replaced)", remedy)
        if max_bytes is not None and info.st_size > max_bytes:
            raise DamagedFileError(path, f"it holds {info.st_size} bytes, more than the {max_bytes} allowed", remedy)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def read_regular(
    path: Path, root: Path, *, max_bytes: int | None = None, expected_bytes: int | None = None, remedy: str = _REMEDY
) -> bytes:
    """The bytes of `path` as `open_regular` opens it (`max_bytes`, `expected_bytes` and `remedy` as there)."""
    with open_regular(path, root, max_bytes=max_bytes, expected_bytes=expected_bytes, remedy=remedy) as handle:
        return handle.read()


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a file"
