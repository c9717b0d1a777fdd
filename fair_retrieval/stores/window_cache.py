"""What a store in multi-vector mode needs beyond the index: the embedder's windows, one pass, and the hit's span.

In multi-vector mode a store keeps each document as the vectors of its windows (`fair_retrieval.MultiVectorIndex`)
and returns k distinct documents scored by their best window(s). Both adapters share what is here:

- `windows_of(embedding)`: the one rule of which embeddings can fill a multi-vector store: those with
  `embed_document_windows(texts)` (`FairEmbedder`, LangChain's `FairEmbeddings`, LlamaIndex's `FairEmbedding`) or a
  cache around one (`fair_retrieval.stores.cached_windows`); `gives_windows`: the first kind alone, those that make
  a store multi-vector by default; `window_embedder(embedding)`: what gives the windows, or an error saying that
  only those can fill such a store.
- `WindowCache`: LlamaIndex embeds nodes before the store sees them (`VectorStoreIndex`, `IngestionPipeline`) and
  hands it only the pooled vector. `FairEmbedding` remembers the windows of the texts it embedded last (its own
  windows, keyed by the text and the settings they were cut with), so the store takes them from that same pass
  instead of embedding the text again (`fair_retrieval.stores.window_source`). The store only reads the cache: an
  embedder gives the same vectors whatever store it feeds.
- `best_window_metadata(hit)`: the character span of the best window, put in a result's metadata under
  `BEST_WINDOW_KEY` so that an application can highlight it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
from collections import OrderedDict
from collections.abc import Hashable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.index import DocumentHit
from fair_retrieval.stores.cached_windows import cached_window_embedder

logger = logging.getLogger(__name__)

__all__ = [
    "BEST_WINDOW_KEY",
    "RESERVED_KEYS",
    "WindowCache",
    "WindowEmbedder",
    "best_window_metadata",
    "gives_windows",
    "window_embedder",
    "windows_of",
]

BEST_WINDOW_KEY = "best_window"
"""Metadata key of a multi-vector hit: {"start": …, "end": …, "window": …} (character span, window position)."""
RESERVED_KEYS: tuple[str, ...] = (BEST_WINDOW_KEY,)
"""Metadata keys the stores put in their results, so refused in what is added (`check_store_entries`): a user's
value under one would be replaced in every result."""
CACHE_WINDOWS = 200_000
"""How many windows a `WindowCache` keeps at most (about 300 MB of 384-d float32 vectors)."""


@runtime_checkable
class WindowEmbedder(Protocol):
    """An embedder that gives the vectors of every window of a document with the pooled ones."""

    def embed_document_windows(self, texts: list[str]) -> DocumentWindows:
        """The documents' pooled and window vectors from one pass (`FairEmbedder.embed_document_windows`)."""
        ...


def windows_of(embedding: Any) -> WindowEmbedder | None:
    """What gives `embedding`'s window vectors: itself when it has `embed_document_windows`, a
    `CachedWindowEmbedder` for a cache around such embeddings; None for any other (the one rule of which embeddings
    can fill a multi-vector store)."""
    if isinstance(embedding, WindowEmbedder):
        return embedding
    return cached_window_embedder(embedding)  # CacheBackedEmbeddings(FairEmbeddings): windows cached too


def gives_windows(embedding: Any) -> bool:
    """Whether `embedding` gives window vectors itself (`embed_document_windows`), what makes a store built without
    `multivector=` multi-vector. A cache around such embeddings fills a multi-vector store only when one is asked
    for (`windows_of`): the default over a cache stays pooled, as it was before caches kept windows."""
    return isinstance(embedding, WindowEmbedder)


def window_embedder(embedding: Any, where: str, missing: str | None = None) -> WindowEmbedder:
    """What gives `embedding`'s window vectors (`windows_of`), else an error naming what to use.

    Args:
        embedding: the store's embeddings / embed model (None: the store has none).
        where: the call, for the message (e.g. "FaissVectorStore(multivector=True)").
        missing: the message for no embedding at all (None: one naming `where`).

    Raises:
        ValueError: no embedding.
        TypeError: embeddings that give no windows.
    """
    if embedding is None:
        raise ValueError(
            missing
            or f"{where} keeps each document as the vectors of its windows and has no embedder to take them "
            "from; give it fair-retrieval's embeddings (FairEmbedder, FairEmbeddings, FairEmbedding)."
        )
    found = windows_of(embedding)
    if found is not None:
        return found
    raise TypeError(
        f"{where} keeps each document as the vectors of its windows, which only fair-retrieval's embedders give "
        f"(FairEmbedder, FairEmbeddings, FairEmbedding, or CacheBackedEmbeddings around one); got "
        f"{type(embedding).__name__}. Use one of those, or multivector=False."
    )


def best_window_metadata(hit: DocumentHit) -> dict[str, int]:
    """The metadata value under `BEST_WINDOW_KEY` for a hit: its best window's character span and position."""
    return {"start": hit.span[0], "end": hit.span[1], "window": hit.window}


class WindowCache:
    """The windows of the texts an embedder embedded last, by text and by the `WindowSettings` they were cut with,
    so a store can take them from the pass that made the pooled vectors. The embedder fills it with its own passes;
    a store only reads it (`take`), so nothing a store does changes what the embedder gives. Thread-safe; the oldest
    entries go first once `capacity` windows are held.

    Args:
        capacity: the most windows kept.
    """

    def __init__(self, capacity: int = CACHE_WINDOWS) -> None:
        self._capacity = capacity
        self._entries: OrderedDict[tuple[bytes, Hashable], DocumentWindows] = OrderedDict()
        self._windows = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def remember(self, texts: Sequence[str], windows: DocumentWindows, settings: Hashable) -> None:
        """Keep each text's windows (one document of `windows` per text, in order), cut with `settings` (the
        embedder's `window_settings()` of the pass)."""
        with self._lock:
            for position, text in enumerate(texts):
                key = (_key(text), settings)
                entry = windows.select([position])
                old = self._entries.pop(key, None)
                self._windows += len(entry.owners) - (len(old.owners) if old is not None else 0)
                self._entries[key] = entry
            while self._windows > self._capacity and len(self._entries) > 1:
                _, dropped = self._entries.popitem(last=False)
                self._windows -= len(dropped.owners)

    def take(
        self, texts: Sequence[str], pooled: np.ndarray, settings: Hashable
    ) -> tuple[list[DocumentWindows | None], int]:
        """The remembered windows of each text, cut with `settings`, whose pooled vector matches `pooled` (n, d)
        (None where none is).

        A text embedded since with another configuration, or given a vector made elsewhere, does not match and is a
        miss. Returns the entries and the number of misses.
        """
        found: list[DocumentWindows | None] = []
        with self._lock:
            for text, vector in zip(texts, pooled, strict=True):
                entry = self._entries.get((_key(text), settings))
                if entry is not None and np.allclose(entry.pooled[0], vector, atol=1e-5):
                    found.append(entry)
                else:
                    found.append(None)
        return found, sum(entry is None for entry in found)


def _key(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()
