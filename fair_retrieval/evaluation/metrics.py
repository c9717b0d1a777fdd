"""Retrieval metrics: nDCG@k and Recall@k per query, their means per group, PSI and the harmonic mean.

Definitions follow trec_eval (and so pytrec-eval and ranx): nDCG uses linear gain (the relevance grade) and
log2(rank + 1) discount, with the ideal ranking built from all judged relevant documents; Recall@k is the share of
relevant documents found in the first k. Queries are averaged with equal weight.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from fair_retrieval.validate import positive_int

Run = Mapping[str, Sequence[str]]  # query id → ranked document ids
Qrels = Mapping[str, Mapping[str, int]]


def ndcg_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    """nDCG@k of one ranking against graded judgements (linear gain, as trec_eval's ndcg_cut)."""
    _check_k(k)
    gains = sorted((rel for rel in judged.values() if rel > 0), reverse=True)
    ideal = sum(gain / math.log2(rank + 2) for rank, gain in enumerate(gains[:k]))
    if ideal == 0.0:
        return 0.0
    dcg = sum(max(0, judged.get(doc, 0)) / math.log2(rank + 2) for rank, doc in enumerate(ranked[:k]))
    return dcg / ideal


def recall_at_k(ranked: Sequence[str], judged: Mapping[str, int], k: int = 10) -> float:
    """Share of the relevant (grade > 0) documents that appear in the first k of the ranking."""
    _check_k(k)
    relevant = {doc for doc, rel in judged.items() if rel > 0}
    if not relevant:
        return 0.0
    return len(relevant.intersection(ranked[:k])) / len(relevant)


def metric_names(ndcg_k: Sequence[int] = (10,), recall_k: Sequence[int] = (10, 100)) -> list[str]:
    """Names used in reports: "ndcg@10", "recall@10", …"""
    return [f"ndcg@{k}" for k in ndcg_k] + [f"recall@{k}" for k in recall_k]


def per_query_metrics(
    run: Run, qrels: Qrels, ndcg_k: Sequence[int] = (10,), recall_k: Sequence[int] = (10, 100)
) -> dict[str, dict[str, float]]:
    """Every metric for every query of `qrels` (a query missing from `run` retrieved nothing and scores 0)."""
    result: dict[str, dict[str, float]] = {}
    for qid, judged in qrels.items():
        ranked = run.get(qid, ())
        scores = {f"ndcg@{k}": ndcg_at_k(ranked, judged, k) for k in ndcg_k}
        scores.update({f"recall@{k}": recall_at_k(ranked, judged, k) for k in recall_k})
        result[qid] = scores
    return result


def mean_metrics(
    per_query: Mapping[str, Mapping[str, float]], query_ids: Sequence[str] | None = None
) -> dict[str, float]:
    """Mean of every metric over `query_ids` (all queries when None); also "count", the number of queries."""
    ids = list(per_query) if query_ids is None else list(query_ids)
    if not ids:
        raise ValueError("Cannot average metrics over an empty set of queries.")
    names = list(per_query[ids[0]])
    means = {name: sum(per_query[qid][name] for qid in ids) / len(ids) for name in names}
    means["count"] = float(len(ids))
    return means


def position_sensitivity_index(values: Sequence[float]) -> float:
    """PSI = 1 − min/max over the groups' scores (0 = no position bias; NovaSearch, arXiv 2505.13950).

    Raises:
        ValueError: with fewer than two groups, or a negative score. All-zero scores give 0 (nothing to compare).
    """
    values = list(values)
    if len(values) < 2:
        raise ValueError("PSI compares groups: it needs at least two group scores.")
    if min(values) < 0:
        raise ValueError("PSI is defined for non-negative scores.")
    top = max(values)
    return 0.0 if top == 0 else 1.0 - min(values) / top


def harmonic_mean(values: Sequence[float]) -> float:
    """Harmonic mean of the groups' scores: high only when *every* group scores well (0 if any group is 0)."""
    values = list(values)
    if not values:
        raise ValueError("The harmonic mean needs at least one value.")
    if min(values) < 0:
        raise ValueError("The harmonic mean is defined for non-negative values.")
    if min(values) == 0:
        return 0.0
    return len(values) / sum(1.0 / v for v in values)


def _check_k(k: int) -> None:
    positive_int(k, "k")
