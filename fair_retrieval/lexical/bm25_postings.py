"""Lucene's BM25 scored from postings at query time, so a write changes only what it wrote: `BM25Postings`.

bm25s (what `LexicalIndex` scored with before) computes every (word, text) score when it indexes a corpus; the
scores depend on the corpus's size, each word's document frequency and the average length, so one added text
changes them all and the index is rebuilt. Here the index keeps what does not change, each text's term counts and
length, and computes the score of the query's words when asked, as Lucene does:

    score(text) = Σ over the query's words (each as often as it is asked) of
                  idf(word) · tf / (tf + k1 · (1 − b + b · length / avgdl)),
    idf(word) = ln(1 + (N − df + 0.5) / (df + 0.5))

with N, df and avgdl those of the live texts (bm25s's "lucene" variant: the same scores, up to float rounding).

Texts are rows, numbered as they come. A write appends rows (their counts wait in a pending list) or marks rows
dead (their counts leave df, N and the total length at once); a search first freezes the pending rows into a
segment (postings sorted by word, then row), merging it with the last segment while that one is at most twice its
size, so there are O(log n) segments and each row is merged O(log n) times. The owner of the index rebuilds it when
dead rows outnumber live ones (`dead_share`), which also lets go of their postings.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["BM25Postings"]


@dataclass(frozen=True)
class _Segment:
    """Postings of some rows: for each word (ascending) its rows (ascending) and term counts."""

    words: np.ndarray  # (W,) int64, ascending
    starts: np.ndarray  # (W + 1,) int64: word i's postings are [starts[i], starts[i + 1])
    rows: np.ndarray  # (P,) int64
    counts: np.ndarray  # (P,) float64

    @staticmethod
    def of(words: np.ndarray, rows: np.ndarray, counts: np.ndarray) -> _Segment:
        order = np.lexsort((rows, words))
        words, rows, counts = words[order], rows[order], counts[order]
        unique, first = np.unique(words, return_index=True)
        return _Segment(unique, np.r_[first, len(words)].astype(np.int64), rows, counts)

    @property
    def size(self) -> int:
        return len(self.rows)

    def postings(self, word: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows holding `word` and its counts there (empty arrays when none does)."""
        at = int(np.searchsorted(self.words, word))
        if at == len(self.words) or self.words[at] != word:
            return self.rows[:0], self.counts[:0]
        return self.rows[self.starts[at] : self.starts[at + 1]], self.counts[self.starts[at] : self.starts[at + 1]]

    def merged(self, other: _Segment, alive: np.ndarray) -> _Segment:
        """One segment of both, without the dead rows' postings."""
        words = np.concatenate([np.repeat(s.words, np.diff(s.starts)) for s in (self, other)])
        rows = np.concatenate([self.rows, other.rows])
        counts = np.concatenate([self.counts, other.counts])
        live = alive[rows]
        return _Segment.of(words[live], rows[live], counts[live])


class BM25Postings:
    """Lucene's BM25 over rows of token ids, added and removed one text at a time (see the module docstring).

    Args:
        k1: term-frequency saturation.
        b: length normalisation.
    """

    def __init__(self, k1: float, b: float) -> None:
        self.k1, self.b = float(k1), float(b)
        self._lengths = np.zeros(64, dtype=np.float64)  # row → its number of tokens
        self._owners = np.zeros(64, dtype=np.int64)  # row → the id of the record it is a text of
        self._alive = np.zeros(64, dtype=bool)
        self._rows = 0  # rows handed out
        self._df = np.zeros(64, dtype=np.int64)  # word → live rows holding it
        self._live = 0
        self._total = 0.0  # live rows' tokens
        self._pending: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []  # (words, rows, counts) not in a segment
        self._segments: list[_Segment] = []

    @property
    def dead_share(self) -> float:
        """Dead rows per live row (what says a rebuild would let go of more than it keeps)."""
        return (self._rows - self._live) / max(self._live, 1)

    def add(self, tokens: np.ndarray, owner: int) -> int:
        """Add one text (its token ids) of the record `owner`; returns its row."""
        return int(self.add_many([tokens], [owner])[0])

    def add_many(self, texts: Sequence[np.ndarray], owners: Sequence[int]) -> np.ndarray:
        """Add texts (each its token ids) of the records `owners` (one each), as `add` does one by one but counted
        in one pass over all their tokens; returns their rows."""
        count = len(texts)
        first = self._rows
        rows = np.arange(first, first + count, dtype=np.int64)
        lengths = np.fromiter((len(text) for text in texts), dtype=np.int64, count=count)
        self._lengths = _grown(self._lengths, first + count)
        self._owners = _grown(self._owners, first + count)
        self._alive = _grown(self._alive, first + count)
        self._lengths[rows], self._owners[rows], self._alive[rows] = lengths, owners, True
        self._rows += count
        self._live += count
        self._total += float(lengths.sum())
        if lengths.sum():
            words = np.concatenate([np.asarray(text, dtype=np.int64) for text in texts])
            width = int(words.max()) + 1
            pairs, counts = np.unique(np.repeat(rows, lengths) * width + words, return_counts=True)  # (row, word)
            held_rows, held_words = np.divmod(pairs, width)
            self._df = _grown(self._df, width)
            self._df[:width] += np.bincount(held_words, minlength=width)
            self._pending.append((held_words, held_rows, counts.astype(np.float64)))
        return rows

    def remove(self, row: int, tokens: np.ndarray) -> None:
        """Remove a live row (`tokens`: the token ids it was added with)."""
        self._alive[row] = False
        words = np.unique(tokens)
        self._df[words] -= 1
        self._live -= 1
        self._total -= len(tokens)

    def scores(self, query: Sequence[int]) -> tuple[np.ndarray, np.ndarray]:
        """(owners, scores) of the live rows holding at least one of the query's word ids (each counted as often as
        it is asked), one pair a row, rows ascending (a record of several texts appears once for each that holds
        one)."""
        self._freeze()
        if not self._live or self._total <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        words, asked = np.unique(np.asarray(query, dtype=np.int64), return_counts=True)
        avgdl = self._total / self._live
        found_rows, found_scores = [], []
        for word, times in zip(words.tolist(), asked.tolist(), strict=True):
            df = int(self._df[word]) if word < len(self._df) else 0
            if df <= 0:
                continue
            idf = np.log(1.0 + (self._live - df + 0.5) / (df + 0.5))
            for segment in self._segments:
                rows, counts = segment.postings(word)
                live = self._alive[rows]
                rows, counts = rows[live], counts[live]
                norm = self.k1 * (1.0 - self.b + self.b * self._lengths[rows] / avgdl)  # (n,)
                found_rows.append(rows)
                found_scores.append(times * idf * counts / (counts + norm))
        if not found_rows:
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        # summed per row over a dense array of every row: linear, no sort (a Lucene score is > 0 for a held word)
        summed = np.bincount(np.concatenate(found_rows), weights=np.concatenate(found_scores), minlength=self._rows)
        rows = np.flatnonzero(summed > 0)
        return self._owners[rows], summed[rows]

    def _freeze(self) -> None:
        """Put the pending rows into a segment, merging the last segments while the older is at most twice the
        newer's size."""
        if not self._pending:
            return
        words = np.concatenate([words for words, _, _ in self._pending])
        rows = np.concatenate([rows for _, rows, _ in self._pending])
        counts = np.concatenate([counts for _, _, counts in self._pending])
        self._pending = []
        self._segments.append(_Segment.of(words.astype(np.int64), rows, counts))
        while len(self._segments) > 1 and self._segments[-2].size <= 2 * self._segments[-1].size:
            newer = self._segments.pop()
            self._segments[-1] = self._segments[-1].merged(newer, self._alive)


def _grown(array: np.ndarray, size: int) -> np.ndarray:
    """`array`, or a copy at least twice as long (zero-filled) when it is shorter than `size`."""
    if len(array) >= size:
        return array
    grown = np.zeros(max(size, 2 * len(array)), dtype=array.dtype)
    grown[: len(array)] = array
    return grown
