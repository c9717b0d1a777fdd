"""A query by vector, checked and answered in one of the stores' query modes: nearest first, or MMR.

LlamaIndex hands a vector store a whole query (its vector, its top k, its mode, restrictions); `vector_query_hits`
checks it as the store needs it and answers it, so the adapter only translates names: "default" is the store's
search (`DocumentStore.search`), "mmr" is `fair_retrieval.stores.marginal_relevance.mmr_hits` with the query's
λ (`mmr_threshold`, 0.5 when none is given, as llama-index's SimpleVectorStore) among the `prefetch_k` best (None:
every document that qualifies, as SimpleVectorStore considers every node).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from fair_retrieval.stores.document_store import DocumentStore, StoreHit
from fair_retrieval.stores.indexed_records import Keyed
from fair_retrieval.stores.marginal_relevance import mmr_hits
from fair_retrieval.validate import positive_int

__all__ = ["QUERY_MODES", "vector_query_hits"]

QUERY_MODES: tuple[str, ...] = ("default", "mmr")
"""The query modes a store answers (llama-index's `VectorStoreQueryMode` values)."""

R = TypeVar("R", bound=Keyed)


def vector_query_hits(
    store: DocumentStore[R],
    embedding: Any,
    top_k: Any,
    *,
    mode: str = "default",
    among: Sequence[int] | None = None,
    mmr_threshold: float | None = None,
    prefetch_k: int | None = None,
) -> list[StoreHit[R]]:
    """The `top_k` documents for a query vector in `mode`, best first (MMR: in the order chosen), among `among`.

    Raises:
        ValueError: another mode, no query embedding or one of the wrong size, a bad `top_k` / `prefetch_k`, or an
            `mmr_threshold` outside [0, 1].
    """
    if mode not in QUERY_MODES:
        raise ValueError(
            f"{store.name} answers VectorStoreQueryMode.DEFAULT (dense vector search) and MMR "
            f'(vector_store_query_mode="mmr", vector_store_kwargs={{"mmr_threshold": 0.5}}), got {mode!r}.'
        )
    top_k = positive_int(top_k, "similarity_top_k")
    if embedding is None:
        raise ValueError(
            "The query has no query_embedding: this store searches by vector. Embed the query with the store's "
            "embed model (retrievers do this), or set VectorStoreQuery(query_embedding=...)."
        )
    vector = np.asarray(embedding, dtype=np.float32)
    index = store.index
    if vector.ndim != 1 or (index is not None and vector.size != index.dim):
        raise ValueError(
            f"query_embedding has {vector.size if vector.ndim == 1 else vector.shape} dimensions but this store "
            f"holds {index.dim if index else '?'}-d vectors; embed the query with the store's model (one vector)."
        )
    if mode == "mmr":
        threshold = 0.5 if mmr_threshold is None else mmr_threshold
        if not isinstance(threshold, int | float) or isinstance(threshold, bool) or not 0.0 <= threshold <= 1.0:
            raise ValueError(
                f"mmr_threshold must be a number in [0, 1] (1: relevance only, 0: diversity only), got {threshold!r}."
            )
        return mmr_hits(store, vector, top_k, prefetch_k, float(threshold), among=among)
    return store.search(vector, top_k, among=among)
