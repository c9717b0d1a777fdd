"""`QdrantStore`: the stores' door (`DocumentStore`) over a Qdrant collection instead of an in-process FAISS index.

Everything a store does that is not Qdrant's stays where it is, written once, and runs unchanged: the checks of
every input at the door, the windows a document is kept as (`StoreWindows`, the same code and shape as the FAISS
store's), the embedding of texts and of a framework's nodes (`StoreCore.add_texts`, `add_embedded_windows`), the
query modes and their fusion (`StoreCore.text_search`, `hybrid_search`: the same `fuse` on the same two rankings),
MMR, LlamaIndex's query modes. What this class replaces are the primitives under them, each one or two Qdrant calls
(`fair_retrieval.stores.qdrant_collection` has the point layout):

- a dense search is a grouped query (`query_points_groups`, group size 1): k distinct documents, each scored by its
  best window (the FAISS store's aggregate "max"), the best window's span in the hit;
- the lexical side is BM25 as sparse vectors with Qdrant's IDF modifier (`fair_retrieval.lexical.sparse_bm25`), the
  same words, k1, b and formula as the FAISS store's bm25s, so the same scores;
- filters are translated into Qdrant filters and evaluated in the engine (`fair_retrieval.stores.qdrant_filters`),
  never after the search; a restriction to ids or groups (LlamaIndex's node_ids / doc_ids) is one more condition;
- writes, deletes, gets and counts are Qdrant's, so the collection can be a server's, replicated and sharded, shared
  by processes and machines: nothing of the documents is held here.

The collection records the store's settings (metric, mode, window shape, lexical and search settings, the embedder's
identity), and a store opening it takes them and checks the embeddings it is given as a folder's load does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from fair_retrieval.embedding.identity import check_identity
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.lexical import LexicalSettings
from fair_retrieval.lexical.lexical_tokens import LexicalTokenizer
from fair_retrieval.lexical.sparse_bm25 import (
    average_length,
    check_sparse_settings,
    document_vector,
    query_vector,
)
from fair_retrieval.stores.arguments import preview
from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.filters import RecordFilter, StoreFilter, is_engine_filter
from fair_retrieval.stores.indexed_records import Keyed
from fair_retrieval.stores.qdrant_collection import (
    CALL_SEARCH_PARAMS,
    DOC_FIELD,
    GROUP_FIELD,
    ID_FIELD,
    RECORD_FIELD,
    SEQUENCE_FIELD,
    SPAN_FIELD,
    STAMP_FIELD,
    VERSION_FIELD,
    WINDOW_FIELD,
    QdrantCollection,
    default_collection_options,
    int_id_of,
)
from fair_retrieval.stores.qdrant_filters import check_engine_filter, function_filter_error, qdrant_filter, renamed_keys
from fair_retrieval.stores.search_modes import SearchSettings
from fair_retrieval.stores.store_core import MISMATCH_OVERRIDE, StoreHit
from fair_retrieval.stores.store_format import StoreFormat
from fair_retrieval.stores.store_lock import locked
from fair_retrieval.stores.store_mode import DocumentMode, StoreWindows, checked_windows
from fair_retrieval.stores.text_documents import TextDocument, document_text, text_document_format
from fair_retrieval.validate import is_number

logger = logging.getLogger(__name__)

__all__ = ["EngineSelection", "QdrantStore", "client_at", "qdrant_client"]

R = TypeVar("R", bound=Keyed)

ORPHAN_SECONDS = 3600
"""How old a window with no head at all must be for a search that meets it to delete it: a write puts its head
within seconds of its windows, so an hour-old window without one is a killed write's (of a document new then, or
deleted since), not one being made; the margin also covers writers' clocks that differ."""
MAX_SEARCH_ROUNDS = 8
"""How many times a dense search asks again around windows no head counts before it answers with fewer hits."""
DISTANCES = {"cosine": "Dot", "ip": "Dot", "l2": "Euclid"}
"""The Qdrant distance of each store metric ("cosine": unit vectors by inner product, as the FAISS store)."""
_REFUSED_OPTIONS = ("kind", "gpu", "index", "index_params")


def qdrant_client(
    client: Any = None,
    *,
    location: str | None = None,
    url: str | None = None,
    path: str | None = None,
    api_key: str | None = None,
    **connection: Any,
) -> Any:
    """`client` when given, else a `qdrant_client.QdrantClient` made from where the collection lives: `location`
    (":memory:" or a URL), `url`, `host` or `path` (local mode, a folder), with `api_key` and the other
    `QdrantClient` keywords of a server connection in `connection` (port, grpc_port, prefer_grpc, https, prefix,
    timeout).

    Raises:
        ValueError: both a client and where to make one, or none of them, or more than one place; a local-mode folder
            another client holds (local mode serves one client at a time: close it, or run a server).
        ImportError: qdrant-client is not installed (with the install command).
    """
    host = connection.pop("host", None)
    places = {
        name: value for name, value in (("location", location), ("url", url), ("host", host), ("path", path)) if value
    }
    if client is not None:
        if places or connection:
            raise ValueError(f"Pass either client= or {' / '.join([*places, *connection])}=, not both.")
        return client
    if len(places) != 1:
        raise ValueError(
            "Say where the Qdrant collection lives: client=QdrantClient(...), or one of url='http://localhost:6333', "
            f"path='./qdrant' (local mode) or location=':memory:'; got {sorted(places) or 'none'}."
        )
    try:
        from qdrant_client import QdrantClient
    except ImportError as error:
        raise ImportError('A Qdrant store needs qdrant-client: pip install "fair-retrieval[qdrant]".') from error
    try:
        return QdrantClient(**places, api_key=api_key, **connection)  # type: ignore[arg-type]  # one place, a str
    except RuntimeError as error:  # qdrant-client's words for a folder locked by another client
        if path is None or "already accessed by another instance" not in str(error):
            raise
        raise ValueError(
            f"The Qdrant local-mode folder {path!r} is open in another client (this process or another one): local "
            "mode serves one client at a time. Close that client (client.close(), or end its process) first; for "
            "writers in several processes at once, run a Qdrant server (docker run -p 6333:6333 qdrant/qdrant) and "
            "pass url=."
        ) from None


def client_at(where: str, api_key: str | None = None) -> Any:
    """A `qdrant_client.QdrantClient` for one place written as the command line takes it: a server's URL
    ("http://…", "https://…"), ":memory:", or a folder (local mode, created if absent).

    Raises:
        ValueError: an empty place, a file, or a folder that holds other files than a local-mode Qdrant's (a store
            folder, documents): local mode would write its own files among them.
    """
    if not isinstance(where, str) or not where.strip():
        raise ValueError("--qdrant needs a server's URL (http://localhost:6333) or a folder for local mode.")
    if where.startswith(("http://", "https://")):
        return qdrant_client(url=where, api_key=api_key)
    if where == ":memory:":
        return qdrant_client(location=where)
    folder = Path(where)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"--qdrant {where}: that is a file; give a folder for local mode, or a server's URL.")
    if folder.is_dir() and any(folder.iterdir()) and not (folder / "meta.json").is_file():
        raise ValueError(
            f"--qdrant {where}: the folder holds other files than a local-mode Qdrant's (no meta.json); give an "
            "empty or new folder for the collections, or a server's URL."
        )
    return qdrant_client(path=where)


class EngineSelection:
    """A restriction a search runs under inside the engine (ids, groups and a filter, as one Qdrant condition): what
    `QdrantStore.selection` gives where the FAISS store gives int ids."""

    __slots__ = ("condition",)

    def __init__(self, condition: Any) -> None:
        self.condition = condition


class QdrantStore(DocumentStore[R]):
    """A `DocumentStore` whose documents live in a Qdrant collection (see the module docstring).

    Filters: the stores' grammar (translated), or Qdrant's own `models.Filter` (evaluated as given; the metadata is
    under "metadata" in every point's payload, as langchain-qdrant keeps it: "metadata.topic").

    Args:
        client: a `qdrant_client.QdrantClient`; or None with `location`, `url` or `path` (and `api_key`, and the
            client's other keywords in `client_options`: port, prefer_grpc, timeout, ...), where the store makes one
            (`qdrant_client`).
        collection_name: the collection; created on the first add (or now, with `dim`) when it does not exist, else
            opened: its recorded settings are taken, the embeddings given are checked against its record.
        fmt: how one record is written into a head point and read back: every surface writes the text-document
            entry (`text_documents.text_document_format`, what LangChain and the command line write; an adapter with
            its own records keeps them beside it, `text_records_format`), so each opens the others' collections.
        earlier: formats of collections written by earlier releases that this store also opens (and then keeps
            writing in that collection's format), by the name a collection records.
        search: how text queries are answered by default: a `SearchSettings`, or a mapping of the fields given
            (`mode`, `alpha`, `fusion`) to apply over the collection's recorded settings (the defaults for a new one).
        search_params: a `qdrant_client.models.SearchParams` for dense searches (HNSW ef, exact, quantization
            rescoring), or None: the measured default on a server (`qdrant_collection.default_search_params`: a beam
            of 1,024, int8 candidates re-scored), none in local mode (exact).
        collection_options: keyword arguments of `create_collection` for a new collection (`hnsw_config`,
            `quantization_config`, `shard_number`, `replication_factor`, `on_disk_payload`, …; `on_disk`: the dense
            vectors on disk), over the measured defaults (`qdrant_collection.default_collection_options`: HNSW
            m 32 / ef_construct 256, int8 codes in RAM, the float windows on disk); `quantization_config=None` and
            `on_disk=False` turn those off.
        allow_embedder_mismatch: open a collection made by another embedder configuration anyway (a WARNING).
        batch_size: points per upsert request.
        metadata_of: a record's metadata, what its points carry for filters (None: its `metadata` attribute).
        **options: `StoreCore`'s: metric, multivector, aggregate (only "max": Qdrant's grouped search), dim,
            embedder, replaced_move_to_end, group_of, name, windows, text_of, lexical (Lucene's BM25, whole texts).

    Raises:
        TypeError: a client that is no `QdrantClient`, or a FAISS option (kind, gpu, index, index_params).
        ValueError: as `StoreCore`, an aggregate other than "max", lexical settings the engine cannot score, a
            collection that is not a fair-retrieval store's, or of another metric, mode, window shape or embedder
            configuration than asked for.
    """

    filters_in_engine = True

    def compiled_filter(self, spec: Any) -> StoreFilter | None:
        """As `DocumentStore.compiled_filter`; Qdrant's own `models.Filter` also checked to read what this store's
        points hold (`qdrant_filters.check_engine_filter`), before anything is embedded or searched."""
        compiled = super().compiled_filter(spec)
        if compiled is not None and compiled is not spec and compiled.engine is not None:  # compiled here: checked
            check_engine_filter(compiled.engine, also=(GROUP_FIELD,))
        return compiled

    @staticmethod
    @contextlib.contextmanager
    def call_search_params(search_params: Any) -> Iterator[None]:
        """Within this block, this thread's or task's dense searches use `search_params` (a `models.SearchParams`:
        HNSW ef, exact, quantization rescoring) instead of the store's; None keeps the store's. What langchain-qdrant
        takes per call as `search_params=`.

        Raises:
            TypeError: `search_params` is not a `qdrant_client` `models.SearchParams` (or None).
        """
        if search_params is None:
            yield
            return
        from qdrant_client import models

        if not isinstance(search_params, models.SearchParams):
            raise TypeError(
                f"search_params must be a qdrant_client models.SearchParams (e.g. models.SearchParams(hnsw_ef=256)), "
                f"got {type(search_params).__name__}."
            )
        token = CALL_SEARCH_PARAMS.set(search_params)
        try:
            yield
        finally:
            CALL_SEARCH_PARAMS.reset(token)

    group_key = GROUP_FIELD
    """The payload key of a document's group (LlamaIndex's ref_doc_id), which Qdrant's own filters may name."""

    @staticmethod
    def renamed_filter(spec: Any, rename: Callable[[str], str], name: str = "qdrant_filters") -> Any:
        """Qdrant's own filter with its payload keys renamed (`qdrant_filters.renamed_keys`), for an adapter whose
        framework wrote them for another layout.

        Raises:
            TypeError: `spec` is not a `qdrant_client` `models.Filter` (`name` says what the caller calls it).
        """
        if not is_engine_filter(spec):
            raise TypeError(f"{name} must be a qdrant_client models.Filter, got {type(spec).__name__}.")
        return renamed_keys(spec, rename)

    def __init__(
        self,
        *,
        client: Any = None,
        collection_name: str,
        fmt: StoreFormat[R],
        earlier: Sequence[StoreFormat[R]] = (),
        location: str | None = None,
        url: str | None = None,
        path: str | None = None,
        api_key: str | None = None,
        client_options: Mapping[str, Any] | None = None,
        search: SearchSettings | Mapping[str, Any] | None = None,
        search_params: Any = None,
        collection_options: Mapping[str, Any] | None = None,
        allow_embedder_mismatch: bool = False,
        batch_size: int = 256,
        metadata_of: Callable[[R], Mapping[str, Any]] | None = None,
        **options: Any,
    ) -> None:
        name = options.get("name", "QdrantStore")
        given = sorted(key for key in _REFUSED_OPTIONS if options.get(key) is not None)
        if given:
            raise TypeError(
                f"{name} keeps its vectors in Qdrant, which takes no FAISS option ({', '.join(given)}); set the "
                "collection's HNSW and quantization with collection_options=, its searches with search_params=."
            )
        made = client is None  # a client made here is closed again when the open fails (a local folder unlocked)
        client = qdrant_client(client, location=location, url=url, path=path, api_key=api_key, **(client_options or {}))
        try:
            collection = QdrantCollection(client, collection_name, name, search_params, batch_size)
            recorded = collection.recorded()
            dim = options.pop("dim", None)
            if recorded is not None:
                _check_record(recorded, collection_name)
                collection.int_head_ids = recorded.get("head_ids") == "int"
                options = _recorded_options(recorded, options, collection_name)
            options = {key: value for key, value in options.items() if value is not None or key == "embedder"}
            super().__init__(search=_search_settings(recorded, search, collection_name), **options)
            if self.multivector and self.mode.aggregate != "max":
                raise ValueError(
                    f"{name} scores a document by its best window (aggregate='max', Qdrant's grouped search); "
                    f"aggregate={self.mode.aggregate!r} is a FAISS store option."
                )
            lexical = self.lexical
            if lexical is not None:
                check_sparse_settings(lexical, name)
            self._tokenizer = None if lexical is None else LexicalTokenizer(lexical.language)
            read = {form.name: form for form in (*earlier, fmt)}
            self._store_format = read.get(recorded.get("records", fmt.name), fmt) if recorded is not None else fmt
            self._text_of: Callable[[R], str] | None = options.get("text_of")
            self._group_of: Callable[[R], str] | None = options.get("group_of")
            self._move_to_end = bool(options.get("replaced_move_to_end", True))
            self._metadata_of: Callable[[R], Mapping[str, Any]] = metadata_of or (lambda record: record.metadata)  # type: ignore[attr-defined]
            self._collection = collection
            self._collection_options = {**default_collection_options(), **(collection_options or {})}
            self._recorded = recorded
            if recorded is not None and recorded.get("records", fmt.name) not in read:
                raise ValueError(
                    f"Qdrant collection {collection_name!r} holds records of {recorded['records']!r}, which {name} "
                    f"does not read ({fmt.name!r}): an earlier release's LlamaIndex FairQdrantVectorStore wrote its "
                    "nodes in a layout only that store opens. Open it with LlamaIndex's FairQdrantVectorStore, or "
                    "write the documents again into a new collection (every surface of this release writes one layout "
                    "that each of them opens)."
                )
            if recorded is not None and not self._exact_filters:
                logger.warning(
                    "Qdrant collection %r was written by an earlier release, whose points carry no filter markers: "
                    "its filters read list fields, nulls and empty lists as Qdrant does (docs/guides/qdrant.md lists "
                    "the differences). Write its documents into a new collection for filters that match the FAISS "
                    "store's exactly.",
                    collection_name,
                )
            if recorded is not None:
                # what a store opened without embeddings rebuilds them of
                self.recorded_identity = recorded.get("identity")
                self._check_recorded_identity(recorded, allow_embedder_mismatch)
                self.check_embedder_size(f"Qdrant collection {collection_name!r}")
            elif dim is not None:
                self._create(int(dim))
        except BaseException:
            if made:
                client.close()
            raise

    @property
    def _exact_filters(self) -> bool:
        """Whether every point carries `field_markers` (a collection made by this release, or none yet)."""
        return self._recorded is None or self._recorded.get("filter_markers") is True

    client_of = staticmethod(qdrant_client)
    """The client given, or one made from where the collection lives (`qdrant_client`)."""

    @staticmethod
    def of_records(
        fmt: StoreFormat[R],
        write: Callable[[R], Any],
        read: Callable[[str, str, dict[str, Any], dict[str, Any]], R],
        **options: Any,
    ) -> QdrantStore[R]:
        """A Qdrant store of an adapter's records, each head written as the text-document entry every surface reads
        (`text_documents.text_entry_format`: `write` gives a record's id, text, metadata and the adapter's own fields
        kept beside them, `read` makes a record of them), with `fmt`'s rules; a collection an earlier release wrote
        in `fmt` itself opens too. `options` are the constructor's."""
        from fair_retrieval.stores.text_documents import text_entry_format

        earlier = [*options.pop("earlier", ()), fmt]
        return QdrantStore(fmt=text_entry_format(fmt, write, read), earlier=earlier, **options)

    @staticmethod
    def of_texts(**options: Any) -> QdrantStore[TextDocument]:
        """A Qdrant store of documents as (id, text, metadata) (`TextDocument`, LangChain's), written in heads as
        the text-document store file writes them, its lexical side reading their text; `options` are the
        constructor's, and `upgrade`: the distribution to upgrade for a newer collection."""
        name = options.get("name", "QdrantStore")
        fmt = text_document_format(name, name, options.pop("upgrade", "fair-retrieval"))
        return QdrantStore(fmt=fmt, text_of=document_text, **options)

    # ------------------------------------------------------------------------------------------------ the record

    def _settings_record(self) -> dict[str, Any]:
        """What the collection records of this store (beside its format, size and distance)."""
        return {
            "metric": self.metric,
            "multivector": self.multivector,
            "windows": None
            if self.windows is None
            else {"tokens": list(self.windows.tokens), "boundaries": self.windows.boundaries},
            "lexical": None if self.lexical is None else dataclasses.asdict(self.lexical),
            "search": self.search_settings.settings().get("search", {}),
            "identity": self.identity(),
            "records": self._store_format.name,
            "avgdl": None,
            "filter_markers": True,  # every point carries `field_markers`: filters translate exactly
            "head_ids": "int",  # heads named by int id: a write meets another key of its int id (`head_id`)
        }

    def _create(self, dim: int) -> None:
        """Create the collection for `dim`-d vectors, then read back what it records (another writer may have
        created it first: its record is checked as an opened one's)."""
        self._collection.create(dim, DISTANCES[self.metric], self._settings_record(), self._collection_options)
        recorded = self._collection.recorded()
        assert recorded is not None  # just created
        _check_record(recorded, self._collection.name)
        self._collection.int_head_ids = recorded.get("head_ids") == "int"
        if recorded.get("identity") != self.identity() or recorded.get("dim") != dim:
            self._check_recorded_identity(recorded, False)
        self._recorded = recorded

    def _check_recorded_identity(self, recorded: Mapping[str, Any], allow_mismatch: bool) -> None:
        if self.embedder is None:
            return
        check_identity(
            recorded.get("identity"),
            self.identity() or {},
            source=f"Qdrant collection {self._collection.name!r}",
            allow_mismatch=allow_mismatch,
            override=MISMATCH_OVERRIDE,
            remedy="Open it with the embeddings that made it, or write these documents to another collection.",
            unrecorded="made without being told its embedder",
        )

    # ------------------------------------------------------------------------------------------------ reading

    @property
    def collection(self) -> QdrantCollection:
        """The Qdrant collection and its point layout."""
        return self._collection

    @property
    def records(self) -> Any:
        """The stored records as the adapters read them: `keys` (every document's id, in insertion order) and
        `records` (int id → record, each read from Qdrant when asked)."""
        return _RecordsView(self)

    @locked
    def __len__(self) -> int:
        return 0 if self._recorded is None else self._collection.count()

    @locked
    def window_count(self) -> int:
        """How many window points the collection holds, counted by the engine (what sizes its memory and disk; a
        write in progress or killed counts too)."""
        return 0 if self._recorded is None else self._collection.window_count()

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and bool(self.get([key]))

    @locked
    def records_of(self, int_ids: Sequence[int]) -> list[R]:
        """The stored records of `int_ids`, in that order, in one request.

        Raises:
            ValueError: one is not stored (deleted meanwhile).
        """
        heads = self._heads(list(int_ids))
        missing = [int_id for int_id in int_ids if int_id not in heads]
        if missing:
            raise ValueError(f"{self.name}: {len(missing)} document(s) are no longer stored (deleted meanwhile).")
        return [heads[int_id] for int_id in int_ids]

    @locked
    def get(self, keys: Iterable[str]) -> list[tuple[int, R]]:
        """The stored (int id, record) of `keys`, in that order; unknown keys skipped, repeats given once (heads
        read by point id: no filter over the collection)."""
        unique = list(dict.fromkeys(keys))
        heads = self._collection.heads_of(unique) if self._recorded is not None else {}
        return [(int_id_of(key), self._decoded(heads[key])) for key in unique if key in heads]

    @locked
    def delete(self, keys: Iterable[str], *, strict: bool = False) -> list[str]:
        """Remove the documents stored under `keys` (as `StoreCore.delete`): their heads and windows deleted by point
        id (a head counts its windows), no filter over the collection; the documents of an earlier release's heads,
        which do not, by a filter on their keys."""
        unique = list(dict.fromkeys(keys))
        heads = self._collection.heads_of(unique) if self._recorded is not None else {}
        unknown = self.unknown_keys(unique, heads, strict)
        self._collection.delete_heads(heads)
        return unknown

    def selection(
        self,
        keys: Sequence[str] | None = None,
        groups: Sequence[str] | None = None,
        keep: Callable[[R], bool] | None = None,
        *,
        empty_means_all: bool = False,
    ) -> Any:
        """The restriction to `keys`, `groups` and what `keep` (a compiled filter dict) accepts, as one condition
        the engine evaluates (`EngineSelection`); None when nothing restricts."""
        from fair_retrieval.stores.arguments import id_strings

        parts = []
        if keys is not None and (keys or not empty_means_all):
            parts.append(QdrantCollection.any_of(DOC_FIELD, id_strings(keys, "node_ids")))
        if groups is not None and (groups or not empty_means_all):
            parts.append(QdrantCollection.any_of(GROUP_FIELD, id_strings(groups, "doc_ids")))
        if keep is not None:
            parts.append(_keep_condition(keep, self._exact_filters))
        return None if not parts else EngineSelection(_all_of(parts))

    @locked
    def ordered(self, selected: Any, keys: Sequence[str] | None = None) -> list[int]:
        """The int ids of the documents `selected` restricts to (None: every document), in the order of `keys`
        when given, else in insertion order."""
        if self._recorded is None:
            return []
        condition = None if selected is None else _condition(selected)
        if keys is not None:
            wanted = [int_id_of(key) for key in dict.fromkeys(keys)]
            condition = _all_of([c for c in (condition, QdrantCollection.any_of(ID_FIELD, wanted)) if c is not None])
        heads = self._collection.scroll(self._collection.head_filter(condition))
        found = {int(point.payload[ID_FIELD]): point.payload[SEQUENCE_FIELD] for point in heads}
        if keys is not None:
            return [int_id for int_id in wanted if int_id in found]
        return sorted(found, key=found.__getitem__)

    @locked
    def vectors(self, int_ids: Sequence[int]) -> np.ndarray:
        """The documents' pooled vectors (their windows' weighted mean, unit length), float32 (n, dim), in order."""
        windows = self._collection.windows(list(int_ids)) if int_ids else {}
        heads = self._collection.heads(list(int_ids)) if int_ids else {}
        rows = []
        for int_id in int_ids:
            version = heads.get(int_id, {}).get(VERSION_FIELD)
            own = [(vector, weight) for vector, weight, v in windows.get(int_id, []) if v == version]
            if not own:
                raise ValueError(f"{self.name}: document {int_id} is not stored (deleted meanwhile?).")
            matrix = np.asarray([vector for vector, _ in own], dtype=np.float64)
            pooled = (matrix * np.asarray([weight for _, weight in own])[:, None]).sum(axis=0)
            rows.append(pooled / max(float(np.linalg.norm(pooled)), 1e-12))
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), -1)

    @locked
    def search(
        self,
        query: Any,
        k: int,
        *,
        among: Any = None,
        keep: Callable[[R], bool] | None = None,
        source: str = "the query embedding",
    ) -> list[StoreHit[R]]:
        """The k best documents for one query vector by their best window, best first, among `among` and what
        `keep` accepts, inside Qdrant (`QdrantCollection.dense_groups`).

        Raises:
            ValueError: a query of another size, a filter the engine cannot evaluate.
        """
        condition = self._restriction(among, keep)
        matrix = self.prepared(np.asarray(query, dtype=np.float32).reshape(1, -1), 1, source)
        if self._recorded is None or condition is _NOTHING:
            return []
        groups, heads = self._counted_groups(matrix[0].tolist(), k, condition)
        hits = []
        for int_id, score, payload, _ in groups:
            head = heads[int_id]
            start, end = payload[SPAN_FIELD]
            window = {"start": int(start), "end": int(end), "window": int(payload[WINDOW_FIELD])}
            value = score * score if self.metric == "l2" else score  # Qdrant's Euclid is the distance; FAISS: squared
            hits.append(StoreHit(int_id, self._decoded(head), value, window if self.multivector else None))
        return hits

    def _counted_groups(
        self, vector: list[float], k: int, condition: Any
    ) -> tuple[list[tuple[int, float, Any, str]], dict[int, dict[str, Any]]]:
        """`QdrantCollection.dense_groups` with every hit a window its head counts, and those heads: a window no
        head counts (a write being made, killed or raced by a newer one) is asked around, so it never takes a
        document's place; one older than its head, or with no head and older than `ORPHAN_SECONDS`, is deleted (no
        write can make it current again)."""
        excluded: list[str] = []
        for _ in range(MAX_SEARCH_ROUNDS):
            groups = self._collection.dense_groups(vector, k, condition, excluded)
            heads = self._collection.heads([int_id for int_id, _, _, _ in groups])
            stale = [
                (point, payload)
                for int_id, _, payload, point in groups
                if heads.get(int_id, {}).get(VERSION_FIELD) != payload[VERSION_FIELD]
            ]
            if not stale:
                return groups, heads
            excluded.extend(point for point, _ in stale)
            orphaned = time.time_ns() // 1000 - ORPHAN_SECONDS * 1_000_000  # µs, as stamps
            dead = [
                point
                for point, payload in stale
                if int(payload.get(STAMP_FIELD, 0))
                < (orphaned if (head := heads.get(int(payload[ID_FIELD]))) is None else int(head.get(STAMP_FIELD, 0)))
            ]
            if dead:
                logger.info("%s: deleting %d window(s) that no head counts any more.", self.name, len(dead))
                self._collection.delete_points(dead)
        counted = [group for group in groups if heads.get(group[0], {}).get(VERSION_FIELD) == group[2][VERSION_FIELD]]
        return counted, heads

    @locked
    def lexical_search(
        self,
        query: str,
        k: int,
        *,
        among: Any = None,
        keep: Callable[[R], bool] | None = None,
    ) -> list[StoreHit[R]]:
        """The k documents with the best BM25 scores for a query text, best first, among `among` and what `keep`
        accepts, scored inside Qdrant (the same scores as the FAISS store's bm25s); only documents sharing a word.

        Raises:
            ValueError: the store has no lexical side, a filter the engine cannot evaluate.
        """
        self._require_lexical()
        condition = self._restriction(among, keep)
        assert self._tokenizer is not None
        indices, values = query_vector(self._tokenizer.tokens(query))
        if self._recorded is None or condition is _NOTHING or not indices:
            return []
        found = self._collection.sparse_hits(indices, values, k, condition)
        heads = self._collection.heads([int_id for int_id, _ in found])
        return [StoreHit(i, self._decoded(heads[i]), score, None) for i, score in found if i in heads]

    # ------------------------------------------------------------------------------------------------ changing

    @locked
    def add(
        self, records: Sequence[R], vectors: Any, source: str = "the embeddings", lengths: Sequence[int] | None = None
    ) -> list[int]:
        """Store records with one vector each, kept as one window spanning the whole text (as `StoreCore.add`)."""
        matrix = self.prepared(vectors, len(records), source)
        spans = list(lengths) if lengths is not None else [len(self._text(record)) for record in records]
        return self._write(records, DocumentWindows.single(matrix, spans))

    @locked
    def add_windows(self, records: Sequence[R], windows: Any, source: str = "embed_document_windows") -> list[int]:
        """Store records with their windows (checked as `StoreCore.add_windows` checks them).

        Raises:
            TypeError: a pooled store, or `windows` that are not `DocumentWindows`.
        """
        if not self.multivector:
            raise TypeError(f"{self.name} keeps one pooled vector per document; add vectors, not windows.")
        checked = checked_windows(windows, len(records), source, unit=self.metric == "cosine")
        return self._write(records, checked)

    @locked
    def remove(self, int_ids: Iterable[int]) -> None:
        """Remove stored documents (every point) by int id."""
        wanted = sorted(set(int_ids))
        if wanted and self._recorded is not None:
            self._collection.delete_documents(_all_of([QdrantCollection.any_of(ID_FIELD, wanted)]))

    @locked
    def delete_group(self, group: str) -> int:
        """Remove every document of a group; returns how many."""
        if self._recorded is None:
            return 0
        condition = _all_of([QdrantCollection.any_of(GROUP_FIELD, [group])])
        count = self._collection.count(condition)
        self._collection.delete_documents(condition)
        return count

    @locked
    def clear(self) -> None:
        """Remove every document (the collection and its record stay)."""
        if self._recorded is not None:
            from qdrant_client import models

            self._collection.delete_documents(models.Filter(must=[]))

    def merge_from(self, other: Any, copy_record: Any = None, *, allow_embedder_mismatch: bool = False) -> int:
        """Refused: a Qdrant store takes documents by adds; copy a FAISS store into it with `copy_from`."""
        raise TypeError(
            f"{self.name} does not merge another store's index; add its documents (store.copy_from(faiss_store)), "
            "which writes them with their windows."
        )

    @locked
    def copy_from(self, other: DocumentStore[R], batch: int = 512) -> int:
        """Write every document of a FAISS-backed store into this collection with its stored windows (no model
        runs); returns how many. The stores must have the same metric, mode, window shape and vector size, and
        embedder identities that agree (checked as a load checks them).

        Raises:
            ValueError: another metric, mode or window shape, or embedder configuration.
        """
        from fair_retrieval.index import MultiVectorIndex
        from fair_retrieval.stores.store_mode import stored_windows

        if other.metric != self.metric or other.multivector != self.multivector or other.windows != self.windows:
            raise ValueError(
                f"Cannot copy a store of {other.mode} ({other.windows}, metric={other.metric!r}) into a collection of "
                f"{self.mode} ({self.windows}, metric={self.metric!r}); create the collection with the store's "
                "settings (the same embeddings, multivector and windows)."
            )
        self._check_merged_identity(other, False)
        int_ids = list(other.records.records)
        index = other.index
        if int_ids and index is not None:
            # BM25's average length over every document copied, not only the first batch's
            self._record_average_length([self._text(record) for record in other.records.records.values()], index.dim)
        for start in range(0, len(int_ids), batch):
            part = int_ids[start : start + batch]
            records = [other.records.records[i] for i in part]
            if isinstance(index, MultiVectorIndex):
                self._write(records, stored_windows(index, part))
            else:
                spans = [len(self._text(record)) for record in records]
                self._write(records, DocumentWindows.single(other.vectors(part), spans))
        logger.info("Copied %d documents into Qdrant collection %r.", len(int_ids), self._collection.name)
        return len(int_ids)

    def save(self, *args: Any, **kwargs: Any) -> None:
        """Refused: a Qdrant store is saved by Qdrant (snapshots, replicas); nothing is written here."""
        raise TypeError(f"{self.name} lives in its Qdrant collection; use Qdrant's snapshots to back it up.")

    # ------------------------------------------------------------------------------------------------ internals

    def _write(self, records: Sequence[R], windows: DocumentWindows) -> list[int]:
        """Write records with their windows: the collection created first when there is none, BM25's average
        length recorded on the first write."""
        keys = [record.key for record in records]
        from fair_retrieval.stores.arguments import repeated

        doubled = repeated(keys)
        if doubled:
            raise ValueError(f"Keys repeat within one upsert: {preview(doubled)}; store each record once.")
        if not records:
            return []
        if self._recorded is None:
            self._create(windows.dim)
        assert self._recorded is not None
        if windows.dim != self._recorded["dim"]:
            raise ValueError(
                f"The embeddings gave {windows.dim}-d vectors, but Qdrant collection {self._collection.name!r} holds "
                f"{self._recorded['dim']}-d ones; use the embeddings it was made with."
            )
        if not np.isfinite(windows.vectors).all():
            raise ValueError("The embeddings hold NaN or infinite values; nothing was stored.")
        tokens = [[] if self._tokenizer is None else self._tokenizer.tokens(self._text(r)) for r in records]
        if self._tokenizer is not None and self._recorded.get("avgdl") is None:
            self._set_average_length(average_length(tokens))
        lexical = self.lexical or LexicalSettings()
        avgdl = float(self._recorded.get("avgdl") or 1.0)
        kept_places: dict[int, int] = {}  # a replaced document keeps its place in the insertion order
        if not self._move_to_end:
            heads = self._collection.heads_of(keys)
            kept_places = {int_id_of(key): int(head[SEQUENCE_FIELD]) for key, head in heads.items()}
        documents: list[dict[str, Any]] = []
        for position, record in enumerate(records):
            rows = windows.of(position)
            int_id = int_id_of(record.key)
            documents.append(
                {
                    "sequence": kept_places.get(int_id),
                    "key": record.key,
                    "int_id": int_id,
                    "group": None if self._group_of is None else self._group_of(record),
                    "metadata": dict(self._metadata_of(record)),
                    "record": self._format.encode(int_id, record),
                    "sparse": document_vector(tokens[position], avgdl, lexical.k1, lexical.b),
                    "windows": [
                        (vector, (int(span[0]), int(span[1])), int(weight))
                        for vector, span, weight in zip(
                            windows.vectors[rows].tolist(), windows.spans[rows], windows.weights[rows], strict=True
                        )
                    ],
                }
            )
        self._collection.write(documents, windows.dim)
        return [int_id_of(record.key) for record in records]

    def _record_average_length(self, texts: Sequence[str], dim: int) -> None:
        """Record BM25's average length over `texts` when the collection has none yet (created for `dim`-d
        vectors if needed): what a copy of a whole store writes before its batches."""
        if self._tokenizer is None:
            return
        if self._recorded is None:
            self._create(dim)
        assert self._recorded is not None
        if self._recorded.get("avgdl") is None:
            self._set_average_length(average_length([self._tokenizer.tokens(text) for text in texts]))

    def _set_average_length(self, avgdl: float) -> None:
        assert self._recorded is not None
        self._recorded = {**self._recorded, "avgdl": avgdl}
        self._collection.update_record({"avgdl": avgdl})

    def _restriction(self, among: Any, keep: Callable[[R], bool] | None) -> Any:
        """The Qdrant condition of a search's restriction (None: none; `_NOTHING`: nothing qualifies)."""
        parts = []
        if among is not None:
            if isinstance(among, EngineSelection):
                parts.append(among.condition)
            else:
                ids = [int(i) for i in among]
                if not ids:
                    return _NOTHING
                parts.append(QdrantCollection.any_of(ID_FIELD, ids))
        if keep is not None:
            parts.append(_keep_condition(keep, self._exact_filters))
        return _all_of(parts) if parts else None

    def _heads(self, int_ids: Sequence[int]) -> dict[int, R]:
        if self._recorded is None:
            return {}
        return {int_id: self._decoded(payload) for int_id, payload in self._collection.heads(int_ids).items()}

    def _decoded(self, payload: Mapping[str, Any]) -> R:
        _, record = self._format.decode(payload[RECORD_FIELD])
        return record

    def _text(self, record: R) -> str:
        return "" if self._text_of is None else self._text_of(record)

    @property
    def _format(self) -> StoreFormat[R]:
        return self._store_format

    def _empty(self) -> bool:
        return self._recorded is None

    def _dimension(self) -> int | None:
        return None if self._recorded is None else self._recorded.get("dim")


_NOTHING = object()
"""A restriction no document passes."""


class _RecordsView:
    """`QdrantStore.records`: what the adapters read of `IndexedRecords`, read from the collection."""

    def __init__(self, store: QdrantStore[Any]) -> None:
        self._store = store

    @property
    def keys(self) -> list[str]:
        """Every stored document's key, in insertion order."""
        store = self._store
        if store._recorded is None:
            return []
        with store.lock:  # local mode is not thread-safe: a scroll meets no write half done
            heads = store.collection.scroll(store.collection.head_filter())
        ordered = sorted(heads, key=lambda point: point.payload[SEQUENCE_FIELD])
        return [point.payload[DOC_FIELD] for point in ordered]

    @property
    def records(self) -> Mapping[int, Any]:
        """int id → record, each read from the collection when asked."""
        return _LazyRecords(self._store)

    def __len__(self) -> int:
        return len(self._store)


class _LazyRecords(Mapping[int, Any]):
    def __init__(self, store: QdrantStore[Any]) -> None:
        self._store = store

    def __getitem__(self, int_id: int) -> Any:
        with self._store.lock:
            found = self._store._heads([int_id])
        if int_id not in found:
            raise KeyError(int_id)
        return found[int_id]

    def __iter__(self) -> Iterator[int]:
        return iter(self._store.ordered(None))

    def __len__(self) -> int:
        return len(self._store)


def _keep_condition(keep: Callable[..., bool], exact: bool) -> Any:
    """The Qdrant condition of a compiled filter (Qdrant's own `models.Filter` as given: its keys read the points'
    payload, the metadata under "metadata" as langchain-qdrant keeps it, e.g. "metadata.topic"); a Python function
    is refused (the engine cannot run it). `exact`: the collection's points carry the filter markers."""
    engine = getattr(keep.filter, "engine", None) if isinstance(keep, RecordFilter) else None
    spec = getattr(keep.filter, "spec", None) if isinstance(keep, RecordFilter) else None
    if engine is not None:  # with a grammar dict beside it (LlamaIndex's filters and qdrant_filters): both must hold
        return _all_of([engine, qdrant_filter(spec, exact=exact)]) if spec else engine
    if spec is None:
        raise function_filter_error()
    return qdrant_filter(spec, exact=exact) if spec else _all_of([])


def _condition(selected: Any) -> Any:
    if isinstance(selected, EngineSelection):
        return selected.condition
    return QdrantCollection.any_of(ID_FIELD, [int(i) for i in selected])


def _all_of(parts: Sequence[Any]) -> Any:
    from qdrant_client import models

    return models.Filter(must=list(parts))


def _search_settings(
    recorded: Mapping[str, Any] | None, search: SearchSettings | Mapping[str, Any] | None, collection: str
) -> SearchSettings:
    """The store's search settings: `search` when complete, else the given fields over the recorded ones."""
    if isinstance(search, SearchSettings):
        return search
    base = None
    if recorded is not None and recorded.get("search"):
        base = SearchSettings.saved({"search": recorded["search"]}, f"Qdrant collection {collection!r}")
    return DocumentStore.settings_with(base, **dict(search or {}))


def _check_record(recorded: Mapping[str, Any], collection: str) -> None:
    """Refuse a collection record whose values are not what a store writes (edited by hand, or damaged), naming the
    value, before any of it is used.

    Raises:
        ValueError: the first value of the wrong kind.
    """
    where, fix = (
        f"Qdrant collection {collection!r}",
        (
            "its record was edited by hand or damaged. Recreate the collection through the store (a new "
            "collection_name), or delete it and add the documents again."
        ),
    )

    def refuse(key: str, expected: str) -> ValueError:
        return ValueError(f"{where}: its record's {key!r} is {recorded.get(key)!r}, not {expected}; {fix}")

    metric = recorded.get("metric", "cosine")
    if metric not in DISTANCES:
        raise refuse("metric", f"one of {', '.join(DISTANCES)}")
    if recorded.get("distance") is not None and recorded["distance"] != DISTANCES[metric]:
        raise refuse("distance", f"{DISTANCES[metric]!r}, the distance of its metric {metric!r}")
    for key in ("multivector", "filter_markers"):
        if not isinstance(recorded.get(key, False), bool):
            raise refuse(key, "True or False")
    for key in ("lexical", "search", "identity"):
        if not isinstance(recorded.get(key) or {}, Mapping):
            raise refuse(key, "a mapping or null")
    if recorded.get("head_ids") not in (None, "int"):
        raise refuse("head_ids", "'int' or absent")
    if not isinstance(recorded.get("records", ""), str):
        raise refuse("records", "a format name")
    avgdl = recorded.get("avgdl")
    if avgdl is not None and not (is_number(avgdl) and 0 < avgdl < float("inf")):
        raise refuse("avgdl", "null or a positive number (BM25's average document length)")
    windows = recorded.get("windows")
    if windows is not None:
        tokens = windows.get("tokens") if isinstance(windows, Mapping) else None
        if not isinstance(tokens, list):
            raise refuse("windows", "null or {'tokens': [positive ints], 'boundaries': ...}")
        try:  # its sizes and boundaries checked as a store's own are ([]: the embedder's own windows)
            StoreWindows(tuple(tokens), windows.get("boundaries"))  # type: ignore[arg-type]
        except ValueError:
            raise refuse("windows", "a window shape a store writes") from None


def _recorded_options(recorded: Mapping[str, Any], options: dict[str, Any], collection: str) -> dict[str, Any]:
    """The store options of an opened collection: its recorded metric, mode, windows and lexical settings, each
    refused when asked for otherwise.

    Raises:
        ValueError: an option given that disagrees with the collection's record.
    """
    where = f"Qdrant collection {collection!r}"
    windows = recorded.get("windows")
    lexical = recorded.get("lexical")
    saved = {
        "metric": recorded.get("metric", "cosine"),
        "multivector": bool(recorded.get("multivector")),
        "windows": None if windows is None else StoreWindows(tuple(windows["tokens"]), windows["boundaries"]),
        "lexical": None if lexical is None else LexicalSettings.saved({"lexical": lexical}, where),
    }
    opened = dict(options)
    for field, value in saved.items():
        asked = opened.get(field)
        if asked is not None and asked != value:
            raise ValueError(
                f"{where} holds a store with {field}={value!r}, but {field}={asked!r} was asked for. Open it with "
                f"{field}={value!r} (or leave it out), or write to another collection."
            )
        if field == "lexical" and value is None:
            continue
        opened[field] = value
    DocumentMode(saved["multivector"], opened.get("aggregate") or "max")  # checked as a file's mode is
    return opened
