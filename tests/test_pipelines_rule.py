"""The multi-vector rule of benchmarks/pipelines.py on made-up results: each part, the tie-break, the fallback."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from tests.benchmark_modules import load_benchmark


@pytest.fixture(scope="module")
def pipelines() -> Any:
    """The benchmark's modules (benchmarks/pipelines.py and its siblings), as a namespace of their names."""
    import types

    module = load_benchmark("pipelines")
    import pipelines_report
    import pipelines_runs

    return types.SimpleNamespace(**{**vars(pipelines_runs), **vars(pipelines_report), **vars(module)})


def _results(ndcg: dict[str, float], psi: dict[str, float], scifact: dict[str, float]) -> dict[str, Any]:
    runs = {name: {"ndcg@10": value, "psi": psi.get(name, 0.05)} for name, value in ndcg.items()}
    results: dict[str, Any] = {
        f"{d}/{p}": {"runs": {n: dict(r) for n, r in runs.items()}}
        for d in ("squad-v2", "reddit")
        for p in ("llamaindex", "langchain")
    }
    results["scifact"] = {"runs": {name: {"ndcg@10": value} for name, value in scifact.items()}}
    return results


def test_the_rule_holds_and_a_tie_goes_to_max(pipelines: Any) -> None:
    ndcg = {"default": 0.70, "small-to-big": 0.72, "mv-max": 0.80, "mv-max-mean": 0.8004, "mv-top2": 0.79}
    scifact = {"default": 0.64, "mv-max": 0.64, "mv-max-mean": 0.641, "mv-top2": 0.64}
    report = pipelines.multivector_verdicts(_results(ndcg, {"default": 0.1}, scifact))
    assert report["rule_holds"] is True
    assert report["aggregate"] == "max"  # 0.800 vs 0.8004: equal to three decimals, so the simplest
    assert report["verdicts"]["mv-top2"]["meets_rule"] is True


def test_each_part_of_the_rule_can_fail(pipelines: Any) -> None:
    ndcg = {"default": 0.70, "small-to-big": 0.81, "mv-max": 0.80, "mv-max-mean": 0.73, "mv-top2": 0.79}
    psi = {"default": 0.10, "mv-top2": 0.20}
    scifact = {"default": 0.64, "mv-max": 0.63, "mv-max-mean": 0.64, "mv-top2": 0.64}
    report = pipelines.multivector_verdicts(_results(ndcg, psi, scifact))
    verdicts = report["verdicts"]
    assert not any(verdicts[n]["meets_rule"] for n in ("mv-max", "mv-max-mean", "mv-top2"))
    assert verdicts["mv-max"]["runs"]["squad-v2/langchain"]["small_to_big"] is False
    assert verdicts["mv-max"]["scifact_ok"] is False
    assert verdicts["mv-max-mean"]["runs"]["reddit/llamaindex"]["gain"] is False
    assert verdicts["mv-top2"]["runs"]["reddit/langchain"]["psi"] is False
    assert report["rule_holds"] is False
    assert report["aggregate"] == "max-mean"  # the only one meeting the PSI and SciFact parts
    assert report["aggregate_by"] == "psi and scifact parts"


def test_cached_windows_assemble_in_the_callers_order(pipelines: Any) -> None:
    parts = [
        (np.ones(2), np.ones((2, 2)), np.array([[0, 5], [4, 9]]), np.array([5, 5])),
        (np.zeros(2), np.zeros((1, 2)), np.array([[0, 3]]), np.array([3])),
    ]
    windows = pipelines._assemble(parts)
    assert windows.owners.tolist() == [0, 0, 1]
    assert windows.spans.tolist() == [[0, 5], [4, 9], [0, 3]]
    assert pipelines._distinct(["b", "a", "b", "c", "a"]) == ["b", "a", "c"]
