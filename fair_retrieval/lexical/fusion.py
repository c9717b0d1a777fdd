"""How a hybrid search joins the dense and the lexical rankings of one query into one: `fuse`.

Each side gives its best candidates as (key, score) pairs, best first. The fusions are the ones the stacks and the
vector databases offer:

- "rrf": reciprocal rank fusion, Σ weight / (60 + rank) over the lists a document is in (Cormack et al. 2009; what
  LlamaIndex's `QueryFusionRetriever(mode="reciprocal_rerank")` and LangChain's `EnsembleRetriever` compute), the
  dense list weighted α and the lexical one 1 − α (α = 0.5: both equal, the plain RRF);
- "relative_score": each list's scores min-max scaled to [0, 1], then α · dense + (1 − α) · lexical (Weaviate's
  relative score fusion, LlamaIndex's `mode="relative_score"`); a document missing from a list scores 0 there;
- "dist_based_score": the same with each list scaled by its mean ± 3 standard deviations (Qdrant / LlamaIndex's
  distribution-based score fusion), robust to one outlying score.

α is LlamaIndex's `alpha`: 1 is dense only, 0 lexical only; `adaptive_alpha` chooses one per query from the two
lists' scores (how far each list's top score stands above the rest of its list). Fused scores lie in [0, 1] (RRF
divided by the score of a document first in both lists), higher is better; ties keep the dense order, then the
lexical one. A non-finite score (an inner product beyond float32's range is +inf or -inf) is ranked, not
propagated: the scales come from a list's finite scores, +inf scales to 1 and -inf or NaN to 0.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any, TypeVar

import numpy as np

__all__ = ["ADAPTIVE_RANGE", "FUSIONS", "RRF_K", "adaptive_alpha", "check_alpha", "check_fusion", "fuse"]

FUSIONS: tuple[str, ...] = ("rrf", "relative_score", "dist_based_score")
RRF_K = 60
"""The rank constant of reciprocal rank fusion (the value of the paper and of both stacks)."""

ADAPTIVE_RANGE = (0.2, 0.8)
"""The α `adaptive_alpha` gives lies in this range: neither side is ever dropped."""

K = TypeVar("K", bound=Hashable)


def check_fusion(fusion: Any) -> str:
    """`fusion` if it is one of `FUSIONS`, else a ValueError naming them."""
    if fusion not in FUSIONS:
        raise ValueError(
            f"fusion must be one of {FUSIONS} (reciprocal rank, min-max scaled scores, scores scaled by their "
            f"distribution), got {fusion!r}."
        )
    return str(fusion)


def check_alpha(alpha: Any) -> float:
    """`alpha` as a float in [0, 1] (1: dense only, 0: lexical only), else a ValueError. A numpy number (e.g.
    `np.float32(0.5)`, what a computed weight often is) is a number too; a bool, NaN or infinity is not."""
    number = isinstance(alpha, int | float | np.integer | np.floating) and not isinstance(alpha, bool | np.bool_)
    if not number or not 0.0 <= float(alpha) <= 1.0:
        raise ValueError(f"alpha must be a number in [0, 1] (1: dense only, 0: lexical only), got {alpha!r}.")
    return float(alpha)


def fuse(
    dense: Sequence[tuple[K, float]],
    lexical: Sequence[tuple[K, float]],
    k: int,
    *,
    fusion: str = "rrf",
    alpha: float = 0.5,
    dense_larger_is_better: bool = True,
) -> list[tuple[K, float]]:
    """The k best documents of the two rankings fused, best first, with their fused scores in [0, 1].

    Args:
        dense: the dense side's candidates, best first (key, raw score).
        lexical: the lexical side's candidates, best first (key, BM25 score).
        k: how many to return at most.
        fusion: one of `FUSIONS`.
        alpha: the dense side's weight (1 − alpha the lexical side's).
        dense_larger_is_better: False for distances (an "l2" store), whose scores are negated before scaling.
    """
    check_fusion(fusion)
    alpha = check_alpha(alpha)
    fused: dict[K, float] = {}
    if fusion == "rrf":
        top = alpha / (RRF_K + 1) + (1.0 - alpha) / (RRF_K + 1)
        for weight, ranking in ((alpha, dense), (1.0 - alpha, lexical)):
            for rank, (key, _) in enumerate(ranking, start=1):
                fused[key] = fused.get(key, 0.0) + weight / (RRF_K + rank) / top
    else:
        sign = 1.0 if dense_larger_is_better else -1.0
        for weight, ranking, direction in ((alpha, dense, sign), (1.0 - alpha, lexical, 1.0)):
            scaled = _scaled([direction * score for _, score in ranking], fusion)
            for (key, _), value in zip(ranking, scaled, strict=True):
                fused[key] = fused.get(key, 0.0) + weight * value
    first: dict[K, int] = {}
    for position, (key, _) in enumerate([*dense, *lexical]):
        first.setdefault(key, position)
    ranked = sorted(fused.items(), key=lambda item: (-item[1], first[item[0]]))
    return [(key, float(min(1.0, max(0.0, score)))) for key, score in ranked[:k]]


def _scaled(scores: list[float], fusion: str) -> np.ndarray:
    """One list's scores scaled to [0, 1]: min-max ("relative_score") or mean ± 3 σ ("dist_based_score"); a list
    of equal scores (or of one) scales to 1.

    The scale is taken from the finite scores only: a score of +inf (an inner product beyond float32's range)
    scales to 1, one of -inf or NaN to 0, so a non-finite score never makes the others NaN nor the ranking
    unordered."""
    values = np.asarray(scores, dtype=np.float64)
    if not len(values):
        return values
    finite = np.isfinite(values)
    scaled = np.where(values == np.inf, 1.0, 0.0)
    if not finite.any():
        return scaled
    kept = values[finite]
    if fusion == "relative_score":
        low, high = kept.min(), kept.max()
    else:
        mean, spread = kept.mean(), kept.std()
        low, high = mean - 3 * spread, mean + 3 * spread
    if not high - low > 0:  # equal scores, or a spread beyond float64 (inf - inf)
        scaled[finite] = 1.0
    else:
        scaled[finite] = np.clip((kept - low) / (high - low), 0.0, 1.0)
    return scaled


def adaptive_alpha(dense: Sequence[float], lexical: Sequence[float], *, dense_larger_is_better: bool = True) -> float:
    """The dense side's weight for one query, from how peaked each side's scores are.

    A side's confidence is the z-score of its top score within its own list, c = (s₁ − mean) / std (0 for a list
    of fewer than two scores or of equal scores); α = c_dense / (c_dense + c_lexical), clipped to `ADAPTIVE_RANGE`.
    A lexical list that is empty (no query word in the store's vocabulary) gives 1 (dense only); two flat lists
    give 0.5.

    Args:
        dense: the dense side's scores, best first.
        lexical: the lexical side's BM25 scores, best first.
        dense_larger_is_better: False for distances (negated first).
    """
    if not len(lexical):
        return 1.0
    sign = 1.0 if dense_larger_is_better else -1.0
    c_dense = _peak([sign * s for s in dense])
    c_lexical = _peak(list(lexical))
    if c_dense + c_lexical <= 0:
        return 0.5
    low, high = ADAPTIVE_RANGE
    return float(min(high, max(low, c_dense / (c_dense + c_lexical))))


def _peak(scores: list[float]) -> float:
    """How far a list's top score stands above the list: its z-score (0 for fewer than two or equal scores)."""
    values = np.asarray(scores, dtype=np.float64)
    values = values[np.isfinite(values)]  # a non-finite score carries no measure of the list's spread
    if len(values) < 2 or values.std() <= 0:
        return 0.0
    return float(max(0.0, (values.max() - values.mean()) / values.std()))
