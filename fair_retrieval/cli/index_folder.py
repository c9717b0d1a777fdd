"""The index folder that `fair-retrieval index` writes and `fair-retrieval search` reads, published atomically as a
whole: its files, its manifest (written by `index_manifest`, read by `read_manifest`) and its documents.

A folder holds the FaissIndex files (`index.faiss`, `index.json`), `documents.jsonl` (row i = the document, or
chunk, of vector id i) and `manifest.json` (how the vectors were made: model, pooling, max length, long-document
policy, calibration, chunk sizes). A multi-vector folder (`index --multivector`) holds a `MultiVectorIndex`
instead: the window vectors in index.faiss, their table in `windows.json`, document id i = row i; its manifest
records the aggregate under "multivector" (None or absent: one vector per document).

`index` writes everything into a hidden staging folder beside the output first (`staging_folder`); `publish` then
moves the files into the output as one `fair_retrieval.jsonio.Publication` whose record is the FaissIndex's
index.json: the files arrive under temporary names, index.json (written last) commits them with their sizes and
CRC-32s, and they are renamed into place. So an interrupted run (Ctrl-C, a crash, SIGKILL) at any point leaves the
previous index whole or the new one, never a mix, and the next run finishes or removes what it left. `search` reads
index.json first: `read_manifest` and `read_rows` find the manifest and documents.jsonl of the generation it names
(`FaissIndex.load` does the same for index.faiss). A folder without index.json is treated as not built; an
index.json that is damaged, lacks its publication entry or does not list the manifest is refused, naming it, and
the documents are always documents.jsonl of the folder (a manifest cannot point elsewhere).
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from fair_retrieval.embedding.embedder_options import EmbedderOptions
from fair_retrieval.index.multivector import MultiVectorIndex
from fair_retrieval.index.persistence import FOLDER_FILES, INDEX_FILE, META_FILE
from fair_retrieval.inputs import Document
from fair_retrieval.jsonio import (
    IN_USE_FILE,
    READ_ATTEMPTS,
    TEMPORARY_SUFFIX,
    DamagedFileError,
    Publication,
    Snapshot,
    held_folder,
    parse_versioned_json,
    record_generation,
    remove_abandoned,
    require_generation,
    write_json_atomically,
)

if TYPE_CHECKING:
    from fair_retrieval.index import FaissIndex

MANIFEST_FILE = "manifest.json"
LLAMA_STORE_FILE = "default__vector_store.json"
"""The file LlamaIndex's `StorageContext.persist` writes for a folder's vector store (beside docstore.json)."""
DOCUMENTS_FILE = "documents.jsonl"
INDEX_RECORD = META_FILE  # FaissIndex's index.json: the record that commits the whole folder
INDEX_DATA = INDEX_FILE
MANIFEST_FORMAT = "fair-retrieval-index"
MANIFEST_VERSION = 1  # later fields (long_documents, window_overlap, chunking) are optional: old readers skip them
LEGACY_LONG_DOCUMENTS = "truncate"
"""The policy of an index whose manifest names none: it was built before windows existed, so it truncated."""
REBUILD = "Rebuild it: fair-retrieval index --input DOCS --output DIR --overwrite."
_STAGING_PREFIX = ".{name}.partial-"


@contextlib.contextmanager
def staging_folder(output: Path) -> Iterator[Path]:
    """A hidden temporary folder beside `output` to write into; removed on exit, whatever happens.

    The folder is locked while in use (`jsonio.held_folder`), so that a later run can tell the staging folders of
    killed runs (SIGKILL skips the clean-up here) from those of runs still going, and removes the former.
    """
    output.parent.mkdir(parents=True, exist_ok=True)
    prefix = _STAGING_PREFIX.format(name=output.name)
    remove_abandoned(path for path in output.parent.glob(f"{prefix}*") if path.is_dir())
    staging = Path(tempfile.mkdtemp(prefix=prefix, dir=output.parent))
    try:
        with held_folder(staging):
            yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish(staging: Path, output: Path, *, base: tuple[str | None] | None = None) -> None:
    """Publish every file of `staging` (a FaissIndex saved there, documents.jsonl, manifest.json) into `output`,
    atomically as a whole, with the index's index.json as the record (see the module docstring).

    Files of the replaced generation (those its record names) that the new one lacks (index.faiss of an untrained
    index) are removed; other files in `output` are left alone.

    Args:
        staging: the staging folder.
        output: the index folder.
        base: `(generation,)` of `output` when the run started (`jsonio.record_generation` of its index.json, None
            for none): checked once the folder lock is held, so a run that published meanwhile is not replaced
            unseen. None checks nothing.

    Raises:
        FileNotFoundError: if `staging` holds no index.json (save the FaissIndex into it first).
        StoreConflictError: (a ValueError) another run published into `output` since `base`; nothing changed.
    """
    source = staging / INDEX_RECORD
    if not source.is_file():
        raise FileNotFoundError(f"{staging} holds no {INDEX_RECORD}; save the FaissIndex there before publish().")
    staged = Snapshot.read(source)
    names = sorted(
        path.name
        for path in staging.iterdir()
        if path.name not in (INDEX_RECORD, IN_USE_FILE) and not path.name.endswith(TEMPORARY_SUFFIX)
    )
    known = list(FOLDER_FILES)  # every file an index folder may list: what killed runs left of them is removed
    record = output / INDEX_RECORD

    def check() -> None:
        if base is not None:
            require_generation(
                output,
                base[0],
                record_generation(record),
                "index run",
                message=(
                    f"--output {output} was written by another `fair-retrieval index` run after this one started; "
                    "this run wrote nothing. Run the command again (with --overwrite to replace that index)."
                ),
            )

    with Publication(record, [*known, *names], check=check) as publication:
        for name in names:
            publication.add(name, staging / name)
        # the replaced generation's files that this one lacks go with it (`Publication.commit`: only those its
        # record names, so a file of yours is never removed)
        publication.commit(staged.value, entries=staged.files)


def index_manifest(
    index: FaissIndex | MultiVectorIndex,
    options: EmbedderOptions,
    *,
    model: str,
    count: int,
    chunking: dict[str, int] | None,
    engine: str,
) -> dict[str, Any]:
    """The manifest of a folder holding `index`: how its vectors were made, so that queries are embedded alike.

    Args:
        index: the built FaissIndex, or MultiVectorIndex for documents kept as their windows (its dimension, kind,
            metric and parameters are recorded; a multi-vector index also its aggregate, under "multivector").
        options: the embedder's options as resolved for the documents (pooling and max_length None mean the
            model's own, as `search` reads them).
        model: the model reference queries are embedded with (a Hub id, or an absolute folder).
        count: the vectors, = rows of documents.jsonl.
        chunking: the chunk settings (`chunk_tokens`, `chunk_overlap`, `documents`), or None for one vector per
            document.
        engine: "local" or "ray".
    """
    from fair_retrieval.version import __version__

    return {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "model": model,
        "pooling": options.pooling,
        "max_length": options.max_length,
        "long_documents": options.long_documents,
        "window_overlap": options.window_overlap,
        "window_boundaries": options.window_boundaries,
        "window_tokens": options.window_tokens,
        "calibration": options.calibration.to_dict() if options.calibration is not None else None,
        "chunking": chunking,
        "dim": index.dim,
        "count": count,
        "kind": index.kind,
        "metric": index.metric,
        "params": index.params,
        "documents": DOCUMENTS_FILE,
        "multivector": {"aggregate": index.aggregate} if isinstance(index, MultiVectorIndex) else None,
        "engine": engine,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "fair_retrieval_version": __version__,
    }


def write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write `manifest` (from `index_manifest`) as the folder's manifest.json (strict JSON, atomically)."""
    write_json_atomically(folder / MANIFEST_FILE, manifest)


def write_documents(documents: Iterable[Document], path: Path) -> None:
    """Write documents.jsonl: row i is the document stored under vector id i."""
    with path.open("w", encoding="utf-8") as handle:
        for doc in documents:
            row = {"id": doc.id, "text": doc.text, "metadata": doc.metadata}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of an index folder, checked: the one of the generation that index.json names.

    Raises:
        FileNotFoundError: if the folder does not exist.
        ValueError: if the folder has no manifest (not built, or building was interrupted) or it is malformed
            (DamagedFileError when it is truncated or corrupted).
    """
    if not folder.exists():
        raise FileNotFoundError(
            f"Index folder {folder} does not exist; build one with `fair-retrieval index --input DOCS --output DIR`."
        )
    if not folder.is_dir():
        raise ValueError(f"{folder} is a file; pass the folder written by `fair-retrieval index`.")
    path = folder / MANIFEST_FILE
    if not (folder / INDEX_RECORD).exists() and not (folder / INDEX_RECORD).is_symlink():
        if path.exists():
            raise ValueError(f"{folder / INDEX_RECORD} is missing: {folder} is not a complete index. {REBUILD}")
        raise ValueError(_not_an_index(folder))
    with open_published(path) as handle:
        raw = handle.read()
    manifest = parse_versioned_json(
        path, raw, format_name=MANIFEST_FORMAT, max_version=MANIFEST_VERSION, required=("model",), remedy=REBUILD
    )
    if manifest.get("documents", DOCUMENTS_FILE) != DOCUMENTS_FILE:
        raise DamagedFileError(
            path, f"it names the documents {manifest['documents']!r}; an index keeps them in {DOCUMENTS_FILE}", REBUILD
        )
    return manifest


def _not_an_index(folder: Path) -> str:
    """What a folder that holds neither a store (store.json) nor an index (index.json) is, and what to do: the
    file a store folder lost, a LlamaIndex persist folder, or no index at all."""
    from fair_retrieval.stores.store_folder import store_folder_paths

    index_folder, store_file = store_folder_paths(folder)
    build = "`fair-retrieval index --input DOCS --output DIR`"
    llama_files = [name for name in (LLAMA_STORE_FILE, "docstore.json") if (folder / name).exists()]
    if llama_files:
        return (
            f"{folder} is a LlamaIndex persist folder ({', '.join(llama_files)}; no store.json), not a fair-retrieval "
            "store folder. Open it in LlamaIndex with FairFaissVectorStore.from_persist_dir("
            f"{str(folder)!r}), or make a store folder the command line searches with {build}."
        )
    if index_folder.is_dir():
        return (
            f"{store_file} is missing: {folder} holds a store's index/ folder without the store file that names its "
            f"documents, so it cannot be searched. Restore store.json from a backup, or rebuild the store with {build}."
        )
    return f"{folder} is not a fair-retrieval store folder (no store.json) nor an index folder; build one with {build}."


def open_published(path: Path) -> IO[bytes]:
    """Open a file of an index folder as its index.json has it (under its temporary name while a publication is
    being finished, or was killed after its commit; else under `path`), checked against the size and CRC-32 the
    record keeps for it before anything of it is used; the handle is at its start.

    The record is always verified (`jsonio.Snapshot`) and must list the file; the file is opened inside the folder,
    as a regular file of the recorded size.

    Raises:
        FileNotFoundError: if the folder has no index.json, or the file does not exist.
        DamagedFileError: (a ValueError) index.json is damaged or does not list the file, or the file differs from
            what index.json records (a changed byte, swapped rows, an edit by hand, a truncation, a link, a FIFO);
            the message names it and says to rebuild.
        ValueError: saves kept replacing the folder while it was read.
    """
    record_path = path.parent / INDEX_RECORD
    for _ in range(READ_ATTEMPTS):
        record = Snapshot.read(record_path, remedy=REBUILD)
        if not record.lists(path.name):
            raise DamagedFileError(record_path, f"it does not list {path.name}, a file of the index", REBUILD)
        try:
            handle = record.open(path.name)
        except (OSError, ValueError):
            if not record.is_current():
                continue
            raise
        try:
            problem = record.mismatch(path.name, handle)
        except BaseException:
            handle.close()
            raise
        if problem is None:
            return handle
        handle.close()
        if record.is_current():
            raise DamagedFileError(path, f"{problem} (truncated, corrupted or edited since it was indexed)", REBUILD)
    raise ValueError(f"{path.parent} was replaced {READ_ATTEMPTS} times while it was read; search again.")


def query_embedder_options(manifest: dict[str, Any], device: str | None = None) -> EmbedderOptions:
    """The options that rebuild the index's embedder for queries: its pooling, max length and long-document
    policy, uncalibrated (queries are embedded plainly).

    A manifest written before long documents were windowed has no `long_documents` and no `window_overlap`; such an
    index truncated its documents (`LEGACY_LONG_DOCUMENTS`) and had no windows to overlap (0). One written before
    windows could follow the text's boundaries has no `window_boundaries` nor `window_tokens`: its windows were token
    windows of the whole window.

    Raises:
        ValueError: for values in the manifest that `EmbedderOptions` refuses (a damaged manifest).
    """
    return EmbedderOptions(
        calibration=None,
        pooling=manifest.get("pooling"),
        max_length=manifest.get("max_length"),
        device=device,
        long_documents=manifest.get("long_documents", LEGACY_LONG_DOCUMENTS),
        window_overlap=manifest.get("window_overlap", 0),
        window_boundaries=manifest.get("window_boundaries", "tokens"),
        window_tokens=manifest.get("window_tokens"),
    )


def manifest_identity(manifest: dict[str, Any]) -> dict[str, Any]:
    """The identity (`fair_retrieval.embedding.identity`) of the embedder that built the index, as far as the manifest
    records it: model, pooling, max_length, long_documents, window_overlap and calibration (the manifest has no
    LPES factors nor prompts: `index` sets neither). Manifests from before windows read as `query_embedder_options`
    reads them (truncated, no overlap)."""
    return {
        "model": manifest.get("model"),
        "pooling": manifest.get("pooling"),
        "max_length": manifest.get("max_length"),
        "long_documents": manifest.get("long_documents", LEGACY_LONG_DOCUMENTS),
        "window_overlap": manifest.get("window_overlap", 0),
        "window_boundaries": manifest.get("window_boundaries", "tokens"),
        "window_tokens": manifest.get("window_tokens"),
        "calibration": manifest.get("calibration"),
    }


def read_rows(path: Path, wanted: set[int], handle: IO[bytes] | None = None) -> dict[int, dict[str, Any]]:
    """Rows `wanted` (0-based line numbers = vector ids) of documents.jsonl, read in one pass.

    Args:
        path: documents.jsonl of an index folder.
        wanted: the line numbers to read.
        handle: the file as `open_published(path)` gave it, read from its start and left open (a search answering
            several queries opens and checks it once); None opens and checks it here.

    Raises:
        ValueError: if rows are missing (DamagedFileError when a row is not JSON): the folder is inconsistent.
    """
    rows: dict[int, dict[str, Any]] = {}
    if not wanted:
        return rows
    if handle is None:
        with open_published(path) as opened:
            return read_rows(path, wanted, opened)
    handle.seek(0)
    line_number = 0
    text = io.TextIOWrapper(handle, encoding="utf-8")
    try:
        for line_number, line in enumerate(text, start=1):
            if line_number - 1 in wanted:
                rows[line_number - 1] = json.loads(line)
                if len(rows) == len(wanted):
                    break
    except json.JSONDecodeError as error:
        raise DamagedFileError(path, f"line {line_number} is not valid JSON ({error})", REBUILD) from None
    except UnicodeDecodeError:
        raise DamagedFileError(path, f"it is not UTF-8 text after line {line_number}", REBUILD) from None
    finally:
        text.detach()  # the handle stays open for the next query
    missing = wanted - rows.keys()
    if missing:
        raise ValueError(f"{path} has no rows {sorted(missing)[:5]}; the index folder is inconsistent, rebuild it.")
    return rows


def read_texts(path: Path, handle: IO[bytes]) -> dict[int, str]:
    """Every row's text of documents.jsonl by its line number (= vector id), in one pass: what a lexical search
    over the folder reads (`handle` as `open_published(path)` gave it, left open).

    Raises:
        DamagedFileError: a row that is not JSON or has no text.
    """
    handle.seek(0)
    texts: dict[int, str] = {}
    text = io.TextIOWrapper(handle, encoding="utf-8")
    line_number = 0
    try:
        for line_number, line in enumerate(text, start=1):
            row = json.loads(line)
            if not isinstance(row, dict) or not isinstance(row.get("text"), str):
                raise DamagedFileError(path, f"line {line_number} has no text", REBUILD)
            texts[line_number - 1] = row["text"]
    except json.JSONDecodeError as error:
        raise DamagedFileError(path, f"line {line_number} is not valid JSON ({error})", REBUILD) from None
    except UnicodeDecodeError:
        raise DamagedFileError(path, f"it is not UTF-8 text after line {line_number}", REBUILD) from None
    finally:
        text.detach()
    return texts


STORE_FILES = ("store.json", "index")
"""The files of a store folder (`fair_retrieval.stores.store_folder`) that `index --overwrite` may replace."""
REPLACED_FILES = (*STORE_FILES, INDEX_RECORD, *FOLDER_FILES)
"""Every name in --output that `fair-retrieval index` may write, replace or remove, in either output format: a run
refuses an --output holding any of them unless --overwrite (before any work), and then removes only the files a
commit record there names as its own (`recorded_files`)."""


def recorded_files(record: Path) -> list[str]:
    """The files the commit record `record` names as its generation's (relative to its folder; a store's record
    names its store file "../store.json"), where `record` is one a save wrote (verified); none for a missing or
    unreadable record: a folder without one holds nothing this command wrote, so nothing of it is removed."""
    try:
        return list(Snapshot.read(record).files)
    except (OSError, ValueError):
        return []


def remove_index_folder_files(folder: Path) -> None:
    """Remove the index folder in `folder`, where `index --overwrite` has just saved a store folder (which `search`
    reads first; the earlier index is gone, as --overwrite asks): the files its record (index.json) names, the
    manifest first (once it is gone the folder no longer reads as an index), then the record. A file no record
    names is never removed: it is not this command's."""
    record = folder / INDEX_RECORD
    names = [name for name in recorded_files(record) if "/" not in name]  # an index folder's files are its own
    if not names:
        return
    for name in sorted(names, key=lambda name: name != MANIFEST_FILE):
        (folder / name).unlink(missing_ok=True)
    record.unlink(missing_ok=True)


def remove_store_folder_files(folder: Path) -> None:
    """Remove the store folder in `folder`, where `index --overwrite --output-format index` has just published an
    index folder: only where its index folder's record names the store file (a store this command or a store saved),
    the store file first (without it the folder no longer reads as a store), then the files the record names in its
    index folder, then the record; the index folder itself only once empty. A file no record names is never
    removed, so a folder of yours called index/ is left as it is."""
    store_file, index_folder = folder / STORE_FILES[0], folder / STORE_FILES[1]
    if index_folder.is_symlink() or not index_folder.is_dir():
        return
    record = index_folder / INDEX_RECORD
    names = recorded_files(record)
    if f"../{STORE_FILES[0]}" not in names:
        return
    store_file.unlink(missing_ok=True)
    for name in names:
        if "/" not in name:
            (index_folder / name).unlink(missing_ok=True)
    record.unlink(missing_ok=True)
    with contextlib.suppress(OSError):  # files of another program left in it: the folder stays, with them
        index_folder.rmdir()
