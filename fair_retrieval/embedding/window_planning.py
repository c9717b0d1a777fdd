"""Where a FairEmbedder cuts documents into windows: how many content tokens a window holds, and the plan of the
pieces the model reads (`plan_documents`), for the embedder's own windows or another shape asked for one call.

A mixin of `FairEmbedder` (typed by the `_Planning` protocol of what it reads), kept apart so the embedder's module
holds the model calls and this one the cutting (`windows.fitting_windows`, `boundaries.boundary_windows`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, NamedTuple, Protocol

from fair_retrieval.embedding.boundaries import WindowBoundaries, boundary_windows
from fair_retrieval.embedding.windows import DocumentPlan, LongDocuments, WindowPiece, default_overlap, fitting_windows
from fair_retrieval.inputs import readable_texts
from fair_retrieval.validate import is_positive_int

__all__ = ["WindowPlanning", "WindowSettings"]


class WindowSettings(NamedTuple):
    """How one `embed_document_windows` call cuts documents, its arguments resolved against the embedder's own
    (equal settings: equal windows, whatever the arguments were).

    Attributes:
        tokens: the most content tokens a window holds.
        overlap: the tokens consecutive windows share.
        boundaries: where windows are cut ("text" or "tokens").
        cuts: False when the embedder truncates documents (every document one window, whatever the rest says).
    """

    tokens: int
    overlap: int
    boundaries: WindowBoundaries
    cuts: bool


class _Planning(Protocol):
    max_length: int
    long_documents: LongDocuments
    window_tokens: int | None
    window_overlap: int
    window_boundaries: WindowBoundaries
    _overlap_given: int | None
    _tokenizing: Any

    @property
    def tokenizer(self) -> Any: ...

    @property
    def window_content_tokens(self) -> int: ...

    @property
    def _window_room(self) -> int: ...

    def _token_lengths(self, texts: Sequence[str], task: Literal["query", "document"] = "document") -> list[int]: ...

    def _window_shape(self, window_tokens: int | None) -> tuple[int, int]: ...

    def _plan(
        self, texts: list[str], window_tokens: int | None = None, window_boundaries: WindowBoundaries | None = None
    ) -> DocumentPlan: ...

    def _windows(
        self,
        texts: list[str],
        capacity: int | None = None,
        overlap: int | None = None,
        boundaries: WindowBoundaries | None = None,
    ) -> list[list[WindowPiece]]: ...


class WindowPlanning:
    """The window side of `FairEmbedder` (see the module docstring)."""

    @property
    def window_content_tokens(self: _Planning) -> int:
        """The most content tokens one window holds: `window_tokens`, or (None) all that `max_length` holds after
        the document prompt and special tokens."""
        return self._window_room if self.window_tokens is None else self.window_tokens

    @property
    def _window_room(self: _Planning) -> int:
        """The content tokens `max_length` holds: minus the document prompt and special tokens."""
        return self.max_length - self._token_lengths([""])[0]

    def plan_documents(
        self: _Planning,
        texts: Sequence[str],
        window_tokens: int | None = None,
        window_boundaries: WindowBoundaries | None = None,
    ) -> DocumentPlan:
        """The pieces the model reads for `texts` under this embedder's `long_documents` policy (tokenizes only).

        With "windows", a document with more than `window_content_tokens` content tokens (or `window_tokens`, for
        this call) is cut into windows of at most that many (sharing `window_overlap` tokens), at token boundaries of
        the document's own tokenization or at its paragraph and sentence ends (`window_boundaries`); a document that
        fits is its own single piece, embedded exactly as before.

        Raises:
            TypeError, ValueError: texts that are not a list of str the tokenizer can read (`readable_texts`).
        """
        return self._plan(readable_texts(texts), window_tokens, window_boundaries)

    def _plan(
        self: _Planning,
        texts: list[str],
        window_tokens: int | None = None,
        window_boundaries: WindowBoundaries | None = None,
    ) -> DocumentPlan:
        """`plan_documents` of texts checked already (the embedder's own calls)."""
        lengths = self._token_lengths(texts, "document")
        overhead = self.max_length - self._window_room  # the prompt and special tokens of a text
        if self.long_documents == "truncate":
            return DocumentPlan.truncating(texts, lengths, self.max_length, overhead)
        capacity, overlap = self._window_shape(window_tokens)
        long_ones = _cut_ones(lengths, overhead, capacity)
        cut = self._windows([texts[i] for i in long_ones], capacity, overlap, window_boundaries)
        windows = dict(zip(long_ones, cut, strict=True))
        return DocumentPlan.windowing(texts, lengths, windows, overhead)

    def whole_windows(
        self: _Planning, texts: Sequence[str], window_tokens: Sequence[int | None] = (None,)
    ) -> list[list[int | None]]:
        """For each window size (None: this embedder's own window), each text's weight as the one window of the
        whole text that `embed_document_windows(texts, window_tokens=size)` makes of it, where it makes one (the
        text fits the size, or this embedder truncates documents), else None (it is cut into windows).

        The weight is what that call gives the window (`plan_documents`: its content tokens). Tokenizes each text
        once, whatever the number of sizes; cuts and embeds nothing. Why: a text that is one window at a size is
        read whole there, so its window's vector is its pooled vector (the same at every size where it fits).

        Raises:
            TypeError, ValueError: texts that are not a list of str the tokenizer can read (`readable_texts`);
                `window_tokens` that do not fit, as `embed_document_windows`.
        """
        texts = readable_texts(texts)
        lengths = self._token_lengths(texts, "document")
        overhead = self.max_length - self._window_room
        if self.long_documents == "truncate":
            kept: list[int | None] = list(DocumentPlan.truncating(texts, lengths, self.max_length, overhead).weights)
            return [kept for _ in window_tokens]
        weights = DocumentPlan.windowing(texts, lengths, {}, overhead).weights  # every text as one window
        found: list[list[int | None]] = []
        for size in window_tokens:
            cut = set(_cut_ones(lengths, overhead, self._window_shape(size)[0]))
            found.append([None if i in cut else weight for i, weight in enumerate(weights)])
        return found

    def window_settings(
        self: _Planning, window_tokens: int | None = None, window_boundaries: WindowBoundaries | None = None
    ) -> WindowSettings:
        """The `WindowSettings` of an `embed_document_windows` call with these arguments (none: its own windows).

        Raises:
            ValueError: as `embed_document_windows`, for `window_tokens` that do not fit.
        """
        if self.long_documents == "truncate":
            return WindowSettings(self._window_room, 0, self.window_boundaries, False)
        tokens, overlap = self._window_shape(window_tokens)
        return WindowSettings(tokens, overlap, window_boundaries or self.window_boundaries, True)

    def _window_shape(self: _Planning, window_tokens: int | None) -> tuple[int, int]:
        """(content tokens, overlap) of this embedder's windows, or of windows of `window_tokens` for one call.

        Raises:
            ValueError: for `window_tokens` that is not a positive int or more than `max_length` holds.
        """
        if window_tokens is None:
            return self.window_content_tokens, self.window_overlap
        if not is_positive_int(window_tokens) or window_tokens > self._window_room:
            raise ValueError(
                f"window_tokens must be a positive int of at most {self._window_room} content tokens (what "
                f"max_length={self.max_length} holds), got {window_tokens!r}."
            )
        given = self._overlap_given
        overlap = default_overlap(window_tokens) if given is None else min(given, window_tokens // 2)
        return window_tokens, overlap

    def _windows(
        self: _Planning,
        texts: list[str],
        capacity: int | None = None,
        overlap: int | None = None,
        boundaries: WindowBoundaries | None = None,
    ) -> list[list[WindowPiece]]:
        """Each text cut into windows (text, content tokens, character span) that fit `max_length` once re-tokenized."""
        if not texts:
            return []
        with self._tokenizing:
            encoded = self.tokenizer(
                texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
            )
        capacity = self.window_content_tokens if capacity is None else capacity
        overlap = self.window_overlap if overlap is None else overlap
        limit = self.max_length - self._window_room + capacity  # a window's tokens, prompt and special ones included
        cut = boundary_windows if (boundaries or self.window_boundaries) == "text" else fitting_windows
        return [
            cut(text, offsets, capacity, overlap, limit, self._token_lengths)
            for text, offsets in zip(texts, encoded["offset_mapping"], strict=True)
        ]


def _cut_ones(lengths: Sequence[int], overhead: int, capacity: int) -> list[int]:
    """The documents (indices) a windowing call cuts into windows: more content tokens than a window holds (`lengths`
    are their tokens with the `overhead` of prompt and special tokens)."""
    return [i for i, n in enumerate(lengths) if n - overhead > capacity]
