"""The windows a multi-vector store keeps, and the mode a store gets when none is asked for.

A multi-vector store scores a document by its best window, so its windows need not be the embedder's: the window
study (docs/window_study.md) picked windows cut at the text's own boundaries (whole paragraphs, else whole sentences;
`window_boundaries="text"`) at two sizes kept together, the model's window and half of it, ahead of every other
policy and of each stack's small-to-big recipe. So a new multi-vector store asks its embedder for windows of that
shape on every call
(`FairEmbedder.embed_document_windows(..., window_tokens=..., window_boundaries=...)`), records it in its file,
and keeps it when loaded; the pooled vectors an embedder gives anything else are unchanged.

- `StoreWindows`: the shape (window sizes in content tokens, boundaries) a store asks for, and its `embed` (one
  pass per size); none: the embedder's own windows (stores saved before the shape was recorded).
- `default_windows(embedder)`: the study's shape for an embedder: `DEFAULT_WINDOW_SHARES` of its window's content
  tokens, cut at `DEFAULT_WINDOW_BOUNDARIES`.
- `window_settings(embedder, arguments)`: how one such call cuts documents (equal settings, equal windows), what
  lets a store take windows its embedder already made (`fair_retrieval.stores.window_source`).
- `new_store_mode`: a store built without `multivector=` over embeddings that give no windows
  (`fair_retrieval.stores.window_cache.gives_windows`: any other framework's) is pooled, said once at INFO.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args

import numpy as np

from fair_retrieval.embedding.boundaries import WindowBoundaries
from fair_retrieval.embedding.embedding_report import window_passes
from fair_retrieval.embedding.identity import fair_embedder_of
from fair_retrieval.embedding.window_planning import WindowSettings
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.index import Aggregate, MultiVectorIndex
from fair_retrieval.jsonio import DamagedFileError
from fair_retrieval.stores.cached_windows import inner_embedder
from fair_retrieval.stores.document_modes import DocumentMode, requested_mode
from fair_retrieval.stores.window_cache import gives_windows
from fair_retrieval.validate import is_positive_int

logger = logging.getLogger(__name__)

__all__ = [
    "DEFAULT_WINDOW_BOUNDARIES",
    "DEFAULT_WINDOW_SHARES",
    "STORE_WINDOWS_KEY",
    "StoreWindows",
    "default_windows",
    "merged_passes",
    "new_store_mode",
    "window_settings",
]

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
        with window_passes(len(texts)):  # one log line: each document counted once, with the passes
            return merged_passes([embedder.embed_document_windows(texts, **arguments) for arguments in calls])

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
    seen: set[tuple[int, int, int]] = set()
    keep = np.ones(len(owners), dtype=bool)
    for row, (owner, (start, end)) in enumerate(zip(owners.tolist(), spans.tolist(), strict=True)):
        keep[row] = (owner, start, end) not in seen
        seen.add((owner, start, end))
    order = np.argsort(owners[keep], kind="stable")
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


def window_settings(embedder: Any, arguments: Mapping[str, Any]) -> WindowSettings | None:
    """The `WindowSettings` of an `embed_document_windows(texts, **arguments)` call of `embedder`: those of the
    fair-retrieval embedder it is or wraps, else its own `window_settings(**arguments)` if it has one; None for
    another embedder, whose windows cannot be compared."""
    fair = fair_embedder_of(inner_embedder(embedder))
    settings = fair.window_settings if fair is not None else getattr(embedder, "window_settings", None)
    return settings(**arguments) if callable(settings) else None


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
