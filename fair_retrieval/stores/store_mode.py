"""A store's mode, one value: pooled (one vector per document) or multi-vector (the vectors of its windows), with
its aggregate, and the windows a multi-vector store keeps.

A store in multi-vector mode keeps each document as the vectors of its windows in a `MultiVectorIndex` and returns
k distinct documents scored by an aggregate of their windows' scores (the default, `DEFAULT_MULTIVECTOR`); in the
pooled mode each document is one vector in a `FaissIndex`. Its windows need not be the embedder's: the window study
(docs/window_study.md) picked windows cut at the text's own boundaries (whole paragraphs, else whole sentences;
`window_boundaries="text"`) at two sizes kept together, the model's window and half of it, ahead of every other
policy and of each stack's small-to-big recipe. So a new multi-vector store asks its embedder for windows of that
shape on every call (`FairEmbedder.embed_document_windows(..., window_tokens=..., window_boundaries=...)`), records
it in its file, and keeps it when loaded; the pooled vectors an embedder gives anything else are unchanged.

- `DocumentMode`: the mode and the aggregate, checked; the index a store makes on its first add (`new_index`, the
  one place the stores' default index is decided: with no kind, compressed windows for a multi-vector store,
  `COMPRESSED_KIND`, flat for a pooled one; the kind a store reports for it, `kind_of`) and the one it loads
  (`load_index`); how a saved store records them (`settings`, optional keys of the store file,
  absent in files written before multi-vector stores existed, which are pooled) and the fields it adds to the
  identity the store records (`identity`), so that a pooled store is never read as a multi-vector one nor the other
  way round (`saved`, `check_requested`).
- `StoreWindows`: the shape (window sizes in content tokens, boundaries) a store asks for, and its `embed` (one
  pass per size); none: the embedder's own windows (stores saved before the shape was recorded).
- `default_windows(embedder)`: the study's shape for an embedder: `DEFAULT_WINDOW_SHARES` of its window's content
  tokens, cut at `DEFAULT_WINDOW_BOUNDARIES`.
- `window_cutter(embedder)`: how one such call cuts documents (equal settings, equal windows), what tells a store
  whether a call gives again the pooled vectors a framework handed it (`fair_retrieval.stores.embedded_windows`).
- `new_store_mode`: the mode of a new store's arguments; one built without `multivector=` over embeddings that give
  no windows (`fair_retrieval.stores.window_embedders.gives_windows`: any other framework's) is pooled, said once
  at INFO.
- `checked_windows`: what an embedder's `embed_document_windows` returned, checked, with unit rows for cosine.
- `stored_windows`: the windows of stored documents as `DocumentWindows`, to copy them into another store.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast, get_args

import numpy as np

from fair_retrieval.embedding.boundaries import WindowBoundaries
from fair_retrieval.embedding.embedding_report import window_passes
from fair_retrieval.embedding.identity import fair_embedder_of
from fair_retrieval.embedding.window_planning import WindowSettings
from fair_retrieval.embedding.windows import DocumentWindows, merged_rows
from fair_retrieval.index import (
    AGGREGATES,
    DEFAULT_AGGREGATE,
    KINDS,
    Aggregate,
    FaissIndex,
    Kind,
    Metric,
    MultiVectorIndex,
    check_kind_params,
)
from fair_retrieval.index.exact_rerank import RerankedIndex
from fair_retrieval.index.gpu import GpuChoice
from fair_retrieval.jsonio import DamagedFileError
from fair_retrieval.stores.vectors import unit_rows
from fair_retrieval.stores.window_embedders import gives_windows, inner_embedder
from fair_retrieval.validate import is_positive_int, shown

__all__ = [
    "AGGREGATE_KEY",
    "COMPRESSED_KIND",
    "DEFAULT_MULTIVECTOR",
    "DEFAULT_WINDOW_BOUNDARIES",
    "DEFAULT_WINDOW_SHARES",
    "MULTIVECTOR_KEY",
    "STORE_KINDS",
    "STORE_WINDOWS_KEY",
    "DocumentMode",
    "StoreWindows",
    "checked_windows",
    "default_windows",
    "given_index_mode",
    "merged_passes",
    "new_store_mode",
    "requested_mode",
    "stored_windows",
    "window_cutter",
]

logger = logging.getLogger(__name__)


DEFAULT_MULTIVECTOR = True
"""The document mode of a store built without `multivector=`: the one place both adapters' default comes from
(multi-vector: each document kept as its windows, the window study's pick; docs/window_study.md). A store whose
embeddings give no windows is pooled (`window_embedders.gives_windows`); stores saved without a mode are pooled
whatever this says."""

COMPRESSED_KIND = "compressed"
"""The kind a store reports (and records) for `MultiVectorIndex(dim, compressed=True)`: window codes in memory, the
exact vectors in a memory-mapped file (the compressed window study's pick, docs/compressed_window_study.md). A
multi-vector store built without `kind=` makes it wherever its codes fit the vector size (`DocumentMode.new_index`);
a store may also ask for it by name. Multi-vector stores only."""
STORE_KINDS: tuple[str, ...] = (*KINDS, COMPRESSED_KIND)
"""The kinds a store takes by name: the index kinds (`fair_retrieval.index.KINDS`) and `COMPRESSED_KIND`."""

MULTIVECTOR_KEY = "multivector"
"""Store-file key (and identity field) of the mode: true for a multi-vector store; absent or false: pooled."""
AGGREGATE_KEY = "aggregate"
"""Store-file key (and identity field) of a multi-vector store's aggregate."""


@dataclass(frozen=True)
class DocumentMode:
    """How a store keeps its documents.

    Attributes:
        multivector: False (one pooled vector per document) or True (the vectors of its windows).
        aggregate: how a multi-vector document's window scores become its score ("max", "max-mean", "top2"; see
            `fair_retrieval.MultiVectorIndex`); ignored by a pooled store.

    Raises:
        TypeError: `multivector` is not a bool.
        ValueError: an unknown aggregate.
    """

    multivector: bool = False  # what a store file without mode keys holds; new stores: `requested_mode`
    aggregate: Aggregate = DEFAULT_AGGREGATE

    def __post_init__(self) -> None:
        if not isinstance(self.multivector, bool):
            raise TypeError(f"multivector must be True or False, got {type(self.multivector).__name__}.")
        if self.aggregate not in AGGREGATES:
            raise ValueError(f"aggregate must be one of {AGGREGATES}, got {self.aggregate!r}.")

    def __str__(self) -> str:
        return f"multi-vector documents (aggregate={self.aggregate!r})" if self.multivector else "pooled documents"

    # ------------------------------------------------------------------------------------------------ the index

    def new_index(
        self, dim: int, metric: Metric, kind: str | None, gpu: GpuChoice, params: Mapping[str, Any]
    ) -> FaissIndex | MultiVectorIndex:
        """The empty index of a store's first add: a `FaissIndex`, or a `MultiVectorIndex` with the aggregate.

        The one place the stores' default index is decided: with no kind (None), a multi-vector store keeps its
        windows compressed (`MultiVectorIndex(dim, compressed=True)`, what the compressed window study adopted),
        or in a flat index when the codes do not fit `dim` (PQ48 needs a multiple of 48; said at INFO); a
        pooled store is flat. A named kind is made as asked.

        Args:
            dim: the vector size.
            metric: the index metric ("ip" for cosine stores, whose vectors are unit).
            kind: the index kind, as `FaissIndex` takes it (it checks it), `COMPRESSED_KIND`, or None (the
                mode's default, above).
            gpu: as `FaissIndex`.
            params: kind parameters, as `FaissIndex` (a multi-vector index also takes `fetch_factor`).

        Raises:
            ValueError: kind="compressed" for a vector size its codes do not fit; as the index otherwise.
        """
        options: dict[str, Any] = dict(params)
        if not self.multivector:
            return FaissIndex(dim, metric=metric, kind=cast("Kind", kind or "flat"), gpu=gpu, **options)
        if kind is None or kind == COMPRESSED_KIND:
            try:
                return MultiVectorIndex(dim, metric, gpu=gpu, aggregate=self.aggregate, compressed=True, **options)
            except ValueError as error:
                if kind is not None or not _codes_refused(dim, metric):
                    raise
                logger.info(
                    "The compressed window index's codes do not fit %d-d vectors (%s); this store keeps its "
                    "windows in a flat index.",
                    dim,
                    error,
                )
        return MultiVectorIndex(dim, metric, cast("Kind", kind or "flat"), gpu, aggregate=self.aggregate, **options)

    def check_index_options(self, kind: str | None, params: Mapping[str, Any]) -> None:
        """Refuse now what `new_index` would refuse of `kind` and `params` on the first add (after the texts were
        embedded): an unknown kind, "compressed" for a pooled store, parameters the kind does not take (a
        multi-vector store's `fetch_factor` is its own). None takes what flat takes (no kind parameters).

        Raises:
            ValueError: an unknown kind, or "compressed" for a pooled store; a bad parameter value.
            TypeError: parameters the kind does not take.
        """
        if kind is not None and kind not in STORE_KINDS:
            index = "MultiVectorIndex" if self.multivector else "FaissIndex"  # the class this store's index is
            raise ValueError(
                f"kind must be one of {STORE_KINDS} or None (the mode's default), got {shown(kind)}; for a faiss "
                f"factory string pass index={index}(dim, factory=...)."
            )
        kind_params = {key: value for key, value in params.items() if not (self.multivector and key == "fetch_factor")}
        if kind != COMPRESSED_KIND:
            check_kind_params(kind or "flat", kind_params)
            return
        if not self.multivector:
            raise ValueError(
                f"kind={COMPRESSED_KIND!r} keeps a multi-vector store's windows compressed; a pooled store takes "
                f"{KINDS} (or pass multivector=True)."
            )
        if kind_params:
            raise TypeError(
                f"kind={COMPRESSED_KIND!r} takes no parameter(s) {sorted(kind_params)} (only fetch_factor); set "
                "`store.index.windows.candidate_factor` once the index is made, or pick another kind."
            )

    @staticmethod
    def kind_of(index: FaissIndex | MultiVectorIndex) -> str:
        """The kind a store reports for an index it made: `COMPRESSED_KIND` for compressed windows, else the
        index's own kind."""
        if isinstance(index, MultiVectorIndex) and isinstance(index.windows, RerankedIndex):
            return COMPRESSED_KIND
        return index.kind

    def load_index(self, folder: str | os.PathLike[str], gpu: GpuChoice) -> FaissIndex | MultiVectorIndex:
        """The index saved in `folder`, which must be of this mode (each index refuses the other's folder).

        Raises:
            ValueError: the folder holds the other kind of index, or a multi-vector index of another aggregate
                than the store file records; as `FaissIndex.load` / `MultiVectorIndex.load` otherwise.
        """
        if not self.multivector:
            return FaissIndex.load(folder, gpu=gpu)
        index = MultiVectorIndex.load(folder, gpu=gpu)
        if index.aggregate != self.aggregate:
            raise ValueError(
                f"{folder} holds a multi-vector index with aggregate={index.aggregate!r} but its store file records "
                f"aggregate={self.aggregate!r}: the folder was modified by hand. Rebuild the store and save it again."
            )
        return index

    # ------------------------------------------------------------------------------------------------ saved stores

    def settings(self) -> dict[str, Any]:
        """The store-file keys of the mode: {"multivector": true, "aggregate": …}; none for a pooled store, whose
        file stays as earlier releases wrote it."""
        if not self.multivector:
            return {}
        return {MULTIVECTOR_KEY: True, AGGREGATE_KEY: self.aggregate}

    def identity(self, embedder: Mapping[str, Any], windows: Any = None) -> dict[str, Any]:
        """The identity a store records: its embedder's, with the mode, the aggregate and the window shape
        (`StoreWindows.settings()`, when `windows` is given) of a multi-vector store.

        A pooled store's identity is the embedder's alone, as stores recorded it before multi-vector stores existed.
        """
        identity = dict(embedder)
        if self.multivector:
            identity.update({MULTIVECTOR_KEY: True, AGGREGATE_KEY: self.aggregate})
            if windows is not None:
                identity.update(windows.settings())
        return identity

    @classmethod
    def saved(cls, state: Mapping[str, Any], source: Path, remedy: str) -> DocumentMode:
        """The mode a store file records (`state`, its content); pooled when it records none (an earlier release).

        Raises:
            DamagedFileError: (a ValueError) a mode that is not a bool or an unknown aggregate.
        """
        multivector = state.get(MULTIVECTOR_KEY, False)  # a file without the key is pooled, whatever the default
        aggregate = state.get(AGGREGATE_KEY, DEFAULT_AGGREGATE)
        try:
            return cls(multivector, aggregate)
        except (TypeError, ValueError) as error:
            raise DamagedFileError(source, f"its document mode is malformed ({error})", remedy) from None

    def check_requested(self, requested: bool | None, source: Path, argument: str = "multivector") -> None:
        """Refuse a mode asked for on load (`requested`; None takes the saved one) that is not the saved one.

        Raises:
            TypeError: `requested` is neither None nor a bool.
            ValueError: it disagrees with the saved mode; the message says what the folder holds.
        """
        if requested is None:
            return
        if not isinstance(requested, bool):
            raise TypeError(f"{argument} must be True, False or None (the saved mode), got {requested!r}.")
        if requested != self.multivector:
            raise ValueError(
                f"{source} holds a store of {self}, but {argument}={requested} was asked for. Load it with "
                f"{argument}={self.multivector} (or None, the saved mode); to change the mode, rebuild the store from "
                f"its documents with {argument}={requested}."
            )


def _codes_refused(dim: int, metric: Metric) -> bool:
    """Whether the compressed index's codes cannot be built for `dim`-d vectors (what `RerankedIndex` checks)."""
    try:
        RerankedIndex(dim, metric, gpu=False)
    except ValueError:
        return True
    return False


def requested_mode(multivector: bool | None, aggregate: Aggregate | None) -> DocumentMode:
    """The mode a store is built in: `multivector` (None: `DEFAULT_MULTIVECTOR`) with `aggregate` (None:
    `DEFAULT_AGGREGATE`), the same rules for every adapter.

    Raises:
        TypeError: `multivector` is not a bool.
        ValueError: an unknown aggregate, or an aggregate given for a pooled store (it would be silently unused).
    """
    mode = DocumentMode(
        DEFAULT_MULTIVECTOR if multivector is None else multivector,
        DEFAULT_AGGREGATE if aggregate is None else aggregate,
    )
    if not mode.multivector and aggregate is not None:
        raise ValueError(
            f"aggregate={aggregate!r} scores a document by its windows, which only a multi-vector store keeps: pass "
            "multivector=True with it, or leave aggregate out."
        )
    return mode


def checked_windows(windows: Any, count: int, source: str, *, unit: bool) -> DocumentWindows:
    """What an embedder's `embed_document_windows` returned for `count` texts, checked, with unit rows if `unit`.

    Args:
        windows: the result.
        count: how many texts were embedded.
        source: the call, for messages (e.g. "embed_document_windows").
        unit: L2-normalise the pooled and window vectors (a cosine store; fair-retrieval's embedders already give
            unit vectors, for which this changes nothing).

    Raises:
        TypeError: not a `DocumentWindows`.
        ValueError: another number of documents than texts.
    """
    if not isinstance(windows, DocumentWindows):
        raise TypeError(f"{source} returned {type(windows).__name__}, expected fair_retrieval.DocumentWindows.")
    if len(windows) != count:
        raise ValueError(f"{source} returned {len(windows)} documents for {count} texts.")
    if not unit:
        return windows
    return DocumentWindows(
        unit_rows(windows.pooled).astype(np.float32),
        unit_rows(windows.vectors).astype(np.float32),
        windows.owners,
        windows.spans,
        windows.weights,
    )


def stored_windows(index: MultiVectorIndex, ids: Sequence[int]) -> DocumentWindows:
    """The windows of stored documents (vectors, spans, weights; pooled vectors recomputed), in the order of `ids`.

    The vectors are read back from the index: exact for flat, hnsw and ivf, the decoded codes for ivfpq.

    Raises:
        ValueError: an id that is not stored.
    """
    dim = index.dim
    if not ids:
        empty = np.zeros((0, dim), dtype=np.float32)
        no_ids = np.zeros(0, dtype=np.int64)
        return DocumentWindows(empty, empty, no_ids, np.zeros((0, 2), dtype=np.int64), no_ids)
    vectors = [index.get_window_vectors(id_) for id_ in ids]
    owners = np.concatenate([np.full(len(part), position, dtype=np.int64) for position, part in enumerate(vectors)])
    spans = np.asarray([span for id_ in ids for span in index.window_spans(id_)], dtype=np.int64).reshape(-1, 2)
    weights = np.asarray([weight for id_ in ids for weight in index.window_weights(id_)], dtype=np.int64)
    return DocumentWindows(
        index.get_vectors(list(ids)), np.concatenate(vectors).astype(np.float32), owners, spans, weights
    )


def given_index_mode(index: Any, requested: DocumentMode, dim: int | None, name: str) -> DocumentMode:
    """The mode of a store built over `index` (the index's own), after checking that it fits."""
    if not isinstance(index, FaissIndex | MultiVectorIndex):
        raise TypeError(
            f"index must be a fair_retrieval.FaissIndex or MultiVectorIndex, got {type(index).__name__}; for a new "
            f"store use {name}.create(dim=...)."
        )
    if isinstance(index, MultiVectorIndex) != requested.multivector:
        raise ValueError(
            f"index is a {type(index).__name__} but multivector={requested.multivector}: pass a MultiVectorIndex with "
            "multivector=True, or a FaissIndex with multivector=False."
        )
    if dim is not None:
        raise ValueError("Pass either index or dim, not both: the index already knows its dimension.")
    if len(index):
        raise ValueError(
            f"index already holds {len(index)} vectors, but this store has no documents for them. Pass an empty "
            "index (the store adds vectors together with their documents), or load a saved store."
        )
    return DocumentMode(True, index.aggregate) if isinstance(index, MultiVectorIndex) else requested


logger = logging.getLogger(__name__)


DEFAULT_WINDOW_SHARES: tuple[float, ...] = (1.0, 0.5)
"""The sizes of a multi-vector store's windows, as shares of the embedder's window (rounded up): the window study
picked both the whole window and half of it ("multi-scale": a document is found by its best window of either size)."""
DEFAULT_WINDOW_BOUNDARIES: WindowBoundaries = "text"
"""A multi-vector store's windows are cut at paragraph and sentence ends (the window study's pick)."""
STORE_WINDOWS_KEY = "store_windows"
"""Store-file key (and identity field) of a multi-vector store's window shape: {"tokens": [...], "boundaries": ...}
(named apart from the embedder's own `window_tokens` / `window_boundaries`, which its identity records too)."""
WINDOW_TOKENS_KEY = "window_tokens"  # the `embed_document_windows` argument of one size
WINDOW_BOUNDARIES_KEY = "window_boundaries"  # the `embed_document_windows` argument of the boundaries


@dataclass(frozen=True)
class StoreWindows:
    """The shape of the windows a multi-vector store keeps.

    Attributes:
        tokens: the window sizes in content tokens: one size, or several (every document kept as its windows of
            each size, scored by the best of all; "multi-scale"); empty: the embedder's own window.
        boundaries: "text" or "tokens"; None: the embedder's own.
    """

    tokens: tuple[int, ...] = ()
    boundaries: WindowBoundaries | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.tokens, tuple) or not all(is_positive_int(n) for n in self.tokens):
            raise ValueError(f"window_tokens must be positive ints, got {self.tokens!r}.")
        if self.boundaries is not None and self.boundaries not in get_args(WindowBoundaries):
            raise ValueError(f"window_boundaries must be one of {get_args(WindowBoundaries)}, got {self.boundaries!r}.")

    def calls(self) -> list[dict[str, Any]]:
        """The keyword arguments of one `embed_document_windows` call per window size (one call without any for
        the embedder's own windows)."""
        extra: dict[str, Any] = {} if self.boundaries is None else {WINDOW_BOUNDARIES_KEY: self.boundaries}
        return [{WINDOW_TOKENS_KEY: n, **extra} for n in self.tokens] or [extra]

    def embed(self, embedder: Any, texts: list[str]) -> DocumentWindows:
        """`embedder`'s windows of `texts` in this shape: one pass per size, each document's windows of every size
        together (the pooled vectors are those of the first size's pass)."""
        calls = self.calls()
        if len(calls) == 1:
            return embedder.embed_document_windows(texts, **calls[0])  # type: ignore[no-any-return]
        with window_passes(len(texts)) as passes:  # one log line: each document counted once, with the passes
            parts = []
            for number, arguments in enumerate(calls):
                passes.label = pass_label(number, arguments.get(WINDOW_TOKENS_KEY), self.tokens)
                parts.append(embedder.embed_document_windows(texts, **arguments))
            return merged_passes(parts)

    def settings(self) -> dict[str, Any]:
        """The store-file key of the shape (also the identity field it adds); none for the embedder's own."""
        if not self.tokens and self.boundaries is None:
            return {}
        return {STORE_WINDOWS_KEY: {"tokens": list(self.tokens), "boundaries": self.boundaries}}

    @classmethod
    def saved(cls, state: Mapping[str, Any], source: Path, remedy: str) -> StoreWindows:
        """The shape a store file records; the embedder's own windows when it records none (an earlier release).

        Raises:
            DamagedFileError: (a ValueError) a malformed shape.
        """
        shape = state.get(STORE_WINDOWS_KEY, {})
        try:
            if not isinstance(shape, dict) or not isinstance(shape.get("tokens", []), list):
                raise ValueError(f"{STORE_WINDOWS_KEY} must be {{'tokens': [...], 'boundaries': ...}}, got {shape!r}")
            return cls(tuple(shape.get("tokens", [])), shape.get("boundaries"))
        except ValueError as error:
            raise DamagedFileError(source, f"its window shape is malformed ({error})", remedy) from None


def pass_label(number: int, tokens: int | None, sizes: tuple[int, ...]) -> str:
    """What a window pass's progress bar says it embeds: "whole windows" (the first, largest size), "half windows"
    (a size half of it), else the size in tokens."""
    if number == 0:
        return "whole windows"
    if tokens is not None and sizes and abs(2 * tokens - sizes[0]) <= 1:
        return "half windows"
    return f"{tokens}-token windows"


def merged_passes(passes: list[DocumentWindows]) -> DocumentWindows:
    """Documents' windows of several passes over the same texts, each document's windows together, in pass order
    (one pass: itself).

    A window of a later pass with the span of one already kept for its document (a text that fits windows of both
    sizes) is the same text read the same way, so it is kept once.
    """
    if len(passes) == 1:
        return passes[0]
    owners = np.concatenate([p.owners for p in passes])
    spans = np.concatenate([p.spans for p in passes])
    keep, order = merged_rows(owners, spans)
    return DocumentWindows(
        passes[0].pooled,
        np.concatenate([p.vectors for p in passes])[keep][order],
        owners[keep][order],
        spans[keep][order],
        np.concatenate([p.weights for p in passes])[keep][order],
    )


def default_windows(embedder: Any) -> StoreWindows:
    """The study's shape for `embedder`'s windows (`DEFAULT_WINDOW_SHARES` of its window, cut at
    `DEFAULT_WINDOW_BOUNDARIES`); the embedder's own windows where it is not fair-retrieval's (a custom
    `embed_document_windows` that takes no shape) or truncates documents."""
    fair = fair_embedder_of(inner_embedder(embedder))  # a cache's windows are those of the embedder it wraps
    if fair is None or fair.long_documents != "windows":
        return StoreWindows()
    sizes = tuple(max(1, math.ceil(fair.window_content_tokens * share)) for share in DEFAULT_WINDOW_SHARES)
    return StoreWindows(sizes, DEFAULT_WINDOW_BOUNDARIES)


def window_cutter(embedder: Any) -> Callable[..., WindowSettings] | None:
    """What tells the `WindowSettings` of an `embed_document_windows(texts, **arguments)` call of `embedder` (called
    with those arguments): the `window_settings` of the fair-retrieval embedder it is or wraps, else its own if it
    has one; None for another embedder, whose windows cannot be compared. Equal settings, equal windows."""
    fair = fair_embedder_of(inner_embedder(embedder))
    settings = fair.window_settings if fair is not None else getattr(embedder, "window_settings", None)
    return settings if callable(settings) else None


def new_store_mode(
    multivector: bool | None,
    aggregate: Aggregate | None,
    index: Any,
    embedder: Any,
    name: str,
    windows: StoreWindows | None,
) -> tuple[DocumentMode, StoreWindows | None]:
    """The mode of a store being built and, in multi-vector mode, the windows it keeps.

    A given index decides the mode when `multivector` is None; else None means `DEFAULT_MULTIVECTOR`, except over
    embeddings that give no windows (pooled, said once at INFO). The windows: `windows` when given (a loaded store's
    record), else the study's shape for the embedder (`default_windows`).

    Raises:
        TypeError, ValueError: as `requested_mode`.
    """
    if multivector is None and index is not None:
        multivector = isinstance(index, MultiVectorIndex)
    mode = requested_mode(multivector, aggregate)
    if multivector is None and mode.multivector and not gives_windows(embedder):
        if embedder is not None:
            log_pooled_default(embedder, name)
        mode = requested_mode(False, aggregate)
    if not mode.multivector:
        return mode, None
    return mode, windows if windows is not None else default_windows(embedder)


def log_pooled_default(embedder: Any, name: str) -> None:
    """Say (INFO) that a store built without `multivector=` is pooled because its embeddings give no windows."""
    logger.info(
        "%s: %s gives no window vectors, so this store keeps one pooled vector per document (multivector=False). "
        "fair-retrieval's embeddings give windows and make it a multi-vector store by default.",
        name,
        type(embedder).__name__,
    )
