"""Windows of several sizes from one model pass: the smaller windows read from the largest windows' token states.

A multi-vector store keeps every document as its windows at several sizes (the whole window and half of it, by
default), and embedding each size by its own pass reads every token once per size. Here only the windows of the
largest size run through the model; the vector of a smaller window is the mean of the largest pass's token states
over the smaller window's text (as late chunking pools chunk vectors from one pass over a long text), run through
whatever modules follow the model's pooling (e.g. a Dense layer) and L2-normalised.

Which token states a smaller window reads (its span is a character span of its document; a token belongs to it when
the token starts inside that span):

- a smaller window with the span of a window already kept for its document (a text that fits a smaller window, or a
  smaller window that happens to equal a larger one) is that window, kept once, as `merged_passes` keeps it;
- a smaller window that lies inside one large window is read from that window's states; inside several (both sides
  of an overlap), from the one in which it sits farthest from an edge (the most context on both sides; the earlier
  one on a tie);
- a smaller window that straddles two large windows is read from both: consecutive large windows split the text
  they share at its middle, and each token is read from the window on its side of that middle (the one in which it
  has more context), so every token of the smaller window counts once and its whole text is represented.

Only the smaller window's own tokens are averaged: not the special tokens ([CLS], [SEP]) nor the prompt, which the
large window's pass reads once for all of its text. A mean of token states has a meaning for a part of a text;
the state of one pooling token (cls or last pooling) does not, so one pass is for mean-pooled embedders only.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np
import torch

from fair_retrieval.embedding.windows import DocumentPlan, merged_rows
from fair_retrieval.validate import is_positive_int

__all__ = ["SpanReader", "WindowLayout", "multiscale_sizes", "read_segments", "window_layout"]


def multiscale_sizes(window_tokens: object) -> tuple[int, ...]:
    """The window sizes of a one-pass call, checked: positive ints, largest first, no size twice.

    Why: the first size is the one the model reads; every later one is read from it, so it must be smaller.

    Raises:
        TypeError: when `window_tokens` is not a sequence (a list or tuple) of sizes.
        ValueError: for an empty sequence, a size that is not a positive int, or sizes not strictly descending.
    """
    if isinstance(window_tokens, (str, bytes)) or not isinstance(window_tokens, Sequence):
        raise TypeError(
            f"window_tokens must be a list or tuple of window sizes, largest first (e.g. (510, 255)), got "
            f"{type(window_tokens).__name__}."
        )
    sizes = tuple(window_tokens)
    if not sizes or not all(is_positive_int(n) for n in sizes):
        raise ValueError(f"window_tokens must be one or more positive ints, got {window_tokens!r}.")
    if any(later >= earlier for earlier, later in itertools.pairwise(sizes)):
        raise ValueError(
            f"window_tokens must be strictly descending (the largest size is the pass the others are read from), "
            f"got {window_tokens!r}."
        )
    return sizes


class Segment(NamedTuple):
    """Part of a smaller window read from one large window: the tokens of `piece` that start in [start, end)."""

    piece: int
    start: int
    end: int


def read_segments(span: tuple[int, int], windows: Sequence[tuple[int, int, int]]) -> list[Segment]:
    """Where a smaller window's tokens are read (the rules of the module docstring).

    Args:
        span: the smaller window's character span [start, end) in its document.
        windows: the document's large windows as (piece index, start, end), in text order.

    Returns:
        One segment (the window lies inside a large window) or several (it straddles), in text order.
    """
    start, end = span
    holding = [
        (min(start - first, last - end), -order, piece)
        for order, (piece, first, last) in enumerate(windows)
        if first <= start and end <= last
    ]
    if holding:
        return [Segment(max(holding)[2], start, end)]  # the most context; the earlier window on a tie
    # each pair of consecutive windows splits the text they share (or the gap between them) at its middle
    cuts = [(following[1] + previous[2]) // 2 for previous, following in itertools.pairwise(windows)]
    cuts = list(np.maximum.accumulate(cuts)) if cuts else []
    bounds = [0, *(int(c) for c in cuts), max(end, windows[-1][2])]
    segments = []
    for order, (piece, first, last) in enumerate(windows):
        low, high = max(start, bounds[order], first), min(end, bounds[order + 1], last)
        if low < high:
            segments.append(Segment(piece, low, high))
    return segments


@dataclass(frozen=True)
class WindowLayout:
    """The windows of a one-pass call in `merged_passes`' layout, and where each comes from.

    Attributes:
        owners: int64 (W,), each kept window's document, sorted (each document's windows together).
        spans: int64 (W, 2), each kept window's character span in its document.
        weights: int64 (W,), each kept window's content tokens.
        pieces: int64 (W,), for a window of the largest size its piece in the large plan, else -1.
        reads: int64 (W,), for a smaller window its index in `segments`, else -1.
        segments: for each smaller window read from the pass, where its tokens are read.
    """

    owners: np.ndarray
    spans: np.ndarray
    weights: np.ndarray
    pieces: np.ndarray
    reads: np.ndarray
    segments: list[list[Segment]] = field(default_factory=list)

    @property
    def straddling(self) -> int:
        """Smaller windows read from more than one large window."""
        return sum(len(parts) > 1 for parts in self.segments)


def window_layout(large: DocumentPlan, smaller: Sequence[DocumentPlan]) -> WindowLayout:
    """The kept windows of `large` and `smaller` (plans of the same texts), laid out as `merged_passes` lays out
    one pass per plan: every plan's windows in plan order, a window whose (document, span) was already kept dropped,
    then stably sorted by document.

    Args:
        large: the plan of the largest windows (the pieces the model reads).
        smaller: the plans of the smaller sizes, in the order of the sizes.
    """
    plans = [large, *smaller]
    owners = np.concatenate([np.asarray(p.owners, dtype=np.int64) for p in plans])  # (all windows,)
    spans = np.concatenate([np.asarray(p.spans, dtype=np.int64).reshape(-1, 2) for p in plans])  # (all windows, 2)
    weights = np.concatenate([np.asarray(p.weights, dtype=np.int64) for p in plans])  # (all windows,)
    count = len(large.pieces)
    keep, order = merged_rows(owners, spans)
    windows_of: dict[int, list[tuple[int, int, int]]] = {}
    for piece, (owner, (start, end)) in enumerate(zip(large.owners, large.spans, strict=True)):
        windows_of.setdefault(owner, []).append((piece, start, end))
    pieces = np.full(len(owners), -1, dtype=np.int64)
    pieces[:count] = np.arange(count)
    reads = np.full(len(owners), -1, dtype=np.int64)
    segments: list[list[Segment]] = []
    for row in (np.flatnonzero(keep[count:]) + count).tolist():
        reads[row] = len(segments)
        first, last = spans[row].tolist()
        segments.append(read_segments((first, last), windows_of[int(owners[row])]))
    return WindowLayout(
        owners[keep][order], spans[keep][order], weights[keep][order], pieces[keep][order], reads[keep][order], segments
    )


class SpanReader:
    """Sums the large pass's token states over each smaller window's tokens, batch by batch.

    Built before the pass from each large piece's tokens (their character starts in the document); `read` takes each
    batch's token states as the model produced them (calibrated, with positional scaling, as the large windows'),
    and `means` gives every smaller window's mean state once all batches are read.

    Args:
        segments: for each smaller window, where its tokens are read (`WindowLayout.segments`).
        token_ids: for each large piece, its token ids as the model reads it (prompt and special tokens included).
        token_starts: for each large piece, int64 (tokens,), each token's first character in the document; -1 for
            special and prompt tokens, which no smaller window reads.
    """

    def __init__(
        self,
        segments: Sequence[Sequence[Segment]],
        token_ids: Sequence[Sequence[int]],
        token_starts: Sequence[np.ndarray],
    ) -> None:
        self._ids = [list(ids) for ids in token_ids]
        # piece → (windows, tokens) it gives: the smaller windows' indices and the token indices they read in it
        reads: dict[int, tuple[list[int], list[int]]] = {}
        for window, parts in enumerate(segments):
            for piece, start, end in parts:
                starts = token_starts[piece]
                tokens = np.flatnonzero((starts >= start) & (starts < end))
                targets, positions = reads.setdefault(piece, ([], []))
                targets += [window] * len(tokens)
                positions += tokens.tolist()
        self._reads = reads
        self._count = len(segments)
        self._tokens = np.bincount(
            np.concatenate([np.asarray(t, dtype=np.int64) for t, _ in reads.values()] or [np.zeros(0, np.int64)]),
            minlength=self._count,
        )  # (windows,) tokens each smaller window reads
        if self._count and self._tokens.min() == 0:
            raise RuntimeError("A smaller window covers no token of the large windows' tokenization.")
        self._sums: torch.Tensor | None = None  # (windows, hidden), float32, made at the first batch

    def read(self, pieces: Sequence[int], features: Mapping[str, Any]) -> None:
        """Add one batch's token states to the sums of the smaller windows that read them.

        Args:
            pieces: the large piece of each row of the batch.
            features: the model's output for the batch: "token_embeddings" (B, L, h) and "attention_mask" (B, L),
                and the "input_ids" (B, L) it read, checked against the tokenization the reads were planned on.

        Raises:
            RuntimeError: when the batch's tokens are not those the reads were planned on.
        """
        states = features["token_embeddings"]  # (B, L, h)
        mask = features["attention_mask"].bool()  # (B, L), True for real tokens (either padding side)
        ids = features["input_ids"]  # (B, L)
        if self._sums is None:
            self._sums = torch.zeros((self._count, states.shape[-1]), dtype=torch.float32, device=states.device)
        targets: list[int] = []
        rows: list[int] = []
        columns: list[int] = []
        for row, piece in enumerate(pieces):
            real = mask[row].nonzero(as_tuple=True)[0]  # (tokens,) positions of the row's real tokens, in order
            if ids[row, real].tolist() != self._ids[piece]:
                raise RuntimeError(
                    "The tokens the model read for a window are not those its smaller windows were planned on "
                    "(a preprocessing this one-pass reading does not follow); embed each window size by its own "
                    "embed_document_windows call instead."
                )
            window_targets, positions = self._reads.get(piece, ([], []))
            targets += window_targets
            rows += [row] * len(positions)
            columns += real[positions].tolist() if positions else []
        if not targets:
            return
        device = states.device
        picked = states[torch.tensor(rows, device=device), torch.tensor(columns, device=device)]  # (n, h)
        self._sums.index_add_(0, torch.tensor(targets, device=device), picked.float())

    def means(self) -> torch.Tensor:
        """(windows, h) float32: each smaller window's mean token state."""
        if self._sums is None:
            raise RuntimeError("SpanReader.means() before any batch was read.")
        counts = torch.as_tensor(self._tokens, dtype=torch.float32, device=self._sums.device)  # (windows,)
        return self._sums / counts[:, None]
