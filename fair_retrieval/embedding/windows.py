"""Token windows: how a document longer than the model's window is cut, and how its window vectors become one.

A model reads at most `max_length` tokens; a longer document is truncated, and whatever sits past the window is
never embedded (the position bias users meet most often). With `long_documents="windows"` the document's content
tokens are cut into windows that each fit the model, every window is embedded as a text of its own, and the
window vectors are combined into one L2-normalised vector: their mean weighted by the tokens each window holds.

This module holds the steps around the model: the `DocumentPlan` of the pieces a list of documents becomes under
either policy, whether windows can be cut for a model and window, where to cut (at word starts, re-checked against
the tokenizer), and how to combine; `FairEmbedder` tokenizes and runs the model in between.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

import numpy as np

from fair_retrieval.validate import is_int, is_positive_int

LongDocuments = Literal["truncate", "windows"]
"""What happens to a document longer than the window: cut off ("truncate") or split and pooled ("windows")."""


class WindowPiece(NamedTuple):
    """One window of a document: its text, its content tokens and where it sits in the document.

    Attributes:
        text: the window's text (`document[start:end]`).
        tokens: its content tokens (the weight of its vector in the document's mean).
        start: character offset of the window's first character in the document.
        end: character offset just past its last character.
    """

    text: str
    tokens: int
    start: int
    end: int


@dataclass(frozen=True)
class DocumentPlan:
    """What the model will read for a list of documents: the pieces (whole texts or their windows) and their owners.

    Attributes:
        pieces: the texts run through the model, one per window (a text that fits is its own single window).
        owners: for each piece, the index of the document it belongs to.
        weights: for each piece, its content tokens (the weight of its vector in the document's mean).
        tokens: for each document, its tokens as the model sees them (prompt and special tokens included).
        cut_tokens: for each document, the content tokens that are never embedded (past the window, when truncated).
        spans: for each piece, its character span [start, end) in its document (a text that is its own piece:
            the whole text, also when the model reads only its start because it is truncated).
    """

    pieces: list[str]
    owners: list[int]
    weights: list[int]
    tokens: list[int]
    cut_tokens: list[int]
    spans: list[tuple[int, int]]

    @property
    def windowed(self) -> int:
        """Documents split into two or more windows."""
        counts = np.bincount(np.asarray(self.owners, dtype=np.int64), minlength=len(self.tokens))
        return int((counts > 1).sum())

    @property
    def truncated(self) -> int:
        """Documents whose end is cut off (never embedded)."""
        return sum(n > 0 for n in self.cut_tokens)

    @classmethod
    def truncating(cls, texts: list[str], lengths: list[int], max_length: int, overhead: int) -> DocumentPlan:
        """Every text is its own piece, cut off at `max_length` tokens (`long_documents="truncate"`).

        Args:
            texts: the documents.
            lengths: their tokens as the model sees them (prompt and special tokens included).
            max_length: the model's window.
            overhead: the prompt and special tokens of a window (`max_length` minus its content tokens).
        """
        cut = [max(0, n - max_length) for n in lengths]
        kept = [min(n, max_length) - overhead for n in lengths]
        spans = [(0, len(text)) for text in texts]
        return cls(list(texts), list(range(len(texts))), kept, lengths, cut, spans)

    @classmethod
    def windowing(
        cls, texts: list[str], lengths: list[int], windows: Mapping[int, list[WindowPiece]], overhead: int
    ) -> DocumentPlan:
        """The documents in `windows` (index → its windows) become their windows, every other document its own
        single piece (`long_documents="windows"`); arguments as in `truncating`."""
        pieces: list[str] = []
        owners: list[int] = []
        weights: list[int] = []
        spans: list[tuple[int, int]] = []
        for i, text in enumerate(texts):
            for piece in windows.get(i, [WindowPiece(text, lengths[i] - overhead, 0, len(text))]):
                pieces.append(piece.text)
                owners.append(i)
                weights.append(max(1, piece.tokens))
                spans.append((piece.start, piece.end))
        return cls(pieces, owners, weights, lengths, [0] * len(texts), spans)


@dataclass(frozen=True)
class DocumentWindows:
    """Documents embedded window by window, with the vector of each window kept (`FairEmbedder.embed_document_windows`).

    A multi-vector store keeps `vectors` and scores a document by its windows; `pooled` is what
    `embed_documents` returns for the same texts (from the same pass), so nothing is embedded twice.

    Attributes:
        pooled: float32 (n, d), one L2-normalised vector per document: the token-weighted mean of its windows.
        vectors: float32 (W, d), one L2-normalised vector per window, the windows of document 0 first, in order.
        owners: int64 (W,), the document (0 ≤ i < n) each window belongs to.
        spans: int64 (W, 2), each window's character span [start, end) in its document.
        weights: int64 (W,), each window's content tokens (its weight in `pooled`).
    """

    pooled: np.ndarray
    vectors: np.ndarray
    owners: np.ndarray
    spans: np.ndarray
    weights: np.ndarray

    def __post_init__(self) -> None:
        count = self.vectors.shape[0]
        if self.vectors.ndim != 2 or self.pooled.ndim != 2 or self.pooled.shape[1] != self.vectors.shape[1]:
            raise ValueError(
                f"DocumentWindows needs (n, d) pooled and (W, d) window vectors, got {self.pooled.shape} and "
                f"{self.vectors.shape}."
            )
        if self.owners.shape != (count,) or self.spans.shape != (count, 2) or self.weights.shape != (count,):
            raise ValueError(
                f"DocumentWindows: {count} window vectors need {count} owners, spans and weights; got "
                f"{self.owners.shape}, {self.spans.shape} and {self.weights.shape}."
            )
        documents = self.pooled.shape[0]
        if count and (self.owners.min() < 0 or self.owners.max() >= documents or np.any(np.diff(self.owners) < 0)):
            raise ValueError(f"DocumentWindows: owners must be sorted document indices in [0, {documents}).")
        if len(np.unique(self.owners)) != documents:
            raise ValueError("DocumentWindows: every document needs at least one window.")

    def __len__(self) -> int:
        return int(self.pooled.shape[0])

    @property
    def dim(self) -> int:
        """The vector size."""
        return int(self.vectors.shape[1])

    def of(self, document: int) -> slice:
        """The rows of `vectors` (and owners, spans, weights) that belong to one document."""
        start, end = np.searchsorted(self.owners, [document, document + 1])
        return slice(int(start), int(end))

    def select(self, documents: Sequence[int]) -> DocumentWindows:
        """The windows of some documents (indices into this batch), renumbered 0.. in the order given."""
        rows = [np.arange(self.of(i).start, self.of(i).stop) for i in documents]
        index = np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)
        owners = np.concatenate([np.full(len(r), j, dtype=np.int64) for j, r in enumerate(rows)]) if rows else index
        return DocumentWindows(
            self.pooled[list(documents)], self.vectors[index], owners, self.spans[index], self.weights[index]
        )

    @classmethod
    def single(cls, vectors: np.ndarray, lengths: Sequence[int]) -> DocumentWindows:
        """Documents that are their own single window: `vectors` (n, d) whole texts of `lengths` characters
        (vectors computed elsewhere, e.g. given to a store as they are)."""
        count = vectors.shape[0]
        spans = np.zeros((count, 2), dtype=np.int64)
        spans[:, 1] = np.asarray(lengths, dtype=np.int64)
        return cls(vectors, vectors, np.arange(count, dtype=np.int64), spans, np.ones(count, dtype=np.int64))


def merged_rows(owners: np.ndarray, spans: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """How the windows of several passes over the same texts merge (rows concatenated in pass order): which rows
    are kept and in what order.

    A row whose (document, span) an earlier row already has is the same text read the same way (a text that fits
    windows of two sizes), so it is dropped; the kept rows are then stably sorted by document, so each document's
    windows sit together in pass order. The one rule of `fair_retrieval.stores.store_mode.merged_passes` and of the
    one-pass layout (`fair_retrieval.embedding.one_pass`).

    Args:
        owners: int (W,), the document of each row.
        spans: int (W, 2), each row's character span.

    Returns:
        keep: bool (W,), the rows kept; order: int (kept,), the kept rows' order (indices into `rows[keep]`).
    """
    seen: set[tuple[int, int, int]] = set()
    keep = np.ones(len(owners), dtype=bool)
    for row, (owner, (start, end)) in enumerate(zip(owners.tolist(), spans.tolist(), strict=True)):
        keep[row] = (owner, start, end) not in seen
        seen.add((owner, start, end))
    return keep, np.argsort(owners[keep], kind="stable")


def window_spans(num_tokens: int, capacity: int, overlap: int) -> list[tuple[int, int]]:
    """Token spans [start, end) of the windows that cover `num_tokens` content tokens.

    The fewest windows of at most `capacity` tokens whose consecutive windows share exactly `overlap` tokens,
    with equal sizes (within one token), so no window is a short remnant whose vector is mostly noise.

    Args:
        num_tokens: content tokens of the document (no special tokens, no prompt).
        capacity: the most content tokens one window may hold (window minus special and prompt tokens).
        overlap: tokens consecutive windows share, 0 ≤ overlap < capacity.

    Raises:
        ValueError: for a capacity < 1 or an overlap outside [0, capacity).
    """
    if capacity < 1:
        raise ValueError(f"A window must hold at least one content token, got capacity={capacity}.")
    if not 0 <= overlap < capacity:
        raise ValueError(f"window_overlap must lie in [0, {capacity}) tokens for this window, got {overlap}.")
    if num_tokens <= capacity:
        return [(0, num_tokens)]
    count = math.ceil((num_tokens - overlap) / (capacity - overlap))
    covered = num_tokens + (count - 1) * overlap  # tokens of all windows together: ≤ count · capacity
    size, longer = divmod(covered, count)
    spans, start = [], 0
    for i in range(count):
        end = start + size + (1 if i < longer else 0)
        spans.append((start, end))
        start = end - overlap
    return spans


def word_starts(text: str, offsets: Sequence[tuple[int, int]]) -> list[bool]:
    """For each token (character offsets into `text`), whether it begins a word: a window may start there without
    cutting a word in two (a cut inside a word re-tokenizes differently, e.g. "##ble" becomes "ble")."""
    starts = []
    for j, (begin, _) in enumerate(offsets):
        after_gap = j == 0 or begin > offsets[j - 1][1]
        starts.append(after_gap or (begin < len(text) and text[begin].isspace()))
    return starts


def snap_to_words(spans: list[tuple[int, int]], starts: Sequence[bool], margin: int) -> list[tuple[int, int]]:
    """Move every window start back (by at most `margin` tokens) to a token that begins a word.

    A window then grows by at most `margin` tokens at its front, and with no overlap the window before it ends
    where it now starts, so consecutive windows still meet exactly. Where no word starts within `margin` tokens
    (a very long word or URL), the token boundary is kept.
    """
    snapped: list[tuple[int, int]] = []
    for i, (start, end) in enumerate(spans):
        new_start = start
        for candidate in range(start, max(start - margin, 0) - 1, -1):
            if starts[candidate]:
                new_start = candidate
                break
        if i and spans[i - 1][1] == start:  # no overlap: the previous window ends where this one now starts
            snapped[-1] = (snapped[-1][0], new_start)
        snapped.append((new_start, end))
    return snapped


def fitting_windows(
    text: str,
    offsets: Sequence[tuple[int, int]],
    capacity: int,
    overlap: int,
    max_length: int,
    token_lengths: Callable[[list[str]], list[int]],
) -> list[WindowPiece]:
    """`text` cut into windows (text, content tokens, character span) that each fit `max_length` tokens once
    re-tokenized.

    Windows start at word starts where one lies close by, so a word is not cut in two; a window text that
    re-tokenizes to more tokens than its span had shrinks every window by the excess, and the cut is tried again.

    Args:
        text: the document.
        offsets: character offsets of its content tokens (its tokenization without special tokens).
        capacity: the most content tokens one window holds (`FairEmbedder.window_content_tokens`).
        overlap: tokens consecutive windows share (at most half a window).
        max_length: the model's window in tokens, prompt and special tokens included.
        token_lengths: tokens of each text as the model sees it (`FairEmbedder.token_lengths`).
    """
    starts = word_starts(text, offsets)
    while True:
        margin = min(16, capacity // 8)  # room to move a window's start back to the start of a word
        spans = window_spans(len(offsets), capacity - margin, min(overlap, (capacity - margin) // 2))
        spans = snap_to_words(spans, starts, margin)
        pieces = [
            WindowPiece(
                text[offsets[start][0] : offsets[end - 1][1]], end - start, offsets[start][0], offsets[end - 1][1]
            )
            for start, end in spans
        ]
        longest = max(token_lengths([piece.text for piece in pieces]))
        if longest <= max_length or capacity <= 1:
            return pieces
        capacity -= longest - max_length  # a piece re-tokenized to more tokens than it had


def check_window_settings(capacity: int, overlap: int, max_length: int, fast_tokenizer: bool, model_name: str) -> None:
    """Fail now, not at the first long document, when windows cannot be cut for this model and window.

    Args:
        capacity: content tokens one window holds (`max_length` minus the prompt and special tokens).
        overlap: the asked-for `window_overlap`.
        max_length: the model's window in tokens.
        fast_tokenizer: whether the tokenizer gives token offsets (a fast tokenizer), which cutting needs.
        model_name: how the model is named in the error.

    Raises:
        ValueError: for a window with no room for content, an overlap over half a window, or a slow tokenizer.
    """
    if capacity < 1:
        raise ValueError(
            f"max_length={max_length} leaves no room for content after the prompt and special tokens; raise max_length."
        )
    if overlap > capacity // 2:
        raise ValueError(
            f"window_overlap={overlap} must be at most half of the {capacity} content tokens of a "
            f"window (max_length={max_length}), i.e. ≤ {capacity // 2}; use a smaller overlap."
        )
    if not fast_tokenizer:
        raise ValueError(
            f"long_documents='windows' cuts documents at token offsets, which {model_name}'s slow "
            "tokenizer does not give; use a model with a fast tokenizer or long_documents='truncate'."
        )


def pool_windows(vectors: np.ndarray, owners: Sequence[int], weights: Sequence[float], count: int) -> np.ndarray:
    """Combine window vectors into one L2-normalised vector per document: the token-weighted mean.

    Args:
        vectors: (W, d) float32, one L2-normalised row per window.
        owners: length W, the document index (0 ≤ i < count) each window belongs to.
        weights: length W, each window's weight (its content tokens).
        count: number of documents; every index in [0, count) must own at least one window.

    Returns:
        (count, d) float32, L2-normalised rows.
    """
    owner_index = np.asarray(owners, dtype=np.int64)
    weighted = vectors.astype(np.float64) * np.asarray(weights, dtype=np.float64)[:, None]  # (W, d)
    pooled = np.zeros((count, vectors.shape[1]), dtype=np.float64)
    np.add.at(pooled, owner_index, weighted)  # (count, d)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.maximum(norms, 1e-12)).astype(np.float32)


DEFAULT_OVERLAP_WORDS = "an eighth of a window"
"""What the default window overlap is, in words (`default_overlap`), for the help and error texts that name it."""


def default_overlap(tokens: int) -> int:
    """The default overlap of windows (and of the model-token splitters' chunks) of `tokens` tokens: an eighth.

    Chosen by the pipelines benchmark's rule on dev data (docs/defaults.md, "Long documents"): with MiniLM's
    254-token windows, 32 tokens of overlap.
    """
    return round(tokens / 8)


def chunk_plan(
    window_tokens: int, chunk_tokens: int | None = None, chunk_overlap: int | None = None
) -> tuple[int, int]:
    """(chunk size, overlap) in model tokens for a splitter feeding an embedder of `window_tokens` content tokens.

    The default chunk is exactly one window, so nothing is windowed or cut; the default overlap is an eighth of
    the chunk (LlamaIndex's and LangChain's defaults overlap 20 % and 5 %), so an answer that straddles a chunk
    boundary is whole in one of the two chunks.

    Raises:
        ValueError: for a chunk size < 1 or an overlap outside [0, chunk size).
    """
    size = window_tokens if chunk_tokens is None else chunk_tokens
    if not is_positive_int(size):
        raise ValueError(f"chunk size must be a positive number of tokens, got {chunk_tokens!r}.")
    overlap = default_overlap(size) if chunk_overlap is None else chunk_overlap
    if not is_int(overlap) or not 0 <= overlap < size:
        raise ValueError(f"chunk overlap must be an int in [0, {size}) tokens, got {chunk_overlap!r}.")
    return size, overlap
