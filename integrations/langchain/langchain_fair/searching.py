"""LangChain's similarity and MMR searches of a `FaissVectorStore` (the base class that holds them).

Each search runs in the store's core (`fair_retrieval.stores.DocumentStore.search`) among the documents the filter
keeps, so it returns k documents whenever k match; this module turns the hits into LangChain `Document`s.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.documents import Document
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from fair_retrieval.stores import BEST_WINDOW_KEY, DocumentStore, StoreHit, positive_int, store_filter
from langchain_fair.local_folders import StoredDocument

__all__ = ["Filter", "StoreSearch"]

Filter = Mapping[str, Any] | Callable[[dict[str, Any]], bool]  # see fair_retrieval.stores.filter_grammar


class StoreSearch:
    """The searches of `FaissVectorStore`, its base class."""

    _store: DocumentStore[StoredDocument]

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to a query vector, with their raw scores (see `metric`).

        In a multi-vector store: the k best distinct documents by their aggregate score, each with its best
        window's span in its metadata under "best_window" (on the copy returned).

        Args:
            embedding: the query vector.
            k: how many documents to return.
            filter: a `fair_retrieval.stores.filter_grammar` dict (``{"lang": "en"}``, ``{"year": {"$gte": 2024}}``,
                ``$in``, ``$and``, ``$or``, ``$not``, …) or a function of the metadata dict; the search runs among
                the matching documents only. A malformed filter raises ValueError before anything is searched.
            fetch_k: unused (filtering needs no extra candidates); accepted for langchain-community's signature.
            **kwargs: unused; accepted for LangChain compatibility.
        """
        hits = self._hits(embedding, k, filter)
        return [(self._document(hit), hit.score) for hit in hits]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to `query` (embedded plainly, as a query), with their raw scores."""
        predicate = store_filter(filter)  # a malformed filter fails before the query is embedded
        return self.similarity_search_with_score_by_vector(self._store.embedder.embed_query(query), k, predicate)

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        """The k documents nearest to a query vector."""
        return [document for document, _ in self.similarity_search_with_score_by_vector(embedding, k, filter)]

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        """The k documents nearest to `query` (`filter` as in `similarity_search_with_score_by_vector`)."""
        predicate = store_filter(filter)
        return self.similarity_search_by_vector(self._store.embedder.embed_query(query), k, predicate)

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """k documents chosen from the `fetch_k` nearest (that pass `filter`) for relevance *and* diversity (MMR).

        Args:
            embedding: the query vector.
            k: how many documents to return.
            fetch_k: the candidates MMR chooses from (a multi-vector store: `fetch_k` distinct documents, compared
                by their pooled vectors).
            lambda_mult: 1 is pure relevance, 0 pure diversity.
            filter: as in `similarity_search_with_score_by_vector`.
            **kwargs: unused; accepted for LangChain compatibility.
        """
        predicate = store_filter(filter)
        positive_int(k, "k")
        if not 0.0 <= lambda_mult <= 1.0:
            raise ValueError(f"lambda_mult must be in [0, 1], got {lambda_mult!r}.")
        hits = self._hits(embedding, max(k, positive_int(fetch_k, "fetch_k")), predicate)
        if not hits:
            return []
        query = self._store.prepared([embedding], 1, "the query embedding")[0]
        vectors = self._store.vectors([hit.int_id for hit in hits]).tolist()
        chosen = maximal_marginal_relevance(query, vectors, lambda_mult=lambda_mult, k=k)
        return [self._document(hits[position]) for position in chosen]

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
        embedding = self._store.embedder.embed_query(query)
        return self.max_marginal_relevance_search_by_vector(embedding, k, fetch_k, lambda_mult, filter=predicate)

    def _hits(self, embedding: Any, k: int, filter: Filter | None) -> list[StoreHit[StoredDocument]]:
        """The core's hits for a query vector among the documents `filter` keeps."""
        predicate = store_filter(filter)
        positive_int(k, "k")
        keep = None if predicate is None else (lambda document: predicate(document.metadata))
        return self._store.search(embedding, k, keep=keep)

    @staticmethod
    def _document(hit: StoreHit[StoredDocument]) -> Document:
        """A copy of a stored document (editing it cannot change the store), with a multi-vector hit's best
        window in its metadata."""
        id_, text, metadata = hit.record
        copied = copy.deepcopy(metadata)
        if hit.best_window is not None:
            copied[BEST_WINDOW_KEY] = dict(hit.best_window)
        return Document(id=id_, page_content=text, metadata=copied)
