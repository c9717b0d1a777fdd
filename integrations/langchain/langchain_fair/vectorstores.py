"""FaissVectorStore: a LangChain vector store on fair_retrieval's FaissIndex, saved without pickle.

LangChain's own FAISS store lived in langchain-community, which was archived; this one depends on langchain-core
only. Vectors live in a `fair_retrieval.FaissIndex` (GPU when faiss sees one, CPU otherwise), under int64 ids this
module hands out; it keeps one map from LangChain's string ids to those ints, and the `Document`s by int id.

A saved store is a folder with `index/` (FaissIndex.save) and `store.json` (documents, metadata and the id map);
a store saved under another `index_name` uses `<name>/` and `<name>.store.json`, so several stores can share a
folder. Both change together: store.json is published in the index's own commit (`FaissIndex.save(companions=...)`,
`fair_retrieval.jsonio.Publication`), so a save killed at any point leaves the previous store or the new one, and a
`load_local` running meanwhile reads one of them. Nothing is pickled, so loading a store cannot execute code; in
exchange, metadata must be JSON: str keys and str / int / float / bool / None / list / dict values.

store.json also records which embeddings made the vectors (`fair_retrieval.identity`: "embedder"), and `load_local`
refuses other embeddings with a ValueError listing what differs, unless told `allow_embedder_mismatch=True`. The
key is optional, so the format stays version 1: the first release reads new files (it ignores the key), and files
of the first release load here with an INFO line saying the embeddings cannot be checked.

Filters are `fair_retrieval.filters` dicts (``{"year": {"$gte": 2024}}``, ``$in``, ``$and``, ``$or``, ``$not``, …)
or functions of the metadata; the search runs over the matching documents only, so it returns k hits whenever k
documents match.

Coming from langchain-community's FAISS store: `save_local` / `load_local` take the same arguments (`index_name`,
`allow_dangerous_deserialization`, which changes nothing here), and `from_embeddings`, `add_embeddings` and
`merge_from` exist. Its folders (`index.faiss` + `index.pkl`) cannot be read without unpickling; rebuild them with
`from_embeddings` (see `load_local`).
"""

from __future__ import annotations

import copy
import itertools
import json
import logging
import os
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple, get_args

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore, VectorStoreRetriever
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from typing_extensions import Self

from fair_retrieval import FaissIndex
from fair_retrieval.filters import Predicate, compile_filter
from fair_retrieval.identity import check_identity, embedder_identity
from fair_retrieval.index import META_FILE as INDEX_RECORD
from fair_retrieval.inputs import ensure_text_list
from fair_retrieval.jsonio import (
    ChangedWhileReadingError,
    DamagedFileError,
    Publication,
    Snapshot,
    companion_name,
    index_record,
    json_bytes,
    parse_versioned_json,
    read_companion,
    retry_while_changing,
    write_atomically,
    write_temporary,
)

logger = logging.getLogger(__name__)

Metric = Literal["cosine", "ip", "l2"]
Filter = Mapping[str, Any] | Callable[[dict[str, Any]], bool]  # see fair_retrieval.filters

STORE_FILE = "store.json"
INDEX_FOLDER = "index"
DEFAULT_INDEX_NAME = "index"  # langchain-community's default; this name keeps the original layout
STORE_SUFFIX = ".store.json"  # the store file of another index_name: <name>.store.json next to <name>/
COMMUNITY_SUFFIXES = (".faiss", ".pkl")  # what langchain-community's FAISS.save_local writes
FORMAT_NAME = "langchain-fair-faiss-store"
FORMAT_VERSION = 1
REBUILD = "Rebuild the store (from_texts / from_embeddings) and save it again, or restore the folder from a backup."
MISMATCH_OVERRIDE = "allow_embedder_mismatch=True"
MISMATCH_REMEDY = (
    "Load it with the embeddings it was built with (same model and options), or rebuild it with these (from_texts)."
)


class _Record(NamedTuple):
    """A stored document (a tuple, lighter than a `Document`: one is built per result)."""

    id: str
    text: str
    metadata: dict[str, Any]


class FaissVectorStore(VectorStore):
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
        **index_params: kind parameters passed to FaissIndex (e.g. nlist=64 for "ivf").

    The index is created on the first add, when the vector size is known.

    Example:
        .. code-block:: python

            from langchain_fair import FairEmbeddings, FaissVectorStore

            store = FaissVectorStore.from_texts(texts, FairEmbeddings(model="..."), metadatas=metadatas)
            hits = store.similarity_search("question", k=4)
            recent = store.similarity_search("question", k=4, filter={"year": {"$gte": 2024}, "lang": ["en", "fr"]})
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
        **index_params: int,
    ) -> None:
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a LangChain Embeddings object, got {type(embedding).__name__}.")
        if metric not in get_args(Metric):
            raise ValueError(f"metric must be one of {get_args(Metric)}, got {metric!r}.")
        self._embedding = embedding
        self._metric: Metric = metric
        self._kind = kind
        self._gpu = gpu
        self._index_params = dict(index_params)
        self._relevance_score_fn = relevance_score_fn
        self._index: FaissIndex | None = None
        self._int_ids: dict[str, int] = {}  # the id map: LangChain id → the index's int64 id
        self._documents: dict[int, _Record] = {}  # by int id, in insertion order (an upsert moves to the end)
        self._next_int_id = 0

    @property
    def embeddings(self) -> Embeddings:
        """The embeddings used for documents and queries."""
        return self._embedding

    @property
    def index(self) -> FaissIndex | None:
        """The underlying `fair_retrieval.FaissIndex` (None until the first add)."""
        return self._index

    @property
    def ids(self) -> list[str]:
        """The ids of the stored documents, in insertion order."""
        return [record.id for record in self._documents.values()]

    def __len__(self) -> int:
        return len(self._documents)

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
        metadata_list = _check_metadatas(metadatas, len(text_list))
        id_list = _new_ids(ids, len(text_list))
        if not text_list:
            return []
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
        """A new store holding `texts`; `kwargs` go to the constructor (metric, kind, gpu, index parameters).

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
        text_list, vectors = self._pairs(text_embeddings)
        metadata_list = _check_metadatas(metadatas, len(text_list))
        id_list = _new_ids(ids, len(text_list))
        if not text_list:
            return []
        return self._store(
            text_list, self._as_matrix(vectors, len(text_list), "text_embeddings"), metadata_list, id_list
        )

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

        As langchain-community's `FAISS.from_embeddings`: `kwargs` go to the constructor (metric, kind, gpu, index
        parameters). This is also the way to move a langchain-community FAISS store over (see `load_local`).

        Raises:
            ValueError: if there are no pairs (create an empty store with `FaissVectorStore(embedding)`), or as
                `add_embeddings`.
            TypeError: as `add_embeddings`.
        """
        text_list, vectors = cls._pairs(text_embeddings)
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

        Raises:
            TypeError: if `other` is not a FaissVectorStore.
            ValueError: if an id is in both stores (the message lists some; delete or rename them first), or the
                stores have different metrics or vector sizes. Nothing is added then.
        """
        if not isinstance(other, FaissVectorStore):
            raise TypeError(
                f"merge_from takes another FaissVectorStore, got {type(other).__name__}. To add a langchain-community "
                "FAISS store, rebuild it with FaissVectorStore.from_embeddings (see load_local)."
            )
        if other is self:
            raise ValueError("merge_from got the store itself; every id would clash. Merge another store.")
        if not other._documents:
            return
        if other._metric != self._metric:
            raise ValueError(
                f"Cannot merge a store with metric={other._metric!r} into one with metric={self._metric!r}: their "
                "scores are not comparable. Rebuild one of them with the other's metric."
            )
        assert other._index is not None  # it holds documents
        if self._index is not None and self._index.dim != other._index.dim:
            raise ValueError(
                f"Cannot merge a store of {other._index.dim}-d vectors into one of {self._index.dim}-d vectors: they "
                "come from different embedding models."
            )
        clashing = [record.id for record in other._documents.values() if record.id in self._int_ids]
        if clashing:
            raise ValueError(
                f"{len(clashing)} id(s) are in both stores: {_some(clashing)}. Delete them from one store (or add that "
                "store's documents under new ids) before merging; nothing was merged."
            )
        int_ids = list(other._documents)
        vectors = other._index.get_vectors(int_ids)
        records = [other._documents[int_id] for int_id in int_ids]
        self._store(
            [record.text for record in records],
            vectors,
            [copy.deepcopy(record.metadata) for record in records],
            [record.id for record in records],
        )
        logger.info("Merged %d documents; %d in the store.", len(records), len(self))

    def _store(
        self, text_list: list[str], vectors: np.ndarray, metadata_list: list[dict[str, Any]], id_list: list[str]
    ) -> list[str]:
        """Index prepared vectors under the documents' ids (replacing existing ones) and keep the documents."""
        if not np.isfinite(vectors).all():  # checked before anything changes (an upsert removes first)
            bad = np.flatnonzero(~np.isfinite(vectors).all(axis=1))
            raise ValueError(
                f"The vectors of texts {bad[:5].tolist()} contain NaN or infinite values; nothing was stored."
            )
        if self._index is None:  # created on the first add, when the vector size is known
            metric: Literal["ip", "l2"] = "l2" if self._metric == "l2" else "ip"
            kind: Any = self._kind  # FaissIndex checks it (and the parameters)
            params: dict[str, Any] = self._index_params
            self._index = FaissIndex(vectors.shape[1], metric=metric, kind=kind, gpu=self._gpu, **params)
        index = self._index
        replaced = [self._int_ids[id_] for id_ in id_list if id_ in self._int_ids]
        if replaced:
            index.remove(replaced)
        fresh = itertools.count(self._next_int_id)  # a replaced id keeps its int id, a new one takes the next
        int_ids = [self._int_ids[id_] if id_ in self._int_ids else next(fresh) for id_ in id_list]
        index.add(vectors, ids=np.asarray(int_ids, dtype=np.int64))
        self._next_int_id = next(fresh)
        for id_, int_id, text, metadata in zip(id_list, int_ids, text_list, metadata_list, strict=True):
            self._int_ids[id_] = int_id
            self._documents.pop(int_id, None)  # a replaced document moves to the end of the insertion order
            self._documents[int_id] = _Record(id_, text, metadata)
        logger.debug("Stored %d documents (%d replaced); %d in the store.", len(id_list), len(replaced), len(self))
        return id_list

    # ------------------------------------------------------------------------------------------------ reading, deleting

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The stored documents for `ids`, in the order asked; unknown ids are skipped (LangChain's contract)."""
        return [self._document(self._int_ids[id_]) for id_ in ensure_text_list(ids, "ids") if id_ in self._int_ids]

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
        unknown = [id_ for id_ in unique if id_ not in self._int_ids]
        if unknown and strict:
            raise ValueError(f"{len(unknown)} id(s) are not in the store: {_some(unknown)}; nothing was deleted.")
        if unknown:
            logger.warning("delete(): %d id(s) are not in the store and were ignored: %s", len(unknown), _some(unknown))
        known = [self._int_ids.pop(id_) for id_ in unique if id_ in self._int_ids]
        if known and self._index is not None:
            self._index.remove(known)
        for int_id in known:
            del self._documents[int_id]
        return not unknown

    # ------------------------------------------------------------------------------------------------ searching

    def similarity_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: Filter | None = None,
        fetch_k: int = 20,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to a query vector, with their raw scores (see `metric`).

        Args:
            embedding: the query vector.
            k: how many documents to return.
            filter: which documents may be returned: a `fair_retrieval.filters` dict (``{"lang": "en"}``, a list
                value meaning "any of", ``{"year": {"$gte": 2024}}``, ``$in``/``$nin``, ``$and``/``$or``/``$not``, …)
                or a function of the metadata dict returning True for documents to keep. The search runs among the
                matching documents only, so it returns min(k, matches) of them. A malformed filter raises
                ValueError before anything is searched.
            fetch_k: unused here (filtering no longer needs extra candidates); accepted for compatibility with
                langchain-community's FAISS store.
            **kwargs: unused; accepted for LangChain compatibility.
        """
        predicate = _predicate(filter)
        _check_k(k, "k")
        if not self._documents:
            return []
        query = self._as_matrix([embedding], 1, "the query embedding")
        return [(self._document(int_id), score) for int_id, score in self._search(query, k, predicate)]

    def similarity_search_with_score(
        self, query: str, k: int = 4, filter: Filter | None = None, fetch_k: int = 20, **kwargs: Any
    ) -> list[tuple[Document, float]]:
        """The k documents nearest to `query` (embedded plainly, as a query), with their raw scores."""
        predicate = _predicate(filter)  # a malformed filter fails before the query is embedded
        return self.similarity_search_with_score_by_vector(
            self._embedding.embed_query(query), k, filter=predicate, fetch_k=fetch_k, **kwargs
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
        predicate = _predicate(filter)
        return self.similarity_search_by_vector(self._embedding.embed_query(query), k, predicate, fetch_k, **kwargs)

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
            fetch_k: candidates MMR chooses from: the `fetch_k` nearest documents that pass `filter`.
            lambda_mult: 1 is pure relevance, 0 pure diversity.
            filter: as in `similarity_search_with_score_by_vector`.
            **kwargs: unused; accepted for LangChain compatibility.
        """
        predicate = _predicate(filter)
        _check_k(k, "k")
        if not 0.0 <= lambda_mult <= 1.0:
            raise ValueError(f"lambda_mult must be in [0, 1], got {lambda_mult!r}.")
        candidates = max(k, _check_k(fetch_k, "fetch_k"))
        if not self._documents:
            return []
        query = self._as_matrix([embedding], 1, "the query embedding")
        int_ids = [int_id for int_id, _ in self._search(query, candidates, predicate)]
        if not int_ids:
            return []
        vectors = self._index.get_vectors(int_ids).tolist()  # type: ignore[union-attr]
        chosen = maximal_marginal_relevance(query[0], vectors, lambda_mult=lambda_mult, k=k)
        return [self._document(int_ids[position]) for position in chosen]

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
        predicate = _predicate(filter)
        return self.max_marginal_relevance_search_by_vector(
            self._embedding.embed_query(query), k, fetch_k, lambda_mult, filter=predicate, **kwargs
        )

    def as_retriever(self, **kwargs: Any) -> VectorStoreRetriever:
        """A LangChain retriever over this store (search_type "similarity", "mmr" or "similarity_score_threshold").

        A `filter` in `search_kwargs` applies to every search type and is checked here: a malformed one raises
        ValueError now rather than at the first query.
        """
        search_kwargs = kwargs.get("search_kwargs") or {}
        if search_kwargs.get("filter") is not None:
            _predicate(search_kwargs["filter"])
        return super().as_retriever(**kwargs)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        # langchain-core's functions assume other scales (1 − cosine distance, unsquared L2 over √2, …); ours
        # give the same (1 + cosine) / 2 for unit vectors whatever the metric.
        if self._relevance_score_fn is not None:
            return self._relevance_score_fn
        if self._metric == "l2":
            return lambda distance: _relevance_from_similarity(1.0 - distance / 2.0)  # |a−b|² = 2 − 2·cos
        return _relevance_from_similarity

    # ------------------------------------------------------------------------------------------------ persistence

    def save_local(self, folder_path: str | os.PathLike[str], index_name: str = DEFAULT_INDEX_NAME) -> Path:
        """Write the store to `folder_path` (created if needed), no pickle: `index/` and `store.json`.

        The two change together: store.json is written under a temporary name and published in the commit of the
        index folder (`FaissIndex.save(companions=...)`), so a save killed at any point (even by SIGKILL) leaves
        the previous store or this one, and `load_local` running meanwhile reads one of them. Saves into one
        folder run one after the other. store.json records the identity of the store's embeddings (as they are
        now), which `load_local` checks.

        Args:
            folder_path: the folder.
            index_name: as in langchain-community's FAISS store, a name that lets several stores share a folder:
                a store saved under another name than "index" is written to `<name>/` and `<name>.store.json`.
                Load it with the same name.

        Returns:
            The folder path.

        Raises:
            ValueError: if `index_name` is empty or holds a path separator.
        """
        folder = Path(folder_path)
        index_folder, store_file = _saved_paths(folder, index_name)
        folder.mkdir(parents=True, exist_ok=True)
        state = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "metric": self._metric,
            "kind": self._kind,
            "index_params": self._index_params,
            "next_int_id": self._next_int_id,
            "has_index": self._index is not None,
            "embedder": embedder_identity(self._embedding),
            "documents": [
                {"id": id_, "int_id": int_id, "text": text, "metadata": metadata}
                for int_id, (id_, text, metadata) in self._documents.items()
            ],
        }
        data = json_bytes(state, indent=None)
        if self._index is not None:
            staged = write_temporary(store_file, data)
            try:
                self._index.save(index_folder, companions={companion_name(store_file): staged})
            finally:
                staged.unlink(missing_ok=True)  # moved by the save; still here only if it failed
        elif (index_folder / INDEX_RECORD).is_file():  # an empty store replacing one with an index
            with Publication(index_folder / INDEX_RECORD, [companion_name(store_file)]):  # finishes a killed save
                write_atomically(store_file, data)
        else:
            write_atomically(store_file, data)
        logger.info("Saved %d documents to %s (index_name=%r)", len(self), folder, index_name)
        return folder

    @classmethod
    def load_local(
        cls,
        folder_path: str | os.PathLike[str],
        embeddings: Embeddings,
        index_name: str = DEFAULT_INDEX_NAME,
        *,
        allow_dangerous_deserialization: bool = False,
        gpu: Literal["auto"] | bool = "auto",
        relevance_score_fn: Callable[[float], float] | None = None,
        allow_embedder_mismatch: bool = False,
    ) -> Self:
        """Load a store written by `save_local`. Only JSON and faiss' own format are read: no code can run.

        The index folder's index.json is read first and names the store.json of the same save, so a load that
        runs while the folder is being saved again returns the store before or after that save.

        store.json records the identity of the embeddings the store was saved with (`fair_retrieval.identity`:
        model, pooling, window, long-document policy, calibration, LPES and prompts of a FairEmbeddings; class and
        model name of other embeddings). `embeddings` with another identity are refused, because new documents
        and queries would then be embedded into another vector space than the stored vectors. A store saved by
        an earlier release records none: it loads with an INFO line saying it cannot be checked.

        Args:
            folder_path: the folder given to `save_local`.
            embeddings: the embeddings to embed new documents and queries with; use the same model (and
                calibration) as when the store was built, or the stored and new vectors will not be comparable.
            index_name: the name given to `save_local` ("index" by default, as in langchain-community).
            allow_dangerous_deserialization: accepted so that code written for langchain-community's FAISS store
                runs unchanged, and ignored: nothing is ever unpickled here, so loading is safe either way.
            gpu: as in the constructor.
            relevance_score_fn: as in the constructor.
            allow_embedder_mismatch: load even when `embeddings` differ from those the store was saved with (a
                WARNING lists the differences); for embeddings known to make the same vectors, e.g. the same model
                under another name. The next `save_local` records the embeddings given here.

        A folder written by langchain-community's `FAISS.save_local` (`index.faiss` + `index.pkl`) is refused:
        its documents are in a pickle. Convert it once, where you trust the folder, with langchain-community::

            old = FAISS.load_local(folder, embeddings, allow_dangerous_deserialization=True)
            ids = [old.index_to_docstore_id[position] for position in range(old.index.ntotal)]
            documents = [old.docstore.search(id_) for id_ in ids]
            vectors = old.index.reconstruct_n(0, old.index.ntotal)  # row i is the vector at position i
            store = FaissVectorStore.from_embeddings(
                zip([d.page_content for d in documents], vectors), embeddings,
                metadatas=[d.metadata for d in documents], ids=ids,
                metric="l2",  # community's default; "ip" for MAX_INNER_PRODUCT, "cosine" if it had normalize_L2
            )
            store.save_local(new_folder)

        Raises:
            FileNotFoundError: if the folder lacks the store file (or its index); for a langchain-community folder,
                the message says how to convert it.
            DamagedFileError: (a ValueError) if store.json or a file of the index is truncated or corrupted; the
                message names the file.
            ValueError: if the files are malformed or disagree with each other, or `index_name` is malformed; or
                if `embeddings` are not those the store was saved with (the message lists the differing fields),
                unless `allow_embedder_mismatch=True`.
        """
        folder = Path(folder_path)
        index_folder, store_file = _saved_paths(folder, index_name)
        if allow_dangerous_deserialization:
            logger.debug("allow_dangerous_deserialization=True changes nothing: FaissVectorStore never unpickles.")
        community = [folder / f"{index_name}{suffix}" for suffix in COMMUNITY_SUFFIXES]
        if not store_file.is_file() and any(path.is_file() for path in community):
            raise FileNotFoundError(
                f"{folder} holds {' and '.join(path.name for path in community if path.is_file())}, written by "
                "langchain-community's FAISS.save_local, and no "
                f"{store_file.name}. FaissVectorStore never unpickles (the documents are in the .pkl): convert the "
                "folder once with langchain-community and FaissVectorStore.from_embeddings, as "
                "FaissVectorStore.load_local's docstring shows."
            )
        return retry_while_changing(
            store_file,
            lambda: cls._load_once(
                store_file, index_folder, embeddings, gpu, relevance_score_fn, allow_embedder_mismatch
            ),
        )

    @classmethod
    def _load_once(
        cls,
        store_file: Path,
        index_folder: Path,
        embeddings: Embeddings,
        gpu: Literal["auto"] | bool,
        relevance_score_fn: Callable[[float], float] | None,
        allow_embedder_mismatch: bool = False,
    ) -> Self:
        """One consistent read of a saved store; ChangedWhileReadingError when a save replaced it meanwhile."""
        record = index_record(index_folder / INDEX_RECORD)
        try:
            store = cls._restore(
                _read_store_file(store_file, record),
                store_file,
                embeddings,
                index_folder,
                gpu,
                relevance_score_fn,
                allow_embedder_mismatch,
            )
        except (OSError, ValueError) as error:
            if record is not None and not record.is_current():
                raise ChangedWhileReadingError from error
            raise
        if record is not None and not record.is_current():  # the index may come from a later save
            raise ChangedWhileReadingError
        return store

    @classmethod
    def _restore(
        cls,
        raw: bytes,
        store_file: Path,
        embeddings: Embeddings,
        index_folder: Path,
        gpu: Literal["auto"] | bool,
        relevance_score_fn: Callable[[float], float] | None,
        allow_embedder_mismatch: bool = False,
    ) -> Self:
        """The store saved in `raw` (the bytes of `store_file`) with the index in `index_folder`, checked."""
        state = parse_versioned_json(
            store_file,
            raw,
            format_name=FORMAT_NAME,
            max_version=FORMAT_VERSION,
            required=("metric", "kind", "next_int_id", "documents"),
            writer="FaissVectorStore.save_local()",
            upgrade="langchain-fair",
            remedy=REBUILD,
        )
        if not isinstance(embeddings, Embeddings):  # checked before its identity is taken (the constructor's error)
            raise TypeError(f"embeddings must be a LangChain Embeddings object, got {type(embeddings).__name__}.")
        check_identity(
            state.get("embedder"),
            embedder_identity(embeddings),
            source=str(store_file),
            allow_mismatch=allow_embedder_mismatch,
            override=MISMATCH_OVERRIDE,
            remedy=MISMATCH_REMEDY,
        )
        store = cls(
            embeddings,
            metric=state["metric"],
            kind=state["kind"],
            gpu=gpu,
            relevance_score_fn=relevance_score_fn,
            **state.get("index_params", {}),
        )
        if state.get("has_index"):
            store._index = FaissIndex.load(index_folder, gpu=gpu)
        try:
            for record in state["documents"]:
                int_id = int(record["int_id"])
                store._int_ids[record["id"]] = int_id
                store._documents[int_id] = _Record(record["id"], record["text"], record["metadata"])
            store._next_int_id = int(state["next_int_id"])
        except (KeyError, TypeError, ValueError) as error:
            raise DamagedFileError(store_file, f"a document entry is malformed ({error!r})", REBUILD) from None
        stored = set(store._index.ids.tolist()) if store._index is not None else set()
        if stored != set(store._documents) or len(store._int_ids) != len(store._documents):
            raise ValueError(
                f"{store_file.parent}: {store_file.name} lists {len(state['documents'])} documents but the index "
                f"holds {len(stored)} vectors under other ids; the folder was modified or written partially. Rebuild "
                "the store."
            )
        return store

    # ------------------------------------------------------------------------------------------------ internals

    @staticmethod
    def _pairs(text_embeddings: Any) -> tuple[list[str], np.ndarray]:
        """(texts, float32 vectors (n, dim)) from (text, vector) pairs, or a TypeError/ValueError naming the pair."""
        if isinstance(text_embeddings, str | bytes | Mapping) or not isinstance(text_embeddings, Iterable):
            raise TypeError(
                "text_embeddings must be (text, vector) pairs, e.g. zip(texts, vectors); got "
                f"{type(text_embeddings).__name__}."
            )
        texts: list[str] = []
        vectors: list[Any] = []
        for position, pair in enumerate(text_embeddings):
            if not isinstance(pair, tuple | list) or len(pair) != 2:
                raise TypeError(
                    f"text_embeddings[{position}] is {type(pair).__name__}, expected a (text, vector) pair."
                )
            if not isinstance(pair[0], str):
                raise TypeError(f"text_embeddings[{position}][0] is {type(pair[0]).__name__}, expected the text (str).")
            texts.append(pair[0])
            vectors.append(pair[1])
        if not texts:
            return [], np.zeros((0, 0), dtype=np.float32)
        try:
            matrix = np.asarray(vectors, dtype=np.float32)
        except (TypeError, ValueError) as error:
            sizes = sorted({len(vector) for vector in vectors if hasattr(vector, "__len__")})
            raise ValueError(
                f"text_embeddings hold vectors that are not one numeric (n, dim) matrix (sizes {sizes}): {error}"
            ) from None
        if matrix.ndim != 2:
            raise ValueError(f"text_embeddings hold vectors of shape {matrix.shape[1:]}; each must be a 1-D vector.")
        return texts, matrix

    def _as_matrix(self, vectors: Any, count: int, source: str) -> np.ndarray:
        """Embeddings as a float32 matrix the index takes: checked shape, and L2-normalised rows for "cosine"."""
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != count:
            raise ValueError(f"{source} returned {matrix.shape[0] if matrix.ndim else 0} vectors for {count} texts.")
        if self._index is not None and matrix.shape[1] != self._index.dim:
            raise ValueError(
                f"{source} gave {matrix.shape[1]}-d vectors but this store holds {self._index.dim}-d ones; use the "
                "embeddings the store was built with."
            )
        if self._metric != "cosine":
            return matrix
        norms = np.linalg.norm(matrix, axis=1, keepdims=True)
        return matrix / np.where(norms > 0, norms, 1.0)  # type: ignore[no-any-return]

    def _search(self, query: np.ndarray, k: int, predicate: Predicate | None) -> list[tuple[int, float]]:
        """(int id, raw score) of the k best matches of one prepared query row among the documents that pass
        `predicate` (the index searches only those: `FaissIndex.search(..., ids=...)`)."""
        index = self._index
        assert index is not None  # the store holds documents
        selected: np.ndarray | None = None
        if predicate is not None:
            kept = [int_id for int_id, record in self._documents.items() if predicate(record.metadata)]
            logger.debug("The filter keeps %d of %d documents.", len(kept), len(self._documents))
            if not kept:
                return []
            if len(kept) < len(self._documents):
                selected = np.asarray(kept, dtype=np.int64)
        count = len(self._documents) if selected is None else int(selected.size)
        scores, found = index.search(query, min(k, count), ids=selected)
        return [
            (int_id, float(score))
            for score, int_id in zip(scores[0].tolist(), found[0].tolist(), strict=True)
            if int_id >= 0
        ]

    def _document(self, int_id: int) -> Document:
        """A copy of a stored document, so callers cannot change the store by editing what they got."""
        id_, text, metadata = self._documents[int_id]
        return Document(id=id_, page_content=text, metadata=copy.deepcopy(metadata))


# ---------------------------------------------------------------------------------------------------- helpers


def _saved_paths(folder: Path, index_name: str) -> tuple[Path, Path]:
    """(index folder, store file) of a store saved under `index_name` in `folder`."""
    if (
        not isinstance(index_name, str)
        or not index_name
        or index_name in (".", "..")
        or any(separator in index_name for separator in ("/", "\\", os.sep))
    ):
        raise ValueError(
            f"index_name must be a plain file name such as 'index' or 'products' (no path separators), got "
            f"{index_name!r}; put the folder in folder_path."
        )
    if index_name == DEFAULT_INDEX_NAME:
        return folder / INDEX_FOLDER, folder / STORE_FILE
    return folder / index_name, folder / f"{index_name}{STORE_SUFFIX}"


def _read_store_file(store_file: Path, record: Snapshot | None) -> bytes:
    """The bytes of the store file saved with the index (`read_companion`), or of `store_file` when none was.

    Raises:
        ChangedWhileReadingError: when a save replaced the record meanwhile.
        FileNotFoundError: if there is no store file.
    """
    raw = read_companion(store_file, record)
    if raw is not None:
        return raw
    if not store_file.is_file():
        raise FileNotFoundError(f"{store_file} does not exist; it is written by FaissVectorStore.save_local().")
    return store_file.read_bytes()


def _relevance_from_similarity(score: float) -> float:
    """Cosine similarity in [-1, 1] → relevance in [0, 1]."""
    return min(1.0, max(0.0, (1.0 + score) / 2.0))


def _check_k(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}.")
    return value


def _new_ids(ids: Any, count: int) -> list[str]:
    """One unique str id per new text; ids=None, or a None entry, means a new UUID."""
    if ids is None:
        ids = [None] * count
    if not isinstance(ids, str):  # a single str is refused by ensure_text_list
        ids = [str(uuid.uuid4()) if id_ is None else id_ for id_ in ids]
    id_list = ensure_text_list(ids, "ids")
    if len(id_list) != count:
        raise ValueError(f"Got {count} texts but {len(id_list)} ids; pass one id per text (or ids=None).")
    repeated = sorted(id_ for id_, times in Counter(id_list).items() if times > 1)
    if repeated:
        raise ValueError(f"ids repeat within this call: {_some(repeated)}; every id must be unique.")
    return id_list


def _check_metadatas(metadatas: Any, count: int) -> list[dict[str, Any]]:
    """One JSON dict per text, copied (later changes by the caller do not leak into the store)."""
    if isinstance(metadatas, dict):
        raise TypeError("metadatas must be a list with one dict per text, got a single dict; wrap it: [metadata].")
    metadata_list = [None] * count if metadatas is None else list(metadatas)
    if len(metadata_list) != count:
        raise ValueError(
            f"Got {count} texts but {len(metadata_list)} metadatas; pass one metadata dict per text (or none)."
        )
    return [_json_copy(metadata, f"metadatas[{position}]") for position, metadata in enumerate(metadata_list)]


def _json_copy(metadata: Any, where: str) -> dict[str, Any]:
    """`metadata` through a JSON round trip; a TypeError names the first entry that would not come back the same."""
    if metadata is None:
        return {}
    if not isinstance(metadata, dict):
        raise TypeError(f"{where} is {type(metadata).__name__}, expected a dict.")
    copied = {}
    for key, value in metadata.items():
        path = f"{where}[{key!r}]"
        if not isinstance(key, str):
            raise TypeError(f"{where} has the key {key!r} ({type(key).__name__}); JSON keys must be strings.")
        try:
            copied[key] = json.loads(json.dumps(value, allow_nan=False, default=_refuse))
        except ValueError as error:
            raise TypeError(f"{path}: {error}; JSON has no NaN or infinity. Store it as None or a string.") from None
        except TypeError as error:
            raise TypeError(
                f"{path} {error}; the store saves metadata as JSON (never pickle). Convert it to str, int, float, "
                "bool, None, list or dict (e.g. a date with .isoformat())."
            ) from None
        if copied[key] != value:
            raise TypeError(f"{path} would change through JSON: keys must be strings and sequences lists.")
    return copied


def _refuse(value: Any) -> Any:
    raise TypeError(f"is a {type(value).__name__}, which is not JSON-serialisable")


class _StoreFilter:
    """A filter compiled once per search call (so methods that call each other do not compile it again)."""

    __slots__ = ("matches",)

    def __init__(self, matches: Predicate) -> None:
        self.matches = matches

    def __call__(self, metadata: Mapping[str, Any]) -> bool:
        return self.matches(metadata)


def _predicate(filter: Filter | _StoreFilter | None) -> _StoreFilter | None:
    """The compiled `filter` (None for none); a malformed filter dict raises ValueError here, before any search.

    A function filter gets a copy of each metadata dict, so one that edits its argument cannot edit the store.
    """
    if filter is None or isinstance(filter, _StoreFilter):
        return filter
    if callable(filter) and not isinstance(filter, Mapping):
        user_filter = filter
        return _StoreFilter(lambda metadata: bool(user_filter(_private_copy(metadata))))
    return _StoreFilter(compile_filter(filter))


def _private_copy(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """A copy of stored metadata for user code: deep where values are lists or dicts, shallow (cheap) otherwise."""
    if any(isinstance(value, list | dict) for value in metadata.values()):
        return copy.deepcopy(dict(metadata))
    return dict(metadata)


def _some(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(repr(item) for item in items[:limit])
    return shown + (f" … ({len(items) - limit} more)" if len(items) > limit else "")
