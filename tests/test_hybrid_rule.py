"""The hybrid study's rule for the default mode (benchmarks/hybrid.py, docs/hybrid_study.md: "The default mode,
second study") on made-up results: each part of it (per-set points, the pooled intervals, the small-to-big fusions,
the query cost), the tie-break and the fallback to dense."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.benchmark_modules import load_benchmark


@pytest.fixture(scope="module")
def hybrid() -> Any:
    """benchmarks/hybrid.py as a module (its siblings importable, as when run as a script)."""
    return load_benchmark("hybrid")


def _set(
    hybrid: Any,
    means: dict[str, float],
    questions: int = 400,
    noise: float = 0.0,
    costs: dict[str, float] | None = None,
) -> dict[str, Any]:
    """A set's results: every run's per-query nDCG@10 around its mean (the same questions, paired), and each
    fusion's per-query cost (1 ms unless `costs` says otherwise)."""
    rng = np.random.default_rng(0)
    base = rng.uniform(-0.3, 0.3, questions)
    runs = {}
    for name in (
        *hybrid.BASE_RUNS,
        "bm25+dense",
        *hybrid.BASELINE_FUSIONS,
        *[f"hybrid-{c}" for c in hybrid.CANDIDATES],
    ):
        mean = means.get(name, 0.5)
        wiggle = rng.normal(0, noise, questions) if noise else np.zeros(questions)
        per_query = dict(enumerate(mean + base + wiggle - wiggle.mean()))  # its mean exactly `mean`
        runs[name] = {"ndcg@10": float(np.mean(list(per_query.values()))), "per_query": per_query}
        if name.startswith("hybrid-"):
            runs[name]["cost_ms"] = [(costs or {}).get(name, 1.0)] * questions
    return {"runs": runs, "questions": questions, "chunks": 10}


def test_a_candidate_level_with_the_better_side_everywhere_and_above_the_baselines_is_adopted(hybrid: Any) -> None:
    good = {"dense": 0.6, "bm25": 0.55, "hybrid-relative-0.5": 0.65, "bm25+small-to-big": 0.6, "bm25+multi-size": 0.6}
    results = {"a/llamaindex": _set(hybrid, good), "b/langchain": _set(hybrid, good)}
    report = hybrid.verdicts(results)
    assert report["candidates"]["relative-0.5"]["passes"]
    assert not report["candidates"]["rrf"]["passes"]  # 0.5 < the better side (dense, 0.6) by more than 0.005
    assert report["adopted"] == "relative-0.5"


def test_one_set_below_the_better_side_beyond_the_tolerance_vetoes(hybrid: Any) -> None:
    good = {"dense": 0.6, "bm25": 0.55, "hybrid-rrf": 0.7}
    bad = {"dense": 0.6, "bm25": 0.7, "hybrid-rrf": 0.69}  # 0.01 below bm25 there, the pooled mean well above
    report = hybrid.verdicts({"a/x": _set(hybrid, good), "b/x": _set(hybrid, bad)})
    assert report["candidates"]["rrf"]["failures"] == ["b/x: -0.010 vs bm25"]
    within = {"dense": 0.6, "bm25": 0.7, "hybrid-rrf": 0.696}  # within the tolerance on the point: no interval
    assert hybrid.verdicts({"a/x": _set(hybrid, good), "b/x": _set(hybrid, within, questions=20)})["candidates"]["rrf"][
        "passes"
    ]


def test_the_pooled_mean_must_be_above_dense_and_bm25_with_its_lower_bound_above_zero(hybrid: Any) -> None:
    level = {"dense": 0.6, "bm25": 0.58, "hybrid-rrf": 0.603}  # above dense on the point, not beyond the noise
    report = hybrid.verdicts({"a/x": _set(hybrid, level, noise=0.4), "b/x": _set(hybrid, level, noise=0.4)})
    assert not report["candidates"]["rrf"]["passes"]
    assert any(f.startswith("pooled vs dense") for f in report["candidates"]["rrf"]["failures"])
    delta, low, high = report["candidates"]["rrf"]["pooled"]["dense"]
    assert low <= 0 < delta < high
    clear = {"dense": 0.6, "bm25": 0.58, "hybrid-rrf": 0.65}
    report = hybrid.verdicts({"a/x": _set(hybrid, clear, noise=0.4), "b/x": _set(hybrid, clear, noise=0.4)})
    assert report["candidates"]["rrf"]["passes"], report["candidates"]["rrf"]["failures"]
    assert report["candidates"]["rrf"]["pooled"]["bm25"][1] > 0


def test_the_pooled_interval_weighs_sets_equally(hybrid: Any) -> None:
    small = _set(hybrid, {"dense": 0.5, "hybrid-rrf": 0.7}, questions=20)
    large = _set(hybrid, {"dense": 0.5, "hybrid-rrf": 0.5}, questions=2000)
    delta, low, high = hybrid.pooled_interval({"s": small, "l": large}, ["s", "l"], "hybrid-rrf", "dense")
    assert delta == pytest.approx(0.1) and low == pytest.approx(0.1) and high == pytest.approx(0.1)


def test_the_mean_must_reach_both_fusions_with_small_to_big(hybrid: Any) -> None:
    means = {"dense": 0.6, "bm25": 0.5, "hybrid-rrf": 0.62, "bm25+multi-size": 0.64}
    report = hybrid.verdicts({"a/x": _set(hybrid, means)})
    assert not report["candidates"]["rrf"]["passes"]
    assert any("bm25+multi-size" in f for f in report["candidates"]["rrf"]["failures"])


def test_a_candidate_costing_more_than_one_and_a_half_times_todays_hybrid_is_out(hybrid: Any) -> None:
    means = {"dense": 0.6, "bm25": 0.5, "hybrid-rrf": 0.65, "hybrid-adaptive-dbsf": 0.66}
    costs = {f"hybrid-{hybrid.TODAY}": 2.0, "hybrid-adaptive-dbsf": 3.1, "hybrid-rrf": 2.9}
    report = hybrid.verdicts({"a/x": _set(hybrid, means, costs=costs)})
    assert report["today_cost_p95_ms"] == pytest.approx(2.0)
    assert report["candidates"]["rrf"]["passes"]  # 2.9 ≤ 1.5 × 2.0
    assert report["candidates"]["adaptive-dbsf"]["failures"] == ["query p95 3.10 ms > 1.5 × 2.00 ms"]
    assert report["adopted"] == "rrf"


def test_a_tie_goes_to_the_earlier_row_and_none_passing_keeps_dense(hybrid: Any) -> None:
    tied = {"dense": 0.6, "bm25": 0.5, "hybrid-rrf": 0.65, "hybrid-dbsf-0.7": 0.651}
    assert hybrid.verdicts({"a/x": _set(hybrid, tied)})["adopted"] == "rrf"
    nobody = {"dense": 0.9, "bm25": 0.9}
    assert hybrid.verdicts({"a/x": _set(hybrid, nobody)})["adopted"] is None


def test_a_candidate_missing_from_a_set_does_not_pass(hybrid: Any) -> None:
    results = {"a/x": _set(hybrid, {"dense": 0.6, "bm25": 0.5, "hybrid-rrf-0.3": 0.7})}
    del results["a/x"]["runs"]["hybrid-rrf-0.3"]
    assert hybrid.verdicts(results)["candidates"]["rrf-0.3"]["failures"] == ["not run on every set"]
