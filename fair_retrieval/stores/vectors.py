"""Vectors on their way into a store's index (checked, unit rows for cosine), and scores turned into relevance."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import numpy as np

__all__ = ["relevance_function", "require_finite", "text_vector_pairs", "unit_rows"]


def require_finite(vectors: np.ndarray) -> None:
    """Refuse vectors with NaN or infinite values before anything is stored (an upsert removes first).

    Raises:
        ValueError: naming the first offending rows.
    """
    finite = np.isfinite(vectors)
    if not finite.all():
        bad = np.flatnonzero(~finite.all(axis=1))
        raise ValueError(
            f"The vectors at positions {bad[:5].tolist()} (in the order given) contain NaN or infinite values; nothing "
            "was stored."
        )


def unit_rows(matrix: np.ndarray) -> np.ndarray:
    """`matrix` with every row L2-normalised: inner products of unit rows are cosines.

    Raises:
        ValueError: rows with NaN or infinite values (refused before any arithmetic, so numpy warns of nothing),
            or zero rows, which have no direction (their cosine with anything is undefined); the message names
            their positions.
    """
    finite = np.isfinite(matrix).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ValueError(
            f"The vectors at positions {bad[:5].tolist()} (in the order given) contain NaN or infinite values; "
            "nothing was stored or searched. Check the embeddings that made them."
        )
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    zero = np.flatnonzero(norms[:, 0] == 0)
    if zero.size:
        raise ValueError(
            f"The vectors at positions {zero[:5].tolist()} (in the order given) are all zeros: they have no direction, "
            'so their cosine similarity is undefined (metric="cosine"). Nothing was stored or searched; drop them, '
            'or use metric="ip" / "l2".'
        )
    return matrix / norms  # type: ignore[no-any-return]


def text_vector_pairs(pairs: Any, name: str) -> tuple[list[str], np.ndarray]:
    """(texts, float32 vectors (n, dim)) from (text, vector) pairs computed elsewhere, e.g. `zip(texts, vectors)`.

    Args:
        pairs: an iterable of (str, vector) tuples or lists.
        name: the argument's name, for messages.

    Returns:
        The texts and their vectors; ([], a (0, 0) matrix) for no pairs.

    Raises:
        TypeError: not an iterable of pairs, or a pair that is not (str, vector); the message names it.
        ValueError: vectors that do not form one numeric (n, dim) matrix.
    """
    if isinstance(pairs, str | bytes | Mapping) or not isinstance(pairs, Iterable):
        raise TypeError(f"{name} must be (text, vector) pairs, e.g. zip(texts, vectors); got {type(pairs).__name__}.")
    texts: list[str] = []
    vectors: list[Any] = []
    for position, pair in enumerate(pairs):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise TypeError(f"{name}[{position}] is {type(pair).__name__}, expected a (text, vector) pair.")
        if not isinstance(pair[0], str):
            raise TypeError(f"{name}[{position}][0] is {type(pair[0]).__name__}, expected the text (str).")
        texts.append(pair[0])
        vectors.append(pair[1])
    if not texts:
        return [], np.zeros((0, 0), dtype=np.float32)
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as error:
        sizes = sorted({len(vector) for vector in vectors if hasattr(vector, "__len__")})
        raise ValueError(
            f"{name} hold vectors that are not one numeric (n, dim) matrix (sizes {sizes}): {error}"
        ) from None
    if matrix.ndim != 2:
        raise ValueError(f"{name} hold vectors of shape {matrix.shape[1:]}; each must be a 1-D vector.")
    return texts, matrix


def relevance_from_similarity(score: float) -> float:
    """Cosine similarity in [-1, 1] → relevance in [0, 1]."""
    return min(1.0, max(0.0, (1.0 + score) / 2.0))


def relevance_function(metric: str) -> Callable[[float], float]:
    """The map from a raw score of `metric` to relevance in [0, 1]: (1 + cosine) / 2 for unit vectors, whatever
    the metric ("cosine" and "ip" score the cosine; "l2" the squared distance |a − b|² = 2 − 2·cos)."""
    if metric == "l2":
        return lambda distance: relevance_from_similarity(1.0 - distance / 2.0)
    return relevance_from_similarity
