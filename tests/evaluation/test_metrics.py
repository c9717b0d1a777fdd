"""Metrics: cross-checked against pytrec-eval and ranx on random runs with graded judgements; PSI and HM."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest

from fair_retrieval.evaluation.metrics import (
    harmonic_mean,
    mean_metrics,
    ndcg_at_k,
    per_query_metrics,
    position_sensitivity_index,
    recall_at_k,
)


def random_case(seed: int) -> tuple[dict[str, dict[str, int]], dict[str, dict[str, float]]]:
    """Graded qrels (some zero grades) and scored runs without ties, over 40 documents and 25 queries."""
    rng = random.Random(seed)
    docs = [f"d{i}" for i in range(40)]
    qrels, run = {}, {}
    for q in range(25):
        judged = rng.sample(docs, rng.randint(1, 5))
        qrels[f"q{q}"] = {d: rng.choice([1, 1, 2, 3]) for d in judged}
        if rng.random() < 0.3:
            qrels[f"q{q}"][rng.choice(docs)] = 0 if rng.random() < 0.5 else 1
        retrieved = rng.sample(docs, 30)
        run[f"q{q}"] = {d: 100.0 - i - rng.random() * 0.5 for i, d in enumerate(retrieved)}
    return qrels, run


def ranked(run: dict[str, dict[str, float]]) -> dict[str, list[str]]:
    return {q: sorted(scores, key=lambda d: -scores[d]) for q, scores in run.items()}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ndcg_and_recall_match_pytrec_eval(seed: int) -> None:
    pytrec_eval = pytest.importorskip("pytrec_eval")
    qrels, run = random_case(seed)
    evaluator = pytrec_eval.RelevanceEvaluator(qrels, {"ndcg_cut_10", "recall_10", "recall_20"})
    reference = evaluator.evaluate(run)
    ours = per_query_metrics(ranked(run), qrels, ndcg_k=(10,), recall_k=(10, 20))
    for qid in qrels:
        assert ours[qid]["ndcg@10"] == pytest.approx(reference[qid]["ndcg_cut_10"], abs=1e-9)
        assert ours[qid]["recall@10"] == pytest.approx(reference[qid]["recall_10"], abs=1e-9)
        assert ours[qid]["recall@20"] == pytest.approx(reference[qid]["recall_20"], abs=1e-9)


RANX = """
import json, sys
import ranx
qrels, run = json.load(sys.stdin)
print(json.dumps(ranx.evaluate(ranx.Qrels(qrels), ranx.Run(run), ["ndcg@10", "recall@10", "recall@5"])))
"""
"""ranx's metrics in a process of their own, with numba's compiler off: the same functions run as Python, in
milliseconds on 25 queries, where compiling them takes 30 s here (the switch must be set before numba is imported,
which the test session may have done already)."""


@pytest.mark.slow  # a process of its own with ranx: a few seconds
def test_mean_ndcg_and_recall_match_ranx() -> None:
    pytest.importorskip("ranx")
    qrels, run = random_case(3)
    positive = {q: {d: r for d, r in judged.items() if r > 0} for q, judged in qrels.items()}
    done = subprocess.run(
        [sys.executable, "-c", RANX],
        input=json.dumps([positive, run]),
        capture_output=True,
        text=True,
        env={**os.environ, "NUMBA_DISABLE_JIT": "1"},
        check=True,
    )
    scores = json.loads(done.stdout)
    ours = mean_metrics(per_query_metrics(ranked(run), qrels, ndcg_k=(10,), recall_k=(5, 10)))
    assert ours["ndcg@10"] == pytest.approx(scores["ndcg@10"], abs=1e-6)
    assert ours["recall@10"] == pytest.approx(scores["recall@10"], abs=1e-6)
    assert ours["recall@5"] == pytest.approx(scores["recall@5"], abs=1e-6)
    assert ours["count"] == 25


def test_ndcg_by_hand() -> None:
    # one relevant document at rank 3: DCG = 1/log2(4) = 0.5, ideal = 1
    assert ndcg_at_k(["a", "b", "rel", "c"], {"rel": 1}, 10) == pytest.approx(0.5)
    assert ndcg_at_k(["a", "b", "rel"], {"rel": 1}, 2) == 0.0
    assert ndcg_at_k(["rel"], {"rel": 1, "other": 1}, 10) == pytest.approx(1 / (1 + 1 / 1.5849625007211563))
    assert recall_at_k(["x", "rel"], {"rel": 1, "other": 2, "zero": 0}, 2) == 0.5
    with pytest.raises(ValueError, match="k must be a positive int"):
        ndcg_at_k(["a"], {"a": 1}, 0)


def test_missing_query_in_run_scores_zero() -> None:
    scores = per_query_metrics({}, {"q": {"d": 1}})
    assert scores["q"] == {"ndcg@10": 0.0, "recall@10": 0.0, "recall@100": 0.0}


def test_psi_and_harmonic_mean() -> None:
    assert position_sensitivity_index([0.8, 0.6, 0.4]) == pytest.approx(0.5)
    assert position_sensitivity_index([0.5, 0.5]) == 0.0
    assert position_sensitivity_index([0.0, 0.0]) == 0.0
    assert harmonic_mean([0.5, 1.0]) == pytest.approx(2 / 3)
    assert harmonic_mean([0.7, 0.0]) == 0.0
    assert harmonic_mean([0.3]) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="at least two"):
        position_sensitivity_index([0.5])
    with pytest.raises(ValueError, match="non-negative"):
        harmonic_mean([0.5, -0.1])
    with pytest.raises(ValueError, match="empty"):
        mean_metrics({"q": {"ndcg@10": 1.0}}, [])
