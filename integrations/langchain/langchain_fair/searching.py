"""LangChain's similarity and MMR searches of a `FaissVectorStore` (its base class): each runs in the store's core
(`DocumentStore.search`) among the documents the filter keeps; the hits become LangChain `Document`s."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from langchain_core.documents import Document

from fair_retrieval.stores import (
    DocumentStore,
    StoreHit,
    TextDocument,
    check_query,
    hit_metadata,
    mmr_hits,
    positive_int,
    record_filter,
    store_filter,
)

__all__ = ["Filter", "StoreSearch"]

Filter = Mapping[str, Any] | Callable[[dict[str, Any]], bool]  # see fair_retrieval.stores.filter_grammar


class StoreSearch:
    """The searches of `FaissVectorStore`, its base class."""

    _store: DocumentStore[TextDocument]

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to a query vector, with their raw scores (see `metric`), among those `filter`
        keeps: a `fair_retrieval.stores.filter_grammar` dict (``{"year": {"$gte": 2024}}``, ``$in``, ``$or``, …) or
        a function of the metadata, checked before anything is searched (`fetch_k` is unused: the search runs among
        the matches). A multi-vector store's are k distinct documents, each with its best window's span under
        "best_window" in its metadata (a copy)."""
        return [(self._document(hit), hit.score) for hit in self._hits(embedding, k, filter)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to `query` (embedded plainly, as a query), with their raw scores."""
        predicate = store_filter(filter)  # a malformed filter fails before the query is embedded
        return self.similarity_search_with_score_by_vector(
            self._store.embedder.embed_query(check_query(query)), k, predicate
        )

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        """The k documents nearest to a query vector."""
        return [document for document, _ in self.similarity_search_with_score_by_vector(embedding, k, filter)]

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        """The k documents nearest to `query` (`filter` as in `similarity_search_with_score_by_vector`)."""
        return [document for document, _ in self.similarity_search_with_score(query, k, filter)]

    def max_marginal_relevance_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """k documents chosen for relevance and diversity (MMR, `fair_retrieval.stores.mmr_hits`; `lambda_mult` 1:
        relevance only, 0: diversity only) among the `fetch_k` nearest that pass `filter`, with their raw search
        scores (a multi-vector store: distinct documents, compared by their pooled vectors)."""
        hits = mmr_hits(self._store, embedding, k, fetch_k, lambda_mult, keep=record_filter(filter))
        return [(self._document(hit), hit.score) for hit in hits]

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """The documents of `max_marginal_relevance_search_with_score_by_vector`, without scores."""
        found = self.max_marginal_relevance_search_with_score_by_vector(embedding, k, fetch_k, lambda_mult, filter)
        return [document for document, _ in found]

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
        embedding = self._store.embedder.embed_query(check_query(query))
        return self.max_marginal_relevance_search_by_vector(embedding, k, fetch_k, lambda_mult, filter=predicate)

    def _hits(self, embedding: Any, k: int, filter: Filter | None) -> list[StoreHit[TextDocument]]:
        return self._store.search(embedding, positive_int(k, "k"), keep=record_filter(filter))

    @staticmethod
    def _document(hit: StoreHit[TextDocument]) -> Document:
        """A copy of a stored document, with a multi-vector hit's best window in its metadata."""
        return Document(id=hit.record.key, page_content=hit.record.text, metadata=hit_metadata(hit))
