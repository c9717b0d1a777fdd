"""plan_index: which FAISS index to build for a corpus of a given size.

Small corpora get an exact flat index: it needs no training and fits in memory. Above `flat_limit` vectors the plan
is the compressed index `fair_retrieval.index.index_plan` sizes for the corpus (IVF-PQ with an SQ8 refinement stage; the
same plan `FaissIndex(kind="ivfpq")` makes), optionally with an OPQ rotation in front; explicit IVF-PQ parameters
give plain IVF-PQ instead. The training sample is 39·nlist vectors (the points per list faiss' k-means asks for),
at least 10,000 (PQ codebooks: 256 centroids each), at most the corpus.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Literal

from fair_retrieval.index.index_plan import POINTS_PER_CENTROID, IndexPlan, ivfpq_plan, kind_plan
from fair_retrieval.validate import is_int, is_positive_int

PlanKind = Literal["auto", "flat", "ivfpq"]
FLAT_LIMIT = 1_000_000
MIN_TRAIN_SIZE = 10_000
_IVFPQ_KEYS = ("nlist", "nprobe", "m", "nbits", "k_factor")


def plan_index(
    count: int,
    dim: int,
    kind: PlanKind = "auto",
    *,
    flat_limit: int = FLAT_LIMIT,
    opq: bool = False,
    train_size: int | None = None,
    **params: int,
) -> IndexPlan:
    """Choose the index for `count` vectors of size `dim`.

    Args:
        count: number of vectors to index.
        dim: vector size.
        kind: "auto" (flat up to `flat_limit` vectors, compressed above), "flat" or "ivfpq".
        flat_limit: the largest corpus "auto" keeps exact.
        opq: add an OPQ rotation before IVF-PQ.
        train_size: training sample size (default 39·nlist, at least 10,000, capped at `count`).
        **params: IVF-PQ overrides: nprobe, k_factor (keep the sized plan); nlist, m, nbits (plain IVF-PQ).

    Raises:
        ValueError: bad counts or kinds, parameters for a flat index, or IVF-PQ parameters that cannot work.
    """
    for name, value in (("count", count), ("dim", dim), ("flat_limit", flat_limit)):
        if not is_int(value) or value < (0 if name != "dim" else 1):
            raise ValueError(f"{name} must be a non-negative int, got {value!r}.")
    if kind not in ("auto", "flat", "ivfpq"):
        raise ValueError(f"kind must be 'auto', 'flat' or 'ivfpq', got {kind!r}.")
    unknown = sorted(set(params) - set(_IVFPQ_KEYS))
    if unknown:
        raise ValueError(f"Unknown index parameter(s) {unknown}; IVF-PQ takes {list(_IVFPQ_KEYS)}.")
    chosen = kind if kind != "auto" else ("flat" if count <= flat_limit else "ivfpq")
    if chosen == "flat":
        if params or opq:
            raise ValueError(
                f"A flat index takes no IVF-PQ parameters or OPQ (got {sorted(params) + (['opq'] if opq else [])}); "
                f"pass kind='ivfpq'{' or a smaller flat_limit' if kind == 'auto' else ''}."
            )
        return kind_plan("flat", dim)
    try:
        plan = ivfpq_plan(count, dim, **params)
    except TypeError as error:
        raise ValueError(str(error)) from error
    assert plan is not None  # count is known
    nlist, nbits = plan.params["nlist"], plan.params["nbits"]
    needed = max(nlist, 2**nbits)
    size = train_size if train_size is not None else max(POINTS_PER_CENTROID * nlist, MIN_TRAIN_SIZE)
    if not is_positive_int(size):
        raise ValueError(f"train_size must be a positive int, got {train_size!r}.")
    size = min(size, count)
    if size < needed:
        raise ValueError(
            f"IVF-PQ with nlist={nlist}, nbits={nbits} needs at least {needed} training vectors, but only {size} "
            f"are available; use kind='flat' for {count} vectors, or lower nlist / nbits."
        )
    factory = f"OPQ{plan.params['m']},{plan.factory}" if opq else plan.factory
    return replace(plan, factory=factory, train_size=size)
