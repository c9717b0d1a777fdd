"""FaissVectorStore: a LangChain vector store on fair_retrieval's FaissIndex, saved without pickle.

The store logic is `fair_retrieval.stores.DocumentStore`'s, shared with the LlamaIndex store; this module and its
base classes (`langchain_fair.searching`, `langchain_fair.local_folders`) translate LangChain's types to it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from typing_extensions import Self

from fair_retrieval.index import Aggregate
from fair_retrieval.stores import DocumentStore, LexicalSettings, StoreMetric, StoreWindows, TextDocument, WrappedStore
from langchain_fair.local_folders import LocalFolders
from langchain_fair.store_documents import StoreDocuments

logger = logging.getLogger(__name__)


class FaissVectorStore(LocalFolders, StoreDocuments, WrappedStore, VectorStore):
    """A FAISS vector store for LangChain that never pickles.

    Args:
        embedding: any LangChain `Embeddings`; use `langchain_fair.FairEmbeddings` for position-fair documents.
        metric: "cosine" (unit vectors: scores are cosines, the default), "ip" (raw inner product) or "l2" (squared
            distance).
        kind: None (the default: a multi-vector store keeps its windows compressed, "compressed", where the
            codes fit the vector size, else flat; a pooled store is flat), "flat" (exact), "hnsw", "ivf", "ivfpq"
            or "compressed" (`fair_retrieval.stores.DocumentMode.new_index`).
        gpu: "auto" puts the index on a GPU when faiss sees one; True requires one; False stays on CPU.
        relevance_score_fn: a raw score → [0, 1]; the default is LangChain's for normalised vectors: the cosine
            ("cosine", "ip"), 1 − distance / √2 ("l2"), clipped to [0, 1] (`DocumentStore.relevance`).
        multivector: keep each document as its windows' vectors (needs `FairEmbeddings`): searches return k
            distinct documents scored by `aggregate`, the best window's span in the metadata under "best_window".
            None: `fair_retrieval.stores.DEFAULT_MULTIVECTOR` (multi-vector), pooled over embeddings without windows.
        aggregate: "max", "max-mean" or "top2" (None: `DEFAULT_AGGREGATE`); refused for a pooled store.
        windows: the windows a multi-vector store keeps (`fair_retrieval.stores.StoreWindows`: sizes, boundaries);
            None: the window study's default (the embedder's window and half of it, at the text's boundaries);
            `StoreWindows()`: the embedder's own windows, one pass.
        retrieval_mode: how text queries are answered: "hybrid" (None: this, dense and BM25 over the documents'
            text, fused), "dense" (the vectors only: the opt-out) or "sparse" (BM25 only); an `Enum` with those
            values (e.g. langchain-qdrant's `RetrievalMode`) is read by its value. A call can ask for another
            (`retrieval_mode=` in `similarity_search`, the relevance-score and MMR searches, or
            `as_retriever(search_kwargs=...)`); the `*_by_vector` searches are dense. A hybrid score is the fused
            one, in [0, 1] relative to the query's candidates: `score_threshold` is compared with it, and
            `relevance_score_fn` is not applied to it (it is a relevance already).
        alpha: the dense side's weight in a hybrid fusion (1: dense only, 0: BM25 only); None: 0.3.
        fusion: how hybrid fuses: "relative_score" (min-max scaled scores; None: this, the hybrid study's best), "rrf"
            (reciprocal rank, as `EnsembleRetriever`) or "dist_based_score".
        lexical: how the BM25 side reads the texts (`fair_retrieval.stores.LexicalSettings`: language, k1, b);
            None: English.
        distance_strategy: langchain-community FAISS's argument, read as the metric it means
            (`community_metric`: "MAX_INNER_PRODUCT" → "ip", "COSINE" → "cosine", "EUCLIDEAN_DISTANCE" → "l2"; its
            `DistanceStrategy` enum by value).
        normalize_L2: langchain-community FAISS's argument: True means metric "cosine".
        **index_params: kind parameters (e.g. nlist=64 for "ivf"; `fetch_factor` in multi-vector mode).

    Raises:
        TypeError: `embedding` is not a LangChain `Embeddings`, or gives no windows for a multi-vector store, or
            index parameters the kind does not take.
        ValueError: an unknown metric, kind or aggregate, an aggregate for a pooled store, a distance strategy with
            no metric here or disagreeing with `metric`, or gpu=True and no GPU. All before any text is embedded.
    """

    def __init__(
        self,
        embedding: Embeddings,
        *,
        metric: StoreMetric | None = None,
        kind: str | None = None,
        gpu: Literal["auto"] | bool = "auto",
        relevance_score_fn: Callable[[float], float] | None = None,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
        windows: StoreWindows | None = None,
        retrieval_mode: Any = None,
        alpha: float | None = None,
        fusion: str | None = None,
        lexical: LexicalSettings | None = None,
        distance_strategy: Any = None,
        normalize_L2: bool | None = None,  # noqa: N803 - langchain-community's FAISS spells it so
        **index_params: int,
    ) -> None:
        store_metric = community_metric(metric, distance_strategy, normalize_L2)
        search = DocumentStore.settings_with(mode=retrieval_mode, alpha=alpha, fusion=fusion)
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a LangChain Embeddings object, got {type(embedding).__name__}.")
        store: DocumentStore[TextDocument] = DocumentStore.of_texts(
            metric=store_metric,
            kind=kind,
            gpu=gpu,
            index_params=dict(index_params),
            multivector=multivector,
            aggregate=aggregate,
            embedder=embedding,
            replaced_move_to_end=True,  # LangChain: an upserted document moves to the end
            name="FaissVectorStore",
            windows=windows,
            lexical=lexical,
            search=search,
        )
        self._hold(store)
        self._relevance_score_fn = relevance_score_fn

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A new store holding `texts` (not none: use the constructor); `kwargs` go to the constructor."""
        text_list = DocumentStore.required_texts(texts, "from_texts", cls.__name__)
        store = cls(embedding, **kwargs)
        store.add_texts(text_list, metadatas, ids=ids)
        return store

    @classmethod
    def from_embeddings(
        cls,
        text_embeddings: Iterable[tuple[str, Sequence[float]]],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A new store holding (text, vector) pairs (not none); `embedding` embeds later texts and queries."""
        pairs = DocumentStore.required_pairs(text_embeddings, "from_embeddings", cls.__name__)
        store = cls(embedding, **kwargs)
        store.add_embeddings(pairs, metadatas, ids)
        return store

    def merge_from(self, other: FaissVectorStore, *, allow_embedder_mismatch: bool = False) -> None:
        """Add every document of `other` with its stored vectors (windows between multi-vector stores); TypeError
        for another class, ValueError (nothing added) for a shared id, another metric, vector size, mode, window
        shape or embedder configuration (checked as `load_local` checks the embeddings it is given; pass
        `allow_embedder_mismatch=True` to merge anyway, with a WARNING)."""
        if not isinstance(other, FaissVectorStore):
            raise TypeError(
                f"merge_from takes another FaissVectorStore, got {type(other).__name__}. To add a langchain-community "
                "FAISS store, rebuild it with FaissVectorStore.from_embeddings (see load_local)."
            )
        self._store.merge_from(other._store, allow_embedder_mismatch=allow_embedder_mismatch)


COMMUNITY_METRICS = {"MAX_INNER_PRODUCT": "ip", "COSINE": "cosine", "EUCLIDEAN_DISTANCE": "l2"}
"""langchain-community FAISS's `DistanceStrategy` values → this store's metric (the others have none here)."""


def community_metric(metric: str | None, distance_strategy: Any, normalize_l2: bool | None) -> str:
    """The store's metric from its own `metric` and langchain-community FAISS's `distance_strategy` (a name, or its
    `DistanceStrategy` enum, read by value) and `normalize_L2` (True: unit vectors, "cosine"); "cosine" when none
    is given.

    Raises:
        ValueError: a distance strategy with no metric here, the two disagreeing with each other or with `metric`.
        TypeError: a `normalize_L2` that is not a bool.
    """
    if normalize_l2 is not None and not isinstance(normalize_l2, bool):
        raise TypeError(f"normalize_L2 must be a bool, got {type(normalize_l2).__name__}; or pass metric='cosine'.")
    asked: dict[str, str] = {}
    if distance_strategy is not None:
        value = str(getattr(distance_strategy, "value", distance_strategy))
        if value not in COMMUNITY_METRICS:
            meanings = ", ".join(f"{name} → {meaning!r}" for name, meaning in COMMUNITY_METRICS.items())
            raise ValueError(
                f"distance_strategy={value!r} has no metric in FaissVectorStore; pass metric='cosine', 'ip' or 'l2' "
                f"instead (the strategies it reads: {meanings})."
            )
        asked["distance_strategy"] = COMMUNITY_METRICS[value]
    if normalize_l2:
        if asked.get("distance_strategy") == "l2":
            raise ValueError(
                "normalize_L2=True with distance_strategy EUCLIDEAN_DISTANCE ranks unit vectors by distance; pass "
                "metric='cosine' (the same ranking, scores as cosines) or metric='l2' without normalize_L2."
            )
        asked["normalize_L2"] = "cosine"  # inner products of unit vectors (MAX_INNER_PRODUCT's too) are cosines
        asked.pop("distance_strategy", None)
    if metric is not None:
        asked = {"metric": metric, **asked}
    chosen = set(asked.values())
    if len(chosen) > 1:
        given = ", ".join(f"{name} means {value!r}" for name, value in asked.items())
        raise ValueError(f"The store's metric is given twice, differently ({given}); pass metric= alone.")
    return chosen.pop() if chosen else "cosine"
