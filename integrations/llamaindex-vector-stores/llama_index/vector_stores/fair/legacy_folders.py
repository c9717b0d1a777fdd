"""Folders persisted by the earlier FairFaissVectorStore (llama-index's FaissVectorStore format), read for conversion.

Such a folder holds a raw faiss index where the store file now stands (`default__vector_store.json`, vectors by
position) and the nodes in `docstore.json`, tied together by the positions in `index_store.json`. `legacy_nodes`
reads them back as nodes carrying their vectors, which `FairFaissVectorStore.from_legacy_persist_dir` adds to a new
store; reading the faiss file itself is `fair_retrieval.stores.raw_faiss`' job.
"""

from __future__ import annotations

import logging
from pathlib import Path

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.simple import NAMESPACE_SEP
from llama_index.core.vector_stores.types import DEFAULT_PERSIST_FNAME

from fair_retrieval.index import Metric
from fair_retrieval.stores import is_raw_faiss, preview, read_raw_faiss

logger = logging.getLogger(__name__)

__all__ = ["legacy_message", "legacy_nodes"]

LEGACY_DOCSTORE = "docstore.json"  # what StorageContext.persist writes next to the vector store
LEGACY_INDEX_STORE = "index_store.json"
LEGACY_ID_MAP = "id_map.json"  # written by llama-index's FaissMapVectorStore


def legacy_nodes(folder: Path, namespace: str) -> tuple[list[BaseNode], Metric]:
    """The nodes (copies, their `embedding` set from the faiss file) of an old folder, and the faiss metric.

    Raises:
        FileNotFoundError: the folder lacks the faiss file, docstore.json or index_store.json.
        ValueError: the faiss file's vectors cannot be read back, or the files do not fit together (e.g. a
            folder written by FaissMapVectorStore).
    """
    raw_path = folder / f"{namespace}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}"
    if not raw_path.is_file():
        raise FileNotFoundError(f"{raw_path} does not exist: is {folder} a folder written by StorageContext.persist?")
    if not is_raw_faiss(raw_path):
        raise ValueError(
            f"{raw_path} is not a raw faiss index; a folder written by this FairFaissVectorStore loads with "
            "FairFaissVectorStore.from_persist_dir."
        )
    if (folder / LEGACY_ID_MAP).is_file():
        raise ValueError(
            f"{folder} holds {LEGACY_ID_MAP}: it was written by llama-index's FaissMapVectorStore, whose ids this "
            "conversion does not read. Rebuild the index from your documents with FairFaissVectorStore."
        )
    for name in (LEGACY_DOCSTORE, LEGACY_INDEX_STORE):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"{folder} lacks {name}, which holds the nodes of the old store (the faiss file keeps only "
                "vectors); without it the folder cannot be converted. Rebuild the index from your documents."
            )
    from llama_index.core.data_structs.data_structs import IndexDict
    from llama_index.core.storage.docstore import SimpleDocumentStore
    from llama_index.core.storage.index_store import SimpleIndexStore

    vectors, metric = read_raw_faiss(raw_path)
    docstore = SimpleDocumentStore.from_persist_dir(str(folder))
    index_store = SimpleIndexStore.from_persist_dir(str(folder))
    positions: dict[int, str] = {}  # every vector index of the storage context shares this vector store
    for struct in index_store.index_structs():
        if not isinstance(struct, IndexDict):
            continue
        for key, node_id in struct.nodes_dict.items():
            try:
                position = int(key)
            except ValueError:
                raise ValueError(
                    f"{folder / LEGACY_INDEX_STORE} maps vector id {key!r}, not a faiss position: the folder was "
                    "not written by the plain FaissVectorStore. Rebuild the index from your documents."
                ) from None
            if not 0 <= position < len(vectors) or positions.setdefault(position, node_id) != node_id:
                raise ValueError(
                    f"{folder}: {LEGACY_INDEX_STORE} refers to vector {position} ({node_id!r}), which the faiss "
                    f"file ({len(vectors)} vectors) does not hold once. Rebuild the index from your documents."
                )
    nodes = []
    missing = []
    for position, node_id in sorted(positions.items()):
        node = docstore.get_node(node_id, raise_error=False)
        if node is None:
            missing.append(node_id)
            continue
        node = node.model_copy()
        node.embedding = vectors[position].tolist()
        nodes.append(node)
    if missing:
        raise ValueError(
            f"{folder / LEGACY_DOCSTORE} lacks {len(missing)} node(s) that {LEGACY_INDEX_STORE} lists: "
            f"{preview(missing)}. Rebuild the index from your documents."
        )
    if len(positions) < len(vectors):
        logger.warning(
            "%s holds %d vectors that no index refers to; they are left out.",
            raw_path,
            len(vectors) - len(positions),
        )
    return nodes, metric


def legacy_message(path: Path) -> str:
    """The error message for a raw faiss file where a store file is expected: how to convert the folder."""
    folder = str(path.parent)
    return (
        f"{path} is a raw faiss index, written by the earlier FairFaissVectorStore (a subclass of llama-index's "
        "FaissVectorStore) or by FaissVectorStore itself; its nodes are in docstore.json next to it. Convert the "
        f"folder once: store = FairFaissVectorStore.from_legacy_persist_dir({folder!r}); "
        "index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model); "
        f"index.storage_context.persist({folder!r}). Or rebuild the index from your documents."
    )
