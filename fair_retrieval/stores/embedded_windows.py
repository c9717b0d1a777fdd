"""The windows of documents a framework embedded itself: taken from the embedder's pass, the rest embedded once.

A framework that embeds documents before a store sees them (LlamaIndex's `VectorStoreIndex` and `IngestionPipeline`
hand a vector store finished pooled vectors) gives a multi-vector store no windows. The embedder remembered them
(`fair_retrieval.stores.window_embedders.WindowCache`: its own windows), so `gathered_windows` takes each document's
windows from that pass where they are the windows the store keeps, and asks the embedder for the others explicitly
(`embed_document_windows(texts, window_tokens=..., window_boundaries=...)`, one call per window size): documents it
cannot find there (vectors made elsewhere, an evicted cache), and those whose windows of the store's shape the
embedder's own pass did not cut.

`within_content` moves window spans from the embedded text (which may carry a header, e.g. LlamaIndex's metadata
lines before a node's text) into the document's own text, so a span highlights the text the application shows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from fair_retrieval.embedding.embedding_report import window_passes
from fair_retrieval.embedding.window_planning import WindowSettings
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.stores.store_mode import StoreWindows, checked_windows, merged_passes, window_cutter
from fair_retrieval.stores.window_embedders import WindowCache, WindowEmbedder, concatenate

logger = logging.getLogger(__name__)

__all__ = ["GatheredWindows", "content_offset", "gathered_windows", "within_content", "within_contents"]

AGREEMENT = 0.999
"""The least cosine between a given pooled vector and the embedder's own for the same text before a warning."""


class GatheredWindows(NamedTuple):
    """The windows of a batch of documents, in order, and what the model had to read again.

    Attributes:
        windows: one document per text, in the order given; its pooled vectors are the ones given.
        misses: the documents not found in the cache (embedded once more).
        disagreeing: of those, the documents whose given pooled vector is not the embedder's (cosine below
            `AGREEMENT`): their vectors were made by another model or configuration.
        embedded: the documents the model read again, in any pass (the misses, and documents whose windows of the
            store's shape are not those the embedder's own pass cut).
        passes: the `embed_document_windows` calls made (at most one per window size of the shape).
    """

    windows: DocumentWindows
    misses: int
    disagreeing: int
    embedded: int = 0
    passes: int = 0


def gathered_windows(
    texts: Sequence[str],
    pooled: np.ndarray,
    embedder: WindowEmbedder,
    cache: WindowCache | None,
    shape: StoreWindows | None = None,
) -> GatheredWindows:
    """Each text's windows of `shape`, one pass per window size: taken from `cache` (the embedder's own pass) where
    the text's pooled vector matches `pooled` and that pass cut the windows the size asks for, else embedded, for all
    such texts of a size in one call (`embed_document_windows(texts, **arguments)`). The cache is only read.

    The embedder's own windows stand for a size's when their `WindowSettings` are the size's, or when the text is one
    window there (it fits) that also fits the size: a text that fits is read whole, however windows are cut.

    Args:
        texts: exactly the texts the pooled vectors were embedded from.
        pooled: float32 (len(texts), d), the vectors the framework gave the store.
        embedder: what embeds the misses (`embed_document_windows`).
        cache: the embedder's cache of recent windows, or None (every text is embedded again).
        shape: the windows the store keeps; None: the embedder's own windows.

    Returns:
        The windows in input order (pooled: `pooled`), with the counts of misses, of misses whose given vector
        disagrees, of documents read again and of calls made.

    Raises:
        ValueError: a text count other than the vector count, or windows of another size than the vectors (or of
            another count than the texts).
        TypeError: the embedder gave something other than `DocumentWindows`.
    """
    if pooled.ndim != 2 or pooled.shape[0] != len(texts):
        raise ValueError(f"Got {len(texts)} texts but vectors of shape {pooled.shape}; pass one vector per text.")
    cut = window_cutter(embedder)  # the embedder resolved once for every call's settings
    own = None if cut is None else cut()
    cached: list[DocumentWindows | None] = [None] * len(texts)
    if cache is not None and own is not None:
        cached, _ = cache.take(texts, pooled, own)
    misses = [position for position, entry in enumerate(cached) if entry is None]
    reference: dict[int, np.ndarray] = {}  # a miss's pooled vector as the embedder's own pass makes it
    passes: list[DocumentWindows] = []
    embedded: set[int] = set()
    calls = 0
    with window_passes() as read:  # one log line for the passes below, each document counted once
        for arguments in (shape or StoreWindows()).calls():
            settings = None if cut is None else cut(**arguments)
            found = [
                entry if entry is not None and _stands_for(entry, text, own, settings) else None
                for entry, text in zip(cached, texts, strict=True)
            ]
            missing = [position for position, entry in enumerate(found) if entry is None]
            if missing:
                fresh = _embedded(embedder, [texts[position] for position in missing], arguments, pooled.shape[1])
                calls += 1
                embedded.update(missing)
                for row, position in enumerate(missing):
                    found[position] = fresh.select([row])
            for position in misses:
                entry = found[position]
                if (
                    position not in reference
                    and entry is not None
                    and _stands_for(entry, texts[position], settings, own)
                ):
                    reference[position] = entry.pooled[0]
            passes.append(concatenate([entry for entry in found if entry is not None]))
        read.documents = len(embedded)
    merged = merged_passes(passes)
    return GatheredWindows(
        DocumentWindows(pooled, merged.vectors, merged.owners, merged.spans, merged.weights),
        len(misses),
        _disagreeing(pooled, reference),
        len(embedded),
        calls,
    )


def _stands_for(entry: DocumentWindows, text: str, made: WindowSettings | None, wanted: WindowSettings | None) -> bool:
    """Whether a document's windows cut with `made` are those a call cutting with `wanted` gives: the same settings,
    or one window of the whole text (it fit) that also fits `wanted`'s windows. Unknown settings (None): no."""
    if made is None or wanted is None:
        return False
    if made == wanted:
        return True
    whole = len(entry.owners) == 1 and entry.spans[0].tolist() == [0, len(text)]
    return made.cuts and wanted.cuts and whole and int(entry.weights[0]) <= wanted.tokens


def _embedded(embedder: WindowEmbedder, texts: list[str], arguments: dict[str, Any], dim: int) -> DocumentWindows:
    """The embedder's windows of `texts` in one call, checked against the count and the vectors' size `dim`."""
    windows = checked_windows(
        embedder.embed_document_windows(texts, **arguments), len(texts), "embed_document_windows", unit=False
    )
    if windows.dim != dim:
        raise ValueError(
            f"The embedder gives {windows.dim}-d windows but the vectors are {dim}-d; use the embed model the vectors "
            "were made with."
        )
    return windows


def _disagreeing(pooled: np.ndarray, reference: dict[int, np.ndarray]) -> int:
    """How many given vectors have a cosine below `AGREEMENT` with the embedder's own for the same text."""
    if not reference:
        return 0
    rows = sorted(reference)
    own = np.stack([reference[row] for row in rows]).astype(np.float64)
    given = pooled[rows].astype(np.float64)
    agreement = np.sum(own * given, axis=1)
    norms = np.linalg.norm(given, axis=1) * np.linalg.norm(own, axis=1)
    return int(np.sum(agreement < AGREEMENT * np.maximum(norms, 1e-12)))


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


def within_contents(windows: DocumentWindows, embedded: Sequence[str], contents: Sequence[str]) -> DocumentWindows:
    """`windows` of the texts `embedded` with each document's spans moved into its own text, `contents` (where it
    starts in its embedded text: `content_offset`; `within_content`)."""
    offsets = [content_offset(text, content) for text, content in zip(embedded, contents, strict=True)]
    return within_content(windows, offsets, [len(content) for content in contents])


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
