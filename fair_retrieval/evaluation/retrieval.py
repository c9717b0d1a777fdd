"""Exact inner-product search over normalised embeddings, for evaluation.

Evaluation needs the true ranking of every query, not an approximation, and corpora of a few thousand documents:
a chunked matrix product is exact, deterministic (ties go to the lower corpus index) and needs no FAISS.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def top_k(queries: np.ndarray, documents: np.ndarray, k: int, chunk_size: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """Return (scores, indices), each (n_queries, min(k, n_docs)), best first; ties broken by lower index.

    Raises:
        ValueError: on mismatched dimensions or k < 1.
    """
    if queries.ndim != 2 or documents.ndim != 2 or queries.shape[1] != documents.shape[1]:
        raise ValueError(
            f"Query and document embeddings must be 2-D with the same width, got {queries.shape} and {documents.shape}."
        )
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}.")
    k = min(k, documents.shape[0])
    all_scores = np.empty((queries.shape[0], k), dtype=np.float32)
    all_indices = np.empty((queries.shape[0], k), dtype=np.int64)
    docs = np.ascontiguousarray(documents, dtype=np.float32)
    for start in range(0, queries.shape[0], chunk_size):
        block = np.ascontiguousarray(queries[start : start + chunk_size], dtype=np.float32) @ docs.T
        # A stable sort of the negated scores: best first, and equal scores keep corpus order.
        order = np.argsort(-block, axis=1, kind="stable")[:, :k]
        all_indices[start : start + chunk_size] = order
        all_scores[start : start + chunk_size] = np.take_along_axis(block, order, axis=1)
    return all_scores, all_indices


def ranked_ids(
    query_ids: Sequence[str], doc_ids: Sequence[str], queries: np.ndarray, documents: np.ndarray, k: int
) -> dict[str, list[str]]:
    """Run: query id → the ids of its top-k documents, best first."""
    _, indices = top_k(queries, documents, k)
    return {qid: [doc_ids[i] for i in row] for qid, row in zip(query_ids, indices, strict=True)}
