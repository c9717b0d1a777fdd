"""Vectors on their way into an index, and relevance scores in [0, 1]."""

from __future__ import annotations

import numpy as np
import pytest

from fair_retrieval.stores.vectors import relevance_function, require_finite, text_vector_pairs, unit_rows


def test_require_finite_names_the_rows() -> None:
    require_finite(np.ones((2, 3), np.float32))
    bad = np.ones((4, 3), np.float32)
    bad[1, 0], bad[3, 2] = np.nan, np.inf
    with pytest.raises(ValueError, match=r"positions \[1, 3\].*NaN or infinite"):
        require_finite(bad)


def test_unit_rows_normalise_and_refuse_zero_rows() -> None:
    rows = unit_rows(np.array([[3.0, 4.0], [0.0, 1.0]], np.float32))
    np.testing.assert_allclose(rows, [[0.6, 0.8], [0.0, 1.0]])
    with pytest.raises(ValueError, match=r"positions \[1\].*all zeros.*cosine similarity is undefined"):
        unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]], np.float32))


@pytest.mark.filterwarnings("error::RuntimeWarning")
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_unit_rows_refuse_non_finite_rows_without_a_numpy_warning(value: float) -> None:
    with pytest.raises(ValueError, match=r"positions \[0\].*NaN or infinite"):
        unit_rows(np.array([[value, 1.0], [1.0, 0.0]], np.float32))


def test_pairs_become_texts_and_a_matrix() -> None:
    texts, matrix = text_vector_pairs(zip(["a", "b"], [[1, 2], [3, 4]], strict=True), "pairs")
    assert texts == ["a", "b"] and matrix.dtype == np.float32 and matrix.shape == (2, 2)
    texts, matrix = text_vector_pairs([], "pairs")
    assert texts == [] and matrix.shape == (0, 0)


@pytest.mark.parametrize(
    ("pairs", "error", "message"),
    [
        ("ab", TypeError, "pairs must be .* zip"),
        ({"a": [1]}, TypeError, "pairs must be"),
        ([("a", [1]), "b"], TypeError, r"pairs\[1\] is str, expected a \(text, vector\) pair"),
        ([(1, [1])], TypeError, r"pairs\[0\]\[0\] is int"),
        ([("a", [1, 2]), ("b", [1])], ValueError, "not one numeric"),
        ([("a", [[1, 2]])], ValueError, "each must be a 1-D vector"),
    ],
)
def test_malformed_pairs_are_refused(pairs: object, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        text_vector_pairs(pairs, "pairs")


def test_relevance_follows_langchains_convention_for_unit_vectors() -> None:
    for metric in ("cosine", "ip"):
        relevance = relevance_function(metric)
        assert relevance(1.0) == 1.0 and relevance(0.3) == 0.3 and relevance(-0.2) == 0.0 and relevance(1.5) == 1.0
    l2 = relevance_function("l2")
    for cosine in (1.0, 0.5, 0.0):  # |a−b|² = 2 − 2·cos for unit vectors; LangChain's 1 − |a−b| / √2
        assert l2(2 - 2 * cosine) == pytest.approx(1 - ((2 - 2 * cosine) ** 0.5) / 2**0.5)
    assert l2(4.0) == 0.0 and l2(0.0) == 1.0
