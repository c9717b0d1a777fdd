"""FairQdrantVectorStore: the default store (best windows + BM25 beside them) in a Qdrant collection, for LangChain.

The store logic is `fair_retrieval.stores.QdrantStore`'s (the stores' door over a Qdrant collection); the searches
and document calls are the FAISS store's own base classes (`langchain_fair.searching`,
`langchain_fair.store_documents`), so both stores answer the same calls with the same arguments.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from typing_extensions import Self

from fair_retrieval.stores import (
    DocumentStore,
    LexicalSettings,
    QdrantStore,
    StoreMetric,
    StoreWindows,
    TextDocument,
    WrappedStore,
)
from langchain_fair.store_documents import StoreDocuments

__all__ = ["FairQdrantVectorStore"]

NAME = "FairQdrantVectorStore"


class FairQdrantVectorStore(StoreDocuments, WrappedStore, VectorStore):
    """A LangChain vector store whose documents live in a Qdrant collection, kept as the FAISS store keeps them.

    Each document is kept as the vectors of its windows (the FAISS store's default windows, from the same code) and
    its BM25 terms; a search returns k distinct documents, each found by its best window (Qdrant's grouped search),
    the best window's span under "best_window" in its metadata; "sparse" and "hybrid" searches score BM25 inside
    Qdrant (sparse vectors with its IDF modifier) and fuse as the FAISS store does. Filters are the FAISS store's
    grammar, translated into Qdrant filters and evaluated in the engine (a Python function filter is refused).

    Args:
        client: a `qdrant_client.QdrantClient` (a server's URL, or local mode: ":memory:" or a path).
        collection_name: the collection: opened when it exists (its recorded settings are taken and the embeddings
            checked against them), else created on the first add.
        embedding: any LangChain `Embeddings`; `langchain_fair.FairEmbeddings` gives windows (multi-vector store).
        metric: "cosine" (the default), "ip" or "l2"; an existing collection's own when None.
        multivector: keep documents as their windows (None: multi-vector over `FairEmbeddings`, pooled otherwise).
        windows: the windows a multi-vector store keeps (`StoreWindows`); None: the FAISS store's default.
        retrieval_mode: "dense", "hybrid" or "sparse" (an `Enum` such as langchain-qdrant's `RetrievalMode` by its
            value); None: the collection's recorded mode, else "hybrid" ("dense" is the opt-out).
        alpha: the dense side's weight in a hybrid fusion.
        fusion: how hybrid fuses: "relative_score", "rrf" or "dist_based_score".
        lexical: how BM25 reads the texts (`LexicalSettings`: language, k1, b; Lucene's variant, whole texts).
        relevance_score_fn: a raw score → [0, 1]; None: the metric's (`DocumentStore.relevance`).
        search_params: `qdrant_client.models.SearchParams` for dense searches (HNSW ef, exact, rescoring).
        collection_options: keyword arguments of `create_collection` for a new collection (hnsw_config,
            quantization_config, shard_number, replication_factor, on_disk_payload; on_disk for the vectors).
        allow_embedder_mismatch: open a collection made by another embedder configuration anyway (a WARNING).

    Raises:
        TypeError: `embedding` is not a LangChain `Embeddings`, or `client` is no `QdrantClient`.
        ValueError: as `fair_retrieval.stores.QdrantStore`: a collection that is not a fair-retrieval store's, or of
            another metric, mode, window shape or embedder configuration. All before any text is embedded.
    """

    def __init__(
        self,
        client: Any,
        collection_name: str,
        embedding: Embeddings,
        *,
        metric: StoreMetric | None = None,
        multivector: bool | None = None,
        windows: StoreWindows | None = None,
        retrieval_mode: Any = None,
        alpha: float | None = None,
        fusion: str | None = None,
        lexical: LexicalSettings | None = None,
        relevance_score_fn: Callable[[float], float] | None = None,
        search_params: Any = None,
        collection_options: Mapping[str, Any] | None = None,
        allow_embedder_mismatch: bool = False,
    ) -> None:
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a LangChain Embeddings object, got {type(embedding).__name__}.")
        store: QdrantStore[TextDocument] = QdrantStore.of_texts(
            upgrade="langchain-fair",
            client=client,
            collection_name=collection_name,
            search={"mode": retrieval_mode, "alpha": alpha, "fusion": fusion},
            search_params=search_params,
            collection_options=collection_options,
            allow_embedder_mismatch=allow_embedder_mismatch,
            metric=metric,
            multivector=multivector,
            embedder=embedding,
            replaced_move_to_end=True,
            name=NAME,
            windows=windows,
            lexical=lexical,
        )
        self._hold(store)
        self._relevance_score_fn = relevance_score_fn

    @property
    def client(self) -> Any:
        """The `QdrantClient`."""
        return self._qdrant.collection.client

    @property
    def collection_name(self) -> str:
        """The collection's name."""
        return self._qdrant.collection.name

    @property
    def _qdrant(self) -> QdrantStore[TextDocument]:
        assert isinstance(self._store, QdrantStore)
        return self._store

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: Sequence[str | None] | None = None,
        client: Any = None,
        collection_name: str | None = None,
        location: str | None = None,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        **kwargs: Any,
    ) -> Self:
        """A store holding `texts` (not none) in `collection_name` of `client`, or of a client made from
        `location` (":memory:" or a URL), `url`, `path` and `api_key` (langchain-qdrant's arguments); `kwargs` go
        to the constructor.

        Raises:
            ValueError: no texts, no collection_name, or both a client and where to make one.
        """
        text_list = DocumentStore.required_texts(texts, "from_texts", cls.__name__)
        made = _client(client, location, url, path, api_key)
        with _closed_on_failure(made, client is None):
            store = cls(made, _name(collection_name), embedding, **kwargs)
            store.add_texts(text_list, metadatas, ids=ids)
        return store

    @classmethod
    def from_embeddings(
        cls,
        text_embeddings: Iterable[tuple[str, Sequence[float]]],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        ids: Sequence[str | None] | None = None,
        *,
        client: Any = None,
        collection_name: str | None = None,
        location: str | None = None,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        **kwargs: Any,
    ) -> Self:
        """A store holding (text, vector) pairs (not none), where `from_texts` puts its texts."""
        pairs = DocumentStore.required_pairs(text_embeddings, "from_embeddings", cls.__name__)
        made = _client(client, location, url, path, api_key)
        with _closed_on_failure(made, client is None):
            store = cls(made, _name(collection_name), embedding, **kwargs)
            store.add_embeddings(pairs, metadatas, ids)
        return store

    @classmethod
    def from_existing_collection(
        cls,
        collection_name: str,
        embedding: Embeddings,
        *,
        client: Any = None,
        location: str | None = None,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        **kwargs: Any,
    ) -> Self:
        """The store of an existing collection (langchain-qdrant's name for it).

        Raises:
            ValueError: there is no such collection, or it is not a fair-retrieval store's.
        """
        made = _client(client, location, url, path, api_key)
        with _closed_on_failure(made, client is None):
            if not made.collection_exists(collection_name):
                raise ValueError(
                    f"Qdrant has no collection {collection_name!r}; create it with from_texts or add_texts."
                )
            return cls(made, collection_name, embedding, **kwargs)

    def copy_from(self, store: Any) -> int:
        """Write every document of a `langchain_fair.FaissVectorStore` (a saved folder loaded with `load_local`, or
        a CLI store folder) into this collection with its stored windows, no model run; returns how many.

        Raises:
            TypeError: `store` is not a FaissVectorStore.
            ValueError: another metric, mode, window shape or embedder configuration.
        """
        from langchain_fair.vectorstores import FaissVectorStore

        if not isinstance(store, FaissVectorStore):
            raise TypeError(f"copy_from takes a FaissVectorStore, got {type(store).__name__}.")
        return self._qdrant.copy_from(store._store)


@contextlib.contextmanager
def _closed_on_failure(client: Any, made: bool) -> Iterator[None]:
    """Close `client` when what follows raises and it was `made` here (the caller never gets it: a local-mode
    folder would stay locked for the rest of the process)."""
    try:
        yield
    except BaseException:
        if made:
            client.close()
        raise


def _client(client: Any, location: str | None, url: str | None, path: str | None, api_key: str | None) -> Any:
    """The client given, or one made from where the store lives (`fair_retrieval.stores.qdrant_client`)."""
    return QdrantStore.client_of(client, location=location, url=url, path=path, api_key=api_key)


def _name(collection_name: str | None) -> str:
    if collection_name is None:
        raise ValueError("Pass collection_name= (the Qdrant collection to write the documents to).")
    return collection_name
