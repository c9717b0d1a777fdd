"""Maximal marginal relevance: the exact greedy selection, and a store's documents chosen by it."""

from __future__ import annotations

import numpy as np
import pytest

from fair_retrieval.stores import DocumentStore, StoreHit
from fair_retrieval.stores.marginal_relevance import check_mmr_lambda, mmr_hits, mmr_order


class Doc:
    def __init__(self, key: str) -> None:
        self.key = key


def _reference(query: np.ndarray, vectors: np.ndarray, k: int, lambda_mult: float) -> list[int]:
    """MMR written plainly from its definition: max over every chosen document."""

    def cos(a: np.ndarray, b: np.ndarray) -> float:
        return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))

    chosen: list[int] = []
    while len(chosen) < min(k, len(vectors)):
        best, best_score = -1, -np.inf
        for position, vector in enumerate(vectors):
            if position in chosen:
                continue
            redundant = max((cos(vector, vectors[c]) for c in chosen), default=0.0) if chosen else 0.0
            score = (
                cos(query, vector) if not chosen else lambda_mult * cos(query, vector) - (1 - lambda_mult) * redundant
            )
            if score > best_score:
                best, best_score = position, score
        chosen.append(best)
    return chosen


@pytest.mark.parametrize("lambda_mult", [0.0, 0.3, 0.5, 1.0])
def test_mmr_order_is_the_definition(lambda_mult: float) -> None:
    rng = np.random.default_rng(3)
    for _ in range(20):
        vectors = rng.normal(size=(12, 6))
        query = rng.normal(size=6)
        assert mmr_order(query, vectors, 5, lambda_mult) == _reference(query, vectors, 5, lambda_mult)


def test_mmr_order_edges() -> None:
    assert mmr_order([1.0, 0.0], np.zeros((0, 2)), 3) == [] and mmr_order([1.0, 0.0], [[1.0, 0.0]], 0) == []
    near_duplicates = [[1.0, 0.0], [0.99, 0.01], [0.6, 0.8]]
    assert mmr_order([1.0, 0.0], near_duplicates, 2, 1.0) == [0, 1]
    assert mmr_order([1.0, 0.0], near_duplicates, 2, 0.3) == [0, 2]
    for bad in (1.5, -0.1, float("nan"), True, "0.5", None):
        with pytest.raises(ValueError, match=r"lambda_mult must be a number in \[0, 1\]"):
            mmr_order([1.0], [[1.0]], 1, bad)  # type: ignore[arg-type]
    assert check_mmr_lambda(np.float32(0.25), "mmr_threshold") == 0.25
    with pytest.raises(ValueError, match=r"^mmr_threshold must be a number in \[0, 1\]"):
        check_mmr_lambda(2, "mmr_threshold")


def test_mmr_hits_choose_among_the_stores_search() -> None:
    store: DocumentStore[Doc] = DocumentStore(metric="cosine", gpu=False, multivector=False)
    vectors = np.array([[1.0, 0.0, 0.0], [0.99, 0.05, 0.0], [0.7, 0.7, 0.0], [0.0, 0.0, 1.0]], dtype=np.float32)
    store.add([Doc(f"d{i}") for i in range(4)], vectors)
    query = [1.0, 0.0, 0.0]
    hits = mmr_hits(store, query, 2, lambda_mult=0.3)
    assert [hit.record.key for hit in hits] == ["d0", "d3"] and all(isinstance(hit, StoreHit) for hit in hits)
    assert [hit.score for hit in hits] == pytest.approx([1.0, 0.0], abs=1e-6)  # the search's scores
    not_d3 = mmr_hits(store, query, 2, lambda_mult=0.3, keep=lambda doc: doc.key != "d3")
    assert [hit.record.key for hit in not_d3] == ["d0", "d2"] and not_d3[1].score == pytest.approx(0.7071, abs=1e-4)
    assert [hit.record.key for hit in mmr_hits(store, query, 2, fetch_k=2, lambda_mult=0.3)] == ["d0", "d1"]
    assert [hit.record.key for hit in mmr_hits(store, query, 3, lambda_mult=1.0)] == ["d0", "d1", "d2"]
    with pytest.raises(ValueError, match="fetch_k"):
        mmr_hits(store, [1.0, 0.0, 0.0], 2, fetch_k=0)
