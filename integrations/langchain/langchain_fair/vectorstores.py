"""FaissVectorStore: a LangChain vector store on fair_retrieval's FaissIndex, saved without pickle.

The store logic (ids, upserts, deletes, filtered searches, multi-vector documents, saving and loading) is
`fair_retrieval.stores.DocumentStore`'s, shared with the LlamaIndex store; this module and its two base classes
(`langchain_fair.searching`, `langchain_fair.local_folders`) translate LangChain's types and signatures to it. See
docs/guides/stores.md for the design, the saved format and the conversion of langchain-community's folders.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from typing_extensions import Self

from fair_retrieval import FaissIndex, MultiVectorIndex
from fair_retrieval.index import Aggregate
from fair_retrieval.stores import (
    DocumentStore,
    StoreHit,
    StoreMetric,
    check_store_entries,
    ensure_text_list,
    json_metadata_list,
    new_ids,
    preview,
    relevance_function,
    store_filter,
    text_vector_pairs,
)
from langchain_fair.local_folders import LocalFolders, StoredDocument
from langchain_fair.searching import StoreSearch

logger = logging.getLogger(__name__)

Metric = StoreMetric


class FaissVectorStore(LocalFolders, StoreSearch, VectorStore):
    """A FAISS vector store for LangChain that never pickles.

    Args:
        embedding: any LangChain `Embeddings`; use `langchain_fair.FairEmbeddings` for position-fair documents.
        metric: "cosine" (vectors are L2-normalised; scores are cosine similarities, larger is better), "ip" (raw
            inner product, larger is better) or "l2" (squared Euclidean distance, smaller is better).
        kind: the FaissIndex kind: "flat" (exact, default), "hnsw", "ivf" or "ivfpq".
        gpu: "auto" puts the index on a GPU when faiss sees one; True requires one; False stays on CPU.
        relevance_score_fn: maps a raw score to [0, 1] for `similarity_search_with_relevance_scores`; the default
            gives (1 + cosine) / 2 for unit vectors under every metric.
        multivector: keep each document as the vectors of its windows (a `fair_retrieval.MultiVectorIndex`):
            searches return k distinct documents scored by `aggregate`, with the best window's character span in
            each result's metadata under "best_window". Needs embeddings that give windows (`FairEmbeddings`).
            None: the library's default (`fair_retrieval.stores.DEFAULT_MULTIVECTOR`).
        aggregate: how a multi-vector document's window scores become its score: "max", "max-mean" or "top2"
            (None: `fair_retrieval.index.DEFAULT_AGGREGATE`); refused for a pooled store.
        **index_params: kind parameters for the index (e.g. nlist=64 for "ivf"; `fetch_factor` in multi-vector
            mode).

    Everything is checked here; the index is created on the first add, when the vector size is known.

    Raises:
        TypeError: `embedding` is not a LangChain `Embeddings`, or gives no windows for a multi-vector store.
        ValueError: an unknown metric, kind or aggregate, an aggregate for a pooled store, or gpu=True without a
            GPU.

    Example:
        .. code-block:: python

            store = FaissVectorStore.from_texts(texts, FairEmbeddings(model="..."), metadatas=metadatas)
            hits = store.similarity_search("question", k=4, filter={"year": {"$gte": 2024}})
            store.save_local("my_store")
            store = FaissVectorStore.load_local("my_store", FairEmbeddings(model="..."))
    """

    def __init__(
        self,
        embedding: Embeddings,
        *,
        metric: Metric = "cosine",
        kind: str = "flat",
        gpu: Literal["auto"] | bool = "auto",
        relevance_score_fn: Callable[[float], float] | None = None,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
        **index_params: int,
    ) -> None:
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a LangChain Embeddings object, got {type(embedding).__name__}.")
        self._store: DocumentStore[StoredDocument] = DocumentStore(
            metric=metric,
            kind=kind,
            gpu=gpu,
            index_params=dict(index_params),
            multivector=multivector,
            aggregate=aggregate,
            embedder=embedding,
            replaced_move_to_end=True,  # LangChain: an upserted document moves to the end
            name="FaissVectorStore",
        )
        self._relevance_score_fn = relevance_score_fn

    @property
    def _embedding(self) -> Embeddings:
        return self._store.embedder  # type: ignore[no-any-return]

    @property
    def embeddings(self) -> Embeddings:
        """The embeddings used for documents and queries."""
        return self._embedding

    @property
    def index(self) -> FaissIndex | MultiVectorIndex | None:
        """The `fair_retrieval.FaissIndex` (`MultiVectorIndex` in multi-vector mode; None until the first add)."""
        return self._store.index

    @property
    def metric(self) -> str:
        """ "cosine", "ip" or "l2": what the scores are."""
        return self._store.metric

    @property
    def multivector(self) -> bool:
        """Whether documents are kept as the vectors of their windows."""
        return self._store.multivector

    @property
    def aggregate(self) -> Aggregate | None:
        """How a multi-vector document's window scores become its score; None for a pooled store."""
        mode = self._store.mode
        return mode.aggregate if mode.multivector else None

    @property
    def ids(self) -> list[str]:
        """The ids of the stored documents, in insertion order."""
        return self._store.records.keys

    @property
    def _int_ids(self) -> Mapping[str, int]:
        """The id map: LangChain id → the index's int64 id."""
        return self._store.records.int_ids

    def __len__(self) -> int:
        return len(self._store)

    # ------------------------------------------------------------------------------------------------ adding

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Embed `texts` as documents and store them; an existing id is replaced (upsert).

        A multi-vector store embeds each text once, window by window (`embed_document_windows`).

        Args:
            texts: the texts.
            metadatas: one JSON-serialisable dict per text, or None.
            ids: one id per text (None entries get a new UUID), or None for all new UUIDs.
            **kwargs: unused; accepted for LangChain compatibility.

        Returns:
            The ids the texts were stored under, in input order.

        Raises:
            TypeError: a non-string text, a non-dict or non-JSON metadata value, or a non-string id.
            ValueError: metadatas or ids of the wrong length, or an id repeated within the call.
        """
        documents = self._documents(ensure_text_list(texts, "texts"), metadatas, ids)
        if not documents:
            return []
        text_list = [document.text for document in documents]
        if self._store.multivector:
            self._store.add_windows(documents, self._store.embed_windows(text_list))
        else:
            self._store.add(documents, self._embedding.embed_documents(text_list), "embed_documents")
        return [document.key for document in documents]

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
        """A new store holding `texts`; `kwargs` go to the constructor.

        Raises:
            ValueError: if `texts` is empty (use `FaissVectorStore(embedding)` for an empty store), or as
                `add_texts`.
        """
        text_list = ensure_text_list(texts, "texts")
        if not text_list:
            raise ValueError(
                "from_texts got no texts. To start with an empty store, use FaissVectorStore(embedding) and "
                "add_texts / add_documents later."
            )
        store = cls(embedding, **kwargs)
        store.add_texts(text_list, metadatas, ids=ids)
        return store

    def add_embeddings(
        self,
        text_embeddings: Iterable[tuple[str, Sequence[float]]],
        metadatas: list[dict[str, Any]] | None = None,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """Store texts with vectors computed elsewhere (same model as `embeddings`); an existing id is replaced.

        A multi-vector store keeps each vector as one window spanning the whole text (all it knows of it).

        Raises:
            TypeError: a pair that is not (str, vector), or as `add_texts`.
            ValueError: vectors of differing or wrong dimension, non-finite values, or as `add_texts`.
        """
        text_list, vectors = text_vector_pairs(text_embeddings, "text_embeddings")
        documents = self._documents(text_list, metadatas, ids)
        if not documents:
            return []
        self._store.add(documents, vectors, "text_embeddings", lengths=[len(text) for text in text_list])
        return [document.key for document in documents]

    @classmethod
    def from_embeddings(
        cls,
        text_embeddings: Iterable[tuple[str, Sequence[float]]],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        ids: Sequence[str | None] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A new store holding (text, vector) pairs computed elsewhere; `embedding` embeds later texts and queries.

        Raises:
            ValueError: if there are no pairs, or as `add_embeddings`.
        """
        text_list, vectors = text_vector_pairs(text_embeddings, "text_embeddings")
        if not text_list:
            raise ValueError(
                "from_embeddings got no (text, vector) pairs. To start with an empty store, use "
                "FaissVectorStore(embedding) and add_embeddings / add_texts later."
            )
        store = cls(embedding, **kwargs)
        store.add_embeddings(zip(text_list, vectors, strict=True), metadatas, ids)
        return store

    def merge_from(self, other: FaissVectorStore) -> None:
        """Add every document of `other` with its stored vectors (windows between multi-vector stores).

        Raises:
            TypeError: if `other` is not a FaissVectorStore.
            ValueError: an id in both stores, another metric, vector size or mode; nothing is added then.
        """
        if not isinstance(other, FaissVectorStore):
            raise TypeError(
                f"merge_from takes another FaissVectorStore, got {type(other).__name__}. To add a langchain-community "
                "FAISS store, rebuild it with FaissVectorStore.from_embeddings (see load_local)."
            )
        self._store.merge_from(other._store)

    def _documents(self, texts: list[str], metadatas: Any, ids: Any) -> list[StoredDocument]:
        """The documents to store, checked (metadata as JSON copies, new ids where none are given)."""
        metadata_list = json_metadata_list(metadatas, len(texts))
        id_list = new_ids(ids, len(texts))
        check_store_entries(texts, id_list, metadata_list)
        return [StoredDocument(*fields) for fields in zip(id_list, texts, metadata_list, strict=True)]

    # ------------------------------------------------------------------------------------------------ reading, deleting

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents for `ids`, in the order asked; unknown ids are skipped (LangChain's contract)."""
        wanted = ensure_text_list(ids, "ids")
        return [self._document(StoreHit(int_id, record, 0.0, None)) for int_id, record in self._store.get(wanted)]

    def delete(self, ids: list[str] | None = None, *, strict: bool = False, **kwargs: Any) -> bool:
        """Delete the documents stored under `ids`; unknown ids are ignored with a logged warning (LangChain's
        contract), or refused with `strict=True`.

        Returns:
            True if every id was found and deleted, False if some were unknown.

        Raises:
            ValueError: `ids` is None (to empty the store, pass `store.ids`), or unknown ids with `strict=True`
                (nothing is deleted then).
            TypeError: `ids` is a single string or holds a non-string.
        """
        if ids is None:
            raise ValueError("delete() needs the ids to delete; to delete every document, pass store.ids.")
        unique = list(dict.fromkeys(ensure_text_list(ids, "ids")))
        unknown = [id_ for id_ in unique if id_ not in self._store]
        if unknown and strict:
            raise ValueError(f"{len(unknown)} id(s) are not in the store: {preview(unknown)}; nothing was deleted.")
        if unknown:
            logger.warning(
                "delete(): %d id(s) are not in the store and were ignored: %s", len(unknown), preview(unknown)
            )
        self._store.delete(unique)
        return not unknown

    def as_retriever(self, **kwargs: Any) -> VectorStoreRetriever:
        """A LangChain retriever ("similarity", "mmr" or "similarity_score_threshold"); a `filter` in
        `search_kwargs` is checked now, so a malformed one raises ValueError here."""
        search_kwargs = kwargs.get("search_kwargs") or {}
        if search_kwargs.get("filter") is not None:
            store_filter(search_kwargs["filter"])
        return super().as_retriever(**kwargs)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # langchain-core's functions assume other scales; ours give (1 + cosine) / 2 for unit vectors, any metric.
        return self._relevance_score_fn or relevance_function(self._store.metric)
