"""LangChain's similarity and MMR searches of a `FaissVectorStore` (its base class): each runs in the store's core
among the documents the filter keeps (a text query in the store's retrieval mode, or the call's `retrieval_mode`:
`DocumentStore.search_text`; a vector: `DocumentStore.search_vector`; MMR: `DocumentStore.mmr_search`), every
argument checked there; the hits become LangChain `Document`s."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from langchain_core.documents import Document

from fair_retrieval.stores import DocumentStore, TextDocument

__all__ = ["Filter", "StoreSearch"]

Filter = Mapping[str, Any] | Callable[[dict[str, Any]], bool]  # see fair_retrieval.stores.filters

SEARCH_KEYWORDS = ("score_threshold", "retrieval_mode", "alpha", "fusion")
"""The keyword arguments a text similarity search honours beyond its parameters (langchain-community FAISS's
`score_threshold`, and the call's search mode); any other is refused by name (a TypeError)."""
VECTOR_KEYWORDS = ("score_threshold", "retrieval_mode")
MMR_KEYWORDS = ("retrieval_mode", "alpha", "fusion")
MMR_VECTOR_KEYWORDS = ("retrieval_mode",)
SIMILARITY_PARAMETERS = ("k", "filter", "fetch_k")
MMR_PARAMETERS = ("k", "fetch_k", "lambda_mult", "filter")


class StoreSearch:
    """The searches of `FaissVectorStore`, its base class."""

    _store: DocumentStore[TextDocument]

    @property
    def retrieval_mode(self) -> str:
        """How a text query that names no `retrieval_mode` is answered: "hybrid" (the default), "dense" or "sparse"
        (compares equal to langchain-qdrant's `RetrievalMode` values)."""
        return self._store.search_settings.mode

    def _compiled(self, filter: Any) -> Any:
        """The call's filter compiled once, as this store spells filters (`_spelled`); a compiled one as it is."""
        return self._store.compiled_filter(self._spelled(filter))

    def _spelled(self, filter: Any) -> Any:
        """`filter` in the stores' grammar: as it is here; a store of another library's conventions translates."""
        return filter

    def similarity_search_with_score_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to a query vector, with their raw scores (see `metric`), among those `filter`
        keeps: a `fair_retrieval.stores.filters` dict (``{"year": {"$gte": 2024}}``, ``$in``, ``$or``, …) or
        a function of the metadata, checked before anything is searched (`fetch_k` is unused: the search runs among
        the matches). A multi-vector store's are k distinct documents, each with its best window's span under
        "best_window" in its metadata (a copy). Dense: a `retrieval_mode` other than "dense" is refused.
        `score_threshold=` keeps the hits whose raw score passes it, as langchain-community's FAISS does: a cosine or
        inner product at least it, a squared distance ("l2") at most it; another keyword is a TypeError."""
        self._keywords(kwargs, VECTOR_KEYWORDS, "similarity_search_with_score_by_vector")
        self._dense_only(kwargs)
        predicate = self._compiled(filter)
        with self._searching(kwargs):
            hits = self._store.search_vector(embedding, k, predicate, score_threshold=kwargs.get("score_threshold"))
        return self._documents(self._store.found(hits))

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k best documents for `query` in the store's retrieval mode, or the one `retrieval_mode=` asks for
        ("dense", "sparse", "hybrid"; `alpha=` and `fusion=` for this call too), with their scores: dense raw
        scores (see `metric`), BM25 scores (sparse) or fused scores in [0, 1] (hybrid). A dense or hybrid query is
        embedded plainly, as a query; a sparse one is not embedded. `score_threshold=` keeps the hits whose score
        passes it (a squared distance at most it, any other score at least it, as langchain-community's FAISS);
        another keyword is a TypeError naming the accepted ones, raised before the query is embedded."""
        self._keywords(kwargs, SEARCH_KEYWORDS, "similarity_search_with_score")
        predicate = self._compiled(filter)  # a malformed filter fails before the query is embedded
        settings = self._store.call_settings(**self._call_options(kwargs))
        threshold = self._store.check_score_threshold(kwargs.get("score_threshold"))
        with self._searching(kwargs):
            if settings.mode == "dense":  # by vector, the one dense path (what subclasses of the store extend)
                embedding = self._store.embed_query(query)
                return self.similarity_search_with_score_by_vector(embedding, k, predicate, score_threshold=threshold)
            hits = self._store.search_text(query, k, predicate, settings, score_threshold=threshold)
        return self._documents(self._store.found(hits))

    def _similarity_search_with_relevance_scores(
        self, query: str, k: int = 4, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """LangChain's relevance scores in [0, 1]: the metric's relevance of a dense score, the fused score of a
        hybrid search as it is, a BM25 score divided by the query's best (sparse)."""
        settings = self._store.call_settings(**self._call_options(kwargs))
        found = self.similarity_search_with_score(query, k, **kwargs)
        if settings.mode == "hybrid":
            return found
        if settings.mode == "sparse":
            best = max((score for _, score in found), default=0.0)
            return [(document, score / best if best > 0 else 0.0) for document, score in found]
        relevance = self._select_relevance_score_fn()  # type: ignore[attr-defined]
        return [(document, relevance(score)) for document, score in found]

    def similarity_search_by_vector(
        self, embedding: list[float], k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        """The k documents nearest to a query vector (`score_threshold=` as in
        `similarity_search_with_score_by_vector`)."""
        self._keywords(kwargs, VECTOR_KEYWORDS, "similarity_search_by_vector")
        self._dense_only(kwargs)
        found = self.similarity_search_with_score_by_vector(embedding, k, filter, **kwargs)
        return [document for document, _ in found]

    def similarity_search(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[Document]:
        """The k best documents for `query` (`filter` as in `similarity_search_with_score_by_vector`; `retrieval_mode`,
        `alpha`, `fusion` and `score_threshold` as in `similarity_search_with_score`)."""
        self._keywords(kwargs, SEARCH_KEYWORDS, "similarity_search")
        return [document for document, _ in self.similarity_search_with_score(query, k, filter, **kwargs)]

    def max_marginal_relevance_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: Filter | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """k documents chosen for relevance and diversity (MMR, `DocumentStore.mmr_search`; `lambda_mult` 1: relevance
        only, 0: diversity only) among the `fetch_k` nearest that pass `filter`, with their raw search
        scores (a multi-vector store: distinct documents, compared by their pooled vectors). As
        langchain-community's FAISS, MMR takes no `score_threshold`: another keyword is a TypeError."""
        self._keywords(
            kwargs, MMR_VECTOR_KEYWORDS, "max_marginal_relevance_search_with_score_by_vector", MMR_PARAMETERS
        )
        self._dense_only(kwargs)
        predicate = self._compiled(filter)
        with self._searching(kwargs):
            hits = self._store.mmr_search(embedding, k, fetch_k, lambda_mult, predicate)
        return self._documents(self._store.found(hits))

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
        self._keywords(kwargs, MMR_VECTOR_KEYWORDS, "max_marginal_relevance_search_by_vector", MMR_PARAMETERS)
        self._dense_only(kwargs)
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
        """MMR search for `query` (see `max_marginal_relevance_search_by_vector`); in a "sparse" or "hybrid"
        retrieval mode (the store's, or `retrieval_mode=`) the `fetch_k` candidates are that search's; `alpha=` and
        `fusion=` as in `similarity_search_with_score`, another keyword is a TypeError."""
        self._keywords(kwargs, MMR_KEYWORDS, "max_marginal_relevance_search", MMR_PARAMETERS)
        predicate = self._compiled(filter)
        settings = self._store.call_settings(**self._call_options(kwargs))
        embedding = self._store.embed_query(query)
        with self._searching(kwargs):
            if settings.mode == "dense":
                return self.max_marginal_relevance_search_by_vector(
                    embedding, k, fetch_k, lambda_mult, filter=predicate
                )
            hits = self._store.mmr_search(embedding, k, fetch_k, lambda_mult, predicate, query=query, settings=settings)
        return [document for document, _ in self._documents(self._store.found(hits))]

    def _keywords(
        self,
        kwargs: Mapping[str, Any],
        honoured: tuple[str, ...],
        call: str,
        named: tuple[str, ...] = SIMILARITY_PARAMETERS,
    ) -> None:
        """Refuse the keywords `call` does not honour (`DocumentStore.check_keywords`: a TypeError naming them)."""
        honoured = (*honoured, *self._call_keywords)
        self._store.check_keywords(kwargs, honoured, f"{type(self).__name__}.{call}", named)

    _call_keywords: tuple[str, ...] = ()
    """Keywords every search of this store takes beside the shared ones (a Qdrant store's `search_params`)."""

    def _searching(self, kwargs: Mapping[str, Any]) -> contextlib.AbstractContextManager[None]:
        """What a search runs within for the call's own keywords (`_call_keywords`); here nothing."""
        return contextlib.nullcontext()

    def _check_search_kwargs(self, search_type: Any, search_kwargs: Mapping[str, Any]) -> None:
        """Refuse a retriever's `search_kwargs` its search type's call would refuse, when the retriever is made."""
        named: tuple[str, ...]
        honoured: tuple[str, ...]
        if search_type == "mmr":
            named, honoured, call = MMR_PARAMETERS, MMR_KEYWORDS, "max_marginal_relevance_search"
        else:  # "similarity", "similarity_score_threshold" (langchain-core checks the type itself)
            named, honoured, call = SIMILARITY_PARAMETERS, SEARCH_KEYWORDS, "similarity_search"
        rest = {name: value for name, value in search_kwargs.items() if name not in named}
        self._keywords(rest, honoured, call, named)

    @staticmethod
    def _call_options(kwargs: Mapping[str, Any]) -> dict[str, Any]:
        """A call's `retrieval_mode`, `alpha` and `fusion` under the door's names (`DocumentStore.call_settings`,
        which checks them)."""
        return {"mode": kwargs.get("retrieval_mode"), "alpha": kwargs.get("alpha"), "fusion": kwargs.get("fusion")}

    def _dense_only(self, kwargs: Mapping[str, Any]) -> None:
        """Refuse a lexical `retrieval_mode` for a search by vector (it has no words to search)."""
        mode = kwargs.get("retrieval_mode")
        if mode is not None and self._store.call_settings(mode=mode).mode != "dense":
            raise ValueError(
                f"retrieval_mode={mode!r}: a *_by_vector call searches by vector (dense) and has no text for BM25; "
                "pass the query text to similarity_search (or max_marginal_relevance_search) instead."
            )

    @staticmethod
    def _documents(found: Iterable[tuple[TextDocument, float]]) -> list[tuple[Document, float]]:
        """Found documents (`DocumentStore.found`: copies, a multi-vector hit's best window in the metadata) as
        LangChain `Document`s, with their scores."""
        return [(Document(id=doc.key, page_content=doc.text, metadata=doc.metadata), score) for doc, score in found]
