"""FairFaissVectorStore: a LlamaIndex vector store on fair_retrieval's FaissIndex, with delete, upsert and filters.

The store logic (ids, upserts, deletes, filtered searches, multi-vector nodes, persisting and loading) is
`fair_retrieval.stores.DocumentStore`'s, shared with the LangChain store; this module translates LlamaIndex's types
to it: nodes (`.node_records`), `MetadataFilters` (`.metadata_filters`) and the persisted files (`.persist_files`).
See docs/guides/stores.md for the design and the persisted format.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.vector_stores.fair.metadata_filters import SUPPORTED_OPERATORS, metadata_predicate
from llama_index.vector_stores.fair.node_records import (
    StoredNode,
    embedded_texts,
    node_embeddings,
    node_metadata,
    restored_node,
    stored_node,
    with_best_window,
)
from llama_index.vector_stores.fair.persist_files import DEFAULT_PERSIST_PATH, PersistFiles
from typing_extensions import Self

from fair_retrieval import FaissIndex, MultiVectorIndex
from fair_retrieval.index import Aggregate, GpuChoice, Metric
from fair_retrieval.stores import (
    BEST_WINDOW_KEY,
    DocumentStore,
    positive_int,
    preview,
    repeated,
)

logger = logging.getLogger(__name__)

__all__ = ["BEST_WINDOW_KEY", "DEFAULT_PERSIST_PATH", "SUPPORTED_OPERATORS", "FairFaissVectorStore"]


class FairFaissVectorStore(PersistFiles, BasePydanticVectorStore):
    """A LlamaIndex vector store on `fair_retrieval.FaissIndex`: delete, upsert, metadata filters, GPU, no pickle.

    Args:
        index: an empty `FaissIndex` (or `MultiVectorIndex` with `multivector=True`) to use; or leave it out and
            the store creates one from `dim`, `metric`, `kind`, `gpu` and `index_params`.
        dim: vector size; None creates the index on the first `add`.
        metric: "ip" (inner product; cosine for FairEmbedding's unit vectors) or "l2" (squared Euclidean).
        kind: "flat" (exact, the default), "hnsw", "ivf" or "ivfpq".
        gpu: "auto" puts the index on the GPU(s) when faiss sees one; True requires one; False stays on CPU.
        embed_model: the embed model the nodes' vectors come from: `persist` records its identity and loading
            checks it (LlamaIndex does not tell a store). Required with `multivector=True`, where the store takes
            each node's windows from it.
        multivector: keep each node as its windows' vectors (a `MultiVectorIndex`) and return `similarity_top_k`
            distinct nodes scored by `aggregate`, the best window's span in the metadata under `BEST_WINDOW_KEY`.
            None: the library's default (`fair_retrieval.stores.DEFAULT_MULTIVECTOR`).
        aggregate: "max", "max-mean" or "top2" (None: `fair_retrieval.index.DEFAULT_AGGREGATE`); refused for a
            pooled store.
        **index_params: kind parameters (e.g. nlist=64 for "ivf"; `fetch_factor` in multi-vector mode).

    Raises:
        TypeError: `index` is not a FaissIndex or MultiVectorIndex, or an embed model that gives no windows for a
            multi-vector store.
        ValueError: both `index` and `dim`, a non-empty `index` or one of the other mode, an unknown metric, kind
            or aggregate, an aggregate for a pooled store, `multivector=True` without `embed_model`, a bad dim, or
            gpu=True without a GPU.
    """

    stores_text: bool = True
    is_embedding_query: bool = True

    _store: DocumentStore[StoredNode] = PrivateAttr()

    def __init__(
        self,
        index: FaissIndex | MultiVectorIndex | None = None,
        *,
        dim: int | None = None,
        metric: Metric = "ip",
        kind: str = "flat",
        gpu: GpuChoice = "auto",
        embed_model: Any | None = None,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
        **index_params: int,
    ) -> None:
        if "faiss_index" in index_params:
            raise TypeError(
                "FairFaissVectorStore no longer wraps a raw faiss index (faiss_index=...): it keeps its vectors in a "
                "fair_retrieval.FaissIndex. Use FairFaissVectorStore.create(dim=...), or pass index=FaissIndex(...)."
            )
        if index is None and metric not in ("ip", "l2"):  # LlamaIndex embed models give finished vectors
            raise ValueError(f"metric must be 'ip' (inner product / cosine) or 'l2', got {metric!r}.")
        super().__init__(stores_text=True)
        self._store = DocumentStore(
            metric=metric,
            kind=kind,
            gpu=gpu,
            index_params=dict(index_params),
            multivector=multivector,
            aggregate=aggregate,
            index=index,
            dim=dim,
            replaced_move_to_end=False,  # a replaced node keeps its place
            group_of=lambda record: record.doc_id,  # delete(ref_doc_id) removes a document's nodes
            name="FairFaissVectorStore",
        )
        if self._store.multivector and embed_model is None:
            raise ValueError(
                "FairFaissVectorStore(multivector=True) keeps each node as the vectors of its windows, which it takes "
                "from the embed model's pass: pass embed_model= (the FairEmbedding given to VectorStoreIndex)."
            )
        self._store.embedder = embed_model

    @classmethod
    def create(
        cls, dim: int, metric: Metric = "ip", gpu: GpuChoice = "auto", kind: str = "flat", **options: Any
    ) -> Self:
        """A store over a new index of `dim`-d vectors; the other arguments are the constructor's."""
        return cls(None, dim=dim, metric=metric, gpu=gpu, kind=kind, **options)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this component under."""
        return "FairFaissVectorStore"

    @property
    def client(self) -> FaissIndex | MultiVectorIndex | None:
        """The `fair_retrieval.FaissIndex` (`MultiVectorIndex` in multi-vector mode; None before the first add)."""
        return self._store.index

    @property
    def index(self) -> FaissIndex | MultiVectorIndex | None:
        """The index, as `client`."""
        return self._store.index

    @property
    def metric(self) -> str:
        """ "ip" or "l2": what the scores of `query` are."""
        return self._store.metric

    @property
    def multivector(self) -> bool:
        """Whether nodes are kept as their window vectors."""
        return self._store.multivector

    @property
    def aggregate(self) -> Aggregate | None:
        """How a node's window scores become its score in multi-vector mode; None for a pooled store."""
        mode = self._store.mode
        return mode.aggregate if mode.multivector else None

    @property
    def embedder_identity(self) -> dict[str, Any] | None:
        """The identity of the embed model (the one told, else the one a loaded store recorded; None: unknown)."""
        identity = self.store_identity
        return (
            None if identity is None else {k: v for k, v in identity.items() if k not in ("multivector", "aggregate")}
        )

    @property
    def store_identity(self) -> dict[str, Any] | None:
        """The identity `persist` records and loading checks: `embedder_identity` with a multi-vector store's mode."""
        return self._store.identity()

    def record_embed_model(self, embed_model: Any) -> None:
        """Tell the store which embed model its vectors come from (LlamaIndex does not), so `persist` records it.

        Raises:
            ValueError: None.
            TypeError: in multi-vector mode, an embed model that gives no window vectors.
        """
        if embed_model is None:
            raise ValueError("record_embed_model needs an embed model (e.g. a FairEmbedding), got None.")
        self._store.embedder = embed_model

    @property
    def node_ids(self) -> list[str]:
        """The ids of the stored nodes, in insertion order (a replaced node keeps its place)."""
        return self._store.records.keys

    @property
    def _int_ids(self) -> Mapping[str, int]:
        return self._store.records.int_ids

    @property
    def _next_int_id(self) -> int:
        return self._store.records.next_int_id

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store embedded nodes; a node id already stored is replaced (upsert).

        A multi-vector store takes each node's windows from the embed model's pass that made its embedding
        (`FairEmbedding.window_cache`); nodes not found there are embedded once more (an INFO line counts them).

        Raises:
            TypeError: something that is not a node, or a node whose metadata is not JSON.
            ValueError: a node without an embedding, embeddings of different or wrong sizes or with NaN, or a node
                id repeated within the call. Nothing is stored then.
        """
        node_list = list(nodes)
        if not node_list:
            return []
        records = [stored_node(node, position) for position, node in enumerate(node_list)]
        doubled = repeated(record.key for record in records)
        if doubled:
            raise ValueError(f"node ids repeat within this add: {preview(doubled)}; pass each node once.")
        matrix = node_embeddings(node_list)
        index = self._store.index
        if index is not None and matrix.shape[1] != index.dim:
            raise ValueError(
                f"The nodes have {matrix.shape[1]}-d embeddings but this store holds {index.dim}-d vectors; embed "
                "them with the model the store was built with."
            )
        if self._store.multivector:
            texts, offsets, lengths = embedded_texts(node_list)
            self._store.add_embedded_windows(records, texts, matrix, (offsets, lengths), log=logger)
        else:
            self._store.add(records, matrix, "the nodes' embeddings")
        return [record.key for record in records]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Remove every node of the document `ref_doc_id` (nodes without a source count as their own); an unknown
        document is nothing to delete, as `IngestionPipeline` upserts expect."""
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
        selected = self._select(node_ids, None, filters, empty_means_all=False)
        self._store.remove(self._store.records.records if selected is None else selected)

    def clear(self) -> None:
        """Remove every node (the index keeps its dimension, training and device)."""
        self._store.clear()

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """Copies of stored nodes with their embeddings: those in `node_ids` (in that order) and/or matching
        `filters`; every node when both are None.

        Raises:
            ValueError: a filter this store cannot apply.
            TypeError: node_ids given as one string, or filters that are not MetadataFilters.
        """
        selected = self._select(node_ids, None, filters, empty_means_all=False)
        records = self._store.records.records
        if selected is None:
            int_ids = list(records)
        elif node_ids is not None:  # the caller's order
            chosen = set(selected)
            int_ids = [int_id for int_id, _ in self._store.get(node_ids) if int_id in chosen]
        else:
            int_ids = [int_id for int_id in records if int_id in set(selected)]
        nodes = []
        for int_id, vector in zip(int_ids, self._store.vectors(int_ids) if int_ids else [], strict=True):
            node = restored_node(records[int_id])
            node.embedding = vector.tolist()
            nodes.append(node)
        return nodes

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The `query.similarity_top_k` nodes nearest to `query.query_embedding`, best first.

        `node_ids`, `doc_ids` (an empty list restricts nothing) and `filters` (`MetadataFilters`: EQ, NE, GT, GTE,
        LT, LTE, IN, NIN, IS_EMPTY with AND, OR, NOT) restrict the search inside the index, so it returns
        `similarity_top_k` nodes whenever that many qualify. Scores: inner products ("ip") or squared
        L2 distances ("l2"); in multi-vector mode their aggregate, each node with its best window under
        `BEST_WINDOW_KEY` in its metadata (a copy).

        Raises:
            ValueError: another query mode, no query embedding or one of the wrong size, a bad similarity_top_k,
                or a filter this store cannot apply.
            TypeError: filters that are not MetadataFilters.
        """
        mode = VectorStoreQueryMode(query.mode)
        if mode != VectorStoreQueryMode.DEFAULT:
            raise ValueError(
                f"FairFaissVectorStore answers only VectorStoreQueryMode.DEFAULT (dense vector search), got "
                f"{mode.name}; leave vector_store_query_mode at its default."
            )
        top_k = positive_int(query.similarity_top_k, "similarity_top_k")
        if query.query_embedding is None:
            raise ValueError(
                "The query has no query_embedding: this store searches by vector. Embed the query with the store's "
                "embed model (retrievers do this), or set VectorStoreQuery(query_embedding=...)."
            )
        vector = np.asarray(query.query_embedding, dtype=np.float32)
        selected = self._select(query.node_ids, query.doc_ids, query.filters, empty_means_all=True)
        if vector.ndim != 1:
            raise ValueError(f"query_embedding must be one vector (a list of floats), got shape {vector.shape}.")
        index = self._store.index
        if index is not None and vector.size != index.dim:
            raise ValueError(
                f"query_embedding has {vector.size} dimensions but this store holds {index.dim}-d vectors; "
                "embed the query with the model the store was built with."
            )
        hits = self._store.search(vector, top_k, among=selected)
        nodes = [restored_node(hit.record) for hit in hits]
        for node, hit in zip(nodes, hits, strict=True):
            if hit.best_window is not None:
                with_best_window(node, hit.best_window)
        return VectorStoreQueryResult(
            nodes=nodes, similarities=[hit.score for hit in hits], ids=[hit.record.key for hit in hits]
        )

    def _select(
        self, node_ids: Any, doc_ids: Any, filters: MetadataFilters | None, *, empty_means_all: bool
    ) -> list[int] | None:
        """The sorted int ids satisfying every given restriction; None when nothing restricts."""
        predicate = metadata_predicate(filters)
        keep = None if predicate is None else (lambda record: predicate(node_metadata(record)))
        return self._store.selection(node_ids, doc_ids, keep, empty_means_all=empty_means_all)
