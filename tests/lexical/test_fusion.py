"""fuse: reciprocal rank fusion (k = 60), relative score and distribution-based score fusion on hand-made rankings,
the expected values derived from the formulas of the module's docstring; alpha's ends, ties, disjoint lists, k, and
the inputs left as they were; check_fusion and check_alpha."""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from fair_retrieval.lexical import FUSIONS, RRF_K, adaptive_alpha, check_alpha, check_fusion, fuse
from fair_retrieval.lexical.fusion import ADAPTIVE_RANGE

DENSE = [("a", 0.9), ("b", 0.5), ("c", 0.1)]
LEXICAL = [("c", 10.0), ("d", 4.0), ("a", 2.0)]


def _rrf(dense_rank: int | None, lexical_rank: int | None, alpha: float) -> float:
    """Σ weight / (60 + rank), divided by the score of a document first in both lists."""
    total = (alpha / (60 + dense_rank) if dense_rank else 0.0) + (
        (1 - alpha) / (60 + lexical_rank) if lexical_rank else 0.0
    )
    return total / (alpha / 61 + (1 - alpha) / 61)


def _pairs(found: list[tuple[str, float]]) -> list[tuple[str, float]]:
    return [(key, pytest.approx(score)) for key, score in found]


def test_the_fusions_and_the_rank_constant() -> None:
    assert FUSIONS == ("rrf", "relative_score", "dist_based_score")
    assert RRF_K == 60


@pytest.mark.parametrize("alpha", [0.5, 0.3, 0.8])
def test_rrf_sums_the_weighted_reciprocal_ranks(alpha: float) -> None:
    found = fuse(DENSE, LEXICAL, 10, fusion="rrf", alpha=alpha)
    expected = {
        "a": _rrf(1, 3, alpha),
        "b": _rrf(2, None, alpha),
        "c": _rrf(3, 1, alpha),
        "d": _rrf(None, 2, alpha),
    }
    order = sorted(expected, key=lambda key: -expected[key])
    assert found == [(key, pytest.approx(expected[key])) for key in order]


def test_rrf_is_the_default_and_its_plain_order() -> None:
    assert [key for key, _ in fuse(DENSE, LEXICAL, 10)] == ["a", "c", "b", "d"]  # 1/61+1/63 > 1/63+1/61 by ties
    assert fuse(DENSE, LEXICAL, 10) == fuse(DENSE, LEXICAL, 10, fusion="rrf", alpha=0.5)


@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.5, 1.0])
def test_rrf_scores_a_document_first_in_both_lists_one(alpha: float) -> None:
    found = fuse([("x", 0.1), ("y", 0.0)], [("x", 3.0), ("z", 1.0)], 3, fusion="rrf", alpha=alpha)
    assert found[0] == ("x", pytest.approx(1.0))
    assert all(0.0 <= score <= 1.0 for _, score in found)


def test_fused_scores_never_pass_one_by_rounding() -> None:
    for alpha in np.linspace(0.0, 1.0, 101):
        for fusion in FUSIONS:
            found = fuse([("x", 0.3), ("y", 0.1)], [("x", 3.0), ("y", 1.0)], 2, fusion=fusion, alpha=float(alpha))
            assert all(0.0 <= score <= 1.0 for _, score in found), (fusion, alpha, found)


def test_rrf_reads_ranks_not_scores() -> None:
    assert fuse(DENSE, LEXICAL, 10) == fuse(
        [(k, -i) for i, (k, _) in enumerate(DENSE)], [(k, 100 - i) for i, (k, _) in enumerate(LEXICAL)], 10
    )


def test_relative_score_min_max_scales_each_list() -> None:
    # dense 0.9, 0.5, 0.1 → 1, 0.5, 0; lexical 10, 4, 2 → 1, 0.25, 0; a document missing from a list scores 0 there
    found = fuse(DENSE, LEXICAL, 10, fusion="relative_score", alpha=0.5)
    assert found == _pairs([("a", 0.5), ("c", 0.5), ("b", 0.25), ("d", 0.125)])  # a, c tied: dense order
    weighted = fuse(DENSE, LEXICAL, 10, fusion="relative_score", alpha=0.25)
    assert weighted == _pairs([("c", 0.75), ("a", 0.25), ("d", 0.1875), ("b", 0.125)])


def _dist(values: list[float]) -> list[float]:
    """Scaled by mean ± 3 standard deviations (of the list itself), clipped to [0, 1]."""
    mean = sum(values) / len(values)
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
    low, high = mean - 3 * spread, mean + 3 * spread
    return [min(1.0, max(0.0, (v - low) / (high - low))) for v in values]


@pytest.mark.parametrize("alpha", [0.5, 0.7])
def test_dist_based_score_scales_each_list_by_its_mean_and_three_deviations(alpha: float) -> None:
    dense_scaled = dict(zip("abc", _dist([0.9, 0.5, 0.1]), strict=True))
    lexical_scaled = dict(zip("cda", _dist([10.0, 4.0, 2.0]), strict=True))
    expected = {key: alpha * dense_scaled.get(key, 0.0) + (1 - alpha) * lexical_scaled.get(key, 0.0) for key in "abcd"}
    found = fuse(DENSE, LEXICAL, 10, fusion="dist_based_score", alpha=alpha)
    assert found == [(key, pytest.approx(expected[key])) for key in sorted(expected, key=lambda k: -expected[k])]


def test_dist_based_score_clips_an_outlier_and_keeps_the_rest_apart() -> None:
    scores = [100.0] + [1.0 + 0.01 * i for i in range(11, 0, -1)]  # one outlier past mean + 3σ
    dense = [(f"d{i}", s) for i, s in enumerate(scores)]
    dist = fuse(dense, [], 20, fusion="dist_based_score", alpha=1.0)
    expected = _dist(scores)
    assert expected[0] == 1.0 and (scores[0] - np.mean(scores)) / np.std(scores) > 3  # clipped indeed
    assert dist == _pairs([(f"d{i}", e) for i, e in enumerate(expected)])
    relative = fuse(dense, [], 20, fusion="relative_score", alpha=1.0)
    assert max(s for _, s in relative[1:]) < 0.01 < 0.4 < min(s for _, s in dist[1:])  # min-max: crushed by it


@pytest.mark.parametrize("fusion", ["relative_score", "dist_based_score"])
def test_a_list_of_one_or_of_equal_scores_scales_to_one(fusion: str) -> None:
    assert fuse([("a", 0.3)], [], 5, fusion=fusion, alpha=1.0) == [("a", 1.0)]
    assert fuse([], [("a", 7.0), ("b", 7.0)], 5, fusion=fusion, alpha=0.0) == [("a", 1.0), ("b", 1.0)]


@pytest.mark.parametrize("fusion", ["relative_score", "dist_based_score"])
def test_distances_are_negated_so_the_smallest_is_best(fusion: str) -> None:
    distances = [("a", 0.1), ("b", 0.5), ("c", 0.9)]
    found = fuse(distances, [], 5, fusion=fusion, alpha=1.0, dense_larger_is_better=False)
    assert [key for key, _ in found] == ["a", "b", "c"]
    as_scores = fuse(distances, [], 5, fusion=fusion, alpha=1.0)
    assert [key for key, _ in as_scores] == ["c", "b", "a"]
    scaled = [1.0, 0.5, 0.0] if fusion == "relative_score" else _dist([-0.1, -0.5, -0.9])
    assert found == _pairs(list(zip("abc", scaled, strict=True)))
    lexical = fuse([], [("a", 1.0), ("b", 2.0)], 5, fusion=fusion, alpha=0.0, dense_larger_is_better=False)
    assert lexical[0][0] == "b"  # BM25 scores are never negated


@pytest.mark.parametrize("fusion", FUSIONS)
def test_alpha_one_is_the_dense_order_and_alpha_zero_the_lexical_one(fusion: str) -> None:
    dense = [("a", 0.9), ("b", 0.7), ("c", 0.2), ("e", 0.1)]
    lexical = [("d", 8.0), ("c", 5.0), ("a", 1.0), ("f", 0.5)]
    for alpha, ranking, other in ((1.0, dense, lexical), (0.0, lexical, dense)):
        found = fuse(dense, lexical, 10, fusion=fusion, alpha=alpha)
        keys = [key for key, _ in found]
        assert keys[: len(ranking) - 1] == [key for key, _ in ranking][:-1], (alpha, keys)
        only_other = {key for key, _ in other} - {key for key, _ in ranking}
        assert all(score == 0.0 for key, score in found if key in only_other)  # weighted 0
        if fusion != "dist_based_score":  # (mean + 3σ lies past the best of a short list)
            assert found[0][1] == pytest.approx(1.0)


@pytest.mark.parametrize("fusion", FUSIONS)
def test_disjoint_lists_interleave_and_ties_keep_the_dense_then_the_lexical_order(fusion: str) -> None:
    dense = [("a", 0.9), ("b", 0.1)]
    lexical = [("c", 9.0), ("d", 1.0)]
    found = fuse(dense, lexical, 10, fusion=fusion, alpha=0.5)
    assert [key for key, _ in found] == ["a", "c", "b", "d"]
    assert found[0][1] == pytest.approx(found[1][1]) and found[2][1] == pytest.approx(found[3][1])  # rank for rank


@pytest.mark.parametrize("fusion", FUSIONS)
def test_tied_scores_keep_the_lexical_order_for_lexical_only_documents(fusion: str) -> None:
    found = fuse([], [("z", 2.0), ("y", 2.0), ("x", 2.0)], 10, fusion=fusion, alpha=0.5)
    assert [key for key, _ in found] == ["z", "y", "x"]  # (rrf: by rank, the others: tied at 1)
    if fusion != "rrf":
        assert len({score for _, score in found}) == 1


@pytest.mark.parametrize("fusion", FUSIONS)
def test_k_keeps_the_best(fusion: str) -> None:
    full = fuse(DENSE, LEXICAL, 10, fusion=fusion)
    assert len(full) == 4  # the union, each document once
    for k in (1, 2, 3, 4, 100):
        assert fuse(DENSE, LEXICAL, k, fusion=fusion) == full[:k]
    assert fuse(DENSE, LEXICAL, 0, fusion=fusion) == []


@pytest.mark.parametrize("fusion", FUSIONS)
def test_empty_lists_fuse_to_nothing(fusion: str) -> None:
    assert fuse([], [], 5, fusion=fusion) == []
    assert [key for key, _ in fuse(DENSE, [], 5, fusion=fusion)] == ["a", "b", "c"]
    assert [key for key, _ in fuse([], LEXICAL, 5, fusion=fusion)] == ["c", "d", "a"]


@pytest.mark.parametrize("fusion", FUSIONS)
def test_the_inputs_are_left_as_they_were(fusion: str) -> None:
    dense = [["a", 0.9], ["b", 0.5]]
    lexical = [("b", 3.0), ("c", 1.0)]
    before = copy.deepcopy((dense, lexical))
    fuse(dense, lexical, 1, fusion=fusion, alpha=0.4, dense_larger_is_better=False)  # type: ignore[arg-type]
    assert (dense, lexical) == before
    ranked = (("a", 0.9), ("b", 0.5))  # tuples and generic keys work as well
    assert [key for key, _ in fuse(ranked, (), 2, fusion=fusion, alpha=1.0)] == ["a", "b"]


@pytest.mark.parametrize("fusion", FUSIONS)
def test_fused_scores_lie_in_zero_one_best_first_over_the_union(fusion: str) -> None:
    rng = np.random.default_rng(7)
    for _ in range(30):
        dense_ids = rng.choice(40, size=rng.integers(0, 15), replace=False)
        lexical_ids = rng.choice(40, size=rng.integers(0, 15), replace=False)
        dense = list(
            zip(dense_ids.tolist(), sorted(rng.normal(size=len(dense_ids)).tolist(), reverse=True), strict=True)
        )
        lexical = list(
            zip(lexical_ids.tolist(), sorted(rng.exponential(size=len(lexical_ids)) * 9, reverse=True), strict=True)
        )
        found = fuse(dense, lexical, 100, fusion=fusion, alpha=float(rng.uniform()))
        scores = [score for _, score in found]
        assert {key for key, _ in found} == set(dense_ids.tolist()) | set(lexical_ids.tolist())
        assert all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True)


def test_check_fusion_accepts_the_fusions_and_refuses_the_rest() -> None:
    for fusion in FUSIONS:
        assert check_fusion(fusion) == fusion
    for bad in ("max", "RRF", "", None, 3):
        with pytest.raises(ValueError, match="fusion must be one of") as error:
            check_fusion(bad)
        assert all(repr(name) in str(error.value) for name in FUSIONS)
    with pytest.raises(ValueError, match="fusion must be one of"):
        fuse(DENSE, LEXICAL, 3, fusion="max")


def test_check_alpha_accepts_numbers_in_zero_one() -> None:
    assert check_alpha(0) == 0.0 and isinstance(check_alpha(0), float)
    assert check_alpha(1) == 1.0 and check_alpha(0.25) == 0.25
    assert check_alpha(np.float64(0.5)) == 0.5


@pytest.mark.parametrize("alpha", [-0.01, 1.01, float("nan"), float("inf"), True, False, "0.5", None, [0.5]])
def test_check_alpha_refuses_the_rest(alpha: object) -> None:
    with pytest.raises(ValueError, match=r"alpha must be a number in \[0, 1\]"):
        check_alpha(alpha)
    with pytest.raises(ValueError, match="alpha must be a number in"):
        fuse(DENSE, LEXICAL, 3, alpha=alpha)  # type: ignore[arg-type]


def test_adaptive_alpha_weighs_the_side_whose_top_score_stands_out() -> None:
    flat_dense = [0.50, 0.49, 0.48, 0.47]
    peaked_lexical = [12.0, 2.0, 1.5, 1.0]
    c_dense = (0.50 - np.mean(flat_dense)) / np.std(flat_dense)
    c_lexical = (12.0 - np.mean(peaked_lexical)) / np.std(peaked_lexical)
    expected = min(0.8, max(0.2, c_dense / (c_dense + c_lexical)))
    assert adaptive_alpha(flat_dense, peaked_lexical) == pytest.approx(expected)
    assert adaptive_alpha([0.9, 0.1, 0.1, 0.1], [3.0, 2.9, 2.8, 2.7]) > 0.5  # the dense side stands out
    assert adaptive_alpha([0.9, 0.1, 0.1, 0.1], [5.0, 5.0, 5.0]) == ADAPTIVE_RANGE[1]  # flat lexical: clipped
    assert adaptive_alpha([0.5, 0.5], [5.0, 5.0, 5.0]) == 0.5  # both flat
    assert adaptive_alpha([0.5, 0.4], []) == 1.0  # no query word known: dense only
    assert adaptive_alpha([0.2, 0.3, 0.9], [4.0, 1.0], dense_larger_is_better=False) == adaptive_alpha(
        [-0.2, -0.3, -0.9], [4.0, 1.0]
    )
    low, high = ADAPTIVE_RANGE
    assert low <= adaptive_alpha([0.5, 0.49], [9.0, 1.0, 1.0]) <= high


@pytest.mark.parametrize("fusion", ["relative_score", "dist_based_score"])
def test_a_non_finite_dense_score_is_ranked_not_spread_as_nan(fusion: str) -> None:
    # an inner product beyond float32's range comes back as +inf or -inf; the other scores keep their scale
    inf = math.inf
    with np.errstate(all="raise"):  # no NaN arithmetic hidden behind a warning
        top = fuse([("a", inf), ("b", 0.5), ("c", 0.1)], LEXICAL, 10, fusion=fusion, alpha=0.5)
        bottom = fuse([("a", 0.9), ("b", 0.5), ("c", -inf)], LEXICAL, 10, fusion=fusion, alpha=0.5)
        alone = fuse([("a", inf), ("b", -inf), ("c", math.nan)], LEXICAL, 10, fusion=fusion, alpha=1.0)
    finite = fuse([("b", 0.5), ("c", 0.1)], (), 10, fusion=fusion, alpha=1.0)
    for found in (top, bottom, alone):
        scores = [score for _, score in found]
        assert all(math.isfinite(s) and 0.0 <= s <= 1.0 for s in scores), found
        assert scores == sorted(scores, reverse=True), found
    assert top[0] == ("a", pytest.approx(0.5 + 0.5 * dict(_scaled_lexical(fusion))["a"]))
    assert dict(top)["b"] == pytest.approx(0.5 * dict(finite)["b"])  # scaled as if "a" were not there
    assert dict(bottom)["c"] == pytest.approx(0.5 * dict(_scaled_lexical(fusion))["c"])  # -inf: dense share 0
    assert alone[0][0] == "a" and dict(alone)["b"] == dict(alone)["c"] == 0.0


def _scaled_lexical(fusion: str) -> list[tuple[str, float]]:
    """The lexical list's own scaled scores (alpha 0)."""
    return fuse((), LEXICAL, 10, fusion=fusion, alpha=0.0)


def test_adaptive_alpha_reads_the_finite_scores_only() -> None:
    with np.errstate(all="raise"):
        assert adaptive_alpha([math.inf, 0.9, 0.1, 0.1], [3.0, 2.9, 2.8]) == adaptive_alpha(
            [0.9, 0.1, 0.1], [3.0, 2.9, 2.8]
        )
