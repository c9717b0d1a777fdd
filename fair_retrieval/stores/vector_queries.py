"""A query (its vector and its text), checked and answered in one of the stores' query modes.

LlamaIndex hands a vector store a whole query (its vector, its text, its top k, its mode, restrictions);
`vector_query_hits` checks it as the store needs it and answers it, so the adapter only translates names:

- "default" is the store's own mode (`DocumentStore.search_settings`: hybrid unless the store was built otherwise);
  a query without text is answered by its vector (dense);
- "sparse" and "text_search" search the lexical side by the query's text only (`DocumentStore.lexical_search`), the
  `sparse_top_k` best (else `top_k`);
- "hybrid" fuses both (`DocumentStore.hybrid_search`): `alpha` weighs the dense side (None: the store's), the dense
  side gives `top_k` candidates and the lexical one `sparse_top_k` (each at least the store's `candidates`), and
  `hybrid_top_k` (else `top_k`) fused documents come back, as llama-index's hybrid stores read these fields;
- "mmr" is `fair_retrieval.stores.marginal_relevance.mmr_hits` with the query's λ (`mmr_threshold`, 0.5 when none
  is given, as llama-index's SimpleVectorStore) among the `prefetch_k` best (None: every document that qualifies,
  as SimpleVectorStore considers every node).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import numpy as np

from fair_retrieval.stores.indexed_records import Keyed
from fair_retrieval.stores.marginal_relevance import mmr_hits
from fair_retrieval.stores.store_core import StoreCore, StoreHit
from fair_retrieval.validate import positive_int

__all__ = ["QUERY_MODES", "vector_query_hits"]

QUERY_MODES: tuple[str, ...] = ("default", "mmr", "sparse", "text_search", "hybrid")
"""The query modes a store answers (llama-index's `VectorStoreQueryMode` values)."""

R = TypeVar("R", bound=Keyed)


def vector_query_hits(
    store: StoreCore[R],
    embedding: Any,
    top_k: Any,
    *,
    mode: str = "default",
    among: Sequence[int] | None = None,
    mmr_threshold: float | None = None,
    prefetch_k: int | None = None,
    query_str: str | None = None,
    alpha: float | None = None,
    sparse_top_k: int | None = None,
    hybrid_top_k: int | None = None,
) -> list[StoreHit[R]]:
    """The documents for a query in `mode`, best first (MMR: in the order chosen), among `among`.

    Raises:
        ValueError: another mode, no query embedding (a dense or hybrid mode) or one of the wrong size, no query
            text (sparse or hybrid), a lexical mode on a store without a lexical side, a bad `top_k`,
            `prefetch_k`, `sparse_top_k`, `hybrid_top_k` or `alpha`, or an `mmr_threshold` outside [0, 1].
    """
    if mode not in QUERY_MODES:
        raise ValueError(
            f"{store.name} answers VectorStoreQueryMode.DEFAULT (the store's own mode), HYBRID (dense and BM25 fused; "
            f"alpha, sparse_top_k, hybrid_top_k), SPARSE / TEXT_SEARCH (BM25 over the nodes' text) and MMR "
            f'(vector_store_query_mode="mmr", vector_store_kwargs={{"mmr_threshold": 0.5}}), got {mode!r}.'
        )
    top_k = positive_int(top_k, "similarity_top_k")
    sparse_k = None if sparse_top_k is None else positive_int(sparse_top_k, "sparse_top_k")
    hybrid_k = None if hybrid_top_k is None else positive_int(hybrid_top_k, "hybrid_top_k")
    settings = store.search_settings.with_overrides(alpha=alpha)
    if mode == "default":
        mode = "dense" if query_str is None else settings.mode
    if mode in ("sparse", "text_search", "hybrid"):
        if query_str is None:
            raise ValueError(
                f"A {mode} query searches the nodes' words: it needs query_str (retrievers set it from the question)."
            )
        if mode != "hybrid":
            return store.text_search(
                query_str,
                top_k,
                _no_embedding,
                settings=settings.with_overrides(mode="sparse"),
                among=among,
                sparse_k=sparse_k,
            )
    if embedding is None:
        raise ValueError(
            "The query has no query_embedding: this store searches by vector. Embed the query with the store's "
            "embed model (retrievers do this), or set VectorStoreQuery(query_embedding=...)."
        )
    vector = np.asarray(embedding, dtype=np.float32)
    if vector.ndim != 1:
        raise ValueError(
            f"query_embedding has the shape {vector.shape}, not one vector; embed the query with the store's model."
        )
    if mode == "mmr":
        threshold = 0.5 if mmr_threshold is None else mmr_threshold
        return mmr_hits(store, vector, top_k, prefetch_k, threshold, among=among, lambda_name="mmr_threshold")
    if mode == "hybrid":
        assert query_str is not None
        return store.text_search(
            query_str,
            hybrid_k or top_k,
            lambda _: vector,
            settings=settings.with_overrides(mode="hybrid"),
            among=among,
            dense_k=settings.pool(top_k) if hybrid_k is not None else None,
            sparse_k=None if sparse_k is None else settings.pool(sparse_k),
        )
    return store.search(vector, top_k, among=among, source="query_embedding")  # its size checked there, once


def _no_embedding(text: str) -> Any:
    raise AssertionError("a sparse query is never embedded")
