"""The door both adapters use: `DocumentStore`, a store taking a framework's plain values, each checked once, here.

A vector store adapter (LangChain's `FaissVectorStore`, LlamaIndex's `FairFaissVectorStore`) holds one
`DocumentStore` and translates its framework's types to the values it takes, and nothing more:

- records (the adapter's class: `TextDocument` for LangChain, a node's JSON form for LlamaIndex), or texts with
  their metadata and ids (`add_documents`, `add_document_vectors`);
- texts to embed, vectors a framework embedded (`add_vectors`), or windows (`StoreCore.add_windows`);
- filters in the stores' one grammar (`fair_retrieval.stores.filters`), compiled once per call (a framework's own
  filters translated to it: `check_filter_nesting`, `translated_filter`);
- query texts and query vectors (`search_text`, `search_vector`, `mmr_search`, `query`);
- files and bytes (`save`, `load`, `save_named`, `load_named`, `to_bytes`, `from_bytes`).

It returns one hit type, `StoreHit`. Every input is checked at this door, once, before any text is embedded where
it can be; the store logic behind it is `StoreCore`'s (`fair_retrieval.stores.store_core`) and the modules it calls.
`WrappedStore` gives an adapter's store class the read-only properties both stacks share.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Self, TypeVar, cast

from fair_retrieval.index import Aggregate
from fair_retrieval.inputs import check_query, check_store_entries, ensure_text_list
from fair_retrieval.stores.arguments import check_keywords, ids_to_delete, preview, repeated, require_some
from fair_retrieval.stores.best_window import BEST_WINDOW_KEY, RESERVED_KEYS
from fair_retrieval.stores.files import store_generation
from fair_retrieval.stores.filters import (
    ENGINE_ONLY,
    RecordFilter,
    StoreFilter,
    check_nesting,
    store_filter,
    translated_filter,
)
from fair_retrieval.stores.indexed_records import Keyed, StoreIndex
from fair_retrieval.stores.marginal_relevance import mmr_hits
from fair_retrieval.stores.raw_faiss import read_legacy_folder
from fair_retrieval.stores.search_modes import SearchSettings, check_search_mode
from fair_retrieval.stores.store_archive import store_bytes, store_from_bytes
from fair_retrieval.stores.store_core import StoreCore, StoreHit
from fair_retrieval.stores.store_format import StoreFormat, load_store, save_store
from fair_retrieval.stores.store_lock import locked
from fair_retrieval.stores.text_documents import (
    TextDocument,
    checked_documents,
    document_text,
    named_store_paths,
    pickled_folder_error,
    text_document_format,
)
from fair_retrieval.stores.vector_queries import vector_query_hits
from fair_retrieval.stores.vectors import node_vectors, relevance_function, text_vector_pairs
from fair_retrieval.stores.window_embedders import gives_windows
from fair_retrieval.validate import is_number, positive_int

logger = logging.getLogger(__name__)

__all__ = ["DocumentStore", "WrappedStore"]

R = TypeVar("R", bound=Keyed)
S = TypeVar("S")

Filter = Mapping[str, Any] | Callable[..., Any] | StoreFilter | None
"""A filter as the door takes it: a `fair_retrieval.stores.filters` dict, a function of the metadata, compiled, or
None."""


class DocumentStore(StoreCore[R]):
    """The store both adapters hold: `StoreCore` with the calls that take plain values and check them once.

    Args:
        search: how text queries are answered by default: `SearchSettings`, or a mapping of the fields to change
            from the defaults (`mode`, read as `check_search_mode` reads it, `alpha`, `fusion`); None: the
            defaults.
        **options: the other arguments of `StoreCore` (metric, kind, gpu, index_params, multivector, aggregate,
            index, dim, embedder, replaced_move_to_end, group_of, name, windows, text_of, lexical).

    Raises:
        ValueError, TypeError: as `StoreCore`, and a search mode that is none of `SEARCH_MODES`.
    """

    def __init__(self, *, search: SearchSettings | Mapping[str, Any] | None = None, **options: Any) -> None:
        if isinstance(search, Mapping):
            search = self.settings_with(None, **search)
        super().__init__(search=search, **options)

    @staticmethod
    def of_texts(**options: Any) -> DocumentStore[TextDocument]:
        """A store of documents as (id, text, metadata) (`TextDocument`, LangChain's), its lexical side reading
        their text; `options` are the constructor's."""
        return DocumentStore(text_of=document_text, **options)

    @staticmethod
    def gives_windows(embedder: Any) -> bool:
        """Whether `embedder` gives windows itself (`embed_document_windows`): what makes a new store multi-vector
        by default (`fair_retrieval.stores.window_embedders`, the one rule)."""
        return gives_windows(embedder)

    @staticmethod
    def settings_with(
        settings: SearchSettings | None = None, *, mode: Any = None, alpha: Any = None, fusion: Any = None
    ) -> SearchSettings:
        """`settings` (None: the defaults, `SearchSettings()`) with a call's mode (a name of `SEARCH_MODES`, or an
        Enum with one as its value), alpha and fusion, those given (not None), checked.

        Raises:
            ValueError: a mode, alpha or fusion out of range.
        """
        checked = None if mode is None else check_search_mode(mode)
        return (settings or SearchSettings()).with_overrides(mode=checked, alpha=alpha, fusion=fusion)

    def call_settings(self, *, mode: Any = None, alpha: Any = None, fusion: Any = None) -> SearchSettings:
        """The store's search settings with one call's mode, alpha and fusion, those given (`settings_with`); the
        store's own, unchanged, when none is.

        Raises:
            ValueError: a mode, alpha or fusion out of range.
        """
        return self.settings_with(self.search_settings, mode=mode, alpha=alpha, fusion=fusion)

    # ------------------------------------------------------------------------------------------------ texts

    @staticmethod
    def required_texts(texts: Any, call: str, store: str) -> list[str]:
        """The texts a class method builds a store from (`from_texts`), checked, at least one.

        Raises:
            TypeError: a single string or a non-string text.
            ValueError: no texts (the message points to the constructor).
        """
        text_list = ensure_text_list(texts, "texts")
        require_some(text_list, call, "texts", store)
        return text_list

    @staticmethod
    def required_pairs(pairs: Any, call: str, store: str) -> list[tuple[str, Any]]:
        """The (text, vector) pairs a class method builds a store from (`from_embeddings`), checked, at least one.

        Raises:
            TypeError: a pair that is not (str, vector).
            ValueError: no pairs, vectors of different sizes or not finite.
        """
        texts, vectors = text_vector_pairs(pairs, "text_embeddings")
        require_some(texts, call, "(text, vector) pairs", store)
        return list(zip(texts, vectors, strict=True))

    def add_documents(
        self: DocumentStore[TextDocument],
        texts: Iterable[str],
        metadatas: Any,
        ids: Any,
        embed_documents: Callable[[list[str]], Any] | None = None,
    ) -> list[str]:
        """Embed texts and store them as documents with their metadata (JSON) and ids (None entries, or None: new
        UUIDs; an id already stored is replaced): pooled by `embed_documents` (None: the store's embedder's),
        multi-vector window by window by the store's embedder. Returns the ids.

        Raises:
            TypeError: a non-string text, a non-dict or non-JSON metadata value, or a non-string id.
            ValueError: metadatas or ids of the wrong length, an id repeated within the call, a reserved key.
        """
        text_list = ensure_text_list(texts, "texts")
        documents = checked_documents(text_list, metadatas, ids)
        if documents:
            self.add_texts(documents, text_list, embed_documents or self._embedder.embed_documents)
        return [document.key for document in documents]

    def add_document_vectors(self: DocumentStore[TextDocument], pairs: Any, metadatas: Any, ids: Any) -> list[str]:
        """Store texts with vectors computed elsewhere, (text, vector) pairs (a multi-vector store keeps each as one
        window spanning the whole text), as `add_documents` otherwise. Returns the ids.

        Raises:
            TypeError: a pair that is not (str, vector); as `add_documents`.
            ValueError: vectors of another size or not finite; as `add_documents`.
        """
        text_list, vectors = text_vector_pairs(pairs, "text_embeddings")
        documents = checked_documents(text_list, metadatas, ids)
        if documents:
            self.add(documents, vectors, "text_embeddings", lengths=[len(text) for text in text_list])
        return [document.key for document in documents]

    def documents(self, keys: Any) -> list[StoreHit[R]]:
        """The stored documents of `keys` (a list of ids), in that order, as hits with score 0; unknown ids are
        skipped.

        Raises:
            TypeError: `keys` is a single string or holds a non-string.
        """
        return [StoreHit(int_id, record, 0.0, None) for int_id, record in self.get(ensure_text_list(keys, "ids"))]

    def delete_ids(self, ids: Any, *, strict: bool = False) -> list[str]:
        """Remove the documents stored under `ids`; returns the ids that were not stored (ignored with a WARNING).

        Raises:
            ValueError: `ids` is None (to empty the store, pass its ids), or, with `strict`, ids that are not stored.
            TypeError: `ids` is a single string or holds a non-string.
        """
        return self.delete(ids_to_delete(ids), strict=strict)

    @staticmethod
    def hit_metadata(hit: StoreHit[TextDocument]) -> dict[str, Any]:
        """A copy of a found document's metadata (user code may edit it), with a multi-vector hit's best window
        under `BEST_WINDOW_KEY`."""
        window = {} if hit.best_window is None else {BEST_WINDOW_KEY: dict(hit.best_window)}
        return {**copy.deepcopy(hit.record.metadata), **window}

    @staticmethod
    def found(hits: Iterable[StoreHit[TextDocument]]) -> list[tuple[TextDocument, float]]:
        """Each hit's document, its metadata a copy (`hit_metadata`: user code may edit it, with a multi-vector hit's
        best window), and its score: what an adapter turns into its framework's documents."""
        return [
            (TextDocument(hit.record.key, hit.record.text, DocumentStore.hit_metadata(hit)), hit.score) for hit in hits
        ]

    # ------------------------------------------------------------------------------------------------ vectors

    @staticmethod
    def check_entries(texts: Sequence[str | None], keys: Sequence[str], metadatas: Sequence[Any]) -> None:
        """Refuse the entries of an add before any is stored: an empty or unreadable text (None: an entry without
        text, not checked) or id, or metadata under a key results carry (`RESERVED_KEYS`); every offending entry is
        named at once.

        Raises:
            TypeError, ValueError: naming each offending entry's position and id.
        """
        check_store_entries(texts, keys, metadatas, reserved=RESERVED_KEYS)

    def add_vectors(
        self,
        records: Sequence[R],
        embeddings: Sequence[Any],
        embedded: Sequence[str],
        contents: Sequence[str],
        *,
        noun: str = "node",
        log: logging.Logger = logger,
    ) -> list[str]:
        """Store records a framework embedded itself, with their embeddings; a multi-vector store asks the embedder
        for their windows (`StoreCore.add_embedded_windows`). Returns the ids.

        Args:
            records: the records, ids unique within the call.
            embeddings: one vector each (None where one was not embedded).
            embedded: exactly the texts the vectors were embedded from.
            contents: each record's own text, within its embedded text (the windows' spans are moved into it).
            noun: what the framework calls a record, for messages.
            log: the adapter's logger.

        Raises:
            ValueError: ids repeated within the call, a missing embedding, embeddings of different or wrong sizes
                or not finite. Nothing is stored then.
        """
        keys = [record.key for record in records]
        doubled = repeated(keys)
        if doubled:
            raise ValueError(f"{noun} ids repeat within this add: {preview(doubled)}; pass each {noun} once.")
        if not records:
            return []
        index = self.index
        matrix = node_vectors(list(embeddings), keys, None if index is None else index.dim)
        if self.multivector:
            self.add_embedded_windows(records, embedded, matrix, contents, log=log)
        else:
            self.add(records, matrix, f"the {noun}s' embeddings")
        return keys

    # ------------------------------------------------------------------------------------------------ searching

    filters_in_engine = False
    """Whether the store's engine evaluates Qdrant's own filters (`qdrant_client.models.Filter`): a Qdrant store."""

    def kept_by(self, spec: Filter) -> RecordFilter | None:
        """`compiled_filter(spec)` as a test of a stored record by its metadata (a search's `keep`); None: every
        record."""
        compiled = self.compiled_filter(spec)
        return None if compiled is None else RecordFilter(compiled)

    def compiled_filter(self, spec: Filter) -> StoreFilter | None:
        """`spec` compiled (None: none), so a malformed filter fails before anything is embedded or searched.

        Raises:
            ValueError: a malformed filter dict, naming the place; Qdrant's own filter for a store that filters in
                Python.
        """
        compiled = store_filter(spec)
        if compiled is not None and compiled.engine is not None and not self.filters_in_engine:
            raise ValueError(ENGINE_ONLY)
        return compiled

    @staticmethod
    def record_test(
        predicate: Callable[[Mapping[str, Any]], bool] | None, metadata_of: Callable[[Any], Any], engine: Any = None
    ) -> RecordFilter:
        """A compiled filter as a test of a stored record whose metadata `metadata_of` reads (a LlamaIndex node's
        JSON form), keeping its grammar dict for a store whose engine filters itself (`RecordFilter`); with
        `engine`, Qdrant's own filter (`models.Filter`) beside it, which a record must match too (a Qdrant store
        evaluates both; another store refuses it, `compiled_filter`)."""
        if engine is None:
            assert predicate is not None
            return RecordFilter(predicate, metadata_of)
        spec = getattr(predicate, "spec", None) if predicate is not None else None
        return RecordFilter(StoreFilter(predicate or (lambda metadata: True), spec or {}, engine), metadata_of)

    check_filter_nesting = staticmethod(check_nesting)
    """Refuse a framework's combination of filters nested deeper than the grammar allows, before it is translated
    (`fair_retrieval.stores.filters.check_nesting`: ValueError naming the bound)."""

    translated_filter = staticmethod(translated_filter)
    """A filter dict translated from a framework's own filters, compiled with the grammar's nesting bound counted in
    the framework's levels (`fair_retrieval.stores.filters.translated_filter`); None for {}."""

    @property
    def relevance(self) -> Callable[[float], float]:
        """A raw score of this store's metric → a relevance in [0, 1] (LangChain's convention)."""
        return relevance_function(self.metric)

    def embed_query(self, query: Any) -> Any:
        """The query's vector from the store's embedder (`embed_query`), the text checked first.

        Raises:
            ValueError, TypeError: a query that is not text a model can read (`check_query`).
        """
        return self._embedder.embed_query(check_query(query))

    check_keywords = staticmethod(check_keywords)
    """Refuse a call's keyword arguments that it does not honour, by name (`fair_retrieval.stores.arguments`)."""

    @staticmethod
    def check_score_threshold(score_threshold: Any) -> float | None:
        """`score_threshold` as a float (None: none), checked before anything is embedded or searched.

        Raises:
            TypeError: a threshold that is not a real number.
            ValueError: an integer beyond a float's range.
        """
        if score_threshold is None:
            return None
        if not is_number(score_threshold) or score_threshold != score_threshold:
            raise TypeError(f"score_threshold must be a number (or None), got {score_threshold!r}.")
        try:
            return float(score_threshold)
        except OverflowError:  # an int beyond float's range
            raise ValueError(f"score_threshold {score_threshold} is beyond a float's range; give a score.") from None

    def within_threshold(
        self, hits: list[StoreHit[R]], score_threshold: float | None, mode: str = "dense"
    ) -> list[StoreHit[R]]:
        """The hits whose raw score passes `score_threshold` (None: all), as langchain-community's FAISS reads one:
        a similarity (the "cosine" and "ip" metrics, a hybrid search's fused score, a BM25 score) must be at least
        the threshold, a squared distance (dense search of an "l2" store) at most."""
        if score_threshold is None:
            return hits
        if mode == "dense" and self.metric == "l2":
            return [hit for hit in hits if hit.score <= score_threshold]
        return [hit for hit in hits if hit.score >= score_threshold]

    def search_vector(
        self, embedding: Any, k: Any, filter: Filter = None, *, score_threshold: Any = None
    ) -> list[StoreHit[R]]:
        """The k documents nearest to a query vector among those `filter` keeps (by their `metadata`), those whose
        raw score passes `score_threshold` (`within_threshold`; None: all).

        Raises:
            ValueError: a bad k, a query vector of another size, a malformed filter.
            TypeError: a threshold that is not a number.
        """
        threshold = self.check_score_threshold(score_threshold)
        hits = self.search(embedding, positive_int(k, "k"), keep=self.kept_by(filter))
        return self.within_threshold(hits, threshold)

    def search_text(
        self,
        query: Any,
        k: Any,
        filter: Filter = None,
        settings: SearchSettings | None = None,
        *,
        score_threshold: Any = None,
    ) -> list[StoreHit[R]]:
        """The k best documents for a query text among those `filter` keeps, in the mode of `settings` (None: the
        store's), the query embedded by the store's embedder where the mode needs it (`StoreCore.text_search`);
        those whose score passes `score_threshold` (`within_threshold`; None: all).

        Raises:
            ValueError: a malformed filter (before the query is embedded), a bad k or query, a lexical mode on a
                store without a lexical side.
            TypeError: a threshold that is not a number.
        """
        keep = self.kept_by(filter)
        threshold = self.check_score_threshold(score_threshold)
        mode = (settings or self.search_settings).mode
        hits = self.text_search(query, positive_int(k, "k"), self._embedder.embed_query, settings=settings, keep=keep)
        return self.within_threshold(hits, threshold, mode)

    @locked
    def mmr_search(
        self,
        embedding: Any,
        k: int,
        fetch_k: int | None,
        lambda_mult: Any,
        filter: Filter = None,
        *,
        query: str | None = None,
        settings: SearchSettings | None = None,
    ) -> list[StoreHit[R]]:
        """k documents chosen for relevance and diversity (`fair_retrieval.stores.marginal_relevance`) among the
        `fetch_k` best that `filter` keeps: the nearest to `embedding`, or with `query` and a sparse or hybrid
        `settings` that search's candidates.

        Raises:
            ValueError: a bad k, fetch_k or λ, a malformed filter, a query vector of another size.
        """
        keep = self.kept_by(filter)
        if query is None or settings is None or settings.mode == "dense":
            return mmr_hits(self, embedding, k, fetch_k, lambda_mult, keep=keep)

        def candidates(count: int) -> list[StoreHit[R]]:
            return self.text_search(query, count, lambda _: embedding, settings=settings, keep=keep)

        return mmr_hits(self, embedding, k, fetch_k, lambda_mult, keep=keep, candidates=candidates)

    @locked
    def query(self, embedding: Any, top_k: Any, **options: Any) -> list[StoreHit[R]]:
        """The documents for a query in a query mode ("default", "mmr", "sparse", "text_search", "hybrid"),
        `fair_retrieval.stores.vector_queries.vector_query_hits` (its keyword arguments are `options`).

        Raises:
            ValueError: as `vector_query_hits`.
        """
        return vector_query_hits(self, embedding, top_k, **options)

    # ------------------------------------------------------------------------------------------------ files

    @locked
    def save(self, fmt: StoreFormat[R], store_file: Path, index_folder: Path, *, overwrite: bool = False) -> None:
        """Save the store file and its index folder in one commit (`fair_retrieval.stores.store_format`).

        Raises:
            StoreConflictError: as `save_store`.
        """
        save_store(self, fmt, store_file, index_folder, overwrite=overwrite)

    @classmethod
    def load(cls, fmt: StoreFormat[Any], store_file: Path, index_folder: Path, **options: Any) -> DocumentStore[Any]:
        """The store saved at `store_file`, checked (`fair_retrieval.stores.store_format.load_store`; `options` are
        its keyword arguments: gpu, embedder, allow_embedder_mismatch, multivector, aggregate, missing).

        Raises:
            FileNotFoundError, DamagedFileError, ValueError, TypeError: as `load_store`.
        """
        return cast("DocumentStore[Any]", load_store(fmt, store_file, index_folder, store_class=cls, **options))

    @staticmethod
    def text_format(store: str, writer: str, upgrade: str) -> StoreFormat[TextDocument]:
        """The file format of a store of `TextDocument`s (`fair_retrieval.stores.text_documents`: one format, one
        name, whoever writes it); `store`, `writer` and `upgrade` are what its messages call the store, the writer
        and the distribution to upgrade."""
        return text_document_format(store, writer, upgrade)

    def save_named(
        self: DocumentStore[TextDocument],
        fmt: StoreFormat[TextDocument],
        folder: Path,
        index_name: str,
        *,
        overwrite: bool = False,
    ) -> None:
        """Save the store under `index_name` in `folder` (created if needed): `index/` and `store.json` for the
        default name, else `<name>/` and `<name>.store.json`.

        Raises:
            ValueError: a malformed `index_name`; StoreConflictError as `save`.
        """
        index_folder, store_file = named_store_paths(folder, index_name)
        folder.mkdir(parents=True, exist_ok=True)
        self.save(fmt, store_file, index_folder, overwrite=overwrite)

    @classmethod
    def load_named(
        cls,
        fmt: StoreFormat[TextDocument],
        folder: Path,
        index_name: str,
        writer: str,
        *,
        search: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> DocumentStore[TextDocument]:
        """The store saved under `index_name` in `folder`; a folder of langchain-community's FAISS store is refused
        with how to convert it. `options` are `load`'s; `writer` names what writes such a folder, for messages;
        `search` the search settings to use instead of the saved ones (`mode`, `alpha`, `fusion`: those not None,
        checked before the folder is read, as the constructor's).

        Raises:
            FileNotFoundError, DamagedFileError, ValueError, TypeError: as `load`; ValueError for a malformed
                `index_name` or search setting.
        """
        index_folder, store_file = named_store_paths(folder, index_name)
        searching = cls.settings_with(**(search or {}))  # a bad mode fails before the folder is read
        pickled = pickled_folder_error(folder, index_name, store_file, fmt.store)
        if pickled is not None:
            raise pickled
        missing = f"{store_file} does not exist; it is written by {writer}."
        store = cls.load(fmt, store_file, index_folder, missing=missing, **options)
        if search:
            given = {name: value for name, value in search.items() if value is not None}
            store.search_settings = store.call_settings(**{name: getattr(searching, name) for name in given})
        return store

    @classmethod
    def load_text_folder(
        cls, folder: Path, fmt: StoreFormat[Any], record: Callable[[TextDocument], Any], **options: Any
    ) -> DocumentStore[Any]:
        """The store of texts saved in `folder` (`store.json` beside `index/`: what `fair-retrieval index` and
        LangChain's `save_local` write) as a store of another adapter's records: each document becomes
        `record(document)` and the store follows `fmt`'s rules (`text_documents.text_records_format`); it saves in
        `fmt`. `options` are `load`'s (gpu, embedder, allow_embedder_mismatch, multivector, aggregate).

        Raises:
            FileNotFoundError, DamagedFileError, ValueError, TypeError: as `load`.
        """
        from fair_retrieval.stores.text_documents import DEFAULT_INDEX_NAME, text_records_format

        text_format = text_document_format(fmt.store, "fair-retrieval index", fmt.upgrade)
        index_folder, store_file = named_store_paths(folder, DEFAULT_INDEX_NAME)
        missing = f"{store_file} does not exist; `fair-retrieval index` or FaissVectorStore.save_local() write it."
        read = text_records_format(fmt, record, text_format)
        return cls.load(read, store_file, index_folder, missing=missing, **options)

    @staticmethod
    def text_folder_of(persist_path: str | Path) -> Path | None:
        """The store folder a save at `persist_path` belongs to: its parent when that holds a store of texts
        (`store.json`, what `fair-retrieval index` and LangChain's `save_local` write) and nothing is at
        `persist_path` yet (a folder persisted before in another layout keeps its own files); else None.

        Why: one folder holds one store, so an adapter persisting into a store folder writes that store
        (`save_text_folder`) instead of a second one beside it that the other surfaces would not see.
        """
        from fair_retrieval.stores.text_documents import DEFAULT_INDEX_NAME

        path = Path(persist_path)
        _, store_file = named_store_paths(path.parent, DEFAULT_INDEX_NAME)
        return path.parent if store_file.is_file() and path != store_file and not path.exists() else None

    def save_text_folder(
        self,
        folder: Path,
        fmt: StoreFormat[Any],
        record: Callable[[TextDocument], Any],
        document: Callable[[Any], tuple[str, str, Mapping[str, Any]]],
        *,
        overwrite: bool = False,
    ) -> None:
        """Save the store as the store of texts in `folder` (`store.json` beside `index/`), the counterpart of
        `load_text_folder`: each record is written as the document of `document(record)` (its id, text and
        metadata), so `fair-retrieval search`, LangChain's `load_local` and `load_text_folder` all read the same
        documents.

        Raises:
            StoreConflictError: (a ValueError) as `save`: another writer saved the folder since this store was
                loaded from it, or this store was not loaded from it (and `overwrite` is False).
        """
        from fair_retrieval.stores.text_documents import DEFAULT_INDEX_NAME, text_records_format

        def as_document(item: Any) -> TextDocument:
            key, text, metadata = document(item)
            return TextDocument(key, text, dict(metadata))

        text_format = text_document_format(fmt.store, "fair-retrieval index", fmt.upgrade)
        index_folder, store_file = named_store_paths(folder, DEFAULT_INDEX_NAME)
        self.save(
            text_records_format(fmt, record, text_format, as_document), store_file, index_folder, overwrite=overwrite
        )

    @locked
    def to_bytes(self: DocumentStore[TextDocument], fmt: StoreFormat[TextDocument], index_name: str) -> bytes:
        """The store as bytes, without pickle: its folder packed in memory with a SHA-256
        (`fair_retrieval.stores.store_archive`)."""
        return store_bytes(self, fmt, "store.json", index_name)

    @staticmethod
    def from_bytes(data: Any, load: Callable[[Path], S], store: str) -> S:
        """The store in `data` (written by `to_bytes`), loaded by `load` from the unpacked folder.

        Raises:
            TypeError: `data` is not bytes; ValueError: bytes of another kind, cut short or changed.
        """
        return store_from_bytes(data, load, store)

    @staticmethod
    def legacy_entries(raw_path: Path, store: str) -> tuple[list[tuple[dict[str, Any], Any]], str]:
        """The nodes (their docstore JSON, with their vectors) and metric of a folder LlamaIndex persisted around the
        bare faiss file `raw_path` (`fair_retrieval.stores.raw_faiss`), for its conversion."""
        return read_legacy_folder(raw_path, store)

    def converts(self, raw_path: Path) -> None:
        """Make the store's next save at `raw_path` replace the file it was converted from (its generation)."""
        self.generation = store_generation(raw_path, raw_path.read_bytes())


class WrappedStore:
    """The read-only views of an adapter's store (`_store`, its `DocumentStore`), the same in both stacks: an
    adapter's store class derives from it beside its framework's base class, and gets its `DocumentStore` one way,
    `_hold`: a new one from its constructor, a loaded one (`DocumentStore.load`) through `around`."""

    _store: DocumentStore[Any]

    def _hold(self, store: DocumentStore[Any], **base: Any) -> None:
        """Build the framework's base class (the classes after `WrappedStore` in the adapter's MRO) with `base`,
        then keep `store`: what the adapter's constructor and `around` both run."""
        super().__init__(**base)
        self._store = store

    @classmethod
    def around(cls, store: DocumentStore[Any], **base: Any) -> Self:
        """An adapter's store holding `store`, one the door loaded (`DocumentStore.load`), built without the
        adapter's constructor (which makes a new `DocumentStore`); `base` as `_hold`."""
        wrapped = cls.__new__(cls)
        wrapped._hold(store, **base)
        return wrapped

    @property
    def index(self) -> StoreIndex | None:
        """The `fair_retrieval.FaissIndex` (a `MultiVectorIndex` in multi-vector mode; None before the first add
        when the vector size was not given)."""
        return self._store.index

    @property
    def ids(self) -> list[str]:
        """The ids of the stored documents (nodes), in insertion order."""
        return self._store.records.keys

    @property
    def metric(self) -> str:
        """What the scores are: "cosine" or "ip" (inner products, larger is better), "l2" (squared distances)."""
        return self._store.metric

    @property
    def multivector(self) -> bool:
        """Whether documents are kept as the vectors of their windows (the index is a `MultiVectorIndex`)."""
        return self._store.multivector

    @property
    def kind(self) -> str | None:
        """The index kind the store reports and records on save (`StoreCore.kind`): the one asked for, or the
        mode's default once made ("compressed" windows or "flat"); None before the first add made it."""
        return self._store.kind

    @property
    def aggregate(self) -> Aggregate | None:
        """How a multi-vector document's window scores become its score; None for a pooled store."""
        return self._store.mode.aggregate if self._store.multivector else None

    @property
    def embedder_identity(self) -> dict[str, Any] | None:
        """The identity of what made the vectors (`fair_retrieval.embedding.identity`): the embeddings the store
        was given, else the one a loaded store recorded; None when unknown."""
        return self._store.identity(with_mode=False)

    @property
    def store_identity(self) -> dict[str, Any] | None:
        """The identity a save records and a load checks: `embedder_identity` with a multi-vector store's mode."""
        return self._store.identity()
