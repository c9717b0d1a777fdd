"""Searching a `FaissVectorStore`: LangChain's similarity and MMR searches (the base class that holds them), each
restricted to the documents a filter keeps inside the index's own search.

The store class provides its records (`fair_retrieval.stores.IndexedRecords`: documents, the id map and the index),
its embeddings (queries are embedded plainly, with `embed_query`) and its metric; `_as_matrix` (vectors checked and,
for metric "cosine", normalised) serves its adds too. Filters are `fair_retrieval.stores.filters` dicts or functions of
the metadata.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from fair_retrieval.stores import (
    BEST_WINDOW_KEY,
    IndexedRecords,
    StoreFilter,
    check_query,
    positive_int,
    store_filter,
    unit_rows,
)
from langchain_fair.persistence import StoredDocument

__all__ = ["Filter", "StoreSearch"]

Filter = Mapping[str, Any] | Callable[[dict[str, Any]], bool]  # see fair_retrieval.stores.filters


class StoreSearch:
    """The searches of `FaissVectorStore`, its base class."""

    _records: IndexedRecords[StoredDocument]
    _embedding: Embeddings
    _metric: str  # "cosine", "ip" or "l2"

    def similarity_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Filter | None = None,
        fetch_k: int = 20,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to a query vector, with their raw scores (see `metric`).

        In a multi-vector store: the k best distinct documents by their aggregate score (see the constructor), each
        with its best window's span in its metadata under "best_window" (on the copy returned; the stored metadata
        is unchanged).

        Args:
            embedding: the query vector.
            k: how many documents to return.
            filter: which documents may be returned: a `fair_retrieval.stores.filters` dict (``{"lang": "en"}``, a list
                value meaning "any of", ``{"year": {"$gte": 2024}}``, ``$in``/``$nin``, ``$and``/``$or``/``$not``, …)
                or a function of the metadata dict returning True for documents to keep. The search runs among the
                matching documents only, so it returns min(k, matches) of them. A malformed filter raises
                ValueError before anything is searched.
            fetch_k: unused here (filtering no longer needs extra candidates); accepted for compatibility with
                langchain-community's FAISS store.
            **kwargs: unused; accepted for LangChain compatibility.
        """
        predicate = store_filter(filter)
        positive_int(k, "k")
        if not self._records:
            return []
        query = self._as_matrix([embedding], 1, "the query embedding")
        return [(self._document(int_id, window), score) for int_id, score, window in self._search(query, k, predicate)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to `query` (embedded plainly, as a query), with their raw scores."""
        predicate = store_filter(filter)  # a malformed filter fails before the query is embedded
        return self.similarity_search_with_score_by_vector(
            self._embedding.embed_query(check_query(query)), k, filter=predicate, fetch_k=fetch_k, **kwargs
        )

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        """The k documents nearest to a query vector."""
        hits = self.similarity_search_with_score_by_vector(embedding, k, filter=filter, fetch_k=fetch_k, **kwargs)
        return [document for document, _ in hits]

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        """The k documents nearest to `query` (`filter` as in `similarity_search_with_score_by_vector`)."""
        predicate = store_filter(filter)
        return self.similarity_search_by_vector(
            self._embedding.embed_query(check_query(query)), k, predicate, fetch_k, **kwargs
        )

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """k documents chosen from the `fetch_k` nearest for relevance *and* diversity (MMR).

        Args:
            embedding: the query vector.
            k: how many documents to return.
            fetch_k: candidates MMR chooses from: the `fetch_k` nearest documents that pass `filter` (in a
                multi-vector store, `fetch_k` distinct documents, compared by their pooled vectors; each result
                carries its best window as in `similarity_search_with_score_by_vector`).
            lambda_mult: 1 is pure relevance, 0 pure diversity.
            filter: as in `similarity_search_with_score_by_vector`.
            **kwargs: unused; accepted for LangChain compatibility.
        """
        predicate = store_filter(filter)
        positive_int(k, "k")
        if not 0.0 <= lambda_mult <= 1.0:
            raise ValueError(f"lambda_mult must be in [0, 1], got {lambda_mult!r}.")
        candidates = max(k, positive_int(fetch_k, "fetch_k"))
        if not self._records:
            return []
        query = self._as_matrix([embedding], 1, "the query embedding")
        hits = self._search(query, candidates, predicate)
        if not hits:
            return []
        vectors = self._records.vectors([int_id for int_id, _, _ in hits]).tolist()
        chosen = maximal_marginal_relevance(query[0], vectors, lambda_mult=lambda_mult, k=k)
        return [self._document(hits[position][0], hits[position][2]) for position in chosen]

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """MMR search for `query` (see `max_marginal_relevance_search_by_vector`)."""
        predicate = store_filter(filter)
        return self.max_marginal_relevance_search_by_vector(
            self._embedding.embed_query(check_query(query)), k, fetch_k, lambda_mult, filter=predicate, **kwargs
        )

    def _search(
        self, query: np.ndarray, k: int, predicate: StoreFilter | None
    ) -> list[tuple[int, float, dict[str, int] | None]]:
        """(int id, raw score, best window or None) of the k best matches of one prepared query row among the
        documents that pass `predicate` (the index searches only those: `FaissIndex.search(..., ids=...)`; in
        multi-vector mode k distinct documents and their best windows: `IndexedRecords.search_hits`)."""
        selected: np.ndarray | None = None
        if predicate is not None:
            kept = self._records.matching(lambda document: predicate(document.metadata))
            if not kept:
                return []
            if len(kept) < len(self._records):
                selected = np.asarray(kept, dtype=np.int64)
        return self._records.search_hits(query, k, selected)

    def _document(self, int_id: int, best_window: dict[str, int] | None = None) -> Document:
        """A copy of a stored document, so callers cannot change the store by editing what they got; a search hit
        of a multi-vector store carries its `best_window` in the copy's metadata."""
        id_, text, metadata = self._records.records[int_id]
        copied = copy.deepcopy(metadata)
        if best_window is not None:
            copied[BEST_WINDOW_KEY] = dict(best_window)
        return Document(id=id_, page_content=text, metadata=copied)

    def _as_matrix(self, vectors: Any, count: int, source: str) -> np.ndarray:
        """Embeddings as a float32 matrix the index takes: checked shape, and L2-normalised rows for "cosine"."""
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != count:
            raise ValueError(f"{source} returned {matrix.shape[0] if matrix.ndim else 0} vectors for {count} texts.")
        index = self._records.index
        if index is not None and matrix.shape[1] != index.dim:
            raise ValueError(
                f"{source} gave {matrix.shape[1]}-d vectors but this store holds {index.dim}-d ones; use the "
                "embeddings the store was built with."
            )
        return unit_rows(matrix) if self._metric == "cosine" else matrix
