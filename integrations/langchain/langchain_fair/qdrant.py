"""FairQdrantVectorStore: the default store (best windows + BM25 beside them) in a Qdrant collection, for LangChain.

The store logic is `fair_retrieval.stores.QdrantStore`'s (the stores' door over a Qdrant collection); the searches
and document calls are the FAISS store's own base classes (`langchain_fair.searching`,
`langchain_fair.store_documents`), so both stores answer the same calls with the same arguments.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import uuid
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


logger = logging.getLogger(__name__)


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
        batch_size: points per upsert request.
        distance: langchain-qdrant's way to say the metric (`models.Distance` or its value): COSINE is "cosine",
            DOT "ip", EUCLID "l2"; given with `metric`, they must agree.
        **anchor: langchain-qdrant's sparse_embedding, sparse_vector_name, vector_name, content_payload_key,
            metadata_payload_key, validate_embeddings and validate_collection_config; this store's layout and checks are
            fixed (BM25 scored in the engine, the metadata under "metadata", embeddings and collection always
            checked), so only the values that say the same are taken, others refused with the reason.

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
        batch_size: int = 256,
        distance: Any = None,
        **anchor: Any,
    ) -> None:
        if not isinstance(embedding, Embeddings):
            raise TypeError(f"embedding must be a LangChain Embeddings object, got {type(embedding).__name__}.")
        _check_anchor_options(anchor)
        metric = _metric_of(distance, metric)
        store: QdrantStore[TextDocument] = QdrantStore.of_texts(
            upgrade="langchain-fair",
            client=client,
            collection_name=collection_name,
            search={"mode": retrieval_mode, "alpha": alpha, "fusion": fusion},
            search_params=search_params,
            collection_options=collection_options,
            allow_embedder_mismatch=allow_embedder_mismatch,
            batch_size=batch_size,
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

    def add_texts(
        self,
        texts: Iterable[str],
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: Sequence[str | int | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """As `FaissVectorStore.add_texts`; an id may also be an int, as langchain-qdrant takes it (kept as its
        decimal string, under which `get_by_ids` and `delete` find it, given as either)."""
        return super().add_texts(texts, metadatas, ids=_point_ids(ids), **kwargs)

    def add_embeddings(
        self,
        text_embeddings: Iterable[tuple[str, Sequence[float]]],
        metadatas: list[dict[str, Any]] | None = None,
        ids: Sequence[str | int | None] | None = None,
        **kwargs: Any,
    ) -> list[str]:
        """As `FaissVectorStore.add_embeddings`; int ids as `add_texts` takes them."""
        return super().add_embeddings(text_embeddings, metadatas, _point_ids(ids), **kwargs)

    def get_by_ids(self, ids: Sequence[str | int], /) -> list[Any]:
        """As `FaissVectorStore.get_by_ids`; int ids as `add_texts` takes them."""
        return super().get_by_ids(_point_ids(ids))  # type: ignore[arg-type]

    def delete(self, ids: Sequence[str | int] | None = None, *, strict: bool = False, **kwargs: Any) -> bool:
        """As `FaissVectorStore.delete`; int ids as `add_texts` takes them."""
        return super().delete(_point_ids(ids), strict=strict, **kwargs)  # type: ignore[arg-type]

    _call_keywords = ("search_params",)

    def _searching(self, kwargs: Mapping[str, Any]) -> contextlib.AbstractContextManager[None]:
        """A call's `search_params=` (Qdrant's `models.SearchParams`), as langchain-qdrant takes it, for its dense
        searches."""
        return self._qdrant.call_search_params(kwargs.get("search_params"))

    def _spelled(self, filter: Any) -> Any:
        """A filter dict with langchain-qdrant's payload paths: a key "metadata.<field>" names the metadata field
        <field>, as it does in a `models.Filter` (the payload keeps the metadata under "metadata")."""
        return _metadata_paths(filter) if isinstance(filter, Mapping) else filter

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
        `location` (":memory:" or a URL), `url`, `path` and `api_key` (langchain-qdrant's arguments); `kwargs`:
        the constructor's, langchain-qdrant's `force_recreate` (the collection deleted first), `batch_size`,
        `collection_create_options` (as `collection_options`), and the `QdrantClient` connection keywords (`host`,
        `port`, `grpc_port`, `prefer_grpc`, `https`, `prefix`, `timeout`) for a client made here.

        Raises:
            ValueError: no texts, no collection_name, or both a client and where to make one.
        """
        text_list = DocumentStore.required_texts(texts, "from_texts", cls.__name__)
        connection, options, recreate = _split_keywords(kwargs)
        made = _client(client, location, url, path, api_key, connection)
        with _closed_on_failure(made, client is None):
            store = cls(made, _recreated(cls, made, _name(collection_name), recreate, options), embedding, **options)
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
        connection, options, recreate = _split_keywords(kwargs)
        made = _client(client, location, url, path, api_key, connection)
        with _closed_on_failure(made, client is None):
            store = cls(made, _recreated(cls, made, _name(collection_name), recreate, options), embedding, **options)
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
        connection, options, recreate = _split_keywords(kwargs)
        if recreate:
            raise ValueError("from_existing_collection opens a collection; force_recreate=True is from_texts'.")
        made = _client(client, location, url, path, api_key, connection)
        with _closed_on_failure(made, client is None):
            if not made.collection_exists(collection_name):
                raise ValueError(
                    f"Qdrant has no collection {collection_name!r}; create it with from_texts or add_texts."
                )
            return cls(made, collection_name, embedding, **options)

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


def _client(
    client: Any,
    location: str | None,
    url: str | None,
    path: str | None,
    api_key: str | None,
    connection: Mapping[str, Any] | None = None,
) -> Any:
    """The client given, or one made from where the store lives (`fair_retrieval.stores.qdrant_client`)."""
    return QdrantStore.client_of(client, location=location, url=url, path=path, api_key=api_key, **(connection or {}))


CONNECTION_KEYWORDS = ("host", "port", "grpc_port", "prefer_grpc", "https", "prefix", "timeout")
"""langchain-qdrant's `from_texts` keywords that go to the `QdrantClient` it makes."""
_SAME_LAYOUT = {
    "vector_name": "",
    "content_payload_key": "page_content",
    "metadata_payload_key": "metadata",
    "sparse_vector_name": "langchain-sparse",
    "validate_embeddings": True,
    "validate_collection_config": True,
    "sparse_embedding": None,
    "vector_params": None,
    "sparse_vector_params": None,
}
"""langchain-qdrant's layout keywords, and the value of each that says what this store does anyway."""
_WHY = {
    "sparse_embedding": "the store scores BM25 itself, inside Qdrant (sparse vectors with its IDF modifier); drop it, "
    "and set BM25's language, k1 and b with lexical=LexicalSettings(...)",
    "sparse_vector_name": "the store names its own sparse vector; drop it",
    "vector_name": "the store names its own dense vector (a document's windows); drop it",
    "content_payload_key": "the store keeps a document's text in its own record; drop it",
    "metadata_payload_key": "the metadata is always under 'metadata' (filter on 'metadata.<key>'); drop it",
    "validate_embeddings": "the embeddings are always checked against the collection; drop it",
    "validate_collection_config": "the collection's settings are always checked; drop it",
    "vector_params": "the store sets its vectors' parameters; give HNSW and quantization in collection_options=",
    "sparse_vector_params": "the store sets its sparse vectors' parameters; drop it",
}


def _check_anchor_options(options: Mapping[str, Any]) -> None:
    """Take langchain-qdrant's layout keywords where they say what this store does; refuse the others by name.

    Raises:
        TypeError: a keyword neither store takes.
        ValueError: a layout keyword with another value than this store's, with the reason and the fix.
    """
    unknown = sorted(set(options) - set(_SAME_LAYOUT))
    if unknown:
        raise TypeError(f"{NAME}() got unexpected keyword argument(s) {', '.join(map(repr, unknown))}.")
    for key, value in options.items():
        same = _SAME_LAYOUT[key]
        if not (value == same or (same is None and value in ({}, None))):
            raise ValueError(f"{NAME} does not take {key}={value!r}: {_WHY[key]}.")


def _metric_of(distance: Any, metric: StoreMetric | None) -> StoreMetric | None:
    """The store metric a langchain-qdrant `distance` says (None: `metric` as given).

    Raises:
        ValueError: a distance this store does not keep (Manhattan), or one that disagrees with `metric`.
    """
    if distance is None:
        return metric
    metrics: dict[str, StoreMetric] = {"cosine": "cosine", "dot": "ip", "euclid": "l2"}
    value = str(getattr(distance, "value", distance)).lower()
    if value not in metrics:
        raise ValueError(
            f"{NAME} keeps cosine, dot-product or Euclidean distances (models.Distance.COSINE, DOT, EUCLID), got "
            f"distance={distance!r}."
        )
    if metric is not None and metric != metrics[value]:
        raise ValueError(
            f"distance={distance!r} is metric={metrics[value]!r}, not metric={metric!r}: give one of them."
        )
    return metrics[value]


def _split_keywords(kwargs: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """langchain-qdrant's `from_texts` keywords: (the client's connection keywords, the constructor's, whether to
    recreate the collection); `collection_create_options` becomes `collection_options`."""
    connection = {key: kwargs[key] for key in CONNECTION_KEYWORDS if key in kwargs}
    options = {key: value for key, value in kwargs.items() if key not in CONNECTION_KEYWORDS}
    recreate = bool(options.pop("force_recreate", False))
    created = options.pop("collection_create_options", None)
    if created:
        if options.get("collection_options"):
            raise ValueError("Pass collection_options= or collection_create_options=, not both.")
        options["collection_options"] = created
    return connection, options, recreate


def _recreated(cls: type, client: Any, collection_name: str, recreate: bool, options: Mapping[str, Any]) -> str:
    """`collection_name`, its collection deleted first when `recreate` (langchain-qdrant's `force_recreate`), once
    the constructor's keywords in `options` are known to be good (a refused call deletes nothing)."""
    if not recreate:
        return collection_name
    named = set(inspect.signature(cls).parameters) - {"client", "collection_name", "embedding", "anchor"}
    _check_anchor_options({key: value for key, value in options.items() if key not in named})
    _metric_of(options.get("distance"), options.get("metric"))
    if client.collection_exists(collection_name):
        client.delete_collection(collection_name)
    return collection_name


_PAYLOAD_PREFIX = "metadata."


def _metadata_paths(spec: Mapping[str, Any]) -> dict[str, Any]:
    """`spec` with each field key "metadata.<field>" read as <field>, through $and, $or and $not."""
    spelled: dict[str, Any] = {}
    for key, value in spec.items():
        if key in ("$and", "$or") and isinstance(value, list | tuple):
            value = [_metadata_paths(member) if isinstance(member, Mapping) else member for member in value]
        elif key == "$not" and isinstance(value, Mapping):
            value = _metadata_paths(value)
        elif isinstance(key, str) and key.startswith(_PAYLOAD_PREFIX) and len(key) > len(_PAYLOAD_PREFIX):
            key = key[len(_PAYLOAD_PREFIX) :]
            if key in spec:
                raise ValueError(
                    f"filter names the field {key!r} twice, as {key!r} and as 'metadata.{key}' (langchain-qdrant's "
                    "payload path of the same field); keep one."
                )
        spelled[key] = value
    return spelled


def _point_ids(ids: Any) -> Any:
    """langchain-qdrant's ids as this store keeps them: an int (not a bool) as its decimal string; the rest as given
    (the store checks them: a single string, or another type, is refused there)."""
    if ids is None or isinstance(ids, str):
        return ids
    try:
        return [str(i) if isinstance(i, int) and not isinstance(i, bool) else i for i in ids]
    except TypeError:  # not iterable: the store names what it expected
        return ids


def _name(collection_name: str | None) -> str:
    """The collection `from_texts` writes to: the one named, else a new random name, as langchain-qdrant makes one
    (the store's `collection_name` tells it)."""
    if collection_name is None:
        collection_name = uuid.uuid4().hex
        logger.info(
            "No collection_name given: writing to a new collection %r, as langchain-qdrant does.", collection_name
        )
    return collection_name
