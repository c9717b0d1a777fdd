"""Windows cut at the text's own boundaries: whole paragraphs, else whole sentences, packed up to the window.

Token windows (`windows.fitting_windows`) are equal spans of tokens: they straddle paragraphs and sentences, so a
window vector often mixes the end of one topic with the start of the next (on forum pages, the end of one post with
the start of an unrelated one). Here a long text is first read as units that never cross a sentence end, each
marked when it opens a paragraph (a blank line or a line break before it), and the units are packed in order into
windows of at most `capacity` content tokens:

- a paragraph that fits a window is never split: when it does not fit the room left, the window closes before it;
- a paragraph longer than a window fills windows sentence by sentence;
- a sentence longer than a window is cut into token pieces (at word starts, as token windows are);
- a text with no boundary at all (no sentence end, no line break) gets exactly the token windows.

Overlap counts whole units: a window starts with the last units of the one before it whose tokens together are at
most `overlap` (none when the first of them is already longer), so an answer that straddles a window edge is whole
in one of them. Spans are character offsets into the text, from a unit's first token to its last token's end, so a
window's text is exactly `text[start:end]` and every character that belongs to a token lies in some window.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Callable, Sequence
from typing import Literal, NamedTuple

from fair_retrieval.embedding.windows import WindowPiece, fitting_windows, snap_to_words, window_spans, word_starts

WindowBoundaries = Literal["text", "tokens"]
"""Where long documents are cut into windows: at paragraph and sentence ends ("text") or at equal token spans
("tokens")."""

_PARAGRAPH = re.compile(r"\n\s*")  # a line break (blank lines included) opens a paragraph
# a sentence ends at . ! ? (or their full-width forms, or a Devanagari danda) and closing quotes or brackets, before
# whitespace; full-width ends need no space after them (Chinese and Japanese write none)
_SENTENCE = re.compile(r"(?<=[.!?…])[\"'’”)\]]*\s+|(?<=[。！？।])\s*")


class _Unit(NamedTuple):
    """A piece of the text that no window splits: its token range [first, last) and whether it opens a paragraph."""

    first: int
    last: int
    paragraph: bool


def boundary_windows(
    text: str,
    offsets: Sequence[tuple[int, int]],
    capacity: int,
    overlap: int,
    max_length: int,
    token_lengths: Callable[[list[str]], list[int]],
) -> list[WindowPiece]:
    """`text` cut into windows of whole paragraphs, else whole sentences, that each fit `max_length` tokens once
    re-tokenized (arguments as in `windows.fitting_windows`; `overlap` is a budget of whole units' tokens).

    A window text that re-tokenizes to more tokens than its units counted (a token merged across a cut) makes every
    window smaller by the excess, and the text is packed again.
    """
    units = _units(text, offsets)
    if len(units) == 1:  # no boundary anywhere: token windows, exactly as long_documents="windows" cuts them
        return fitting_windows(text, offsets, capacity, overlap, max_length, token_lengths)
    starts = word_starts(text, offsets)
    while True:
        pieces = [_piece(text, offsets, first, last) for first, last in _pack(units, starts, capacity, overlap)]
        longest = max(token_lengths([piece.text for piece in pieces]))
        if longest <= max_length or capacity <= 1:
            return pieces
        capacity = max(1, capacity - (longest - max_length))


def _units(text: str, offsets: Sequence[tuple[int, int]]) -> list[_Unit]:
    """The text's sentences as token ranges, in order, each marked when it opens a paragraph.

    A cut falls on the first token that starts at or after a boundary's end; tokens never split, so a boundary
    inside a token (rare: a tokenizer that merges punctuation and the next word) moves to that token's end.
    """
    token_starts = [begin for begin, _ in offsets]
    cuts: dict[int, bool] = {}  # first token of a unit → opens a paragraph
    for match in _SENTENCE.finditer(text):
        cuts.setdefault(bisect.bisect_left(token_starts, match.end()), False)
    for match in _PARAGRAPH.finditer(text):
        cuts[bisect.bisect_left(token_starts, match.end())] = True
    bounds = sorted(c for c in cuts if 0 < c < len(offsets))
    edges = [0, *bounds, len(offsets)]
    return [_Unit(a, b, a == 0 or cuts[a]) for a, b in itertools.pairwise(edges)]


def _pack(units: list[_Unit], starts: Sequence[bool], capacity: int, overlap: int) -> list[tuple[int, int]]:
    """Token ranges [first, last) of the windows: units packed in order (module docstring), long sentences cut."""
    pieces = _fit(units, starts, capacity)
    paragraph_end = _paragraph_ends(pieces)
    windows: list[list[_Unit]] = [[]]
    for i, unit in enumerate(pieces):
        current = windows[-1]
        used = sum(u.last - u.first for u in current)
        whole = paragraph_end[i] - unit.first  # tokens from here to the end of this unit's paragraph
        opens_fitting_paragraph = unit.paragraph and whole <= capacity and used + whole > capacity
        if current and (used + unit.last - unit.first > capacity or opens_fitting_paragraph):
            kept_whole = whole if unit.paragraph and whole <= capacity else unit.last - unit.first
            current = _carried(current, overlap, capacity - kept_whole)
            windows.append(current)
        current.append(unit)
    return [(window[0].first, window[-1].last) for window in windows]


def _fit(units: list[_Unit], starts: Sequence[bool], capacity: int) -> list[_Unit]:
    """Units longer than `capacity` tokens cut into equal token pieces whose starts are moved back to a word start."""
    pieces: list[_Unit] = []
    for unit in units:
        size = unit.last - unit.first
        if size <= capacity:
            pieces.append(unit)
            continue
        margin = min(16, capacity // 8)
        spans = window_spans(size, capacity - margin, 0)
        spans = snap_to_words(spans, starts[unit.first : unit.last], margin)
        pieces += [_Unit(unit.first + a, unit.first + b, unit.paragraph and a == 0) for a, b in spans]
    return pieces


def _paragraph_ends(units: list[_Unit]) -> list[int]:
    """For each unit, the last token (exclusive) of the paragraph it belongs to."""
    ends, end = [0] * len(units), units[-1].last
    for i in range(len(units) - 1, -1, -1):
        ends[i] = end
        if units[i].paragraph:
            end = units[i].first
    return ends


def _carried(window: list[_Unit], overlap: int, room: int) -> list[_Unit]:
    """The last whole units of `window` that the next window starts with: at most `overlap` tokens and `room`."""
    carried: list[_Unit] = []
    budget = min(overlap, room)
    for unit in reversed(window[1:]):  # never the whole window again
        size = unit.last - unit.first
        if size > budget:
            break
        carried.insert(0, unit._replace(paragraph=False))
        budget -= size
    return carried


def _piece(text: str, offsets: Sequence[tuple[int, int]], first: int, last: int) -> WindowPiece:
    start, end = offsets[first][0], offsets[last - 1][1]
    return WindowPiece(text[start:end], last - first, start, end)
