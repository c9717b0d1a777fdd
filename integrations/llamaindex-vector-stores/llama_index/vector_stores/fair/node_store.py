"""What both LlamaIndex stores of llama-index-vector-stores-fair do with nodes, the same over FAISS and Qdrant:
`NodeStore`, a base class of `FairFaissVectorStore` and `FairQdrantVectorStore`. Every call goes to the store's
`fair_retrieval.stores.DocumentStore` (the FAISS store's or the Qdrant one's), which checks it; nodes become its
records (`.node_records`) and `MetadataFilters` its filters (`.metadata_filters`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any

from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.vector_stores.fair.metadata_filters import metadata_predicate
from llama_index.vector_stores.fair.node_records import (
    StoredNode,
    hit_nodes,
    node_contents,
    node_metadata,
    restored_node,
    stored_nodes,
)

from fair_retrieval.stores import DocumentStore

logger = logging.getLogger(__name__)

__all__ = ["NodeStore", "search_mode"]


QUERY_KEYWORDS = ("mmr_threshold", "mmr_prefetch_k")
"""What `query` takes in `vector_store_kwargs`; a Qdrant store also `qdrant_filters` (llama-index's Qdrant store's)."""
"""The keyword arguments of `query` (a retriever's `vector_store_kwargs`); any other is refused by name."""


class NodeStore:
    """The node calls of `FairFaissVectorStore` and `FairQdrantVectorStore`, their base class."""

    _store: DocumentStore[StoredNode]

    def record_embed_model(self, embed_model: Any) -> None:
        """Tell the store which embed model made its vectors, so `persist` records it (ValueError for None;
        TypeError for one without windows in multi-vector mode)."""
        if embed_model is None:
            raise ValueError("record_embed_model needs an embed model (e.g. a FairEmbedding), got None.")
        self._store.embedder = embed_model

    @property
    def node_ids(self) -> list[str]:
        """The ids of the stored nodes, in insertion order (a replaced node keeps its place)."""
        return self._store.records.keys

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store embedded nodes, replacing a stored node id; a multi-vector store asks the embed model for their
        windows, one call per window size, except where a node's own vector is its one window at a size
        (`fair_retrieval.stores.embedded_windows`).

        Raises:
            TypeError: something that is not a node, or a node whose metadata is not JSON.
            ValueError: a node without an embedding, embeddings of different or wrong sizes or with NaN, or a node
                id repeated within the call. Nothing is stored then.
        """
        node_list = list(nodes)
        records = stored_nodes(node_list)
        embedded, contents = node_contents(node_list) if self._store.multivector else ([], [])
        embeddings = [node.embedding for node in node_list]
        return self._store.add_vectors(records, embeddings, embedded, contents, noun="node", log=logger)

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Remove every node of the document `ref_doc_id` (a node without a source is its own); an unknown document
        is nothing to delete, as `IngestionPipeline` upserts expect."""
        self._store.delete_group(ref_doc_id)

    def delete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """Remove the nodes in `node_ids` and/or matching `filters` (given both, a node must match both).

        Raises:
            ValueError: neither (to remove everything, call `clear()`), or a filter this store cannot apply.
            TypeError: node_ids given as one string, or filters that are not MetadataFilters.
        """
        if node_ids is None and filters is None:
            raise ValueError(
                "delete_nodes needs node_ids and/or filters (given both, a node must match both); to remove every "
                "node call clear()."
            )
        self._store.remove(self._store.ordered(self._select(node_ids, None, filters, empty_means_all=False)))

    def clear(self) -> None:
        """Remove every node (the index keeps its dimension, training and device)."""
        self._store.clear()

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """Copies of stored nodes with their embeddings: those in `node_ids` (in that order) and/or matching
        `filters`; every node when both are None."""
        with self._store.lock:  # the nodes and their vectors of one state (another thread may delete meanwhile)
            int_ids = self._store.ordered(self._select(node_ids, None, filters, empty_means_all=False), node_ids)
            vectors: Any = self._store.vectors(int_ids) if int_ids else []
            stored = self._store.records_of(int_ids)
        nodes = []
        for record, vector in zip(stored, vectors, strict=True):
            node = restored_node(record)
            node.embedding = vector.tolist()
            nodes.append(node)
        return nodes

    # The async calls run the same calls in a worker thread (the stores are safe to share between threads), so an
    # event loop is never blocked by a search or a write; llama-index's base class would run them in the loop.

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """`query`, in a worker thread."""
        return await asyncio.to_thread(self.query, query, **kwargs)

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        """`add`, in a worker thread."""
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """`delete`, in a worker thread."""
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    async def adelete_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None, **delete_kwargs: Any
    ) -> None:
        """`delete_nodes`, in a worker thread."""
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    async def aget_nodes(
        self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None
    ) -> list[BaseNode]:
        """`get_nodes`, in a worker thread."""
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

    async def aclear(self) -> None:
        """`clear`, in a worker thread."""
        await asyncio.to_thread(self.clear)

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The nodes for `query`, among `node_ids`, `doc_ids` (an empty list restricts nothing) and `filters`
        (`SUPPORTED_OPERATORS`), inside the index, in the query's mode (`DocumentStore.query`):

        - DEFAULT: the store's `default_query_mode` (hybrid unless built otherwise, as HYBRID below; a query without
          `query_str` is answered by its vector, the `similarity_top_k` nearest);
        - HYBRID: dense and BM25 fused (the store's `fusion`; `alpha` the query's, else the store's): the
          `hybrid_top_k` best (else `similarity_top_k`) of the `similarity_top_k` dense and `sparse_top_k` BM25
          candidates (each at least 20); scores are the fused ones, in [0, 1];
        - SPARSE / TEXT_SEARCH: BM25 over the nodes' text (`query_str`), the `sparse_top_k` best (else
          `similarity_top_k`); only nodes sharing a word with the query; scores are BM25's;
        - MMR: chosen for relevance and diversity (`fair_retrieval.stores.marginal_relevance`; λ is the
          `mmr_threshold` keyword, `vector_store_kwargs` of a retriever, else the query's, else 0.5; among the
          `mmr_prefetch_k` best, default every node that qualifies).

        Dense scores: cosines ("cosine"), inner products ("ip") or squared L2 distances ("l2"); a multi-vector
        store's nodes are distinct, each with its best window under `BEST_WINDOW_KEY` in its metadata (when the
        dense side found it).

        Raises:
            ValueError: another query mode, no query embedding (dense, hybrid, MMR) or one of the wrong size, no
                `query_str` (hybrid, sparse), a bad similarity_top_k, sparse_top_k, hybrid_top_k, alpha or
                mmr_threshold, or a filter this store cannot apply.
            TypeError: filters that are not MetadataFilters.
        """
        accepted = (*QUERY_KEYWORDS, *(("qdrant_filters",) if self._store.filters_in_engine else ()))
        unknown = sorted(set(kwargs) - set(accepted))
        if unknown:  # a misspelt or foreign keyword must not be ignored: a filter asked that way would filter nothing
            raise TypeError(
                f"{type(self).__name__}.query() does not take {', '.join(map(repr, unknown))} (vector_store_kwargs); "
                f"it takes {', '.join(map(repr, accepted))}. Restrict a query with filters=MetadataFilters(...), "
                "node_ids or doc_ids"
                + (
                    "; qdrant_filters= (Qdrant's own filter) is for FairQdrantVectorStore."
                    if "qdrant_filters" in unknown
                    else "."
                )
            )
        native = kwargs.get("qdrant_filters")
        if native is not None:  # written for llama-index's layout: its keys read as this store's points hold them
            native = self._store.renamed_filter(native, self._payload_key)  # type: ignore[attr-defined]
            self._store.compiled_filter(native)  # checked before the query runs
        threshold = kwargs.get("mmr_threshold", query.mmr_threshold)
        hits = self._store.query(
            query.query_embedding,
            query.similarity_top_k,
            mode=VectorStoreQueryMode(query.mode).value,
            among=self._select(query.node_ids, query.doc_ids, query.filters, empty_means_all=True, native=native),
            mmr_threshold=threshold,
            prefetch_k=kwargs.get("mmr_prefetch_k"),
            query_str=query.query_str,
            alpha=query.alpha,
            sparse_top_k=query.sparse_top_k,
            hybrid_top_k=query.hybrid_top_k,
        )
        nodes = hit_nodes(hits)
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[hit.score for hit in hits], ids=[hit.record.key for hit in hits]
        )

    def _payload_key(self, key: str) -> str:
        """A payload key of llama-index's Qdrant store as this store's points hold it: llama-index keeps a node's
        metadata at the payload's top and its source document's id under "doc_id", "document_id" and "ref_doc_id";
        here the metadata is under "metadata" and the source id is the group."""
        if key in ("doc_id", "document_id", "ref_doc_id"):
            return str(self._store.group_key)  # type: ignore[attr-defined]
        if key == "metadata" or key.startswith(("metadata.", "metadata[")):
            return key  # already this store's layout
        return f"metadata.{key}"

    def _select(
        self,
        node_ids: Any,
        doc_ids: Any,
        filters: MetadataFilters | None,
        *,
        empty_means_all: bool,
        native: Any = None,
    ) -> Any:
        """What satisfies every given restriction, as the store's search takes it (the FAISS store: the sorted int
        ids; the Qdrant store: one engine condition); None when nothing restricts. `native`: Qdrant's own filter
        (a Qdrant store's `qdrant_filters`), kept beside `filters` (a node must match both)."""
        predicate = metadata_predicate(filters)
        restricts = predicate is not None or native is not None
        keep = DocumentStore.record_test(predicate, node_metadata, native) if restricts else None
        return self._store.selection(node_ids, doc_ids, keep, empty_means_all=empty_means_all)


def search_mode(mode: VectorStoreQueryMode | str | None) -> str | None:
    """The store's search mode for a `default_query_mode` in LlamaIndex's names (None: the store's default)."""
    if mode is None:
        return None
    value = getattr(mode, "value", mode)
    # "default" is LlamaIndex's name of its dense mode; "dense" says the same plainly (the opt-out of hybrid)
    names = {"default": "dense", "dense": "dense", "hybrid": "hybrid", "sparse": "sparse", "text_search": "sparse"}
    if value not in names:
        raise ValueError(
            f"default_query_mode must be one of {sorted(names)} (VectorStoreQueryMode values: dense vectors, dense and "
            f"BM25 fused, BM25 only), got {mode!r}."
        )
    return names[value]
