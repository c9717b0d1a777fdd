"""The store behind the door: documents by id, their vectors in one index, filtered searches, merges.

`StoreCore` is the store logic, free of any framework; `fair_retrieval.stores.DocumentStore` (the door both adapters
use) is a `StoreCore` with the calls that take a framework's plain values (texts, metadata, ids, filters, query
vectors, files) and check them once. A document is a record (`Keyed`: it knows its id; its class is the adapter's:
LangChain keeps id, text and metadata, LlamaIndex a node's JSON form); the store keeps the records in
`IndexedRecords` and their vectors in its index.

The document mode is one value, `DocumentMode` (`fair_retrieval.stores.store_mode`), fixed when the store is built
(`DEFAULT_MULTIVECTOR` when none is asked for; a given index's own; a loaded store's recorded one): pooled, a
`FaissIndex` of one vector per document, or multi-vector, a `MultiVectorIndex` of the vectors of each document's
windows (a search returns k distinct documents scored by the mode's aggregate, each with its best window). The
index is made of it, at once when the vector size is known, else on the first add.

Every argument is checked when the store is built (metric, kind, GPU, mode and aggregate, a given index), so both
adapters fail at the same time with the same message. Saving and loading are `fair_retrieval.stores.store_format`'s.

Threads may share a store: it holds one re-entrant lock (`lock`, `fair_retrieval.stores.store_lock`), shared with its
records, around every change, every read that walks the records or the index, and the lexical side's rebuild; texts
are embedded before it is taken, so a slow model pass never holds the store.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args

import numpy as np

from fair_retrieval.embedding.identity import check_identity, embedder_identity, fair_embedder_of
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.index import (
    Aggregate,
    GpuChoice,
    MultiVectorIndex,
    gpu_count,
)
from fair_retrieval.index import Metric as IndexMetric
from fair_retrieval.inputs import check_query
from fair_retrieval.lexical import LexicalIndex, LexicalSettings
from fair_retrieval.stores.arguments import id_strings, preview
from fair_retrieval.stores.embedded_windows import gathered_windows, within_contents
from fair_retrieval.stores.files import StoreGeneration
from fair_retrieval.stores.indexed_records import IndexedRecords, Keyed, StoreIndex
from fair_retrieval.stores.search_modes import SearchSettings
from fair_retrieval.stores.store_lock import both_locked, locked, new_store_lock
from fair_retrieval.stores.store_mode import (
    AGGREGATE_KEY,
    MULTIVECTOR_KEY,
    STORE_WINDOWS_KEY,
    DocumentMode,
    StoreWindows,
    checked_windows,
    given_index_mode,
    new_store_mode,
    stored_windows,
)
from fair_retrieval.stores.vectors import check_dimension, require_finite, unit_rows
from fair_retrieval.stores.window_embedders import WindowEmbedder, inner_embedder, window_embedder
from fair_retrieval.validate import positive_int

logger = logging.getLogger(__name__)

MISMATCH_OVERRIDE = "allow_embedder_mismatch=True"
"""How a caller merges or loads vectors of another embedder configuration anyway (`check_identity`'s override)."""

__all__ = ["MISMATCH_OVERRIDE", "STORE_METRICS", "StoreCore", "StoreHit", "StoreMetric"]

StoreMetric = Literal["cosine", "ip", "l2"]
"""A store's metric: "cosine" (unit vectors searched by inner product), "ip" (raw inner product) or "l2"."""
STORE_METRICS: tuple[str, ...] = get_args(StoreMetric)

R = TypeVar("R", bound=Keyed)


@dataclass(frozen=True)
class StoreHit(Generic[R]):
    """One document a search found.

    Attributes:
        int_id: its id in the index.
        record: the stored record (the adapter copies it before user code sees it).
        score: the raw score: inner product ("cosine", "ip": larger is better) or squared L2 distance ("l2");
            in multi-vector mode the aggregate of its windows' scores.
        best_window: in multi-vector mode the best window ({"start", "end", "window"}), else None.
    """

    int_id: int
    record: R
    score: float
    best_window: dict[str, int] | None


class StoreCore(Generic[R]):
    """Records by id with their vectors in a `FaissIndex` or `MultiVectorIndex`; what a vector store does.

    Args:
        metric: "cosine", "ip" or "l2" (see `StoreMetric`); with `index` given, the index's own metric is taken
            (a "cosine" store over an inner-product index stays "cosine").
        kind: the index kind ("flat", "hnsw", "ivf", "ivfpq", or "compressed" for a multi-vector store's
            compressed windows), checked now; None: the mode's default (`DocumentMode.new_index`: compressed windows
            for a multi-vector store where its codes fit the vector size, else flat).
        gpu: "auto", True (a GPU is required, checked now) or False.
        index_params: kind parameters for the index (and `fetch_factor` in multi-vector mode).
        multivector: keep documents as their windows' vectors; None: `DEFAULT_MULTIVECTOR`.
        aggregate: how a multi-vector document's window scores become its score; None: `DEFAULT_AGGREGATE`.
            Refused for a pooled store.
        index: an empty index to use from the start (its type must be the mode's), or None.
        dim: the vector size, to create the index now; None creates it on the first add.
        embedder: what made the vectors (its identity is saved and checked on load); in multi-vector mode it
            must give windows (`embed_document_windows`). None: unknown.
        replaced_move_to_end: whether an upserted document moves to the end of the insertion order.
        group_of: the group of a record (e.g. its source document), or None for no groups.
        name: how messages name the store's class, e.g. "FaissVectorStore".
        windows: the windows a multi-vector store keeps (None: `default_windows`).
        text_of: the text of a record, what its lexical side searches (None: no lexical side, dense only).
        lexical: how the lexical side reads and scores texts (None: `LexicalSettings()`, English).
        search: how text queries are answered by default (None: `SearchSettings()`); the adapters read it.

    Raises:
        TypeError: a non-bool `multivector`, an `index` that is no `FaissIndex` / `MultiVectorIndex`, index
            parameters the kind does not take, or a multi-vector store with an embedder that gives no windows.
        ValueError: an unknown metric, kind or aggregate, an aggregate for a pooled store, `index` of the other
            mode or not empty, both `index` and `dim`, a bad `dim` or index parameter value, or gpu=True without a
            GPU.
    """

    def __init__(
        self,
        *,
        metric: str = "cosine",
        kind: str | None = None,
        gpu: GpuChoice = "auto",
        index_params: dict[str, Any] | None = None,
        multivector: bool | None = None,
        aggregate: Aggregate | None = None,
        index: StoreIndex | None = None,
        dim: int | None = None,
        embedder: Any = None,
        replaced_move_to_end: bool = True,
        group_of: Callable[[R], str] | None = None,
        name: str = "DocumentStore",
        windows: StoreWindows | None = None,
        text_of: Callable[[R], str] | None = None,
        lexical: LexicalSettings | None = None,
        search: SearchSettings | None = None,
    ) -> None:
        self.name = name
        self.lock = new_store_lock()  # the store's one lock, shared with its records (see the module docstring)
        if lexical is not None and not isinstance(lexical, LexicalSettings):
            raise TypeError(f"lexical must be a fair_retrieval.lexical.LexicalSettings, got {type(lexical).__name__}.")
        if search is not None and not isinstance(search, SearchSettings):
            raise TypeError(f"search must be a fair_retrieval.stores.SearchSettings, got {type(search).__name__}.")
        # a store without record text has no words to search: its text queries are dense unless told otherwise
        self.search_settings = search or (SearchSettings() if text_of is not None else SearchSettings(mode="dense"))
        if text_of is None and self.search_settings.mode != "dense":
            raise ValueError(f"{name} has no lexical side (no record text); search it in mode 'dense'.")
        mode, self.windows = new_store_mode(multivector, aggregate, index, embedder, name, windows)
        lexical = lexical or LexicalSettings()
        # a multi-vector store's lexical side may score each document by its best window, as the dense side does
        spans_of = self._window_spans if lexical.windows and mode.multivector else None
        self._lexical = None if text_of is None else LexicalIndex(lexical, text_of, spans_of)
        if index is not None:
            mode = given_index_mode(index, mode, dim, name)
            metric = "cosine" if metric == "cosine" and index.metric == "ip" else index.metric
            kind = index.kind
        if metric not in STORE_METRICS:
            raise ValueError(
                f"metric must be one of {STORE_METRICS} (cosine: unit vectors by inner product), got {metric!r}."
            )
        if index is None:  # the index is made on the first add, after its texts were embedded: check its options now
            mode.check_index_options(kind, index_params or {})
        gpu_count(gpu)  # refuses gpu=True without a GPU now, not on the first add
        self._metric, self._kind, self._gpu = metric, kind, gpu
        self.index_params: dict[str, Any] = dict(index_params or {})
        self._mode = mode  # the mode, one value: the index is made of it (at once, or on the first add)
        self._embedder: Any = None
        self.recorded_identity: dict[str, Any] | None = None  # what a loaded store's file records
        self.generation: StoreGeneration | None = None  # the store file it was loaded from or last saved to
        self._records: IndexedRecords[R] = IndexedRecords(
            self._new_index,
            index=self._new_index(dim) if index is None and dim is not None else index,
            replaced_move_to_end=replaced_move_to_end,
            group_of=group_of,
            lock=self.lock,
        )
        self.embedder = embedder  # checked against the mode

    def _window_spans(self, int_id: int) -> list[tuple[int, int]]:
        """A document's window spans in its text (the lexical side's windows; none outside a multi-vector index)."""
        index = self._records.index
        return index.window_spans(int_id) if isinstance(index, MultiVectorIndex) else []

    # ------------------------------------------------------------------------------------------------ reading

    @property
    def metric(self) -> str:
        """ "cosine", "ip" or "l2": what the scores are."""
        return self._metric

    @property
    def kind(self) -> str | None:
        """The index kind: the one asked for, a given index's own, or, with none asked for, the kind of the index
        the mode's default made (`DocumentMode.kind_of`: "compressed" or "flat"); None while that index is not made
        yet (the mode's default, decided on the first add). A store records it when saved."""
        if self._kind is None and self._records.index is not None:
            return self._mode.kind_of(self._records.index)
        return self._kind

    @kind.setter
    def kind(self, kind: str | None) -> None:
        self._kind = kind

    @property
    def gpu(self) -> GpuChoice:
        """Where the index lives ("auto", True or False)."""
        return self._gpu

    @property
    def mode(self) -> DocumentMode:
        """The document mode, one value fixed when the store is built: pooled or multi-vector, with its aggregate
        (the index is made of it, or a given index's own)."""
        return self._mode

    @property
    def multivector(self) -> bool:
        """Whether documents are kept as the vectors of their windows."""
        return self.mode.multivector

    @property
    def index(self) -> StoreIndex | None:
        """The index (None until the first add when no size was given)."""
        return self._records.index

    @property
    def records(self) -> IndexedRecords[R]:
        """The records, their id map and the index (change them through this store)."""
        return self._records

    @property
    def embedder(self) -> Any:
        """What made the vectors (None: unknown); a multi-vector store also takes windows from it."""
        return self._embedder

    @embedder.setter
    def embedder(self, embedder: Any) -> None:
        gives = None
        if embedder is not None and self.multivector:
            gives = window_embedder(embedder, f"A multi-vector {self.name}")
        self._embedder = embedder  # only read: a store never changes what its embedder gives
        self._windows_from: WindowEmbedder | None = gives  # what gives its windows, checked once, here

    @staticmethod
    def embedder_dimension(embedder: Any) -> int | None:
        """The size of the vectors `embedder` makes when it can tell without embedding anything (a `FairEmbedder`,
        an adapter holding one, or a cache around one); None for any other embedder."""
        fair = fair_embedder_of(inner_embedder(embedder))
        return None if fair is None else fair.dimension

    def check_embedder_size(self, source: str) -> None:
        """Refuse, when a saved store opens, an embedder whose vectors are not the size the store holds: one that
        cannot tell its size (not a `FairEmbedder` or an adapter of one) embeds one short probe query, as
        langchain-qdrant does when it opens a collection. Nothing is checked before the store holds a vector.

        Raises:
            ValueError: naming both sizes and what to do.
        """
        dim = self._dimension()
        if self._embedder is None or dim is None:
            return
        size = self.embedder_dimension(self._embedder)
        if size is None:
            embed = getattr(self._embedder, "embed_query", None) or getattr(self._embedder, "get_query_embedding", None)
            if not callable(embed):
                return  # nothing to ask: its first vectors are checked when they come
            size = len(embed("dimension probe"))
        check_dimension(
            size, dim, "The embeddings given make", remedy=f"{source} was made by other embeddings: open it with those"
        )

    def check_window_source(self, missing: str) -> None:
        """Refuse a multi-vector store that has no embedder to take its windows from (`missing`: the message, what
        the adapter's users pass); a pooled store needs none.

        Raises:
            ValueError: `missing`.
        """
        if self.multivector:
            self._window_source(missing)

    def _window_source(self, missing: str | None = None) -> WindowEmbedder:
        """What gives a multi-vector store its windows, checked when the store was given its embedder.

        Raises:
            ValueError: the store has no embedder (`missing`: the message; None: `window_embedder`'s).
        """
        if self._windows_from is not None:
            return self._windows_from
        return window_embedder(self._embedder, f"A multi-vector {self.name}", missing)  # None: raises

    def identity(self, *, with_mode: bool = True) -> dict[str, Any] | None:
        """The identity a save records: the embedder's, with the mode's fields (`DocumentMode.identity`) unless
        `with_mode` is False; without an embedder, the one a loaded store's file recorded; None when unknown."""
        if self._embedder is not None:
            identity = embedder_identity(self._embedder)
        elif self.recorded_identity is not None:
            identity = {
                field: value
                for field, value in copy.deepcopy(self.recorded_identity).items()
                if field not in (MULTIVECTOR_KEY, AGGREGATE_KEY, STORE_WINDOWS_KEY)
            }
        else:
            return None
        return self.mode.identity(identity, self.windows) if with_mode else identity

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: object) -> bool:
        return key in self._records

    @locked
    def get(self, keys: Iterable[str]) -> list[tuple[int, R]]:
        """The stored (int id, record) of `keys`, in that order; unknown keys are skipped, repeats given once."""
        int_ids = self._records.int_ids
        return [(int_ids[key], self._records.records[int_ids[key]]) for key in dict.fromkeys(keys) if key in int_ids]

    @locked
    def records_of(self, int_ids: Sequence[int]) -> list[R]:
        """The stored records of `int_ids`, in that order (each must be stored)."""
        records = self._records.records
        return [records[int_id] for int_id in int_ids]

    @locked
    def selection(
        self,
        keys: Sequence[str] | None = None,
        groups: Sequence[str] | None = None,
        keep: Callable[[R], bool] | None = None,
        *,
        empty_means_all: bool = False,
    ) -> list[int] | None:
        """The sorted int ids of the records in `keys`, in `groups` and kept by `keep` (each given one must hold);
        None when nothing restricts. With `empty_means_all`, an empty `keys` / `groups` list restricts nothing.

        Raises:
            TypeError: `keys` or `groups` given as one string.
        """
        chosen: set[int] | None = None
        if keys is not None and (keys or not empty_means_all):
            chosen = {int_id for int_id, _ in self.get(id_strings(keys, "node_ids"))}
        if groups is not None and (groups or not empty_means_all):
            grouped = set().union(*(self._records.group(group) for group in id_strings(groups, "doc_ids")))
            chosen = grouped if chosen is None else chosen & grouped
        if keep is not None:
            chosen = set(self._records.matching(keep, chosen))
        return None if chosen is None else sorted(chosen)

    @locked
    def ordered(self, selected: Sequence[int] | None, keys: Sequence[str] | None = None) -> list[int]:
        """The int ids of `selected` (None: every record), in the order of `keys` when given (each once), else in
        insertion order."""
        if selected is None:
            return list(self._records.records)
        chosen = set(selected)
        if keys is not None:
            return [int_id for int_id, _ in self.get(keys) if int_id in chosen]
        return [int_id for int_id in self._records.records if int_id in chosen]

    @locked
    def vectors(self, int_ids: Sequence[int]) -> np.ndarray:
        """The stored (multi-vector: pooled) vectors of `int_ids`, float32 (n, dim)."""
        return self._records.vectors(int_ids)

    def prepared(self, vectors: Any, count: int, source: str) -> np.ndarray:
        """Vectors as the index takes them: a float32 (count, dim) matrix of the store's size, unit rows for
        "cosine".

        Raises:
            ValueError: another count or size, NaN or infinite values, or (cosine) zero rows.
        """
        matrix = np.asarray(vectors, dtype=np.float32)
        if matrix.ndim != 2 or matrix.shape[0] != count:
            raise ValueError(f"{source} returned {matrix.shape[0] if matrix.ndim else 0} vectors for {count} texts.")
        check_dimension(int(matrix.shape[1]), self._dimension(), f"{source} gave")
        require_finite(matrix, source)  # every metric: an inf query or vector is never a valid embedding
        return unit_rows(matrix) if self._metric == "cosine" else matrix

    def _dimension(self) -> int | None:
        """The size of the stored vectors (None: not known yet, nothing stored)."""
        index = self._records.index
        return None if index is None else index.dim

    @locked
    def search(
        self,
        query: Any,
        k: int,
        *,
        among: Sequence[int] | None = None,
        keep: Callable[[R], bool] | None = None,
        source: str = "the query embedding",
    ) -> list[StoreHit[R]]:
        """The k best documents for one query vector, best first, among `among` (int ids) and those `keep` accepts.

        The restriction runs inside the index's search (`FaissIndex.search(..., ids=...)`), so k documents come
        back whenever k qualify; in multi-vector mode they are k distinct documents with their best windows.

        Raises:
            ValueError: a query of another size than the stored vectors, one with NaN or infinite values (or, for
                "cosine", a zero query).
        """
        matrix = self.prepared(np.asarray(query, dtype=np.float32).reshape(1, -1), 1, source)  # the one size check
        if self._empty():
            return []
        selected = self._selected(among, keep)
        if selected is not None and not len(selected):  # nothing qualifies
            return []
        hits = self._records.search_hits(matrix, k, selected)
        records = self._records.records
        return [StoreHit(int_id, records[int_id], score, window) for int_id, score, window in hits]

    @property
    def lexical(self) -> LexicalSettings | None:
        """How the lexical side reads and scores texts (None: the store has no lexical side)."""
        return None if self._lexical is None else self._lexical.settings

    @locked
    def lexical_search(
        self,
        query: str,
        k: int,
        *,
        among: Sequence[int] | None = None,
        keep: Callable[[R], bool] | None = None,
    ) -> list[StoreHit[R]]:
        """The k documents with the best BM25 scores for a query text, best first, among `among` and those `keep`
        accepts; only documents sharing a word with the query (an empty query, or one without words, finds none).
        Scores are BM25's (larger is better); hits carry no window.

        Raises:
            ValueError: the store has no lexical side.
        """
        lexical = self._require_lexical()
        if self._empty():
            return []
        selected = self._selected(among, keep)
        if selected is not None and not len(selected):
            return []
        found = lexical.search(
            self._records.records, self._records.revision, query, k, selected, self._records.changed_since
        )
        return [StoreHit(int_id, self._records.records[int_id], score, None) for int_id, score in found]

    @locked
    def hybrid_search(
        self,
        query_vector: Any,
        query: str,
        k: int,
        *,
        among: Sequence[int] | None = None,
        keep: Callable[[R], bool] | None = None,
        settings: SearchSettings | None = None,
        dense_k: int | None = None,
        sparse_k: int | None = None,
        source: str = "the query embedding",
    ) -> list[StoreHit[R]]:
        """The k best documents of the dense and the lexical search fused (`fair_retrieval.lexical.fuse`), best
        first, with fused scores in [0, 1]; each side gives max(k, `settings.candidates`) candidates unless
        `dense_k` / `sparse_k` say otherwise. A hit keeps its best window when the dense side found it.

        Raises:
            ValueError: the store has no lexical side, or a query vector of another size.
        """
        chosen = settings or self.search_settings
        self._require_lexical()
        if self._empty():
            return []
        pool = chosen.pool(k)
        dense = self.search(query_vector, dense_k or pool, among=among, keep=keep, source=source)
        lexical = self.lexical_search(query, sparse_k or pool, among=among, keep=keep)
        by_id = {hit.int_id: hit for hit in lexical}
        by_id.update({hit.int_id: hit for hit in dense})
        fused = chosen.fused(
            [(hit.int_id, hit.score) for hit in dense],
            [(hit.int_id, hit.score) for hit in lexical],
            k,
            dense_larger_is_better=self._metric != "l2",
        )
        return [StoreHit(int_id, by_id[int_id].record, score, by_id[int_id].best_window) for int_id, score in fused]

    def text_search(
        self,
        query: str,
        k: int,
        embed_query: Callable[[str], Any],
        *,
        settings: SearchSettings | None = None,
        among: Sequence[int] | None = None,
        keep: Callable[[R], bool] | None = None,
        dense_k: int | None = None,
        sparse_k: int | None = None,
    ) -> list[StoreHit[R]]:
        """The k best documents for a query text in the mode of `settings` (None: the store's `search_settings`):
        "dense" embeds it with `embed_query` and searches the vectors, "sparse" searches the lexical side only (the
        query is not embedded), "hybrid" fuses both (`hybrid_search`). The door both stacks' text searches call.

        Raises:
            ValueError: a query that is not text a model can read (`check_query`), a bad k, or a lexical mode on a
                store without a lexical side.
        """
        chosen = settings or self.search_settings
        text = check_query(query)
        positive_int(k, "k")
        if chosen.mode != "dense":
            self._require_lexical()
        if chosen.mode == "sparse":
            return self.lexical_search(text, sparse_k or k, among=among, keep=keep)
        vector = embed_query(text)
        if chosen.mode == "dense":
            return self.search(vector, k, among=among, keep=keep)
        return self.hybrid_search(
            vector, text, k, among=among, keep=keep, settings=chosen, dense_k=dense_k, sparse_k=sparse_k
        )

    def _selected(
        self, among: Sequence[int] | None, keep: Callable[[R], bool] | None
    ) -> Sequence[int] | np.ndarray | None:
        """The int ids a search may return (None: every record; an empty list: none qualifies)."""
        if keep is not None:
            kept = self._records.matching(keep, among)
            if not kept:
                return []
            return None if among is None and len(kept) == len(self._records) else np.asarray(kept, np.int64)
        if among is not None and not among:
            return []
        return among

    def _empty(self) -> bool:
        """Whether the store holds no document (what a search answers at once with no hits)."""
        return not self._records

    def _require_lexical(self) -> LexicalIndex:
        if self._lexical is None:
            raise ValueError(f"{self.name} has no lexical side (no record text); search it in mode 'dense'.")
        return self._lexical

    # ------------------------------------------------------------------------------------------------ changing

    @locked
    def add(
        self, records: Sequence[R], vectors: Any, source: str = "the embeddings", lengths: Sequence[int] | None = None
    ) -> list[int]:
        """Store records with one vector each (an id already stored is replaced); a multi-vector store keeps each
        vector as one window spanning the whole document (`DocumentWindows.single`), all it knows of it.

        Args:
            records: the records, ids unique within the call.
            vectors: (len(records), dim) vectors, as the embedder gave them (normalised here for "cosine").
            source: what gave the vectors, for messages.
            lengths: the documents' text lengths (the span of that one window); needed in multi-vector mode.

        Raises:
            ValueError: another count or size of vectors, NaN or infinite values, or ids repeated. Nothing is
                stored then.
        """
        matrix = self.prepared(vectors, len(records), source)
        if self.multivector:
            if lengths is None:
                raise ValueError(f"{self.name} keeps windows: give the documents' text lengths with their vectors.")
            return self._records.upsert(records, DocumentWindows.single(matrix, list(lengths)))
        return self._records.upsert(records, matrix)

    @locked
    def add_windows(self, records: Sequence[R], windows: Any, source: str = "embed_document_windows") -> list[int]:
        """Store records of a multi-vector store with their windows (`embed_document_windows`' result, checked and
        normalised for "cosine"); an id already stored has all its windows replaced.

        Raises:
            TypeError: a pooled store, or `windows` that are not `DocumentWindows`.
            ValueError: as `add`.
        """
        if not self.multivector:
            raise TypeError(f"{self.name} keeps one pooled vector per document; add vectors, not windows.")
        checked = checked_windows(windows, len(records), source, unit=self._metric == "cosine")
        return self._records.upsert(records, checked, f"{source} gave")  # checked and unit already; sized there

    def add_embedded_windows(
        self,
        records: Sequence[R],
        texts: Sequence[str],
        pooled: np.ndarray,
        contents: Sequence[str],
        log: logging.Logger = logger,
    ) -> list[int]:
        """Store records of a multi-vector store whose pooled vectors a framework embedded itself: the windows of the
        store's shape are asked of the embedder, one call per window size, except where a record's given vector is
        its one window at a size (`gathered_windows`: the given vectors checked first; nothing is kept between
        calls).

        Args:
            records: the records.
            texts: exactly the texts the pooled vectors were embedded from.
            pooled: their vectors (n, dim).
            contents: each record's own text, within its embedded text: the windows' spans are moved into it
                (`within_contents`).
            log: where the lines saying what was read again go (the adapter's logger).

        Raises:
            ValueError: no embedder, or as `add_windows`.
        """
        embedder = self._window_source(
            f"This multi-vector store has no embed model to take the nodes' window vectors from (it was loaded "
            f"without one): load it with {self.name}.from_persist_dir(..., embed_model=...) or call "
            "store.record_embed_model(embed_model) with the FairEmbedding the index uses."
        )
        matrix = self.prepared(pooled, len(records), "the embeddings")
        shape = self.windows or StoreWindows()
        gathered = gathered_windows(texts, matrix, embedder, shape)
        log.debug(
            "Windows (%s) of %d nodes: %d taken from the nodes' own vectors (a node that is one window at a size), "
            "%d nodes read again by the embed model in %d call(s); %d given vector(s) compared with the embed "
            "model's own.",
            shape,
            len(records),
            gathered.taken,
            gathered.embedded,
            gathered.passes,
            gathered.checked,
        )
        if gathered.disagreeing:
            log.warning(
                "%d nodes have embeddings other than the embed model gives for the text that was embedded (of %d "
                "compared; with LlamaIndex: metadata lines included): another model, configuration or text. The "
                "store took none of the given vectors as a window: it embedded the windows of all %d nodes itself "
                "and keeps the embed model's window vectors for them.",
                gathered.disagreeing,
                gathered.checked,
                len(records),
            )
        return self.add_windows(records, within_contents(gathered.windows, texts, contents))

    def add_texts(self, records: Sequence[R], texts: list[str], embed_documents: Callable[[list[str]], Any]) -> None:
        """Embed the records' texts and store them: by `embed_documents` (one vector each), or in multi-vector
        mode window by window by the store's embedder (`embed_document_windows`, one pass)."""
        if self.multivector:
            self.add_windows(records, self.embed_windows(texts))
        else:
            self.add(records, embed_documents(texts), "embed_documents")

    def embed_windows(self, texts: list[str]) -> DocumentWindows:
        """The texts' windows from the store's embedder, in one pass.

        Raises:
            TypeError: the embedder gives no windows (or there is none).
        """
        return (self.windows or StoreWindows()).embed(self._window_source(), texts)

    @locked
    def remove(self, int_ids: Iterable[int]) -> None:
        """Remove stored documents by int id; an int id no longer stored (another thread removed it since it was
        looked up) is skipped: int ids are never handed out twice, so it cannot name another document."""
        stored = self._records.records
        self._records.remove(sorted({int_id for int_id in int_ids if int_id in stored}))

    @locked
    def delete(self, keys: Iterable[str], *, strict: bool = False) -> list[str]:
        """Remove the documents stored under `keys`; returns the keys that were not stored, ignored with a WARNING.

        Raises:
            ValueError: with `strict`, keys that are not stored (nothing is removed then).
        """
        unique = list(dict.fromkeys(keys))
        found = self.get(unique)
        unknown = self.unknown_keys(unique, {record.key for _, record in found}, strict)
        self.remove(int_id for int_id, _ in found)
        return unknown

    @staticmethod
    def unknown_keys(keys: Sequence[str], stored: Container[str], strict: bool) -> list[str]:
        """The `keys` of a delete that are not `stored`: refused with `strict` (before anything is removed), else
        ignored with a WARNING.

        Raises:
            ValueError: with `strict`, keys that are not stored.
        """
        unknown = [key for key in keys if key not in stored]
        if unknown and strict:
            raise ValueError(f"{len(unknown)} id(s) are not in the store: {preview(unknown)}; nothing was deleted.")
        if unknown:
            logger.warning(
                "delete(): %d id(s) are not in the store and were ignored: %s", len(unknown), preview(unknown)
            )
        return unknown

    @locked
    def delete_group(self, group: str) -> int:
        """Remove every document of a group (an unknown group is nothing to delete); returns how many."""
        int_ids = self._records.group(group)
        self.remove(int_ids)
        return len(int_ids)

    @locked
    def clear(self) -> None:
        """Remove every document (the index keeps its dimension, training and device)."""
        self._records.clear()

    def merge_from(
        self,
        other: StoreCore[R],
        copy_record: Callable[[R], R] = copy.deepcopy,
        *,
        allow_embedder_mismatch: bool = False,
    ) -> int:
        """Add every document of `other`, copying its stored vectors (windows between multi-vector stores); returns
        how many were added.

        The embedder identities are checked as a load checks them (`check_identity`, on both stores' identities with
        the window shape; the aggregate, a search setting, may differ): a store whose vectors come from another
        embedder configuration (another model, pooling, window, calibration, …) is refused.

        Args:
            other: the store whose documents are added.
            copy_record: copies one of its records for this store.
            allow_embedder_mismatch: merge vectors of another embedder configuration anyway (a WARNING is logged).

        Raises:
            ValueError: `other` is this store, has another metric, mode, window shape, vector size or embedder
                configuration, or shares an id with this store (nothing is added then).
        """
        if other is self:
            raise ValueError("merge_from got the store itself; every id would clash. Merge another store.")
        with both_locked(self, other):  # neither store changes while one is read and the other written
            return self._merge_locked(other, copy_record, allow_embedder_mismatch)

    def _merge_locked(self, other: StoreCore[R], copy_record: Callable[[R], R], allow_embedder_mismatch: bool) -> int:
        """`merge_from`'s work, with both stores locked."""
        theirs = other.index
        if not other._records or theirs is None:
            return 0
        if other.metric != self.metric:
            raise ValueError(
                f"Cannot merge a store with metric={other.metric!r} into one with metric={self.metric!r}: their "
                "scores are not comparable. Rebuild one of them with the other's metric."
            )
        if other.multivector != self.multivector or other.windows != self.windows:
            raise ValueError(
                f"Cannot merge a store of {other.mode} ({other.windows}) into one of {self.mode} ({self.windows}): a "
                "pooled store has no windows to copy, a multi-vector one cannot take one vector for a document's "
                "windows, nor windows of another shape. Rebuild one of them with the other's multivector setting and "
                "windows (from its documents), then merge."
            )
        mine = self.index
        if mine is not None and mine.dim != theirs.dim:
            raise ValueError(
                f"Cannot merge a store of {theirs.dim}-d vectors into one of {mine.dim}-d vectors: they come from "
                "different embedding models."
            )
        self._check_merged_identity(other, allow_embedder_mismatch)
        clashing = [key for key in other._records.keys if key in self._records]
        if clashing:
            raise ValueError(
                f"{len(clashing)} id(s) are in both stores: {preview(clashing)}. Delete them from one store (or add "
                "that store's documents under new ids) before merging; nothing was merged."
            )
        int_ids = list(other._records.records)
        vectors = stored_windows(theirs, int_ids) if isinstance(theirs, MultiVectorIndex) else other.vectors(int_ids)
        self._records.upsert([copy_record(other._records.records[int_id]) for int_id in int_ids], vectors)
        logger.info("Merged %d documents; %d in the store.", len(int_ids), len(self))
        return len(int_ids)

    # ------------------------------------------------------------------------------------------------ internals

    def _check_merged_identity(self, other: StoreCore[Any], allow_mismatch: bool) -> None:
        """Refuse `other`'s vectors when its embedder identity (with its windows) is not this store's, as a load
        refuses embeddings of another configuration (one rule: `check_identity`); the aggregate is this store's."""
        mine = self.identity()
        if mine is None:  # neither an embedder nor a recorded identity: nothing to compare with
            logger.info("%s knows no embedder: cannot check that the merged store's vectors are comparable.", self.name)
            return
        theirs = other.identity(with_mode=False)
        check_identity(
            None if theirs is None else self.mode.identity(theirs, other.windows),
            mine,
            source=f"The {other.name} given to merge_from",
            allow_mismatch=allow_mismatch,
            override=MISMATCH_OVERRIDE,
            remedy="Merge stores built with the same embeddings, or rebuild one from its documents with the other's.",
            unrecorded="built without being told its embedder",
        )

    def _new_index(self, dim: int) -> StoreIndex:
        """The index of the store's mode, for `dim`-d vectors ("cosine" searches unit vectors by "ip")."""
        metric: IndexMetric = "l2" if self._metric == "l2" else "ip"
        return self._mode.new_index(dim, metric, self._kind, self._gpu, self.index_params)
