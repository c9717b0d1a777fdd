"""The dense window study's budget round (benchmarks/dense_windows.py, docs/dense_window_study.md: "Under today's
budget") on made-up results: the memory line, each budget, the pooled interval against today's default, the veto of
a clearly worse run, the tie-break, and today's default staying when nothing passes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.benchmark_modules import load_benchmark


@pytest.fixture(scope="module")
def study() -> Any:
    """benchmarks/dense_windows.py as a module (its siblings importable, as when run as a script)."""
    return load_benchmark("dense_windows")


def _set(study: Any, means: dict[str, float], windows: dict[str, float] | None = None, questions: int = 400) -> dict:
    """A set's results: every shape's (and the recipe's) per-query nDCG@10 around its mean, the same questions
    (paired), and its windows a chunk (6 unless `windows` says otherwise)."""
    rng = np.random.default_rng(0)
    base = rng.uniform(-0.3, 0.3, questions)
    runs = {}
    for name in (study.RECIPE, *study.BUDGET_CANDIDATES):
        per_query = dict(enumerate(means.get(name, 0.5) + base))
        runs[name] = {
            "ndcg@10": float(np.mean(list(per_query.values()))),
            "per_query": per_query,
            "vectors_per_chunk": (windows or {}).get(name, 6.0),
        }
    return {"runs": runs, "questions": questions, "chunks": 10, "done": True}


MEMORY = {"a": 100.0, "b": 150.0, "pooled": 1600.0}  # at most 10 windows a chunk


def _builds(study: Any, ratios: dict[str, float] | None = None) -> dict:
    """Build ratios of every shape on both stacks of models "m" and "n" (2.0 unless `ratios` says otherwise)."""
    row = {name: (ratios or {}).get(name, 2.0) for name in study.BUDGET_CANDIDATES}
    return {model: {"langchain": dict(row), "llamaindex": dict(row)} for model in ("m", "n")}


def _models(study: Any, means: dict[str, float], **options: Any) -> dict:
    return {
        model: {"a/langchain": _set(study, means, **options), "b/llamaindex": _set(study, means, **options)}
        for model in ("m", "n")
    }


def test_the_memory_line_goes_through_the_two_scale_runs(study: Any) -> None:
    def report(windows: float, memory: float, pooled: float) -> dict:
        return {
            "configs": {
                "windows-compressed": {"vectors_per_chunk": windows, "memory_bytes_per_chunk": memory},
                "pooled": {"memory_bytes_per_chunk": pooled},
            }
        }

    line = study.memory_line([report(6.0, 1000.0, 1600.0), report(12.0, 1900.0, 1610.0)])
    assert line["b"] == pytest.approx(150.0) and line["a"] == pytest.approx(100.0)
    assert line["pooled"] == pytest.approx(1605.0)
    with pytest.raises(SystemExit, match="run two shapes"):
        study.memory_line([report(6.0, 1000.0, 1600.0), report(6.2, 1030.0, 1600.0)])
    with pytest.raises(SystemExit, match="two store_scale"):
        study.memory_line([report(6.0, 1000.0, 1600.0)])


def test_a_shape_better_everywhere_within_budget_is_adopted_and_todays_never_is(study: Any) -> None:
    models = _models(study, {"whole+half": 0.6, "quarter": 0.65})
    report = study.budget_verdicts(models, MEMORY, _builds(study))
    assert report["candidates"]["quarter"]["passes"], report["candidates"]["quarter"]["failures"]
    assert report["adopted"] == "quarter"
    assert not report["candidates"]["whole+half"]["passes"]


def test_more_memory_a_chunk_than_the_pooled_store_is_out(study: Any) -> None:
    models = _models(study, {"whole+half": 0.6, "quarter": 0.65}, windows={"quarter": 10.5})  # 1,675 B > 1,600
    report = study.budget_verdicts(models, MEMORY, _builds(study))
    quarter = report["candidates"]["quarter"]
    assert not quarter["passes"] and quarter["max_bytes_per_chunk"] == pytest.approx(1675.0)
    assert quarter["failures"][0].startswith("memory on 4 runs")
    assert report["adopted"] is None


def test_a_build_over_three_times_the_pooled_store_is_out(study: Any) -> None:
    models = _models(study, {"whole+half": 0.6, "quarter": 0.65})
    builds = _builds(study)
    builds["n"]["llamaindex"]["quarter"] = 3.2
    report = study.budget_verdicts(models, MEMORY, builds)
    assert report["candidates"]["quarter"]["failures"] == ["build n/llamaindex 3.20×"]
    del builds["n"]["llamaindex"]["quarter"]
    report = study.budget_verdicts(models, MEMORY, builds)
    assert report["candidates"]["quarter"]["failures"] == ["build not measured on n/llamaindex"]


def test_the_pooled_lower_bound_must_be_above_zero(study: Any) -> None:
    models = _models(study, {"whole+half": 0.6, "quarter": 0.6})
    report = study.budget_verdicts(models, MEMORY, _builds(study))
    assert report["candidates"]["quarter"]["failures"] == ["pooled +0.0000 (lower bound +0.0000)"]


def test_one_run_clearly_worse_vetoes_and_a_wide_small_one_does_not(study: Any) -> None:
    models = _models(study, {"whole+half": 0.6, "quarter": 0.65})
    models["n"]["b/llamaindex"] = _set(study, {"whole+half": 0.6, "quarter": 0.58})
    report = study.budget_verdicts(models, MEMORY, _builds(study))
    quarter = report["candidates"]["quarter"]
    assert quarter["worst_run"] == "n:b/llamaindex" and quarter["failures"] == ["clearly worse on n:b/llamaindex"]
    rng = np.random.default_rng(1)
    small = _set(study, {"whole+half": 0.6}, questions=16)
    noisy = {q: v - 0.02 + rng.normal(0, 0.3) for q, v in small["runs"]["whole+half"]["per_query"].items()}
    small["runs"]["quarter"]["per_query"] = noisy
    small["runs"]["quarter"]["ndcg@10"] = float(np.mean(list(noisy.values())))
    models["n"]["b/llamaindex"] = small
    report = study.budget_verdicts(models, MEMORY, _builds(study))
    assert not any("clearly worse" in f for f in report["candidates"]["quarter"]["failures"])


def test_a_tie_goes_to_the_fewer_windows_a_chunk(study: Any) -> None:
    means = {"whole+half": 0.6, "quarter": 0.65, "t128": 0.649}
    models = _models(study, means, windows={"quarter": 9.0, "t128": 5.0})
    assert study.budget_verdicts(models, MEMORY, _builds(study))["adopted"] == "t128"


def test_a_shape_missing_from_a_run_does_not_pass(study: Any) -> None:
    models = _models(study, {"whole+half": 0.6, "quarter": 0.65})
    del models["m"]["a/langchain"]["runs"]["quarter"]
    report = study.budget_verdicts(models, MEMORY, _builds(study))
    assert report["candidates"]["quarter"]["failures"] == ["not run on m:a/langchain"]
