"""The index folder that `index` writes and `search` reads, written so that it is complete or absent.

A folder holds the FaissIndex files, `documents.jsonl` (row i = the document, or chunk, of vector id i) and
`manifest.json` (how the vectors were made: model, pooling, max length, long-document policy, calibration, chunk
sizes). Everything is first written to a hidden
staging folder beside the output and moved in at the end, the manifest last, so an interrupted run (Ctrl-C, a crash)
never leaves a folder that looks complete; `search` treats a folder without a manifest as not built.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from fair_retrieval.embedder_options import EmbedderOptions
from fair_retrieval.inputs import Document
from fair_retrieval.jsonio import read_versioned_json

MANIFEST_FILE = "manifest.json"
DOCUMENTS_FILE = "documents.jsonl"
MANIFEST_FORMAT = "fair-retrieval-index"
MANIFEST_VERSION = 1  # later fields (long_documents, window_overlap, chunking) are optional: old readers skip them
LEGACY_LONG_DOCUMENTS = "truncate"
"""The policy of an index whose manifest names none: it was built before windows existed, so it truncated."""


@contextlib.contextmanager
def staging_folder(output: Path) -> Iterator[Path]:
    """A hidden temporary folder beside `output` to write into; removed on exit, whatever happens."""
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}.partial-", dir=output.parent))
    try:
        yield staging
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def publish(staging: Path, output: Path) -> None:
    """Move every file of `staging` into `output`, the manifest last (each move is an atomic rename).

    An existing manifest in `output` is removed first, so until the new one lands the folder reads as incomplete.
    """
    output.mkdir(parents=True, exist_ok=True)
    (output / MANIFEST_FILE).unlink(missing_ok=True)
    names = sorted(p.name for p in staging.iterdir() if p.name != MANIFEST_FILE)
    for name in [*names, MANIFEST_FILE]:
        source = staging / name
        if source.is_dir():
            target = output / name
            if target.exists():
                shutil.rmtree(target)
            os.replace(source, target)
        elif source.exists():
            os.replace(source, output / name)


def write_documents(documents: Iterable[Document], path: Path) -> None:
    """Write documents.jsonl: row i is the document stored under vector id i."""
    with path.open("w", encoding="utf-8") as handle:
        for doc in documents:
            row = {"id": doc.id, "text": doc.text, "metadata": doc.metadata}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def read_manifest(folder: Path) -> dict[str, Any]:
    """The manifest of an index folder, checked.

    Raises:
        FileNotFoundError: if the folder does not exist.
        ValueError: if the folder has no manifest (not built, or building was interrupted) or it is malformed.
    """
    if not folder.exists():
        raise FileNotFoundError(
            f"Index folder {folder} does not exist; build one with `fair-retrieval index --input DOCS --output DIR`."
        )
    if not folder.is_dir():
        raise ValueError(f"{folder} is a file; pass the folder written by `fair-retrieval index`.")
    if not (folder / MANIFEST_FILE).is_file():
        raise ValueError(
            f"{folder} is not a complete fair-retrieval index (no {MANIFEST_FILE}); build it with "
            "`fair-retrieval index --input DOCS --output DIR`."
        )
    return read_versioned_json(
        folder / MANIFEST_FILE, format_name=MANIFEST_FORMAT, max_version=MANIFEST_VERSION, required=("model",)
    )


def query_embedder_options(manifest: dict[str, Any], device: str | None = None) -> EmbedderOptions:
    """The options that rebuild the index's embedder for queries: its pooling, max length and long-document
    policy, uncalibrated (queries are embedded plainly).

    A manifest written before long documents were windowed has no `long_documents` and no `window_overlap`; such an
    index truncated its documents (`LEGACY_LONG_DOCUMENTS`) and had no windows to overlap (0).

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
    )


def read_rows(path: Path, wanted: set[int]) -> dict[int, dict[str, Any]]:
    """Rows `wanted` (0-based line numbers = vector ids) of documents.jsonl, read in one pass."""
    rows: dict[int, dict[str, Any]] = {}
    if not wanted:
        return rows
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle):
            if number in wanted:
                rows[number] = json.loads(line)
                if len(rows) == len(wanted):
                    break
    missing = wanted - rows.keys()
    if missing:
        raise ValueError(f"{path} has no rows {sorted(missing)[:5]}; the index folder is inconsistent, rebuild it.")
    return rows
