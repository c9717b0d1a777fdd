"""FairFaissVectorStore: a LlamaIndex vector store on fair_retrieval's FaissIndex, with delete, upsert and filters.

The store logic is `fair_retrieval.stores.DocumentStore`'s, shared with the LangChain store; this module translates
LlamaIndex's nodes (`.node_records`), `MetadataFilters` (`.metadata_filters`) and files (`.persist_files`) to it.
"""

from __future__ import annotations

import logging
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    VectorStoreQueryMode,
)
from llama_index.vector_stores.fair.metadata_filters import SUPPORTED_OPERATORS
from llama_index.vector_stores.fair.node_records import (
    StoredNode,
    node_text,
)
from llama_index.vector_stores.fair.node_store import NodeStore, search_mode
from llama_index.vector_stores.fair.persist_files import DEFAULT_PERSIST_PATH, PersistFiles, settings_embed_model
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


class FairFaissVectorStore(PersistFiles, NodeStore, WrappedStore, BasePydanticVectorStore):
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
            answered: "hybrid" (None: this, dense and the nodes' BM25 fused), "default" or "dense" (the vectors
            only: the opt-out) or "sparse" (BM25 only). Any query can ask for another mode
            (`vector_store_query_mode="hybrid"`, `"sparse"`, `"text_search"`); a query without text is dense.
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
        search = DocumentStore.settings_with(mode=search_mode(default_query_mode), alpha=alpha, fusion=fusion)
        if "faiss_index" in index_params:
            raise TypeError(
                "FairFaissVectorStore no longer wraps a raw faiss index (faiss_index=...): it keeps its vectors in a "
                "fair_retrieval.FaissIndex. Use FairFaissVectorStore.create(dim=...), or pass index=FaissIndex(...)."
            )
        if embed_model is None and multivector is not False:
            embed_model = settings_embed_model(say_pooled=multivector is None and index is None)
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
        cls,
        dim: int | None = None,
        metric: StoreMetric = "ip",
        gpu: GpuChoice = "auto",
        kind: str | None = None,
        **options: Any,
    ) -> Self:
        """A store over a new index of `dim`-d vectors; the other arguments are the constructor's.

        `dim` None: the size the embed model tells (`embed_model=`, or the `Settings.embed_model` the constructor
        takes: a `FairEmbedding` knows its model's).

        Raises:
            TypeError: no `dim` and an embed model that cannot tell its size (or none); as the constructor.
        """
        if dim is None:
            embed_model = options.get("embed_model")
            if embed_model is None and options.get("multivector") is not False:
                embed_model = settings_embed_model(say_pooled=False)
            dim = DocumentStore.embedder_dimension(embed_model)
            if dim is None:
                told = (
                    "no embed model is given (nor a FairEmbedding set in Settings.embed_model)"
                    if embed_model is None
                    else f"the embed model {type(embed_model).__name__} cannot tell its vector size"
                )
                raise TypeError(
                    f"FairFaissVectorStore.create() needs dim= here: {told}. Pass dim=, or "
                    "embed_model=FairEmbedding(...), or use the constructor, which makes the index on the first add."
                )
        return cls(None, dim=dim, metric=metric, gpu=gpu, kind=kind, **options)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this component under."""
        return "FairFaissVectorStore"

    @property
    def client(self) -> StoreIndex | None:
        """The `fair_retrieval.FaissIndex` (`MultiVectorIndex` in multi-vector mode; None before the first add)."""
        return self._store.index
