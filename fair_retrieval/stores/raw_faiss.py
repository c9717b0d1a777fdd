"""Bare faiss files, the format of folders written by earlier stores, read once for their conversion.

`FaissIndex` loads only its own folders (faiss' binary plus a JSON record); llama-index's FaissVectorStore, and the
first FairFaissVectorStore built on it, wrote a bare faiss index where a store file now stands. These functions
recognise such a file and read its vectors back, so that an adapter can rebuild a store from them.
`read_legacy_folder` reads a whole folder persisted that way by LlamaIndex (`StorageContext.persist`): the faiss
file, the nodes' JSON in docstore.json and the positions in index_store.json that tie them together, as plain JSON
(the adapter turns each entry back into a node).
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.index.gpu import import_faiss
from fair_retrieval.index.inspection import Metric

logger = logging.getLogger(__name__)

__all__ = ["is_raw_faiss", "looks_like_raw_faiss", "read_legacy_folder", "read_raw_faiss"]

LEGACY_DOCSTORE = "docstore.json"  # what StorageContext.persist writes next to the vector store
LEGACY_INDEX_STORE = "index_store.json"
LEGACY_ID_MAP = "id_map.json"  # written by llama-index's FaissMapVectorStore
VECTOR_INDEX_TYPE = "vector_store"  # the index_store type of a vector index (its positions → node ids)


def looks_like_raw_faiss(head: bytes) -> bool:
    """Whether the first bytes of a file are a faiss index type code ('IxFI', 'IxF2', 'IHNf', …), not JSON."""
    return len(head) >= 4 and head[:1] == b"I" and head[:4].isalnum()


def is_raw_faiss(path: Path) -> bool:
    """Whether the file `path` is a bare faiss index (see `looks_like_raw_faiss`)."""
    with path.open("rb") as handle:
        return looks_like_raw_faiss(handle.read(4))


def read_raw_faiss(path: Path) -> tuple[np.ndarray, Metric]:
    """The vectors (row i: the vector at faiss position i) and the metric of a bare faiss index file.

    Raises:
        ValueError: a metric other than inner product and L2, or an index that cannot give its vectors back.
    """
    faiss = import_faiss()
    raw = faiss.read_index(str(path))
    if int(raw.metric_type) not in (int(faiss.METRIC_INNER_PRODUCT), int(faiss.METRIC_L2)):
        raise ValueError(f"{path} uses faiss metric {raw.metric_type}; only inner product and L2 are converted.")
    metric: Metric = "ip" if int(raw.metric_type) == int(faiss.METRIC_INNER_PRODUCT) else "l2"
    try:
        vectors = raw.reconstruct_n(0, int(raw.ntotal)) if raw.ntotal else np.zeros((0, int(raw.d)), np.float32)
    except RuntimeError as error:
        raise ValueError(
            f"{path} ({type(raw).__name__}) cannot give its vectors back ({str(error).splitlines()[0]}); rebuild the "
            "index from your documents."
        ) from None
    return np.ascontiguousarray(vectors, dtype=np.float32).reshape(int(raw.ntotal), int(raw.d)), metric


def read_legacy_folder(raw_path: Path, store: str) -> tuple[list[tuple[dict[str, Any], np.ndarray]], Metric]:
    """The nodes (their docstore JSON, with their vectors) of a folder LlamaIndex persisted around the bare faiss
    file `raw_path`, in the order of their positions, and the faiss metric.

    Args:
        raw_path: the bare faiss file (`default__vector_store.json`).
        store: the store's class name, for messages.

    Raises:
        FileNotFoundError: the folder lacks the faiss file, docstore.json or index_store.json.
        ValueError: not a bare faiss file, vectors that cannot be read back, or files that do not fit together
            (e.g. a folder written by FaissMapVectorStore).
    """
    folder = raw_path.parent
    if not raw_path.is_file():
        raise FileNotFoundError(f"{raw_path} does not exist: is {folder} a folder written by StorageContext.persist?")
    if not is_raw_faiss(raw_path):
        raise ValueError(
            f"{raw_path} is not a raw faiss index; a folder written by this {store} loads with "
            f"{store}.from_persist_dir."
        )
    if (folder / LEGACY_ID_MAP).is_file():
        raise ValueError(
            f"{folder} holds {LEGACY_ID_MAP}: it was written by llama-index's FaissMapVectorStore, whose ids this "
            f"conversion does not read. Rebuild the index from your documents with {store}."
        )
    for name in (LEGACY_DOCSTORE, LEGACY_INDEX_STORE):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"{folder} lacks {name}, which holds the nodes of the old store (the faiss file keeps only "
                "vectors); without it the folder cannot be converted. Rebuild the index from your documents."
            )
    vectors, metric = read_raw_faiss(raw_path)
    rebuild = "Rebuild the index from your documents."
    try:
        documents = json.loads((folder / LEGACY_DOCSTORE).read_text(encoding="utf-8"))["docstore/data"]
        structs = json.loads((folder / LEGACY_INDEX_STORE).read_text(encoding="utf-8"))["index_store/data"]
        tables = [
            json.loads(s["__data__"])["nodes_dict"] for s in structs.values() if s["__type__"] == VECTOR_INDEX_TYPE
        ]
    except (KeyError, TypeError, ValueError) as error:
        raise ValueError(f"{folder}: its docstore or index store is malformed ({error!r}). {rebuild}") from None
    positions: dict[int, str] = {}  # every vector index of the storage context shares this vector store
    for table in tables:
        for key, node_id in table.items():
            try:
                position = int(key)
            except ValueError:
                raise ValueError(
                    f"{folder / LEGACY_INDEX_STORE} maps vector id {key!r}, not a faiss position: the folder was "
                    f"not written by the plain FaissVectorStore. {rebuild}"
                ) from None
            if not 0 <= position < len(vectors) or positions.setdefault(position, node_id) != node_id:
                raise ValueError(
                    f"{folder}: {LEGACY_INDEX_STORE} refers to vector {position} ({node_id!r}), which the faiss "
                    f"file ({len(vectors)} vectors) does not hold once. {rebuild}"
                )
    missing = [node_id for node_id in positions.values() if node_id not in documents]
    if missing:
        shown = ", ".join(repr(node_id) for node_id in missing[:5])
        raise ValueError(
            f"{folder / LEGACY_DOCSTORE} lacks {len(missing)} node(s) that {LEGACY_INDEX_STORE} lists: {shown}. "
            f"{rebuild}"
        )
    if len(positions) < len(vectors):
        logger.warning(
            "%s holds %d vectors that no index refers to; they are left out.", raw_path, len(vectors) - len(positions)
        )
    return [(documents[node_id], vectors[position]) for position, node_id in sorted(positions.items())], metric
