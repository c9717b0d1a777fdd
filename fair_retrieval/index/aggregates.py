"""How a document's window scores become its score in a `MultiVectorIndex`, and scores in one direction.

The aggregates (`Aggregate`):

- "max": the best window's score (the highest nDCG@10 of the three in every run of the multi-vector study and of
  the window study). The default: the window study's rule, on intervals, picks it (docs/window_study.md).
- "max-mean": the mean of the best window's score and the pooled vector's (the pooled vector is recomputed from the
  stored windows, so it is exactly what `embed_documents` gives).
- "top2": the mean of the two best windows' scores (a one-window document: its window's score).

Scores are compared "larger is better": inner products as they are, squared L2 distances negated
(`higher_better`, and `metric_score` back).
"""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from fair_retrieval.index.inspection import Metric

__all__ = ["AGGREGATES", "DEFAULT_AGGREGATE", "Aggregate", "aggregate_score", "higher_better", "metric_score"]

Aggregate = Literal["max", "max-mean", "top2"]
"""How a document's window scores become its score (see the module docstring)."""
AGGREGATES: tuple[str, ...] = get_args(Aggregate)
DEFAULT_AGGREGATE: Aggregate = "max"


def aggregate_score(aggregate: Aggregate, own: np.ndarray, pooled: float | None = None) -> float:
    """A document's score from its windows' "larger is better" scores `own` (w,), and for "max-mean" the score of
    its pooled vector."""
    if aggregate == "max":
        return float(own.max())
    if aggregate == "top2":
        return float(np.sort(own)[-2:].mean())
    if pooled is None:
        raise ValueError('aggregate "max-mean" needs the pooled vector\'s score.')
    return float((own.max() + pooled) / 2)


def higher_better(metric: Metric, scores: np.ndarray) -> np.ndarray:
    """Scores as "larger is better" (squared L2 distances negated)."""
    return scores.astype(np.float64) if metric == "ip" else -scores.astype(np.float64)


def metric_score(metric: Metric, value: float) -> float:
    """A "larger is better" score back in the metric's direction."""
    return float(value) if metric == "ip" else float(-value)


def window_scores(metric: Metric, query: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """ "Larger is better" scores of `vectors` (w, d) against one query (d,)."""
    if metric == "ip":
        return vectors.astype(np.float64) @ query.astype(np.float64)
    return -((vectors.astype(np.float64) - query.astype(np.float64)) ** 2).sum(axis=1)
