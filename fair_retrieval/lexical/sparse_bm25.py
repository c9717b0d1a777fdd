"""BM25 as sparse vectors, for an engine that scores sparse dot products with IDF itself (Qdrant's IDF modifier).

BM25 (Lucene's variant, what `LexicalIndex` scores with bm25s) is a sum over the query's words of
``idf(word) · tf / (tf + k1 · (1 − b + b · dl / avgdl))``. Split into what each side knows:

- a document's vector holds, for each of its words, ``tf / (tf + k1 · (1 − b + b · dl / avgdl))`` (`document_vector`):
  its term frequency saturated and normalised by its length against the collection's average length;
- a query's vector holds each query word's count (`query_vector`: a word given twice counts twice, as bm25s sums);
- the engine multiplies each matching entry by ``idf = ln(1 + (N − n + 0.5) / (n + 0.5))`` over the documents that
  hold a sparse vector (Qdrant's `Modifier.IDF`, Lucene's formula).

The dot product is then bm25s's score exactly, for the same words, k1, b and average length. Words become indices by
a stable 32-bit hash of their UTF-8 bytes (`word_index`): the same in every process, with no vocabulary to keep; two
words sharing an index (about one pair in 4 billion) would add their scores.

The average length is the collection's when the first documents were written (`average_length`), recorded with the
collection and used for every later write, as Qdrant's own BM25 takes a fixed average length: documents added much
later are normalised against that average, so scores drift from a BM25 index rebuilt over the whole collection as it
grows unlike its start.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

from fair_retrieval.lexical.lexical_index import LexicalSettings

__all__ = ["SPARSE_METHOD", "average_length", "check_sparse_settings", "document_vector", "query_vector", "word_index"]

SPARSE_METHOD = "lucene"
"""The one BM25 variant whose document side is independent of the query: Lucene's (bm25s's default)."""


def check_sparse_settings(settings: LexicalSettings, store: str) -> None:
    """Refuse lexical settings a sparse-vector BM25 cannot score as `LexicalIndex` does.

    Raises:
        ValueError: another BM25 variant than Lucene's, or `windows=True` (a document scored by its best window).
    """
    if settings.method != SPARSE_METHOD:
        raise ValueError(
            f"{store} scores BM25 in the engine as sparse vectors, which holds for Lucene's variant only; pass "
            f"LexicalSettings(method={SPARSE_METHOD!r}) (the default), not {settings.method!r}."
        )
    if settings.windows:
        raise ValueError(
            f"{store} scores each document's whole text by BM25; LexicalSettings(windows=True) (a document scored by "
            "its best window) is a FAISS store option. Pass windows=False (the default)."
        )


def word_index(word: str) -> int:
    """A word's sparse index: a stable 32-bit hash of its UTF-8 bytes (the same in every process and release)."""
    return int.from_bytes(hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest(), "little")


def average_length(token_lists: Sequence[Sequence[str]]) -> float:
    """The mean number of tokens of the documents (1.0 for none, or none with a token: a neutral normaliser)."""
    total = sum(len(tokens) for tokens in token_lists)
    return total / len(token_lists) if total else 1.0


def document_vector(tokens: Sequence[str], avgdl: float, k1: float, b: float) -> tuple[list[int], list[float]]:
    """A document's sparse BM25 vector (indices ascending, values): each word's saturated, length-normalised term
    frequency (see the module docstring); empty for a document without words."""
    counts = _by_index(tokens)
    norm = k1 * (1.0 - b + b * len(tokens) / avgdl)
    indices = sorted(counts)
    return indices, [counts[i] / (counts[i] + norm) for i in indices]


def query_vector(tokens: Sequence[str]) -> tuple[list[int], list[float]]:
    """A query's sparse vector: each word's count (indices ascending); empty for a query without words."""
    counts = _by_index(tokens)
    indices = sorted(counts)
    return indices, [float(counts[i]) for i in indices]


def _by_index(tokens: Sequence[str]) -> Counter[int]:
    return Counter(word_index(token) for token in tokens)
