"""The windows of documents a framework embedded itself: taken from the embedder's pass, the rest embedded once.

A framework that embeds documents before a store sees them (LlamaIndex's `VectorStoreIndex` and `IngestionPipeline`
hand a vector store finished pooled vectors) gives a multi-vector store no windows. The embedder remembered them
(`fair_retrieval.stores.window_cache.WindowCache`), so `gathered_windows` takes each document's windows from that
pass and embeds only the documents it cannot find there (vectors made elsewhere, an evicted cache) once more.

`within_content` moves window spans from the embedded text (which may carry a header, e.g. LlamaIndex's metadata
lines before a node's text) into the document's own text, so a span highlights the text the application shows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.stores.cached_windows import concatenate
from fair_retrieval.stores.document_modes import checked_windows
from fair_retrieval.stores.store_windows import StoreWindows
from fair_retrieval.stores.window_cache import WindowCache, WindowEmbedder

logger = logging.getLogger(__name__)

__all__ = ["GatheredWindows", "content_offset", "gathered_windows", "within_content"]

AGREEMENT = 0.999
"""The least cosine between a given pooled vector and the embedder's own for the same text before a warning."""


class GatheredWindows(NamedTuple):
    """The windows of a batch of documents, in order, and how many had to be embedded again.

    Attributes:
        windows: one document per text, in the order given.
        misses: the documents not found in the cache (embedded once more).
        disagreeing: of those, the documents whose given pooled vector is not the embedder's (cosine below
            `AGREEMENT`): their vectors were made by another model or configuration.
    """

    windows: DocumentWindows
    misses: int
    disagreeing: int


def gathered_windows(
    texts: Sequence[str],
    pooled: np.ndarray,
    embedder: WindowEmbedder,
    cache: WindowCache | None,
    shape: StoreWindows | None = None,
) -> GatheredWindows:
    """Each text's windows: from `cache` where its pooled vector matches `pooled`, else embedded once by `embedder`.

    Args:
        texts: exactly the texts the pooled vectors were embedded from.
        pooled: float32 (len(texts), d), the vectors the framework gave the store.
        embedder: what embeds the misses (`embed_document_windows`), in one call.
        cache: the embedder's cache of recent windows, or None (every text is embedded again).
        shape: the windows the store keeps: cached windows of another shape are misses, and misses are embedded
            in it. None: the embedder's own windows.

    Returns:
        The windows in input order, with the counts of misses and of misses whose given vector disagrees.

    Raises:
        ValueError: a text count other than the vector count, or windows of another size than the vectors (or of
            another count than the texts).
        TypeError: the embedder gave something other than `DocumentWindows`.
    """
    if pooled.ndim != 2 or pooled.shape[0] != len(texts):
        raise ValueError(f"Got {len(texts)} texts but vectors of shape {pooled.shape}; pass one vector per text.")
    found: list[DocumentWindows | None]
    shape = shape or StoreWindows()
    if cache is not None:
        found, _ = cache.take(texts, pooled, shape)
    else:
        found = [None] * len(texts)
    missing = [position for position, entry in enumerate(found) if entry is None]
    disagreeing = 0
    if missing:
        embedded = checked_windows(
            shape.embed(embedder, [texts[position] for position in missing]),
            len(missing),
            "embed_document_windows",
            unit=False,
        )
        if embedded.dim != pooled.shape[1]:
            raise ValueError(
                f"The embedder gives {embedded.dim}-d windows but the vectors are {pooled.shape[1]}-d; use the "
                "embed model the vectors were made with."
            )
        agreement = np.sum(embedded.pooled.astype(np.float64) * pooled[missing].astype(np.float64), axis=1)
        norms = np.linalg.norm(pooled[missing].astype(np.float64), axis=1) * np.linalg.norm(embedded.pooled, axis=1)
        disagreeing = int(np.sum(agreement < AGREEMENT * np.maximum(norms, 1e-12)))
        for row, position in enumerate(missing):
            found[position] = embedded.select([row])
    parts = [entry for entry in found if entry is not None]
    return GatheredWindows(concatenate(parts), len(missing), disagreeing)


def content_offset(embedded: str, content: str) -> int:
    """Where `content` (a document's own text) starts in `embedded` (the text that was embedded: the content,
    maybe after a header); 0 when it cannot be found (spans then stay those of the embedded text)."""
    if not content or embedded == content:
        return 0
    position = embedded.rfind(content)  # the content comes after any header
    if position >= 0:
        return position
    stripped = content.strip()  # a template may strip the embedded text's ends
    position = embedded.rfind(stripped) if stripped else -1
    if position < 0:
        return 0
    return position - (len(content) - len(content.lstrip()))


def within_content(windows: DocumentWindows, offsets: Sequence[int], lengths: Sequence[int]) -> DocumentWindows:
    """`windows` with each document's spans moved into its own text: minus its offset, clipped to [0, length].

    Args:
        windows: the documents' windows, spans in the embedded texts.
        offsets: for each document, where its own text starts in the embedded text (`content_offset`).
        lengths: for each document, the length of its own text.
    """
    shift = np.asarray(offsets, dtype=np.int64)[windows.owners]
    limit = np.asarray(lengths, dtype=np.int64)[windows.owners]
    spans = np.clip(windows.spans - shift[:, None], 0, limit[:, None])
    return DocumentWindows(windows.pooled, windows.vectors, windows.owners, spans, windows.weights)
