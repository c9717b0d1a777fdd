"""MultiVectorIndex: documents kept as the vectors of their windows, found by their best window.

One vector per document (the token-weighted mean of its windows) averages an answer away when it sits in one
window of a long chunk. A `MultiVectorIndex` keeps every window vector (`FairEmbedder.embed_document_windows`) in a
`FaissIndex` and ranks *documents* by an aggregate of their windows' scores (`fair_retrieval.index.aggregates`:
"max", the default, "max-mean", "top2").

A search returns k *distinct* documents. The windows index is searched for more windows than k (the over-fetch:
`fetch_factor` × k × the mean windows per document at first) and asked again for four times as many until k
documents are certain: for "max", once k distinct documents are among the windows found (a document not found has
every window below the last one returned, so on a flat index the result equals brute force over all windows); for
"top2", once the k-th document's exact aggregate (from its stored windows) is at least the last window score
returned (an upper bound for every document not found). "max-mean" ranks the documents found by their windows
(k distinct ones) by the exact aggregate; a document whose windows all score low but whose pooled vector scores
high can be missed, so it is exact only when every window is fetched. On approximate indices (HNSW, IVF) the window
search itself is approximate; `benchmarks/index_recall.py --multivector` measures document recall against flat. An
IVF windows index whose nprobe is not given visits nlist/4 lists instead of the pooled default's nlist/8
(`plan.window_nprobe`): a window the IVF stage misses can lose its document, and over-fetch does not bring it back.

`compressed=True` (or a codes factory string) keeps the windows in a `RerankedIndex` instead
(`fair_retrieval.index.exact_rerank`): compact codes in memory give candidates, the exact float32 vectors kept in a
memory-mapped file re-rank them, so the order is the flat index's wherever the candidates hold the true top windows
(docs/compressed_window_study.md); it grows (training at sizes it reaches) and shrinks without rebuilds.

Each document id owns a run of window ids (int64, handed out by a counter that only grows) with each window's
character span in its document and its weight (content tokens), kept in numpy arrays
(`fair_retrieval.index.window_table`: no Python object per window or per document). `save` writes the windows index
and this table (`windows.json` and its arrays) in one commit; `load` memory-maps the arrays, refuses a folder of a
pooled `FaissIndex`, and `FaissIndex.load` refuses this one, so a pooled store is never read as a multi-vector one,
nor the other way round.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.index.aggregates import (
    AGGREGATES,
    DEFAULT_AGGREGATE,
    Aggregate,
    aggregate_score,
    higher_better,
    metric_score,
    window_scores,
)
from fair_retrieval.index.exact_rerank import DEFAULT_CODES, RerankedIndex
from fair_retrieval.index.faiss_index import FaissIndex
from fair_retrieval.index.gpu import GpuChoice
from fair_retrieval.index.ids import INT64_MAX, as_ids, as_vectors, distinct, some
from fair_retrieval.index.index_plan import Kind, wider_nprobe
from fair_retrieval.index.inspection import Metric
from fair_retrieval.index.persistence import INDEX_FILE, META_FILE, RERANK_FILE, WINDOWS_FILE, Companion
from fair_retrieval.index.selection import result_columns
from fair_retrieval.index.window_table import END, START, WEIGHT, SavedTable, WindowTable, read_saved_table
from fair_retrieval.jsonio import ChangedWhileReadingError, Snapshot, retry_while_changing
from fair_retrieval.validate import is_positive_int

__all__ = ["AGGREGATES", "Aggregate", "DocumentHit", "MultiVectorIndex"]

DEFAULT_FETCH_FACTOR = 2


@dataclass(frozen=True)
class DocumentHit:
    """One document a multi-vector search found.

    Attributes:
        id: the document's id.
        score: its aggregate score, in the metric's direction (inner product: larger is better; l2: the aggregated
            squared distance, smaller is better).
        window: the position of its best window among the document's windows (0 = its first).
        span: that window's character span [start, end) in the document, e.g. to highlight it.
    """

    id: int
    score: float
    window: int
    span: tuple[int, int]


class MultiVectorIndex:
    """Documents as window vectors in a `FaissIndex`, searched for k distinct documents.

    Args:
        dim: vector size.
        metric: "ip" (inner product; cosine for unit vectors) or "l2", as `FaissIndex`.
        kind: the windows index's kind ("flat", "hnsw", "ivf", "ivfpq"), as `FaissIndex`.
        gpu: as `FaissIndex`.
        aggregate: "max" (the default), "max-mean" or "top2" (see the module docstring).
        fetch_factor: the first window search asks for fetch_factor × k × (mean windows per document) windows.
        factory: a faiss index-factory string instead of `kind`, as `FaissIndex`.
        search: faiss search parameters, as `FaissIndex`.
        compressed: keep the windows in a `RerankedIndex` instead (`fair_retrieval.index.exact_rerank`): compact
            codes in memory for candidates, re-ranked by the exact float32 vectors in a memory-mapped file. True
            for its default codes (`exact_rerank.DEFAULT_CODES`), or a codes factory string ("IVF,PQ48", "PQ48",
            "SQ4", …); its other settings are properties of `windows`. Not with kind, factory, search or params.
        **params: kind parameters, as `FaissIndex`.

    Example:
        >>> windows = embedder.embed_document_windows(texts)
        >>> index = MultiVectorIndex(windows.dim)
        >>> index.add(windows)                     # document ids 0..n-1
        >>> hits = index.search_documents(embedder.embed_query("question"), k=10)
        >>> hits[0].id, hits[0].score, hits[0].span
    """

    def __init__(
        self,
        dim: int,
        metric: Metric = "ip",
        kind: Kind | None = None,
        gpu: GpuChoice = "auto",
        *,
        aggregate: Aggregate = DEFAULT_AGGREGATE,
        fetch_factor: int = DEFAULT_FETCH_FACTOR,
        factory: str | None = None,
        search: str | dict[str, float] | None = None,
        compressed: bool | str | None = None,
        _windows: FaissIndex | RerankedIndex | None = None,  # private: the windows index `load` read
        **params: int,
    ) -> None:
        if aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {aggregate!r}.")
        if not is_positive_int(fetch_factor):
            raise ValueError(f"fetch_factor must be a positive int, got {fetch_factor!r}.")
        kind_params: dict[str, Any] = params  # FaissIndex checks them
        if compressed is not None and compressed is not False:
            if kind is not None or factory is not None or search is not None or params:
                raise ValueError(
                    "compressed= chooses the windows index itself; pass it without kind, factory, search or kind "
                    "parameters (set `index.windows.candidate_factor` or `set_search` afterwards), or drop it."
                )
            codes = DEFAULT_CODES if compressed is True else compressed
            if not isinstance(codes, str):
                raise TypeError(f"compressed must be True, False, None or a codes string, got {type(codes).__name__}.")
            _windows = _windows if _windows is not None else RerankedIndex(dim, metric, codes, gpu)
        self._windows: FaissIndex | RerankedIndex = (
            _windows
            if _windows is not None
            else FaissIndex(dim, metric, kind, gpu, factory=factory, search=search, **kind_params)
        )
        self._aggregate: Aggregate = aggregate
        self._fetch_factor = int(fetch_factor)
        # An IVF index of windows whose nprobe nobody chose visits more lists (plan.window_nprobe) once trained.
        self._widen_probes = _windows is None and factory is None and search is None and "nprobe" not in params
        self._widen_probes_if_trained()
        self._table = WindowTable()  # window id → owner, span, weight; document id → its run of window ids

    @classmethod
    def over(
        cls,
        windows: FaissIndex | RerankedIndex,
        *,
        aggregate: Aggregate = DEFAULT_AGGREGATE,
        fetch_factor: int = DEFAULT_FETCH_FACTOR,
    ) -> MultiVectorIndex:
        """A multi-vector index whose window vectors go into `windows`, an empty FaissIndex built (and trained)
        elsewhere, e.g. an IVF-PQ trained on a sample of the windows.

        Raises:
            ValueError: if `windows` already holds vectors.
        """
        if len(windows):
            raise ValueError(f"MultiVectorIndex.over takes an empty FaissIndex; this one holds {len(windows)} vectors.")
        return cls(windows.dim, windows.metric, aggregate=aggregate, fetch_factor=fetch_factor, _windows=windows)

    # ------------------------------------------------------------------------------------------------ properties

    @property
    def windows(self) -> FaissIndex | RerankedIndex:
        """The index of the window vectors (ids are window ids): a `FaissIndex`, or a `RerankedIndex` when
        `compressed`."""
        return self._windows

    @property
    def aggregate(self) -> Aggregate:
        """How window scores become a document's score."""
        return self._aggregate

    @property
    def dim(self) -> int:
        """Vector size."""
        return self._windows.dim

    @property
    def metric(self) -> Metric:
        """ "ip" or "l2"."""
        return self._windows.metric

    @property
    def kind(self) -> str:
        """The windows index's kind."""
        return self._windows.kind

    @property
    def params(self) -> dict[str, int]:
        """The windows index's kind parameters (`FaissIndex.params`)."""
        return self._windows.params

    @property
    def fetch_factor(self) -> int:
        """The first window search asks for fetch_factor × k × (mean windows per document) windows."""
        return self._fetch_factor

    @property
    def ids(self) -> np.ndarray:
        """The stored document ids, int64, in the order they were first added."""
        return self._table.order().copy()

    @property
    def window_count(self) -> int:
        """How many window vectors are stored."""
        return len(self._windows)

    def __len__(self) -> int:
        return len(self._table)

    def __contains__(self, id_: object) -> bool:
        if not isinstance(id_, (int, np.integer)) or not 0 <= int(id_) <= INT64_MAX:
            return False
        return bool(self._table.contains(np.asarray([int(id_)], dtype=np.int64))[0])

    def __repr__(self) -> str:
        return (
            f"MultiVectorIndex({len(self)} documents, {self.window_count} windows, aggregate={self._aggregate!r}, "
            f"windows={self._windows!r})"
        )

    def window_spans(self, id_: int) -> list[tuple[int, int]]:
        """The character spans of one document's windows, in order.

        Raises:
            ValueError: if the document is not stored.
        """
        window_ids = self._window_ids([id_])
        starts, ends = self._table.column(START, window_ids), self._table.column(END, window_ids)
        return list(zip(starts.tolist(), ends.tolist(), strict=True))

    def window_weights(self, id_: int) -> list[int]:
        """The weights (content tokens) of one document's windows, in order: their weights in its pooled vector.

        With `get_window_vectors` and `window_spans` it gives back what was added for the document (e.g. to copy
        it into another index as `DocumentWindows`).

        Raises:
            ValueError: if the document is not stored.
        """
        return self._table.column(WEIGHT, self._window_ids([id_])).tolist()

    # ------------------------------------------------------------------------------------------------ changing

    def add(self, windows: DocumentWindows, ids: Any = None) -> np.ndarray:
        """Store documents as their windows; returns their ids.

        Args:
            windows: the documents' windows (`FairEmbedder.embed_document_windows`, or `DocumentWindows.single`
                for vectors computed elsewhere).
            ids: one new int64 id per document, or None to continue after the largest stored id.

        Raises:
            TypeError: if `windows` is not a DocumentWindows.
            ValueError: ids already stored or repeated, a wrong count, vectors of another size, NaN or inf.
                Nothing is stored then.
        """
        if not isinstance(windows, DocumentWindows):
            raise TypeError(
                f"MultiVectorIndex.add takes DocumentWindows (FairEmbedder.embed_document_windows), got "
                f"{type(windows).__name__}."
            )
        as_vectors(windows.vectors, "window vectors", self.dim)  # shape and finiteness, before anything changes
        count = len(windows)
        if ids is None:
            start = self._table.largest_document + 1
            doc_ids = np.arange(start, start + count, dtype=np.int64)
        else:
            doc_ids = as_ids(ids, "ids")
        if doc_ids.shape != (count,):
            raise ValueError(f"Got {count} documents but {doc_ids.size} ids; pass one id per document.")
        if distinct(doc_ids).size != count:
            raise ValueError("Ids repeat within one add; add each document once.")
        stored = doc_ids[self._table.contains(doc_ids)]
        if stored.size:
            raise ValueError(f"{stored.size} id(s) are already stored: {some(stored)}; remove them first.")
        first = self._table.size
        window_ids = np.arange(first, first + windows.vectors.shape[0], dtype=np.int64)
        self._windows.add(windows.vectors, ids=window_ids)
        self._widen_probes_if_trained()
        self._table.append(doc_ids, windows.owners, windows.spans, windows.weights)
        return doc_ids

    def _widen_probes_if_trained(self) -> None:
        """Once the windows index is trained, let an IVF one visit `plan.wider_nprobe` lists (see plan)."""
        if not self._widen_probes or not self._windows.is_trained:
            return
        self._widen_probes = False
        wider = wider_nprobe(self._windows.params)
        if wider is not None:
            self._windows.set_search({"nprobe": wider})

    def remove(self, ids: Any) -> int:
        """Remove documents (every window of each); ids not stored are ignored. Returns how many were removed."""
        wanted = distinct(as_ids(ids, "ids"))
        wanted = wanted[self._table.contains(wanted)]
        if not wanted.size:
            return 0
        self._windows.remove(self._table.window_ids(wanted))
        self._table.drop(wanted)
        return int(wanted.size)

    def get_vectors(self, ids: Any) -> np.ndarray:
        """The documents' pooled vectors (the token-weighted mean of their stored windows, L2-normalised), (n, dim).

        Raises:
            ValueError: if some ids are not stored.
        """
        wanted = as_ids(ids, "ids")
        self._window_ids(wanted)  # fails for unknown ids
        return np.stack([self._pooled(int(i)) for i in wanted.tolist()]) if wanted.size else self._empty(0)

    def get_window_vectors(self, id_: int) -> np.ndarray:
        """One document's window vectors, (windows, dim), in order (decoded codes for compressed kinds)."""
        return self._windows.get_vectors(self._window_ids([id_]))

    # ------------------------------------------------------------------------------------------------ searching

    def search(self, queries: Any, k: int, *, ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """The k best documents for every query row, as `FaissIndex.search` returns them.

        Returns:
            (scores, ids): float32 (n, c) aggregate scores and int64 (n, c) document ids, best first, c =
            `result_columns(k, len(self))` (k, clamped to the documents held above `PADDED_K`); -1 ids (and
            -inf / +inf scores) where fewer than c documents are stored or selected.
        """
        matrix = as_vectors(queries, "queries", self.dim)
        if not is_positive_int(k, numpy=True):
            raise ValueError(f"k must be a positive int, got {k!r}.")
        missing = float("-inf") if self.metric == "ip" else float("inf")
        width = result_columns(int(k), len(self))  # k clamped to the documents held (as FaissIndex.search)
        scores = np.full((matrix.shape[0], width), missing, dtype=np.float32)
        found = np.full((matrix.shape[0], width), -1, dtype=np.int64)
        for row in range(matrix.shape[0]):
            hits = self.search_documents(matrix[row], width, ids=ids)
            scores[row, : len(hits)] = [hit.score for hit in hits]
            found[row, : len(hits)] = [hit.id for hit in hits]
        return scores, found

    def search_documents(self, query: Any, k: int, *, ids: Any = None) -> list[DocumentHit]:
        """The k best distinct documents for one query vector, best first, with their best window.

        Args:
            query: one query vector, (dim,) or (1, dim), prepared as the windows were (unit for cosine).
            k: how many documents at most.
            ids: restrict the search to these stored document ids (e.g. those a metadata filter keeps); the
                windows index searches only their windows, so k documents come back whenever k are selected.

        Raises:
            ValueError: a malformed query, a k that is not a positive int, or `ids` that are not stored.
        """
        vector = as_vectors(np.asarray(query, dtype=np.float32).reshape(1, -1), "query", self.dim)
        if not is_positive_int(k, numpy=True):
            raise ValueError(f"k must be a positive int, got {k!r}.")
        selected = None if ids is None else self._window_ids(distinct(as_ids(ids, "ids")))
        total = self.window_count if selected is None else int(selected.size)
        documents = len(self._table) if ids is None else len(distinct(as_ids(ids, "ids")))
        if total == 0:
            return []
        k = min(int(k), documents)
        per_document = math.ceil(self.window_count / max(1, len(self._table)))
        fetch = min(total, max(k, self._fetch_factor * k * per_document))
        while True:
            raw, window_ids = self._windows.search(vector, fetch, ids=selected)
            keep = window_ids[0] >= 0
            window_ids, scores = window_ids[0][keep], higher_better(self.metric, raw[0][keep])
            hits = self._rank(vector[0], window_ids, scores, k)
            exhausted = window_ids.size >= total or fetch >= total
            if exhausted or self._certain(hits, scores, k):
                return hits[:k]
            fetch = min(total, fetch * 4)

    # ------------------------------------------------------------------------------------------------ persistence

    def save(
        self,
        folder: str | os.PathLike[str],
        *,
        companions: Mapping[str, Companion] | None = None,
        overwrite: bool = False,
    ) -> Path:
        """Write the windows index and the window table (`windows.json` and its arrays, `window_table`) into
        `folder` in one commit.

        As `FaissIndex.save`: atomic as a whole, `companions` published in the same commit, the table staged under
        the folder's lock (its arrays written row by row, not copied), a save over a newer generation than the one
        loaded refused (`StoreConflictError`), and an index built in memory not saved over one already there
        unless `overwrite=True`.
        """
        header, arrays = self._table.files(self._aggregate, self._fetch_factor)
        table = {WINDOWS_FILE: header, **arrays}
        return self._windows.save(folder, companions={**(companions or {}), **table}, overwrite=overwrite)

    @classmethod
    def load(cls, folder: str | os.PathLike[str], gpu: GpuChoice = "auto") -> MultiVectorIndex:
        """Load an index written by `save` (or by an earlier release: a `windows.json` of format version 1 is read,
        and the next save writes the current format); `gpu` as in `FaissIndex`. The table's arrays are
        memory-mapped after their checksums are verified.

        Raises:
            FileNotFoundError: if the folder holds no index.
            ValueError: if it holds a pooled `FaissIndex` (no window table), or the table disagrees with the index.
            DamagedFileError: (a ValueError) if a file is truncated or corrupted; the message names it.
        """
        path = Path(folder)

        def attempt() -> MultiVectorIndex:
            record = Snapshot.read(path / META_FILE)
            if not record.lists(WINDOWS_FILE) and not record.lists(INDEX_FILE):
                raise FileNotFoundError(f"{path / META_FILE} commits no index (no {INDEX_FILE}); save the index again.")
            if not record.lists(WINDOWS_FILE):
                raise ValueError(
                    f"{path} holds a pooled FaissIndex (one vector per document), not a multi-vector index; load "
                    "it with FaissIndex.load, or rebuild it from the documents with multi-vector documents."
                )
            saved = read_saved_table(record)
            windows: FaissIndex | RerankedIndex
            if record.lists(RERANK_FILE):  # compressed: codes in index.faiss, exact vectors memory-mapped
                windows = RerankedIndex.read(path, record, gpu)
            else:
                windows = FaissIndex.load(path, gpu=gpu, _multivector=True)
            if not record.is_current():
                raise ChangedWhileReadingError
            return cls._restore(windows, saved)

        return retry_while_changing(path / META_FILE, attempt)

    # ------------------------------------------------------------------------------------------------ internals

    @classmethod
    def _restore(cls, windows: FaissIndex | RerankedIndex, saved: SavedTable) -> MultiVectorIndex:
        table = saved.table(windows.ids)
        index = cls(windows.dim, windows.metric, **saved.settings, _windows=windows)
        index._table = table
        return index

    def _window_ids(self, doc_ids: Sequence[int] | np.ndarray) -> np.ndarray:
        """The window ids of `doc_ids`, document after document (ValueError naming the ids not stored)."""
        if isinstance(doc_ids, np.ndarray) and doc_ids.dtype == np.int64:
            wanted = doc_ids
        else:
            given = [int(i) for i in doc_ids]
            outside = [i for i in given if not 0 <= i <= INT64_MAX]
            if outside:
                raise ValueError(f"{len(outside)} document id(s) are not stored: {some(outside)}.")
            wanted = np.asarray(given, dtype=np.int64)
        known = self._table.contains(wanted)
        if not known.all():
            unknown = wanted[~known]
            raise ValueError(f"{unknown.size} document id(s) are not stored: {some(unknown)}.")
        return self._table.window_ids(wanted)

    def _empty(self, rows: int) -> np.ndarray:
        return np.zeros((rows, self.dim), dtype=np.float32)

    def _pooled(self, doc_id: int, window_ids: np.ndarray | None = None) -> np.ndarray:
        """One document's pooled vector from its stored windows (`window_ids`: its windows, when known)."""
        window_ids = self._window_ids([doc_id]) if window_ids is None else window_ids
        vectors = self._windows.get_vectors(window_ids).astype(np.float64)  # (w, d)
        weights = self._table.column(WEIGHT, window_ids).astype(np.float64)
        pooled = (vectors * weights[:, None]).sum(axis=0)  # (d,)
        return (pooled / max(float(np.linalg.norm(pooled)), 1e-12)).astype(np.float32)

    def _rank(self, query: np.ndarray, window_ids: np.ndarray, scores: np.ndarray, k: int) -> list[DocumentHit]:
        """The documents of the windows found, ranked by the aggregate (exact for candidates but "max")."""
        owners = self._table.owner[window_ids]
        _, first = np.unique(owners, return_index=True)
        order = np.sort(first)  # first (best) window of each document, in score order
        if self._aggregate == "max":
            return self._hits(owners[order], window_ids[order], scores[order])
        doc_ids = owners[order]
        firsts, counts = self._table.ranges(doc_ids)
        best_windows, values = [], []
        for doc_id, start, count in zip(doc_ids.tolist(), firsts.tolist(), counts.tolist(), strict=True):
            window_ids_of = np.arange(start, start + count, dtype=np.int64)
            own = window_scores(self.metric, query, self._windows.get_vectors(window_ids_of))
            pooled = None
            if self._aggregate == "max-mean":
                pooled = float(window_scores(self.metric, query, self._pooled(doc_id, window_ids_of)[None, :])[0])
            best_windows.append(start + int(np.argmax(own)))
            values.append(aggregate_score(self._aggregate, own, pooled))
        hits = self._hits(doc_ids, np.asarray(best_windows, dtype=np.int64), np.asarray(values, dtype=np.float64))
        hits.sort(key=lambda hit: -higher_better(self.metric, np.asarray([hit.score]))[0])
        return hits

    def _certain(self, hits: list[DocumentHit], scores: np.ndarray, k: int) -> bool:
        """Whether no document outside the windows found can enter the top k."""
        if len(hits) < k:
            return False
        if self._aggregate != "top2":
            return True  # "max": exact once k documents are found; "max-mean": ranks the documents found
        bound = float(scores[-1])  # every window not found scores at most this
        return float(higher_better(self.metric, np.asarray([hits[k - 1].score]))[0]) >= bound

    def _hit(self, doc_id: int, window_id: int, value: float) -> DocumentHit:
        return self._hits(np.asarray([doc_id]), np.asarray([window_id]), np.asarray([value]))[0]

    def _hits(self, doc_ids: np.ndarray, window_ids: np.ndarray, values: np.ndarray) -> list[DocumentHit]:
        """One `DocumentHit` per (document, its window, the value in the direction larger is better)."""
        first, _ = self._table.ranges(doc_ids.astype(np.int64))
        positions = (window_ids - first).tolist()
        starts, ends = self._table.column(START, window_ids).tolist(), self._table.column(END, window_ids).tolist()
        return [
            DocumentHit(doc_id, metric_score(self.metric, value), position, (start, end))
            for doc_id, value, position, start, end in zip(
                doc_ids.tolist(), values.tolist(), positions, starts, ends, strict=True
            )
        ]
