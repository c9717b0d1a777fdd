"""An index folder on disk: `index.faiss` and `index.json`, written atomically, read back checked, old formats
migrated.

A folder holds `index.faiss` (faiss' own binary format, which also records dim, metric, structure and search
parameters) and `index.json` (format name and version, the faiss version, factory string, id policy, search values
and count): nothing is pickled, so loading cannot execute code. Files on disk are always CPU indices, so a folder
saved on a GPU machine loads on a CPU one and the other way round.

Saving is atomic as a whole (`fair_retrieval.jsonio.Publication`): index.faiss is written under a temporary name,
then index.json, written last and read first, commits it with its size and CRC-32, and the file is renamed into
place. A save killed at any point (even by SIGKILL) leaves the previous index or the new one, a load running
meanwhile returns one of them, and a truncated or corrupted file is refused by a `DamagedFileError` (a ValueError)
that names it. Stores that embed an index folder publish their own files in the same commit (`companions`).

Every index.json is verified (`jsonio.Snapshot`): one without its publication entry (the sizes and CRC-32s of the
files, and of itself) is refused, as is one listing a file that an index folder does not have (`FOLDER_FILES`, or
the one store file saved beside the folder, `../<name>`). Files are opened inside the folder only, as regular files
of the recorded size.

Format versions: 2 records the factory string and the search values; a record of version 1 (kind parameters only,
no factory) has its structure described from the faiss file and its search values taken from the kind parameters
(`migrated_search`), once it is verified like any other.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from fair_retrieval.index.gpu import import_faiss
from fair_retrieval.index.index_plan import IndexPlan, parse_search
from fair_retrieval.index.inspection import Metric, describe_structure, kind_of, metric_name, native_ivf, stored_ids
from fair_retrieval.jsonio import (
    ChangedWhileReadingError,
    DamagedFileError,
    Publication,
    Snapshot,
    record_generation,
    require_generation,
    retry_while_changing,
)
from fair_retrieval.jsonio.generation import refuse_replacing

INDEX_FILE = "index.faiss"
META_FILE = "index.json"
WINDOWS_FILE = "windows.json"  # the window table of a MultiVectorIndex folder (its header), published with its index
WINDOW_ROWS_FILE = "windows.npy"  # the window table's per-window array (`fair_retrieval.index.window_table`)
DOCUMENT_WINDOWS_FILE = "document_windows.npy"  # the window table's per-document array
FLOAT_FILE = "vectors.f32"  # an earlier RerankedIndex's exact vectors: raw float32 rows, one per id in id order
SEGMENT_NAME = re.compile(r"rows-[0-9a-f]{32}\.seg")
"""A RerankedIndex's segment of exact vectors (`fair_retrieval.index.float_rows`), named by its content's digest."""
RERANK_FILE = "reranked.json"  # a RerankedIndex's settings (codes, candidate factor, training state)
FOLDER_FILES = (
    INDEX_FILE,
    WINDOWS_FILE,
    WINDOW_ROWS_FILE,
    DOCUMENT_WINDOWS_FILE,
    FLOAT_FILE,
    RERANK_FILE,
    "manifest.json",
    "documents.jsonl",
)
"""The files an index.json may list in its own folder: the index, a multi-vector index's window table, a reranked
index's float file and settings (`fair_retrieval.index.exact_rerank`), and the manifest and documents of the command
line's index folder (`fair_retrieval.cli.index_folder`)."""


@dataclass(frozen=True)
class KeptFile:
    """A file of the folder's current generation that a save lists again, unchanged (an immutable segment): not
    written, not removed, committed with the size and CRC-32 the current record gives it."""


KEPT = KeptFile()
Companion = str | os.PathLike[str] | bytes | Callable[[Path], None] | KeptFile
"""A file published with an index (`write_folder`'s companions): a finished file to move in, its bytes, a
function that writes it to the path it is given (staged under the folder's lock, for files too large to hold
in memory), or `KEPT`: the file the folder's current generation holds under that name."""
FORMAT_NAME = "fair-retrieval-faiss-index"
FORMAT_VERSION = 2
_REMEDY = "Rebuild the index and save it again (or restore the folder from a backup)."

T = TypeVar("T")


@dataclass(frozen=True)
class StoredIndex:
    """A trained or flat index read from a folder and checked against its index.json.

    Attributes:
        index: the CPU faiss index (IVF lists with a hash-table direct map, for lookups by id).
        dim: vector size.
        metric: "ip" or "l2".
        plan: its kind, factory string (described from the structure for format version 1) and search values.
        ids: the stored ids, int64, unique, ascending.
        uses_id_map: whether faiss' IDMap2 keeps the ids (False: the IVF lists do).
    """

    index: Any
    dim: int
    metric: Metric
    plan: IndexPlan
    ids: np.ndarray
    uses_id_map: bool
    generation: str | None = None


@dataclass(frozen=True)
class UntrainedIvfpq:
    """A sized ivfpq index saved before it trained: no faiss file, only what its constructor was given."""

    dim: int
    metric: Metric
    search: str | None
    params: dict[str, Any]
    generation: str | None = None


def write_folder(
    folder: str | os.PathLike[str],
    record: Mapping[str, Any],
    index: Any | None,
    companions: Mapping[str, Companion] | None = None,
    *,
    base: tuple[str | None] | None = None,
    overwrite: bool = False,
) -> str:
    """Publish `index` (a CPU faiss index, or None for an untrained sized ivfpq) and index.json in one commit.

    Args:
        folder: the index folder (created if needed).
        record: what index.json records about this index (factory, ids, search, count, …), after the format
            name, version and faiss version.
        index: the CPU faiss index to write; None removes index.faiss.
        companions: files of an enclosing format to publish in the same commit: name relative to `folder` →
            a finished file on the same file system, which is moved (see `FaissIndex.save`), or its bytes, or a
            function that writes it to the path it is given; bytes and functions are staged here under the
            folder's lock (so no other writer's clean-up can remove them).
        base: `(generation,)` of the folder as the writer read it (`FaissIndex.load`, or its last save there):
            the save is refused when another writer published a newer one meanwhile. None (an index built in
            memory): the save is refused when the folder already holds an index, unless `overwrite`.
        overwrite: replace an index the folder holds that this one was neither loaded from nor saved as (the
            caller's documented `overwrite=True`).

    Returns:
        The generation this save published (`jsonio.record_generation` of the folder).

    Raises:
        StoreConflictError: (a ValueError) `base` is not the folder's generation any more, or an index built in
            memory would replace one that is there; nothing was written.
    """
    faiss = import_faiss()
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    meta = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "faiss_version": getattr(faiss, "__version__", None),
        **record,
    }
    given = dict(companions or {})
    extra = {name: Path(source) for name, source in given.items() if isinstance(source, (str, os.PathLike))}
    contents = {name: source for name, source in given.items() if isinstance(source, bytes)}
    writers = {name: source for name, source in given.items() if callable(source)}
    kept = [name for name, source in given.items() if isinstance(source, KeptFile)]
    record_path = path / META_FILE

    def check() -> None:
        if base is not None:
            require_generation(path, base[0], record_generation(record_path), "FaissIndex")
        elif not overwrite and record_generation(record_path) is not None:
            raise refuse_replacing(path, "FaissIndex", "overwrite=True")

    with Publication(
        record_path, [INDEX_FILE, *given], keep=extra.values(), check=check, patterns=[SEGMENT_NAME]
    ) as publication:
        publication.keep_published(kept)
        for name, source in extra.items():
            publication.add(name, source)
        for name, data in contents.items():  # staged here, under the folder's lock
            publication.stage(name).write_bytes(data)
        for name, write in writers.items():
            write(publication.stage(name))
        if index is None:  # nothing for faiss to write yet
            publication.commit(meta, remove=[INDEX_FILE])
        else:
            faiss.write_index(index, str(publication.stage(INDEX_FILE)))
            publication.commit(meta)
    return publication.token


def read_folder(
    folder: str | os.PathLike[str], restore: Callable[[StoredIndex | UntrainedIvfpq], T], *, multivector: bool = False
) -> T:
    """Read an index folder (either format version) and hand what it holds to `restore`, e.g. FaissIndex's
    constructor.

    index.json is read first and index.faiss checked against the size and CRC-32 it records (folders of earlier
    releases record none); a save that replaces the folder meanwhile, `restore` included, makes the read start
    again, so the result is the index before or after that save.

    Raises:
        FileNotFoundError: if the folder lacks index.faiss or index.json.
        DamagedFileError: (a ValueError) if index.json or index.faiss is truncated, corrupted or unreadable by
            this faiss; the message names the file.
        ValueError: if index.json is malformed or disagrees with index.faiss, or the folder holds a multi-vector
            index (window vectors, `windows.json`) or a reranked index (`vectors.f32`) and `multivector` is False
            (the caller then does not read those companions).
    """
    path = Path(folder)
    return retry_while_changing(path / META_FILE, lambda: _read_snapshot(path, restore, multivector))


def migrated_search(meta: Mapping[str, Any]) -> dict[str, float]:
    """The search values an index.json records: its "search" string, or for format version 1, which kept them as
    kind parameters only, nprobe or efSearch from its "params"."""
    if meta.get("version", 1) >= 2:
        return parse_search(meta.get("search") or None)
    kind_params = meta.get("params") or {}
    search: dict[str, float] = {"nprobe": kind_params["nprobe"]} if "nprobe" in kind_params else {}
    if "ef_search" in kind_params:
        search = {"efSearch": kind_params["ef_search"]}
    return search


def _read_snapshot(path: Path, restore: Callable[[StoredIndex | UntrainedIvfpq], T], multivector: bool) -> T:
    """One consistent read of the folder; ChangedWhileReadingError when a save replaced index.json meanwhile."""
    snapshot = Snapshot.read(
        path / META_FILE,
        format_name=FORMAT_NAME,
        max_version=FORMAT_VERSION,
        writer="FaissIndex.save()",
        remedy=_REMEDY,
    )
    check_folder_files(snapshot)
    if snapshot.lists(WINDOWS_FILE) and not multivector:
        raise ValueError(
            f"{path} holds a multi-vector index (the windows of each document, {WINDOWS_FILE}); load it with "
            "fair_retrieval.MultiVectorIndex.load, not FaissIndex.load."
        )
    if snapshot.lists(RERANK_FILE) and not multivector:
        raise ValueError(
            f"{path} holds a reranked index (compact codes and exact vectors on disk, {RERANK_FILE}); load it with "
            "fair_retrieval.index.exact_rerank.RerankedIndex.load, not FaissIndex.load."
        )
    try:
        result = restore(_from_snapshot(snapshot, path))
    except (OSError, ValueError, RuntimeError) as error:
        if not snapshot.is_current():
            raise ChangedWhileReadingError from error
        raise
    return result


def check_folder_files(snapshot: Snapshot) -> None:
    """Refuse an index.json that lists a file an index folder does not have (`FOLDER_FILES`, or one store file
    beside the folder, `../<name>.json`): a crafted record cannot name other files.

    Raises:
        DamagedFileError: (a ValueError) naming index.json and the file.
    """
    companions = 0
    for name in snapshot.files:
        companion = name.startswith("../") and name.endswith(".json")
        companions += companion
        if not (name in FOLDER_FILES or companion or SEGMENT_NAME.fullmatch(name)) or companions > 1:
            raise DamagedFileError(
                snapshot.path,
                f"it lists {name!r}, which is not a file of an index folder (edited or crafted by hand)",
                _REMEDY,
            )


def _from_snapshot(snapshot: Snapshot, path: Path) -> StoredIndex | UntrainedIvfpq:
    meta, index_path = snapshot.value, path / INDEX_FILE
    if not snapshot.lists(INDEX_FILE):
        if meta.get("version") == FORMAT_VERSION and meta.get("factory") is None and meta.get("kind") == "ivfpq":
            return _untrained(snapshot)
        raise FileNotFoundError(
            f"{index_path} is not part of the folder: {META_FILE} commits no {INDEX_FILE} (a store saved without "
            "vectors, or a record not written by FaissIndex.save()). Load the store it belongs to, or save the "
            "index again."
        )
    faiss = import_faiss()
    index = _read_faiss(faiss, snapshot, index_path)
    metric = metric_name(faiss, index, index_path)
    for key, value in (("dim", int(index.d)), ("metric", metric)):
        if key in meta and meta[key] != value:
            raise ValueError(f"{index_path} holds {key}={value!r} but {META_FILE} says {meta[key]!r}.")
    kind = kind_of(faiss, index)
    if "kind" in meta and meta["kind"] != kind:
        raise ValueError(f"{index_path} does not hold a {meta['kind']!r} index as {META_FILE} says.")
    plan = IndexPlan(kind, meta.get("factory") or describe_structure(faiss, index), search=migrated_search(meta))
    ids = stored_ids(faiss, index)
    if ids is None:
        raise ValueError(
            f"{index_path} stores no ids (neither IVF lists nor an IDMap2); it was not written by FaissIndex."
        )
    ids = np.sort(ids)
    if ids.size > 1 and (ids[1:] == ids[:-1]).any():
        raise ValueError(f"{index_path} holds duplicate ids; it was not written by FaissIndex.")
    count = meta.get("count")
    if count is not None and int(count) != int(index.ntotal):
        raise ValueError(f"{index_path} holds {index.ntotal} vectors but {META_FILE} says {count}.")
    return StoredIndex(
        index,
        int(index.d),
        metric,
        plan,
        ids,
        uses_id_map=not native_ivf(faiss, index),
        generation=_generation(snapshot),
    )


MAX_UNTRAINED_VALUE = 1 << 16
"""The largest dimension or kind parameter an untrained ivfpq record may give (nothing is built from more)."""


def _untrained(snapshot: Snapshot) -> UntrainedIvfpq:
    """The sized ivfpq index an index.json without index.faiss describes, its values bounded before anything is
    built from them (a crafted record cannot make the constructor allocate without limit).

    Raises:
        DamagedFileError: (a ValueError) a dimension or parameter that is not an int in 1..`MAX_UNTRAINED_VALUE`.
    """
    meta = snapshot.value
    params = meta.get("params") or {}
    values = [meta.get("dim"), *(params.values() if isinstance(params, dict) else [None])]
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_UNTRAINED_VALUE for v in values):
        raise DamagedFileError(
            snapshot.path, f"its dim and params are not ints from 1 to {MAX_UNTRAINED_VALUE} ({values!r})", _REMEDY
        )
    search = meta.get("search")
    if not (search is None or isinstance(search, str)) or meta.get("metric") not in ("ip", "l2"):
        raise DamagedFileError(snapshot.path, "its metric or search values are malformed", _REMEDY)
    return UntrainedIvfpq(int(meta["dim"]), meta["metric"], search or None, dict(params), _generation(snapshot))


def _generation(snapshot: Snapshot) -> str:
    """The generation of the folder `snapshot` read (`jsonio.record_generation`): its publication token."""
    return snapshot.token


def _read_faiss(faiss: Any, snapshot: Snapshot, index_path: Path) -> Any:
    """The faiss index of index.faiss as `snapshot` lists it: checked against the recorded size and CRC-32 first,
    then parsed from the same open file (so a concurrent rename cannot slip another file in between)."""
    with snapshot.open(INDEX_FILE) as handle:
        problem = snapshot.mismatch(INDEX_FILE, handle)
        if problem is not None:
            if not snapshot.is_current():
                raise ChangedWhileReadingError
            raise DamagedFileError(index_path, f"{problem} (truncated, corrupted or replaced)", _REMEDY)
        try:
            return faiss.read_index(faiss.PyCallbackIOReader(handle.read))
        except RuntimeError as error:
            written = snapshot.value.get("faiss_version")
            by = f" (written by faiss {written})" if written else ""
            raise DamagedFileError(
                index_path,
                f"faiss {getattr(faiss, '__version__', '')} cannot read it{by}: {_faiss_reason(error)}",
                f"{_REMEDY} If it was written by a newer faiss, upgrade faiss.",
            ) from None


def _faiss_reason(error: RuntimeError) -> str:
    """The useful end of a faiss error ("Index type … not recognized", "read error …"), without its C++ location."""
    text = " ".join(str(error).split())
    found = re.search(r"\bat \S+:\d+: (.*)$", text)
    reason = found.group(1) if found else text
    return reason.removeprefix("Error: ")[:200]
