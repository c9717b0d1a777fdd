"""Publishing several files that must change together atomically as a whole (a FaissIndex's index.faiss +
index.json; a LangChain store's index/ + store.json; the CLI's index folder).

The protocol of `Publication` keeps every file under its usual name (so folders look as they always did) and makes
one small JSON file, the *record* (index.json for the formats above), the commit point: written last, read first.

1. A writer locks the record's folder (`flock` on the folder itself, where the OS has it), so saves into one folder
   run one after the other. It finishes the publication of a writer that was killed after its commit (step 4), then
   deletes the temporary files that killed writers left.
2. It writes every new file under a temporary name next to its final one, `<name>.<token>.tmp` (the token: 32 hex
   digits, new for each save), and fsyncs it. Nothing published has changed yet: readers, and a kill, see the
   previous generation.
3. It commits by replacing the record atomically. The record carries, under the key "publication", the token, the
   size and CRC-32 of every file of the new generation, the files of the generation it replaces that it drops
   ("dropped"), and the CRC-32 of the record's own other content ("record_crc32"), so an edited or corrupted record
   is refused too.
4. It renames every temporary file to its final name, deletes the dropped files, and fsyncs the folders. A writer
   killed during this step leaves the rest to the next, which reads what to finish from the record: a file no
   record named is never removed.

Readers use `fair_retrieval.jsonio.snapshot.Snapshot`, which says how the files of a generation are found and
checked.

Renaming over a file that a reader has open is POSIX behaviour (the reader keeps the old content); on Windows a
save fails while a load holds the file.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from fair_retrieval.jsonio.atomic import (
    TEMPORARY_SUFFIX,
    file_entry,
    sync_folder,
    temporary_path,
    write_json_atomically,
)
from fair_retrieval.jsonio.locks import lock_folder
from fair_retrieval.jsonio.paths import check_listed_name, contained, is_inside
from fair_retrieval.jsonio.snapshot import PUBLICATION_KEY, RECORD_CRC_KEY, Snapshot, record_crc32
from fair_retrieval.jsonio.versioned import DamagedFileError

logger = logging.getLogger(__name__)

DROPPED_KEY = "dropped"
"""The key, in a record's publication entry, of the files of the replaced generation that this one removes."""


class Publication:
    """Publish files that belong together atomically as a whole, committed by one record file (module docstring).

    Usage::

        with Publication(folder / "index.json", ["index.faiss"]) as publication:
            write_the_index(publication.stage("index.faiss"))  # the temporary file to write
            publication.add("../store.json", finished_file)  # a finished file, moved in
            publication.commit({"format": ..., "version": ...})  # the record; then the files move into place

    Leaving the block without `commit` (an exception) deletes the temporary files and changes nothing. The lock is
    not reentrant: do not open a second Publication on the same folder inside the first.

    Args:
        record: the record file (written last, read first); its folder is created.
        names: every file (relative to the record's folder) the format may write, so that the temporary files of
            killed writers are found and removed.
        keep: files the caller will `add` that look like such leftovers (its own temporary files): not removed.
        check: called once the lock is held, before anything is staged or removed, e.g. to refuse a save over a
            generation newer than the one the writer read (`jsonio.generation`); what it raises leaves the
            folder unchanged.
        patterns: names of files the format writes besides `names` (immutable segments named by their content):
            their temporary files are removed as leftovers, and a record's dropped ones (below) are format files.
    """

    def __init__(
        self,
        record: Path,
        names: Iterable[str] = (),
        keep: Iterable[Path] = (),
        check: Callable[[], None] | None = None,
        patterns: Iterable[re.Pattern[str]] = (),
    ) -> None:
        self.record = Path(record)
        self.folder = self.record.parent
        self.token = uuid.uuid4().hex
        self._names = list(dict.fromkeys([*names, self.record.name]))
        self._keep = {os.path.abspath(path) for path in keep}
        self._staged: dict[str, Path] = {}
        self._lock: int | None = None
        self._committed = False
        self._check = check
        self._previous: dict[str, dict[str, Any]] = {}  # the replaced generation's own files (read once locked)
        self._patterns = list(patterns)
        self._kept: dict[str, dict[str, Any]] = {}  # files of the replaced generation listed again, unchanged

    def __enter__(self) -> Publication:
        self.folder.mkdir(parents=True, exist_ok=True)
        self._lock = lock_folder(self.folder)
        try:
            for name in self._names:
                check_listed_name(self.record, name)
                if name.startswith("../"):  # a file of the enclosing folder: this folder must not lead out of it
                    contained(self.folder.parent, self.folder)
            if self._check is not None:
                self._check()
            self._finish_interrupted()
            self._remove_leftovers()
        except BaseException:
            self._unlock()
            raise
        return self

    def __exit__(self, *exc_info: object) -> None:
        try:
            if not self._committed:
                for staged in self._staged.values():
                    _remove(staged)
        finally:
            self._unlock()

    def stage(self, name: str) -> Path:
        """The temporary file to write the new `name` to (relative to the record's folder)."""
        staged = temporary_path(self.folder / name, self.token)
        self._staged[name] = staged
        return staged

    def keep_published(self, names: Iterable[str]) -> None:
        """List `names`, files of the generation this one replaces, in the new record as they are (not written, not
        removed), with the sizes and CRC-32s the current record gives them.

        Raises:
            DamagedFileError: (a ValueError) the current record does not list one of them, or it is not in the
                folder: the folder changed behind the writer's back.
        """
        for name in names:
            check_listed_name(self.record, name)
            entry = self._previous.get(name)
            if entry is None or not (self.folder / name).is_file() or (self.folder / name).is_symlink():
                raise DamagedFileError(
                    self.record,
                    f"the save keeps {name}, which the folder's current generation does not hold",
                    "Load the folder again and save again; edit a folder only through its API.",
                )
            self._kept[name] = dict(entry)

    def add(self, name: str, source: Path) -> None:
        """Move the finished file (or folder) `source`, on the same file system, to the temporary name of `name`."""
        os.replace(source, self.stage(name))

    def commit(
        self,
        value: Mapping[str, Any],
        *,
        entries: Mapping[str, Mapping[str, Any]] | None = None,
        remove: Iterable[str] = (),
    ) -> None:
        """Write the record (`value` plus the publication entry): the new generation replaces the old one here. Then
        rename the temporary files into place and delete the `remove` files, which the new generation lacks.

        Files the previous generation's record named (in the record's folder) that this one does not stage are
        removed too: they belonged to the generation this one replaces (a multi-vector index's windows files when a
        pooled one replaces it). A file no record named is never removed.

        Args:
            value: the record's JSON content (its own format, version, …).
            entries: sizes and CRC-32s already known (by name), so large files are not read again.
            remove: files of the previous generation that this one does not have, also where its record is gone.
        """
        given = entries or {}
        files = {name: dict(given.get(name) or file_entry(staged)) for name, staged in self._staged.items()}
        files.update({name: entry for name, entry in self._kept.items() if name not in files})
        dropped = [name for name in dict.fromkeys([*remove, *self._previous]) if name not in files and "/" not in name]
        record: dict[str, Any] = {key: item for key, item in value.items() if key != PUBLICATION_KEY}
        record[PUBLICATION_KEY] = {"token": self.token, "files": files, **({DROPPED_KEY: dropped} if dropped else {})}
        record[PUBLICATION_KEY][RECORD_CRC_KEY] = record_crc32(record)
        write_json_atomically(self.record, record)
        self._committed = True
        for name, staged in self._staged.items():
            _move_into_place(staged, self.folder / name)
        for name in dropped:  # the record names them: a save killed here has the next one remove them
            _remove(self.folder / name)
        for folder in {(self.folder / name).parent for name in self._names}:
            sync_folder(folder)

    def _finish_interrupted(self) -> None:
        """Rename into place the files of a committed publication whose writer was killed before it did.

        Only the files of the format (`names`) are renamed, whatever else a (crafted) record lists, and only inside
        the folder: a record cannot make a save write anywhere else.
        """
        try:
            snapshot = Snapshot.read(self.record)
        except (OSError, ValueError):
            return  # no record yet, or one that this save replaces anyway
        # the previous generation's own files, in this folder: those the new one lacks are removed on commit
        self._previous = {
            name: entry for name, entry in snapshot.files.items() if "/" not in name and name != self.record.name
        }
        for name in snapshot.value[PUBLICATION_KEY].get(DROPPED_KEY) or []:  # what a killed commit left to remove
            if isinstance(name, str) and "/" not in name and name not in snapshot.files and self._is_format_file(name):
                check_listed_name(self.record, name)
                _remove(self.folder / name)
        for name in snapshot.files:
            if not self._is_format_file(name) or name == self.record.name:
                continue
            staged = temporary_path(self.folder / name, snapshot.token)
            if not is_inside(snapshot.root(name), staged) or not is_inside(snapshot.root(name), self.folder / name):
                continue
            if staged.is_file() and not staged.is_symlink():
                logger.info("Finishing the interrupted save of %s: moving %s into place.", self.record, staged)
                _move_into_place(staged, self.folder / name)

    def _is_format_file(self, name: str) -> bool:
        return name in self._names or any(pattern.fullmatch(name) for pattern in self._patterns)

    def _remove_leftovers(self) -> None:
        """Delete the temporary files of saves that were killed before their commit (and of earlier releases)."""
        if self._patterns and self.folder.is_dir():
            temporary = re.compile(r"(.+?)\.(?:[0-9a-f]{32}\.)?" + re.escape(TEMPORARY_SUFFIX[1:]))
            for entry in self.folder.iterdir():
                staged = temporary.fullmatch(entry.name)
                if staged is None or not any(pattern.fullmatch(staged.group(1)) for pattern in self._patterns):
                    continue
                if os.path.abspath(entry) not in self._keep:
                    logger.info("Removing %s, left by an interrupted save.", entry)
                    _remove(entry)
        for name in self._names:
            final = self.folder / name
            if not final.parent.is_dir():
                continue
            pattern = re.compile(re.escape(final.name) + r"\.(?:[0-9a-f]{32}\.)?" + re.escape(TEMPORARY_SUFFIX[1:]))
            for entry in final.parent.iterdir():
                if pattern.fullmatch(entry.name) and os.path.abspath(entry) not in self._keep:
                    logger.info("Removing %s, left by an interrupted save.", entry)
                    _remove(entry)

    def _unlock(self) -> None:
        if self._lock is not None:
            os.close(self._lock)
            self._lock = None


def _move_into_place(staged: Path, final: Path) -> None:
    """Rename `staged` to `final`, replacing a folder there (folders cannot be renamed over non-empty ones)."""
    if staged.is_dir() and final.is_dir():
        shutil.rmtree(final)
    os.replace(staged, final)


def _remove(path: Path) -> None:
    """Delete the file or folder `path`, if it exists (a symlink is unlinked, never followed)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
