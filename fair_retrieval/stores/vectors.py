"""Vectors on their way into a store's index (checked, unit rows for cosine), and scores turned into relevance."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

__all__ = ["check_dimension", "node_vectors", "relevance_function", "require_finite", "text_vector_pairs", "unit_rows"]

STORE_MODEL = "embed them with the model the store was built with"
"""What to do about vectors of another size than a store's (the remedy of `check_dimension`)."""


def check_dimension(size: int, dim: int | None, what: str, *, noun: str = "vectors", remedy: str = STORE_MODEL) -> None:
    """The one check that vectors fit a store: `size`-d ones where the store holds `dim`-d ones (None: no index
    yet, any size fits) are refused.

    Args:
        size: the vectors' size.
        dim: the store's (its index's) size, or None.
        what: what gave them, leading the message (e.g. "Got", "embed_documents gave", "query_embedding is a").
        noun: what they are called after their size.
        remedy: what to do, ending the message.

    Raises:
        ValueError: "{what} {size}-d {noun}, but this store holds {dim}-d ones; {remedy}."
    """
    if dim is not None and size != dim:
        raise ValueError(f"{what} {size}-d {noun}, but this store holds {dim}-d ones; {remedy}.")


def require_finite(vectors: np.ndarray, source: str | None = None) -> None:
    """Refuse vectors with NaN or infinite values before anything is stored or searched (an upsert removes first):
    no embedding holds them, and a score made from one is no ranking.

    Args:
        vectors: a (n, dim) matrix.
        source: what gave them, leading the message (e.g. "the query embedding"); None: vectors to store.

    Raises:
        ValueError: naming the first offending rows.
    """
    finite = np.isfinite(vectors)
    if not finite.all():
        bad = np.flatnonzero(~finite.all(axis=1))
        if source is None:
            raise ValueError(
                f"The vectors at positions {bad[:5].tolist()} (in the order given) contain NaN or infinite values; "
                "nothing was stored."
            )
        raise ValueError(
            f"{source} gave vectors with NaN or infinite values (at positions {bad[:5].tolist()}); nothing was stored "
            "or searched. No embedding holds them: check the model or the code that made these vectors."
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


def node_vectors(embeddings: Sequence[Any], ids: Sequence[str], dim: int | None) -> np.ndarray:
    """Embeddings a framework computed for its nodes as a float32 (n, dim) matrix, checked before anything is stored.

    Args:
        embeddings: one per node (None where a node was not embedded).
        ids: the nodes' ids, for messages.
        dim: the size the store holds (None: not known yet).

    Raises:
        ValueError: naming the first node without an embedding; embeddings of several sizes, or of another size
            than `dim`.
    """
    for position, (embedding, key) in enumerate(zip(embeddings, ids, strict=True)):
        if embedding is None:
            raise ValueError(
                f"nodes[{position}] ({key!r}) has no embedding. Embed nodes before adding them (VectorStoreIndex and "
                "an IngestionPipeline with an embed model do), or set node.embedding."
            )
    sizes = sorted({len(embedding) for embedding in embeddings})
    if len(sizes) > 1 or sizes[0] == 0:
        raise ValueError(f"The nodes' embeddings have sizes {sizes}; embed all nodes with one model.")
    check_dimension(sizes[0], dim, "The nodes' embeddings are", noun="vectors")
    return np.asarray(embeddings, dtype=np.float32)


def relevance_function(metric: str) -> Callable[[float], float]:
    """The map from a raw score of `metric` to relevance, LangChain's convention for normalised vectors.

    "cosine" and "ip" score a cosine for unit vectors, and relevance is that cosine (langchain-core's
    `_cosine_relevance_score_fn` of the cosine distance 1 − cos); "l2" scores the squared distance d², and relevance is
    1 − d / √2 (langchain-core's `_euclidean_relevance_score_fn` of the distance d). Both are clipped to [0, 1], the
    range LangChain checks relevance against, so an unrelated text (cosine ≤ 0) has relevance 0 instead of a warning.
    """
    if metric == "l2":
        return lambda squared: _clipped(1.0 - math.sqrt(max(squared, 0.0)) / math.sqrt(2.0))
    return _clipped


def _clipped(relevance: float) -> float:
    return min(1.0, max(0.0, float(relevance)))
