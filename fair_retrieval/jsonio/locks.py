"""Folder locks (`flock`): saves into one folder run one after the other (`lock_folder`), and a staging folder in use
is told from one that a killed run abandoned (`held_folder`, `remove_abandoned`).

Every lock dies with the process that holds it, so a killed writer never leaves a folder locked. Where the OS or the
file system has no `flock` (Windows), nothing is locked.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: saves into one folder are not serialised
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

IN_USE_FILE = ".in-use.lock"
"""The file a staging folder's holder keeps locked (`held_folder`); it is not part of what is published."""


def lock_folder(folder: Path, *, wait: bool = True) -> int | None:
    """Take the exclusive `flock` of `folder` (released when the returned descriptor is closed, or the process dies).

    Returns:
        The open descriptor; None where the OS or file system has no flock (nothing is locked then), and, with
        `wait=False`, when another process holds the lock.
    """
    return _flock(folder, os.O_RDONLY, wait)


def remove_abandoned(folders: Iterable[Path], min_age_s: float = 60.0) -> None:
    """Delete the staging folders in `folders` that no running process holds (`held_folder`) and that are older
    than `min_age_s` (a folder just created may not be held yet).

    A holder keeps its staging folder's `IN_USE_FILE` locked for as long as it uses it; the lock dies with its
    process, so the folder of a killed run is free.
    """
    if fcntl is None:  # pragma: no cover - Windows: no way to tell an abandoned folder from one in use
        return
    for folder in folders:
        try:
            if time.time() - folder.stat().st_mtime < min_age_s:
                continue
            descriptor = _flock(folder / IN_USE_FILE, os.O_RDWR | os.O_CREAT, wait=False)
        except OSError:
            continue
        if descriptor is None:
            continue
        try:
            logger.info("Removing %s, left by an interrupted run.", folder)
            shutil.rmtree(folder, ignore_errors=True)
        finally:
            os.close(descriptor)


@contextlib.contextmanager
def held_folder(folder: Path) -> Iterator[None]:
    """Hold `folder` (a staging folder) for the block, so that `remove_abandoned` leaves it alone.

    The lock is on the file `IN_USE_FILE` inside it, not on the folder, so a `Publication` into the folder does not
    wait for it.
    """
    descriptor = _flock(folder / IN_USE_FILE, os.O_RDWR | os.O_CREAT, wait=False)
    try:
        yield
    finally:
        if descriptor is not None:
            os.close(descriptor)


def _flock(path: Path, flags: int, wait: bool) -> int | None:
    """Open `path` with `flags` and lock it exclusively: the descriptor, or None where it is not locked."""
    if fcntl is None:  # pragma: no cover - Windows
        return None
    descriptor = os.open(path, flags)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:  # BlockingIOError when held; other errors: a file system without flock
        os.close(descriptor)
        return None
    return descriptor
