"""The windows of documents a framework embedded itself: the given vectors where a document is one window, the
rest embedded once per window size, and nothing kept between calls.

A framework that embeds documents before a store sees them (LlamaIndex's `VectorStoreIndex` and `IngestionPipeline`
hand a vector store finished pooled vectors) gives a multi-vector store no windows, so `gathered_windows` asks the
embedder for them in the store's shape (`embed_document_windows(texts, window_tokens=..., window_boundaries=...)`,
one call per window size), except where the vector it was given is the window: a document that is one window of
its whole text at a size (it fits) and in the embedder's own pass is read whole in both, so its window's vector is
its pooled vector (L2-normalised, as every window vector is). Which documents those are, the embedder's tokenizer
says (`FairEmbedder.whole_windows`), without the model; an embedder that is not fair-retrieval's gets every window
embedded.

The given vectors may come from another model or configuration (a different embed model given to the index than to
the store), so before any is taken, one of them is compared with the embedder's own vector for the same text: one
a size's pass read anyway where there is one (a pass with the embedder's own windows gives every pooled vector
again), else the longest document that fits (a calibration acts only on windows of enough tokens, so the longest
is the one another configuration changes), read alone or in a pass that reads others. If any compared vector
disagrees (cosine below `AGREEMENT`), none is taken: every document's windows are embedded, and the count is
reported.

`within_content` moves window spans from the embedded text (which may carry a header, e.g. LlamaIndex's metadata
lines before a node's text) into the document's own text, so a span highlights the text the application shows.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from fair_retrieval.embedding.embedding_report import window_passes
from fair_retrieval.embedding.identity import fair_embedder_of
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.stores.store_mode import (
    WINDOW_TOKENS_KEY,
    StoreWindows,
    checked_windows,
    merged_passes,
    window_cutter,
)
from fair_retrieval.stores.window_embedders import WindowEmbedder, inner_embedder

logger = logging.getLogger(__name__)

__all__ = ["AGREEMENT", "GatheredWindows", "content_offset", "gathered_windows", "within_content", "within_contents"]

AGREEMENT = 0.999
"""The least cosine between a given pooled vector and the embedder's own for the same text for the given vectors to
be taken as windows (below it: another model, configuration or text)."""


class GatheredWindows(NamedTuple):
    """The windows of a batch of documents, in order, and what the model read for them.

    Attributes:
        windows: one document per text, in the order given; its pooled vectors are the ones given.
        taken: the windows taken from the given vectors (a document that is one window at a size, counted once per
            size), not read by the model.
        embedded: the documents the model read again, in any call (those read only for the check included).
        passes: the `embed_document_windows` calls made: at most one per window size of the shape, one more to
            read a document alone for the check when no size's pass read one to compare, and (only when a given
            vector disagrees) one per size for the documents that were to be taken.
        checked: the documents whose given vector was compared with the embedder's own for the same text.
        disagreeing: of those, the ones with a cosine below `AGREEMENT` (another model, configuration or text);
            when there is any, no given vector is taken and every window is the embedder's.
    """

    windows: DocumentWindows
    taken: int
    embedded: int
    passes: int
    checked: int
    disagreeing: int


class _Reading(NamedTuple):
    """The documents (positions in the batch) one call read at one window size, and their windows."""

    size: int
    positions: list[int]
    windows: DocumentWindows


def gathered_windows(
    texts: Sequence[str],
    pooled: np.ndarray,
    embedder: WindowEmbedder,
    shape: StoreWindows | None = None,
) -> GatheredWindows:
    """Each text's windows of `shape`: the given vector of a text that is one window of its whole text at a size
    and in the embedder's own pass (once checked, as the module says), the others embedded, all of a size in one
    call (`embed_document_windows(texts, **arguments)`). Nothing is kept between calls.

    Args:
        texts: exactly the texts the pooled vectors were embedded from.
        pooled: float32 (len(texts), d), the vectors the framework gave the store.
        embedder: what gives the windows (`embed_document_windows`).
        shape: the windows the store keeps; None: the embedder's own windows.

    Returns:
        The windows in input order (pooled: `pooled`), what was taken, read, and checked (`GatheredWindows`).

    Raises:
        ValueError: a text count other than the vector count, or windows of another size than the vectors (or of
            another count than the texts).
        TypeError: the embedder gave something other than `DocumentWindows`.
    """
    if pooled.ndim != 2 or pooled.shape[0] != len(texts):
        raise ValueError(f"Got {len(texts)} texts but vectors of shape {pooled.shape}; pass one vector per text.")
    calls = (shape or StoreWindows()).calls()
    whole = _whole_windows(texts, embedder, calls)
    own = _own_windows(embedder, calls)
    reading = [[position for position, weight in enumerate(weights) if weight is None] for weights in whole]
    probe = _probe(whole, reading, own)
    if probe is not None:
        size, position = probe
        reading[size] = sorted([*reading[size], position])
    readings: list[_Reading] = []
    with window_passes() as read:  # one log line for the calls below, each document counted once
        readings += _read(texts, embedder, calls, reading, pooled.shape[1])
        checked, disagreeing = _compared(pooled, readings, whole, own)
        if disagreeing:  # another model's vectors: take none of them
            done = [set(positions) for positions in reading]
            rest = [
                [p for p, weight in enumerate(weights) if weight is not None and p not in done[size]]
                for size, weights in enumerate(whole)
            ]
            readings += _read(texts, embedder, calls, rest, pooled.shape[1])
            reading = [sorted([*reading[size], *rest[size]]) for size in range(len(calls))]
            checked, disagreeing = _compared(pooled, readings, whole, own)
        embedded = {position for part in readings for position in part.positions}
        read.documents = len(embedded)
    read_at = [set(positions) for positions in reading]
    taken = [
        [p for p, weight in enumerate(weights) if weight is not None and p not in read_at[size]]
        for size, weights in enumerate(whole)
    ]
    passes = [
        _assembled(
            pooled,
            [(part.positions, part.windows) for part in readings if part.size == size]
            + [(taken[size], _given_windows(texts, pooled, taken[size], whole[size]))],
        )
        for size in range(len(calls))
    ]
    merged = merged_passes(passes)
    return GatheredWindows(
        DocumentWindows(pooled, merged.vectors, merged.owners, merged.spans, merged.weights),
        sum(len(positions) for positions in taken),
        len(embedded),
        len(readings),
        checked,
        disagreeing,
    )


def _whole_windows(texts: Sequence[str], embedder: WindowEmbedder, calls: list[dict[str, Any]]) -> list[list[Any]]:
    """For each call (window size), each text's weight where its given vector is its window there (one window of
    the whole text at that size and in the embedder's own pass), else None. All None for an embedder that is not
    fair-retrieval's (its windows cannot be told without it)."""
    fair = fair_embedder_of(inner_embedder(embedder))
    if fair is None:
        return [[None] * len(texts) for _ in calls]
    own, *sizes = fair.whole_windows(texts, [None, *(arguments.get(WINDOW_TOKENS_KEY) for arguments in calls)])
    return [[weight if mine is not None else None for weight, mine in zip(size, own, strict=True)] for size in sizes]


def _own_windows(embedder: WindowEmbedder, calls: list[dict[str, Any]]) -> list[bool]:
    """For each call, whether it cuts the embedder's own windows (equal `WindowSettings`): its pooled vectors are
    then those the embedder gave the framework, to compare with the given ones."""
    cut = window_cutter(embedder)
    if cut is None:
        return [False] * len(calls)
    own = cut()
    return [cut(**arguments) == own for arguments in calls]


def _probe(whole: list[list[Any]], reading: list[list[int]], own: list[bool]) -> tuple[int, int] | None:
    """The (call, document) read to check the given vectors before any is taken: the longest document that is one
    window somewhere (at most a window's tokens), read in a call that reads others where it fits one, else alone in
    the first call where it fits; None when nothing would be taken or a call reads documents whose pooled vectors
    are compared anyway."""
    fitting = {p: weight for weights in whole for p, weight in enumerate(weights) if weight is not None}
    if not fitting or any(own[size] and reading[size] for size in range(len(whole))):
        return None
    position = min(fitting, key=lambda p: (-fitting[p], p))
    sizes = [size for size, weights in enumerate(whole) if weights[position] is not None]
    return next((size for size in sizes if reading[size]), sizes[0]), position


def _read(
    texts: Sequence[str], embedder: WindowEmbedder, calls: list[dict[str, Any]], reading: list[list[int]], dim: int
) -> list[_Reading]:
    """One `embed_document_windows` call per window size for the documents `reading` names at it (none: no call)."""
    return [
        _Reading(size, positions, _embedded(embedder, [texts[p] for p in positions], calls[size], dim))
        for size, positions in enumerate(reading)
        if positions
    ]


def _compared(pooled: np.ndarray, readings: list[_Reading], whole: list[list[Any]], own: list[bool]) -> tuple[int, int]:
    """(compared, disagreeing): the given vectors compared with the embedder's own for the same text, from the
    documents read whose pooled vector a call gave again (one window of the whole text at its size and in the
    embedder's own pass, or any document of a call that cuts the embedder's own windows), and how many of them have
    a cosine below `AGREEMENT`."""
    reference: dict[int, np.ndarray] = {}
    for part in readings:
        for row, position in enumerate(part.positions):
            if position not in reference and (own[part.size] or whole[part.size][position] is not None):
                reference[position] = part.windows.pooled[row]
    if not reference:
        return 0, 0
    rows = sorted(reference)
    mine = np.stack([reference[row] for row in rows]).astype(np.float64)
    given = pooled[rows].astype(np.float64)
    agreement = np.sum(mine * given, axis=1)
    norms = np.linalg.norm(given, axis=1) * np.linalg.norm(mine, axis=1)
    return len(rows), int(np.sum(agreement < AGREEMENT * np.maximum(norms, 1e-12)))


def _given_windows(
    texts: Sequence[str], pooled: np.ndarray, positions: list[int], weights: list[Any]
) -> DocumentWindows:
    """The documents at `positions` as the one window their given vector is: L2-normalised (as window vectors
    are), the span of the whole text, the weight the embedder gives that window."""
    vectors = pooled[positions].astype(np.float64)
    vectors = (vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)).astype(np.float32)
    spans = np.zeros((len(positions), 2), dtype=np.int64)
    spans[:, 1] = [len(texts[p]) for p in positions]
    owners = np.arange(len(positions), dtype=np.int64)
    return DocumentWindows(vectors, vectors, owners, spans, np.asarray([weights[p] for p in positions], np.int64))


def _assembled(pooled: np.ndarray, parts: list[tuple[list[int], DocumentWindows]]) -> DocumentWindows:
    """One window size's windows of every document, in order, from parts that each hold some documents (their
    positions in the batch, and their windows in that order)."""
    owners = np.concatenate([np.asarray(positions, dtype=np.int64)[windows.owners] for positions, windows in parts])
    order = np.argsort(owners, kind="stable")  # each document's windows stay in their order
    return DocumentWindows(
        pooled,
        np.concatenate([windows.vectors for _, windows in parts])[order],
        owners[order],
        np.concatenate([windows.spans for _, windows in parts])[order],
        np.concatenate([windows.weights for _, windows in parts])[order],
    )


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
