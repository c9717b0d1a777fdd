"""FairFaissVectorStore: a LlamaIndex vector store on fair_retrieval's FaissIndex, with delete, upsert and filters.

The store logic is `fair_retrieval.stores.DocumentStore`'s, shared with the LangChain store; this module translates
LlamaIndex's nodes (`.node_records`), `MetadataFilters` (`.metadata_filters`) and files (`.persist_files`) to it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

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
    hit_nodes,
    node_contents,
    node_metadata,
    node_text,
    restored_node,
    stored_nodes,
)
from llama_index.vector_stores.fair.persist_files import DEFAULT_PERSIST_PATH, PersistFiles
from typing_extensions import Self

from fair_retrieval.index import Aggregate, GpuChoice
from fair_retrieval.stores import (
    BEST_WINDOW_KEY,
    DocumentStore,
    LexicalSettings,
    StoreIndex,
    StoreMetric,
    StoreWindows,
    WrappedStore,
)

logger = logging.getLogger(__name__)

__all__ = ["BEST_WINDOW_KEY", "DEFAULT_PERSIST_PATH", "SUPPORTED_OPERATORS", "FairFaissVectorStore"]


class FairFaissVectorStore(PersistFiles, WrappedStore, BasePydanticVectorStore):
    """A LlamaIndex vector store on `fair_retrieval.FaissIndex`: delete, upsert, metadata filters, GPU, no pickle.

    Args:
        index: an empty `FaissIndex` (`MultiVectorIndex` with `multivector=True`) to use, or None.
        dim: vector size; None (and no `index`) makes the index on the first `add`.
        metric: "ip" (inner product), "cosine" (inner product of the vectors made unit length: the cosine, as
            the LangChain store's "cosine") or "l2" (squared Euclidean). FairEmbedding's vectors are unit vectors.
        kind: None (the default: a multi-vector store keeps its windows compressed, "compressed", where the
            codes fit the vector size, else flat; a pooled store is flat), "flat" (exact), "hnsw", "ivf", "ivfpq"
            or "compressed" (`fair_retrieval.stores.DocumentMode.new_index`).
        gpu: "auto" puts the index on the GPU(s) when faiss sees one; True requires one; False stays on CPU.
        embed_model: what made the nodes' vectors: `persist` records it, loading checks it; required (its windows
            are taken) with `multivector=True`. None: the one set in LlamaIndex's `Settings.embed_model` when it gives
            windows (a `FairEmbedding`; unless `multivector=False`), else none (a pooled store, said at INFO).
        multivector: keep nodes as their windows' vectors: k distinct nodes per query, the best window under
            `BEST_WINDOW_KEY` in the metadata. None: `DEFAULT_MULTIVECTOR`.
        aggregate: "max", "max-mean" or "top2" (None: `DEFAULT_AGGREGATE`); refused for a pooled store.
        windows: the windows a multi-vector store keeps (`fair_retrieval.stores.StoreWindows`); None: the window
            study's default (the embedder's window and half of it, at the text's boundaries); `StoreWindows()`: the
            embed model's own windows, one pass.
        default_query_mode: how a query in `VectorStoreQueryMode.DEFAULT` (what retrievers send unless told) is
            answered: "default" (dense vectors), "hybrid" (dense and the nodes' BM25 fused) or "sparse" (BM25 only).
            Any query can ask for another mode (`vector_store_query_mode="hybrid"`, `"sparse"`, `"text_search"`).
        alpha: the dense side's weight in a hybrid fusion (1: dense only, 0: BM25 only; None: 0.3); a query's `alpha`
            wins.
        fusion: how hybrid fuses: "relative_score" (min-max scaled scores; None: this, the hybrid study's best), "rrf"
            (reciprocal rank) or "dist_based_score".
        lexical: how the BM25 side reads the nodes (`fair_retrieval.stores.LexicalSettings`: language, k1, b);
            None: English.
        **index_params: kind parameters (e.g. nlist=64 for "ivf"; `fetch_factor` in multi-vector mode).

    Raises:
        TypeError: `index` is no FaissIndex / MultiVectorIndex, or a multi-vector store's embed model gives no windows.
        ValueError: a bad or non-empty `index` (or with `dim`), metric, kind, aggregate (or one for a pooled store),
            dim, or `gpu`, or `multivector=True` without `embed_model`.
    """

    stores_text: bool = True
    is_embedding_query: bool = True

    _store: DocumentStore[StoredNode] = PrivateAttr()

    def __init__(
        self,
        index: StoreIndex | None = None,
        *,
        dim: int | None = None,
        metric: StoreMetric = "ip",
        kind: str | None = None,
        gpu: GpuChoice = "auto",
        embed_model: Any | None = None,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
        windows: StoreWindows | None = None,
        default_query_mode: VectorStoreQueryMode | str | None = None,
        alpha: float | None = None,
        fusion: str | None = None,
        lexical: LexicalSettings | None = None,
        **index_params: int,
    ) -> None:
        search = DocumentStore.settings_with(mode=_search_mode(default_query_mode), alpha=alpha, fusion=fusion)
        if "faiss_index" in index_params:
            raise TypeError(
                "FairFaissVectorStore no longer wraps a raw faiss index (faiss_index=...): it keeps its vectors in a "
                "fair_retrieval.FaissIndex. Use FairFaissVectorStore.create(dim=...), or pass index=FaissIndex(...)."
            )
        if embed_model is None and multivector is not False:
            embed_model = _settings_embed_model(say_pooled=multivector is None and index is None)
        store: DocumentStore[StoredNode] = DocumentStore(
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
            embedder=embed_model,  # decides the default mode: multi-vector over a FairEmbedding, else pooled
            windows=windows,
            text_of=node_text,  # the lexical side reads what was embedded
            lexical=lexical,
            search=search,
        )
        store.check_window_source(
            "FairFaissVectorStore(multivector=True) keeps each node as the vectors of its windows, which it takes "
            "from the embed model's pass: pass embed_model= (the FairEmbedding given to VectorStoreIndex)."
        )
        self._hold(store, stores_text=True)

    @classmethod
    def create(
        cls, dim: int, metric: StoreMetric = "ip", gpu: GpuChoice = "auto", kind: str | None = None, **options: Any
    ) -> Self:
        """A store over a new index of `dim`-d vectors; the other arguments are the constructor's."""
        return cls(None, dim=dim, metric=metric, gpu=gpu, kind=kind, **options)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this component under."""
        return "FairFaissVectorStore"

    @property
    def client(self) -> StoreIndex | None:
        """The `fair_retrieval.FaissIndex` (`MultiVectorIndex` in multi-vector mode; None before the first add)."""
        return self._store.index

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
            vectors = self._store.vectors(int_ids) if int_ids else []
            stored = [self._store.records.records[int_id] for int_id in int_ids]
        nodes = []
        for record, vector in zip(stored, vectors, strict=True):
            node = restored_node(record)
            node.embedding = vector.tolist()
            nodes.append(node)
        return nodes

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The nodes for `query`, among `node_ids`, `doc_ids` (an empty list restricts nothing) and `filters`
        (`SUPPORTED_OPERATORS`), inside the index, in the query's mode (`DocumentStore.query`):

        - DEFAULT: the store's `default_query_mode` (dense unless built otherwise; a query without `query_str` is
          answered by its vector): the `similarity_top_k` nearest;
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
        threshold = kwargs.get("mmr_threshold", query.mmr_threshold)
        hits = self._store.query(
            query.query_embedding,
            query.similarity_top_k,
            mode=VectorStoreQueryMode(query.mode).value,
            among=self._select(query.node_ids, query.doc_ids, query.filters, empty_means_all=True),
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

    def _select(
        self, node_ids: Any, doc_ids: Any, filters: MetadataFilters | None, *, empty_means_all: bool
    ) -> list[int] | None:
        """The sorted int ids satisfying every given restriction; None when nothing restricts."""
        predicate = metadata_predicate(filters)
        keep = None if predicate is None else (lambda record: predicate(node_metadata(record)))
        return self._store.selection(node_ids, doc_ids, keep, empty_means_all=empty_means_all)


def _settings_embed_model(*, say_pooled: bool) -> Any | None:
    """The embed model set on LlamaIndex's `Settings` when it gives windows (a `FairEmbedding`), what a store built
    without `embed_model=` takes, as if it were passed; else None, and with `say_pooled` one INFO line on why the
    store is pooled. Only a model that was set is read: `Settings.embed_model` itself would resolve LlamaIndex's
    default (OpenAI's) when none was."""
    from llama_index.core import Settings

    model = getattr(Settings, "_embed_model", None)
    if model is not None and DocumentStore.gives_windows(model):
        return model
    if say_pooled:
        why = "no embed_model was given and none is set" if model is None else f"{type(model).__name__}, set"
        logger.info(
            "FairFaissVectorStore: %s in Settings.embed_model%s, so this store keeps one pooled vector per node "
            "(multivector=False). Pass embed_model=FairEmbedding(...) (or set Settings.embed_model to one) for a "
            "multi-vector store.",
            why,
            "" if model is None else ", gives no window vectors",
        )
    return None


def _search_mode(mode: VectorStoreQueryMode | str | None) -> str | None:
    """The store's search mode for a `default_query_mode` in LlamaIndex's names (None: the store's default)."""
    if mode is None:
        return None
    value = getattr(mode, "value", mode)
    names = {"default": "dense", "hybrid": "hybrid", "sparse": "sparse", "text_search": "sparse"}
    if value not in names:
        raise ValueError(
            f"default_query_mode must be one of {sorted(names)} (VectorStoreQueryMode values: dense vectors, dense and "
            f"BM25 fused, BM25 only), got {mode!r}."
        )
    return names[value]
