"""FaissVectorStore: a LangChain vector store on fair_retrieval's FaissIndex, saved without pickle.

LangChain's own FAISS store lived in langchain-community, which was archived; this one depends on langchain-core
only. Vectors live in a `fair_retrieval.FaissIndex` (GPU when faiss sees one, CPU otherwise); the bookkeeping
beside it (the map from LangChain's string ids to the index's int64 ids, the documents by int id, upserts,
deletes, filtered searches) is `fair_retrieval.stores`', shared with the LlamaIndex store. This module translates
between LangChain's types (`Document`, `Embeddings`, its method signatures) and those.

A saved store is a folder with `index/` (FaissIndex.save) and `store.json` (documents, metadata and the id map);
a store saved under another `index_name` uses `<name>/` and `<name>.store.json`, so several stores can share a
folder (`langchain_fair.saved_store`). Both change together: store.json is published in the index's own commit
(`fair_retrieval.stores.files`), so a save killed at any point leaves the previous store or the new one, and a
`load_local` running meanwhile reads one of them. Nothing is pickled, so loading a store cannot execute code; in
exchange, metadata must be JSON: str keys and str / int / float / bool / None / list / dict values.

store.json also records which embeddings made the vectors (`fair_retrieval.embedding.identity`: "embedder"), and
`load_local` refuses other embeddings with a ValueError listing what differs, unless told
`allow_embedder_mismatch=True`. The key is optional, so the format stays version 1: the first release reads new files
(it ignores the key), and files of the first release load here with an INFO line saying the embeddings cannot be
checked.

With `multivector=True` a document is kept as the vectors of its windows (`fair_retrieval.MultiVectorIndex`,
from `embed_document_windows`: one pass gives the window vectors and the pooled one) and every search returns k
distinct documents, scored by the store's `aggregate` of their windows' scores ("max", "max-mean", "top2"), each
result's metadata (a copy) carrying the best window's character span under "best_window" ({"start", "end",
"window"}). Filters, MMR (over the pooled vectors of the fetch_k distinct candidates), deletes and upserts act on
whole documents; `add_embeddings` keeps each given vector as one window; `merge_from` copies windows between
multi-vector stores and refuses to mix modes. store.json records the mode and the aggregate (optional keys: the
format stays version 1) and `load_local` takes them from there; a pooled store is never read as a multi-vector one.
What is not LangChain's is `fair_retrieval.stores.modes`', shared with the LlamaIndex store.

Filters are `fair_retrieval.stores.filters` dicts (``{"year": {"$gte": 2024}}``, ``$in``, ``$and``, ``$or``, ``$not``,
…) or functions of the metadata; the search runs over the matching documents only, so it returns k hits whenever k
documents match.

Coming from langchain-community's FAISS store: `save_local` / `load_local` take the same arguments (`index_name`,
`allow_dangerous_deserialization`, which changes nothing here), and `from_embeddings`, `add_embeddings` and
`merge_from` exist. Its folders (`index.faiss` + `index.pkl`) cannot be read without unpickling; rebuild them with
`from_embeddings` (see `load_local`).
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from typing_extensions import Self

from fair_retrieval import DocumentWindows, FaissIndex, MultiVectorIndex
from fair_retrieval.index import DEFAULT_AGGREGATE, Aggregate
from fair_retrieval.index import Metric as IndexMetric
from fair_retrieval.stores import (
    DocumentMode,
    IndexedRecords,
    check_store_entries,
    checked_windows,
    ensure_text_list,
    json_metadata_list,
    new_ids,
    preview,
    relevance_function,
    store_filter,
    stored_windows,
    text_vector_pairs,
    window_embedder,
)
from langchain_fair.persistence import LocalFolderPersistence, StoredDocument
from langchain_fair.searching import StoreSearch

logger = logging.getLogger(__name__)

Metric = Literal["cosine", "ip", "l2"]


class FaissVectorStore(LocalFolderPersistence, StoreSearch, VectorStore):
    """A FAISS vector store for LangChain that never pickles.

    Args:
        embedding: any LangChain `Embeddings`; use `langchain_fair.FairEmbeddings` for position-fair documents.
        metric: "cosine" (vectors are L2-normalised before indexing and search; scores are cosine similarities,
            larger is better), "ip" (raw inner product, larger is better) or "l2" (squared Euclidean distance,
            smaller is better).
        kind: the FaissIndex kind: "flat" (exact, default), "hnsw", "ivf" or "ivfpq" (see `fair_retrieval.FaissIndex`).
        gpu: "auto" puts the index on a GPU when faiss sees one; True requires one; False stays on CPU.
        relevance_score_fn: maps a raw score to [0, 1] for `similarity_search_with_relevance_scores`; the default
            gives (1 + cosine) / 2 for unit vectors under every metric.
        multivector: keep each document as the vectors of its windows (a `fair_retrieval.MultiVectorIndex`)
            instead of one pooled vector; searches then return k distinct documents scored by `aggregate`, with
            the best window's character span in each result's metadata under "best_window" ({"start", "end",
            "window"}; it replaces a stored key of that name in the copy returned). Needs embeddings that give
            window vectors (`FairEmbeddings`): TypeError otherwise.
        aggregate: how a multi-vector document's window scores become its score: "max" (its best window),
            "max-mean" (the mean of that and its pooled vector's score) or "top2" (the mean of its two best
            windows; the default). Ignored unless `multivector=True`.
        **index_params: kind parameters passed to FaissIndex (e.g. nlist=64 for "ivf"; with `multivector=True`
            also `fetch_factor`, the over-fetch of the window search, see `fair_retrieval.MultiVectorIndex`).

    The index is created on the first add, when the vector size is known.

    Raises:
        TypeError: `embedding` is not a LangChain `Embeddings`, or `multivector=True` with embeddings that give no
            window vectors.
        ValueError: an unknown metric or aggregate.

    Example:
        .. code-block:: python

            from langchain_fair import FairEmbeddings, FaissVectorStore

            store = FaissVectorStore.from_texts(texts, FairEmbeddings(model="..."), metadatas=metadatas)
            hits = store.similarity_search("question", k=4)
            recent = store.similarity_search("question", k=4, filter={"year": {"$gte": 2024}, "lang": ["en", "fr"]})
            store.save_local("my_store")
            store = FaissVectorStore.load_local("my_store", FairEmbeddings(model="..."))

            # k distinct documents, each found by its best window (whose span is in the metadata)
            store = FaissVectorStore.from_documents(chunks, FairEmbeddings(model="..."), multivector=True)
            best = store.similarity_search("question", k=4)[0]
            start, end = best.metadata["best_window"]["start"], best.metadata["best_window"]["end"]
            passage = best.page_content[start:end]
    """

    def __init__(
        self,
        embedding: Embeddings,
        *,
        metric: Metric = "cosine",
        kind: str = "flat",
        gpu: Literal["auto"] | bool = "auto",
        relevance_score_fn: Callable[[float], float] | None = None,
        multivector: bool = False,
        aggregate: Aggregate = DEFAULT_AGGREGATE,
        **index_params: int,
    ) -> None:
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a LangChain Embeddings object, got {type(embedding).__name__}.")
        if metric not in get_args(Metric):
            raise ValueError(f"metric must be one of {get_args(Metric)}, got {metric!r}.")
        self._mode = DocumentMode(multivector, aggregate)
        if multivector:
            window_embedder(embedding, "FaissVectorStore(multivector=True)")  # fails now, not at the first add
        self._embedding = embedding
        self._metric: Metric = metric
        self._kind = kind
        self._gpu = gpu
        self._index_params = dict(index_params)
        self._relevance_score_fn = relevance_score_fn
        self._records: IndexedRecords[StoredDocument] = IndexedRecords(
            self._new_index,
            replaced_move_to_end=True,  # LangChain: an upserted document moves to the end
        )

    @property
    def embeddings(self) -> Embeddings:
        """The embeddings used for documents and queries."""
        return self._embedding

    @property
    def index(self) -> FaissIndex | MultiVectorIndex | None:
        """The underlying `fair_retrieval.FaissIndex` (a `MultiVectorIndex` in multi-vector mode; None until the
        first add)."""
        return self._records.index

    @property
    def multivector(self) -> bool:
        """Whether documents are kept as the vectors of their windows (see the constructor)."""
        return self._mode.multivector

    @property
    def aggregate(self) -> Aggregate:
        """How a multi-vector document's window scores become its score (unused by a pooled store)."""
        return self._mode.aggregate

    @property
    def ids(self) -> list[str]:
        """The ids of the stored documents, in insertion order."""
        return self._records.keys

    @property
    def _int_ids(self) -> Mapping[str, int]:
        """The id map: LangChain id → the index's int64 id."""
        return self._records.int_ids

    def __len__(self) -> int:
        return len(self._records)

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

        With `multivector=True` each text is embedded once, window by window (`embed_document_windows`), and kept
        as its window vectors; a replaced document's windows are all replaced.

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
        text_list = ensure_text_list(texts, "texts")
        metadata_list = json_metadata_list(metadatas, len(text_list))
        id_list = new_ids(ids, len(text_list))
        check_store_entries(text_list, id_list, metadata_list)
        if not text_list:
            return []
        if self._mode.multivector:
            return self._store(text_list, self._embed_windows(text_list), metadata_list, id_list)
        vectors = self._as_matrix(self._embedding.embed_documents(text_list), len(text_list), "embed_documents")
        return self._store(text_list, vectors, metadata_list, id_list)

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
        """A new store holding `texts`; `kwargs` go to the constructor (metric, kind, gpu, multivector, aggregate,
        index parameters).

        Raises:
            ValueError: if `texts` is empty (create an empty store with `FaissVectorStore(embedding)` instead),
                or as `add_texts`.
            TypeError: as `add_texts`.
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
        """Store texts with vectors computed elsewhere (no embedding call); an existing id is replaced (upsert).

        As langchain-community's `FAISS.add_embeddings`. The vectors must come from the same model (and, for
        position-fair documents, the same calibration) as this store's `embeddings`, or they will not be comparable
        with the stored ones and the queries; with metric="cosine" they are L2-normalised as embedded ones are.

        In a multi-vector store each text is kept as a single window (its whole text, `DocumentWindows.single`):
        the vector given is all the store knows of it, so it is scored by that vector alone (and its best window
        in a result spans the whole text). To keep a text's windows, add it with `add_texts` instead.

        Args:
            text_embeddings: (text, vector) pairs.
            metadatas: one JSON-serialisable dict per pair, or None.
            ids: one id per pair (None entries get a new UUID), or None for all new UUIDs.
            **kwargs: unused; accepted for LangChain compatibility.

        Returns:
            The ids the texts were stored under, in input order.

        Raises:
            TypeError: a pair that is not (str, vector), or as `add_texts`.
            ValueError: vectors of differing or wrong dimension, non-finite values, or as `add_texts`.
        """
        text_list, vectors = text_vector_pairs(text_embeddings, "text_embeddings")
        metadata_list = json_metadata_list(metadatas, len(text_list))
        id_list = new_ids(ids, len(text_list))
        check_store_entries(text_list, id_list, metadata_list)
        if not text_list:
            return []
        matrix = self._as_matrix(vectors, len(text_list), "text_embeddings")
        if self._mode.multivector:
            return self._store(
                text_list, DocumentWindows.single(matrix, [len(text) for text in text_list]), metadata_list, id_list
            )
        return self._store(text_list, matrix, metadata_list, id_list)

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

        As langchain-community's `FAISS.from_embeddings`: `kwargs` go to the constructor (metric, kind, gpu,
        multivector, aggregate, index parameters; a multi-vector store keeps each text as one window, see
        `add_embeddings`). This is also the way to move a langchain-community FAISS store over (see `load_local`).

        Raises:
            ValueError: if there are no pairs (create an empty store with `FaissVectorStore(embedding)`), or as
                `add_embeddings`.
            TypeError: as `add_embeddings`.
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
        """Add every document of `other` to this store, copying its stored vectors (nothing is re-embedded).

        As langchain-community's `FAISS.merge_from`. `other` is left unchanged; its documents keep their ids and
        come after this store's, in their order. Both stores should use the same embedding model. The vectors are
        read back from `other`'s index: exact for the flat, hnsw and ivf kinds, the decoded codes for ivfpq.
        Between multi-vector stores every window is copied with its span and weight (this store's aggregate then
        scores them).

        Raises:
            TypeError: if `other` is not a FaissVectorStore.
            ValueError: if an id is in both stores (the message lists some; delete or rename them first), the
                stores have different metrics or vector sizes, or one is multi-vector and the other pooled. Nothing
                is added then.
        """
        if not isinstance(other, FaissVectorStore):
            raise TypeError(
                f"merge_from takes another FaissVectorStore, got {type(other).__name__}. To add a langchain-community "
                "FAISS store, rebuild it with FaissVectorStore.from_embeddings (see load_local)."
            )
        if other is self:
            raise ValueError("merge_from got the store itself; every id would clash. Merge another store.")
        if not other._records:
            return
        if other._metric != self._metric:
            raise ValueError(
                f"Cannot merge a store with metric={other._metric!r} into one with metric={self._metric!r}: their "
                "scores are not comparable. Rebuild one of them with the other's metric."
            )
        if other._mode.multivector != self._mode.multivector:
            raise ValueError(
                f"Cannot merge a store of {other._mode} into one of {self._mode}: a pooled store has no windows to "
                "copy, and a multi-vector one cannot take one vector for a document's windows. Rebuild one of them "
                "with the other's multivector setting (from its documents), then merge."
            )
        mine, theirs = self._records.index, other._records.index
        assert theirs is not None  # it holds documents
        if mine is not None and mine.dim != theirs.dim:
            raise ValueError(
                f"Cannot merge a store of {theirs.dim}-d vectors into one of {mine.dim}-d vectors: they "
                "come from different embedding models."
            )
        clashing = [id_ for id_ in other._records.keys if id_ in self._records]
        if clashing:
            raise ValueError(
                f"{len(clashing)} id(s) are in both stores: {preview(clashing)}. Delete them from one store (or add "
                "that store's documents under new ids) before merging; nothing was merged."
            )
        int_ids = list(other._records.records)
        documents = [other._records.records[int_id] for int_id in int_ids]
        vectors: np.ndarray | DocumentWindows = (
            stored_windows(theirs, int_ids) if isinstance(theirs, MultiVectorIndex) else other._records.vectors(int_ids)
        )
        self._records.upsert(
            [StoredDocument(id_, text, copy.deepcopy(metadata)) for id_, text, metadata in documents], vectors
        )
        logger.info("Merged %d documents; %d in the store.", len(documents), len(self))

    def _store(
        self,
        text_list: list[str],
        vectors: np.ndarray | DocumentWindows,
        metadata_list: list[dict[str, Any]],
        id_list: list[str],
    ) -> list[str]:
        """Index prepared vectors under the documents' ids (replacing existing ones) and keep the documents."""
        documents = [StoredDocument(*fields) for fields in zip(id_list, text_list, metadata_list, strict=True)]
        self._records.upsert(documents, vectors)
        return id_list

    def _embed_windows(self, text_list: list[str]) -> DocumentWindows:
        """The texts' pooled and window vectors from one pass, checked ("cosine": unit rows) for the index."""
        embedder = window_embedder(self._embedding, "FaissVectorStore(multivector=True)")
        windows = checked_windows(
            embedder.embed_document_windows(text_list),
            len(text_list),
            "embed_document_windows",
            unit=self._metric == "cosine",
        )
        self._as_matrix(windows.pooled, len(text_list), "embed_document_windows")  # the size the store holds
        return windows

    def _new_index(self, dim: int) -> FaissIndex | MultiVectorIndex:
        """The index of a store's first add, when the vector size is known ("cosine" searches unit vectors by "ip");
        a `MultiVectorIndex` in multi-vector mode."""
        metric: IndexMetric = "l2" if self._metric == "l2" else "ip"
        # FaissIndex checks the kind and the parameters
        return self._mode.new_index(dim, metric, self._kind, self._gpu, self._index_params)

    def _settings(self) -> dict[str, Any]:
        return {
            "metric": self._metric,
            "kind": self._kind,
            "index_params": self._index_params,
            **self._mode.settings(),
        }

    @classmethod
    def _empty(cls, embedding: Embeddings, settings: Mapping[str, Any], mode: DocumentMode, **options: Any) -> Self:
        # the constructor checks the settings
        return cls(
            embedding,
            metric=settings["metric"],
            kind=settings["kind"],
            multivector=mode.multivector,
            aggregate=mode.aggregate,
            **options,
            **settings.get("index_params", {}),
        )

    # ------------------------------------------------------------------------------------------------ reading, deleting

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents for `ids`, in the order asked; unknown ids are skipped (LangChain's contract)."""
        return [self._document(self._int_ids[id_]) for id_ in ensure_text_list(ids, "ids") if id_ in self._records]

    def delete(self, ids: list[str] | None = None, *, strict: bool = False, **kwargs: Any) -> bool:
        """Delete the documents stored under `ids`.

        Unknown ids are ignored with a logged warning, as LangChain's standard contract requires; pass
        `strict=True` to get a ValueError instead (and nothing deleted).

        Returns:
            True if every id was found and deleted, False if some were unknown.

        Raises:
            ValueError: if `ids` is None (to empty the store, pass `store.ids`), or with `strict=True` and
                unknown ids.
            TypeError: if `ids` is a single string or holds a non-string.
        """
        if ids is None:
            raise ValueError("delete() needs the ids to delete; to delete every document, pass store.ids.")
        unique = list(dict.fromkeys(ensure_text_list(ids, "ids")))
        unknown = [id_ for id_ in unique if id_ not in self._records]
        if unknown and strict:
            raise ValueError(f"{len(unknown)} id(s) are not in the store: {preview(unknown)}; nothing was deleted.")
        if unknown:
            logger.warning(
                "delete(): %d id(s) are not in the store and were ignored: %s", len(unknown), preview(unknown)
            )
        self._records.remove([self._int_ids[id_] for id_ in unique if id_ in self._records])
        return not unknown

    # ------------------------------------------------------------------------------------------------ searching

    # similarity_search*, max_marginal_relevance_search*: StoreSearch (langchain_fair.searching)

    def as_retriever(self, **kwargs: Any) -> VectorStoreRetriever:
        """A LangChain retriever over this store (search_type "similarity", "mmr" or "similarity_score_threshold").

        A `filter` in `search_kwargs` applies to every search type and is checked here: a malformed one raises
        ValueError now rather than at the first query.
        """
        search_kwargs = kwargs.get("search_kwargs") or {}
        if search_kwargs.get("filter") is not None:
            store_filter(search_kwargs["filter"])
        return super().as_retriever(**kwargs)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # langchain-core's functions assume other scales (1 − cosine distance, unsquared L2 over √2, …); ours
        # give the same (1 + cosine) / 2 for unit vectors whatever the metric.
        if self._relevance_score_fn is not None:
            return self._relevance_score_fn
        return relevance_function(self._metric)

    # ------------------------------------------------------------------------------------------------ internals
