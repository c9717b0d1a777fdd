"""What both LangChain stores of langchain-fair do with documents, the same over FAISS and Qdrant: `StoreDocuments`
(with the searches, `StoreSearch`), a base class of `FaissVectorStore` and `FairQdrantVectorStore`. Every call goes
to the store's `fair_retrieval.stores.DocumentStore` (the FAISS store's or the Qdrant one's), which checks it."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever

from fair_retrieval.stores import DocumentStore, TextDocument
from langchain_fair.searching import StoreSearch

__all__ = ["StoreDocuments"]


class StoreDocuments(StoreSearch):
    """The document calls of `FaissVectorStore` and `FairQdrantVectorStore`, their base class."""

    _store: DocumentStore[TextDocument]
    _relevance_score_fn: Callable[[float], float] | None

    @property
    def embeddings(self) -> Embeddings:
        """The embeddings used for documents and queries."""
        return self._store.embedder  # type: ignore[no-any-return]

    def __len__(self) -> int:
        return len(self._store)

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed `texts` (a multi-vector store: window by window, one pass) and store them under `ids` (None
        entries, or None: new UUIDs) with `metadatas` (JSON dicts); an existing id is replaced. Returns the ids.

        Raises:
            TypeError: a non-string text, a non-dict or non-JSON metadata value, or a non-string id.
            ValueError: metadatas or ids of the wrong length, or an id repeated within the call.
        """
        return self._store.add_documents(texts, metadatas, ids)  # embedded by the store's embeddings

    def add_embeddings(
        self,
        text_embeddings: Iterable[tuple[str, Sequence[float]]],
        metadatas: list[dict[str, Any]] | None = None,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store texts with vectors computed elsewhere (same model as `embeddings`; a multi-vector store keeps each
        as one window spanning the whole text), as `add_texts` otherwise (TypeError for a pair that is not (str,
        vector), ValueError for vectors of another size or not finite)."""
        return self._store.add_document_vectors(text_embeddings, metadatas, ids)

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents for `ids`, in the order asked; unknown ids are skipped (LangChain's contract)."""
        return [document for document, _ in self._documents(self._store.found(self._store.documents(ids)))]

    def delete(self, ids: list[str] | None = None, *, strict: bool = False, **kwargs: Any) -> bool:
        """Delete the documents stored under `ids`; True if every id was stored. Unknown ids are ignored with a
        warning (LangChain's contract), or refused with `strict=True`.

        Raises:
            ValueError: `ids` is None (to empty the store, pass `store.ids`), or unknown ids with `strict=True`
                (nothing is deleted then).
            TypeError: `ids` is a single string or holds a non-string.
        """
        return not self._store.delete_ids(ids, strict=strict)

    def as_retriever(self, **kwargs: Any) -> VectorStoreRetriever:
        """A LangChain retriever; a `filter` in `search_kwargs` is checked now (ValueError here, not later), and so
        are their names (TypeError for one the search type's call does not honour)."""
        search_kwargs = kwargs.get("search_kwargs") or {}
        self._check_search_kwargs(kwargs.get("search_type", "similarity"), search_kwargs)
        if search_kwargs.get("filter") is not None:
            self._store.compiled_filter(search_kwargs["filter"])
        return VectorStore.as_retriever(cast(VectorStore, self), **kwargs)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # langchain-core's cosine / Euclidean conventions, read on our raw scores (inner products, squared distances)
        return self._relevance_score_fn or self._store.relevance
