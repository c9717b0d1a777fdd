"""The hybrid study's rule (benchmarks/hybrid.py, docs/hybrid_study.md) on made-up results: each part of it, the
small-set exception, the tie-break and the fallback to dense."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

HYBRID = Path(__file__).resolve().parents[1] / "benchmarks" / "hybrid.py"


@pytest.fixture(scope="module")
def hybrid() -> Any:
    """benchmarks/hybrid.py as a module (its siblings importable, as when run as a script)."""
    sys.path.insert(0, str(HYBRID.parent))
    spec = importlib.util.spec_from_file_location("hybrid_benchmark", HYBRID)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _set(hybrid: Any, means: dict[str, float], questions: int = 400, noise: float = 0.0) -> dict[str, Any]:
    """A set's results: every run's per-query nDCG@10 around its mean (the same questions, paired)."""
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
    return {"runs": runs, "questions": questions, "chunks": 10}


def test_a_candidate_level_with_the_better_side_everywhere_and_above_the_baselines_is_adopted(hybrid: Any) -> None:
    good = {"dense": 0.6, "bm25": 0.55, "hybrid-relative-0.5": 0.65, "bm25+small-to-big": 0.6, "bm25+multi-size": 0.6}
    results = {"a/llamaindex": _set(hybrid, good), "b/langchain": _set(hybrid, good)}
    report = hybrid.verdicts(results)
    assert report["candidates"]["relative-0.5"]["passes"]
    assert not report["candidates"]["rrf"]["passes"]  # 0.5 < the better side (dense, 0.6) by more than 0.005
    assert report["adopted"] == "relative-0.5"


def test_one_set_below_the_better_side_beyond_the_tolerance_vetoes(hybrid: Any) -> None:
    good = {"dense": 0.6, "bm25": 0.55, "hybrid-rrf": 0.65}
    bad = {"dense": 0.6, "bm25": 0.7, "hybrid-rrf": 0.68}  # 0.02 below bm25 there
    report = hybrid.verdicts({"a/x": _set(hybrid, good), "b/x": _set(hybrid, bad)})
    assert not report["candidates"]["rrf"]["passes"]
    assert "b/x" in report["candidates"]["rrf"]["failures"][0] and "bm25" in report["candidates"]["rrf"]["failures"][0]


def test_a_noisy_set_is_ruled_on_its_interval_a_small_one_on_its_point(hybrid: Any) -> None:
    means = {"dense": 0.6, "bm25": 0.5, "hybrid-rrf": 0.598}  # within the tolerance on the point
    noisy = hybrid.verdicts({"a/x": _set(hybrid, means, questions=400, noise=0.4)})
    assert not noisy["candidates"]["rrf"]["passes"]  # the interval's lower bound is below -0.01
    small = hybrid.verdicts({"a/x": _set(hybrid, means, questions=hybrid.MIN_QUESTIONS - 1, noise=0.4)})
    assert small["candidates"]["rrf"]["passes"], small["candidates"]["rrf"]["failures"]


def test_the_mean_must_reach_both_fusions_with_small_to_big(hybrid: Any) -> None:
    means = {"dense": 0.6, "bm25": 0.5, "hybrid-rrf": 0.62, "bm25+multi-size": 0.64}
    report = hybrid.verdicts({"a/x": _set(hybrid, means)})
    assert not report["candidates"]["rrf"]["passes"]
    assert any("bm25+multi-size" in f for f in report["candidates"]["rrf"]["failures"])


def test_a_tie_goes_to_the_earlier_row_and_none_passing_keeps_dense(hybrid: Any) -> None:
    tied = {"dense": 0.6, "bm25": 0.5, "hybrid-rrf": 0.65, "hybrid-dbsf-0.7": 0.651}
    assert hybrid.verdicts({"a/x": _set(hybrid, tied)})["adopted"] == "rrf"
    nobody = {"dense": 0.9, "bm25": 0.9}
    assert hybrid.verdicts({"a/x": _set(hybrid, nobody)})["adopted"] is None
