"""How close an approximate index comes to exact search: nearest-neighbour recall against brute-force neighbours.

Not to be confused with `fair_retrieval.evaluation.metrics.recall_at_k`, the retrieval metric against relevance
judgements: `knn_recall_at_k` compares an index's results with the exact nearest neighbours of the same vectors.
"""

from __future__ import annotations

import numpy as np

from fair_retrieval.index.faiss_index import FaissIndex
from fair_retrieval.validate import is_positive_int


def exact_neighbours(vectors: np.ndarray, queries: np.ndarray, k: int, metric: str = "ip") -> np.ndarray:
    """Ids (row numbers of `vectors`) of the exact k nearest neighbours of every query, best first, int64 (q, k)."""
    index = FaissIndex(vectors.shape[1], metric="ip" if metric == "ip" else "l2", kind="flat", gpu=False)
    index.add(vectors)
    return index.search(queries, k)[1]


def knn_recall_at_k(found: np.ndarray, truth: np.ndarray, k: int = 10) -> float:
    """Mean over queries of |found top-k ∩ exact top-k| / k (the strict "k-recall@k" of ANN benchmarks).

    Args:
        found: int (q, ≥k) ids returned by the approximate index, best first.
        truth: int (q, ≥k) exact neighbour ids, best first.
        k: cut-off.

    Raises:
        ValueError: shapes that do not match or are narrower than k.
    """
    found, truth = np.asarray(found), np.asarray(truth)
    if found.ndim != 2 or truth.ndim != 2 or found.shape[0] != truth.shape[0]:
        raise ValueError(
            f"found and truth must be (queries, k) arrays of one height, got {found.shape}, {truth.shape}."
        )
    if not is_positive_int(k) or found.shape[1] < k or truth.shape[1] < k:
        raise ValueError(f"k must be ≥ 1 and at most the number of columns ({found.shape[1]}, {truth.shape[1]}).")
    if found.shape[0] == 0:
        raise ValueError("recall needs at least one query.")
    hits = [np.intersect1d(f[:k][f[:k] >= 0], t[:k]).size for f, t in zip(found, truth, strict=True)]
    return float(np.mean(hits) / k)


def top1_in_k(found: np.ndarray, truth: np.ndarray, k: int = 10) -> float:
    """Fraction of queries whose exact nearest neighbour is among the k found (faiss' "1-recall@k")."""
    found, truth = np.asarray(found), np.asarray(truth)
    if found.shape[0] != truth.shape[0] or found.shape[0] == 0 or found.shape[1] < k:
        raise ValueError(f"found and truth must be non-empty (queries, ≥{k}) arrays of one height.")
    return float(np.mean([truth[i, 0] in found[i, :k] for i in range(found.shape[0])]))
