"""Which embedders give a multi-vector store its windows, and the key-value caches those windows may sit in.

In multi-vector mode a store keeps each document as the vectors of its windows (`fair_retrieval.MultiVectorIndex`)
and returns k distinct documents scored by their best window(s). What gives the windows:

- `windows_of(embedding)`: the one rule of which embeddings can fill a multi-vector store: those with
  `embed_document_windows(texts)` (`FairEmbedder`, LangChain's `FairEmbeddings`, LlamaIndex's `FairEmbedding`) or a
  cache around one (`CachedWindowEmbedder`); `gives_windows`: the first kind alone, those that make a store
  multi-vector by default; `window_embedder(embedding)`: what gives the windows, or an error saying that only
  those can fill such a store.
- `CachedWindowEmbedder`: LangChain's `CacheBackedEmbeddings(underlying_embeddings, document_embedding_store)`
  caches what `embed_documents` returns (one pooled vector per text) in a key-value store; a multi-vector store
  needs every window's vector too. `cached_window_embedder` recognises such a wrapper by those two attributes (no
  framework is imported) around an embedder that gives windows, and keeps each document's windows in the same
  key-value store, under a key of its own, ``fair-retrieval/windows/<shape>/<text>`` (the cache's key encoder
  hashes it with its namespace like any key, so it never meets the key of a plain `embed_documents` entry),
  embedding only the texts it does not find. A cached document holds its pooled vector, its windows' vectors,
  spans and token weights (JSON, exact float32 values), so a store filled from the cache equals one filled by the
  embedder itself.

LlamaIndex embeds nodes before the store sees them (`VectorStoreIndex`, `IngestionPipeline`) and hands it only the
pooled vectors; the store asks the embedder for the windows then (`fair_retrieval.stores.embedded_windows`), and
no embedder keeps anything between calls for it.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from fair_retrieval.embedding.windows import DocumentWindows

__all__ = [
    "WINDOW_KEY_PREFIX",
    "CachedWindowEmbedder",
    "WindowEmbedder",
    "cached_window_embedder",
    "concatenate",
    "gives_windows",
    "inner_embedder",
    "window_embedder",
    "windows_of",
]

WINDOW_KEY_PREFIX = "fair-retrieval/windows/"
"""The start of every window entry's key in a cache's key-value store."""


def inner_embedder(embedding: Any) -> Any:
    """The embeddings a caching wrapper holds (`underlying_embeddings` beside a `document_embedding_store`), or
    `embedding` itself when it is no such wrapper."""
    inner = getattr(embedding, "underlying_embeddings", None)
    store = getattr(embedding, "document_embedding_store", None)
    if inner is not None and callable(getattr(store, "mget", None)) and callable(getattr(store, "mset", None)):
        return inner
    return embedding


def cached_window_embedder(embedding: Any) -> CachedWindowEmbedder | None:
    """A `CachedWindowEmbedder` over a caching wrapper whose inner embedder gives windows; None for anything else."""
    inner = inner_embedder(embedding)
    if inner is embedding or not callable(getattr(inner, "embed_document_windows", None)):
        return None
    return CachedWindowEmbedder(inner, embedding.document_embedding_store)


class CachedWindowEmbedder:
    """`embed_document_windows` through a key-value store (`mget(keys)`, `mset(pairs)`).

    Args:
        inner: the embedder that gives windows (`FairEmbeddings`, `FairEmbedder`).
        store: the key-value store (a cache's `document_embedding_store`); values are JSON-compatible dicts.
    """

    def __init__(self, inner: Any, store: Any) -> None:
        self.inner = inner
        self.store = store

    def embed_document_windows(self, texts: list[str], **arguments: Any) -> DocumentWindows:
        """The texts' windows: from the store where held, the others embedded by `inner` (one call) and stored.
        `arguments` (the window shape) go to `inner` and into the key."""
        shape = json.dumps(arguments, sort_keys=True, default=repr)
        keys = [f"{WINDOW_KEY_PREFIX}{shape}/{text}" for text in texts]
        found = [_decoded(entry) for entry in self.store.mget(keys)]
        missing = [position for position, entry in enumerate(found) if entry is None]
        if missing:
            fresh = self.inner.embed_document_windows([texts[position] for position in missing], **arguments)
            pairs = []
            for row, position in enumerate(missing):
                window = fresh.select([row])
                found[position] = window
                pairs.append((keys[position], _encoded(window)))
            self.store.mset(pairs)
        return concatenate([entry for entry in found if entry is not None])


def concatenate(parts: Sequence[DocumentWindows]) -> DocumentWindows:
    """Several batches of documents as one, in order."""
    if not parts:
        raise ValueError("concatenate needs at least one DocumentWindows.")
    offsets = np.cumsum([0, *[len(part) for part in parts[:-1]]])
    return DocumentWindows(
        np.concatenate([part.pooled for part in parts]),
        np.concatenate([part.vectors for part in parts]),
        np.concatenate([part.owners + offset for part, offset in zip(parts, offsets, strict=True)]),
        np.concatenate([part.spans for part in parts]),
        np.concatenate([part.weights for part in parts]),
    )


def _encoded(windows: DocumentWindows) -> dict[str, Any]:
    """One document's windows as JSON values (float32 values are exact as JSON numbers)."""
    return {
        "pooled": windows.pooled[0].tolist(),
        "vectors": windows.vectors.tolist(),
        "spans": windows.spans.tolist(),
        "weights": windows.weights.tolist(),
    }


def _decoded(entry: Any) -> DocumentWindows | None:
    """One document's windows from a stored entry; None for none, or for an entry that is not one (re-embedded)."""
    if not isinstance(entry, dict):
        return None
    try:
        vectors = np.asarray(entry["vectors"], dtype=np.float32)
        return DocumentWindows(
            np.asarray([entry["pooled"]], dtype=np.float32),
            vectors,
            np.zeros(len(vectors), dtype=np.int64),
            np.asarray(entry["spans"], dtype=np.int64).reshape(-1, 2),
            np.asarray(entry["weights"], dtype=np.int64),
        )
    except (KeyError, TypeError, ValueError):
        return None


logger = logging.getLogger(__name__)


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
