"""Building faiss indices from plans: an empty CPU index with the right id policy, search values set by name, and
a copy without some vectors for structures faiss cannot delete from."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from fair_retrieval.index.index_plan import IndexPlan
from fair_retrieval.index.inspection import (
    Metric,
    faiss_metric,
    kind_of,
    native_ivf,
    params_of,
    reconstruct,
    takes_ids,
    unwrap,
)

logger = logging.getLogger(__name__)

ID_MAP_PREFIX = "IDMap2"  # faiss' id map, put around indices that cannot store ids themselves


def new_cpu_index(faiss: Any, dim: int, metric: Metric, plan: IndexPlan) -> tuple[Any, bool, IndexPlan]:
    """A fresh, empty CPU index of `plan`, holding ids natively (IVF) or through IDMap2.

    Returns:
        (index, whether it uses IDMap2, the plan with its kind resolved and its parameters read from faiss).

    Raises:
        ValueError: if faiss cannot build the factory string for `dim`-d vectors, or a search value is unknown.
    """
    metric_type = faiss_metric(faiss, metric)
    try:
        index = faiss.index_factory(dim, plan.factory, metric_type)
        uses_id_map = not takes_ids(faiss, index)
        if uses_id_map:
            index = faiss.index_factory(dim, f"{ID_MAP_PREFIX},{plan.factory}", metric_type)
    except RuntimeError as error:
        raise ValueError(
            f"faiss cannot build {plan.factory!r} for {dim}-d vectors: {str(error).splitlines()[0]}"
        ) from error
    core, _ = unwrap(faiss, index)
    if hasattr(core, "do_polysemous_training"):  # IVF-PQ and plain PQ ("PQ48"): faiss' factory turns it on
        core.do_polysemous_training = False  # only serves Hamming-filtered search, which is not used; slow
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        ivf = faiss.downcast_index(ivf)
        if native_ivf(faiss, index):
            ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # lookup by id for remove() and get_vectors()
    apply_search(faiss, index, plan.build, factory=plan.factory)
    apply_search(faiss, index, plan.search, factory=plan.factory)
    kind = plan.kind if plan.kind != "custom" else kind_of(faiss, index)  # "HNSW8,Flat" is an hnsw index
    return index, uses_id_map, replace(plan, kind=kind, params=params_of(faiss, index))


def apply_search(
    faiss: Any, index: Any, values: Mapping[str, float], *, on_gpu: bool = False, factory: str | None = None
) -> None:
    """Set ParameterSpace values on `index` (GpuParameterSpace for a GPU index).

    Raises:
        ValueError: a name faiss does not know for this index (`factory` names it in the message).
    """
    if not values:
        return
    space = getattr(faiss, "GpuParameterSpace", faiss.ParameterSpace)() if on_gpu else faiss.ParameterSpace()
    for key, value in values.items():
        try:
            space.set_index_parameter(index, key, float(value))
        except RuntimeError as error:
            raise ValueError(
                f"faiss has no search parameter {key!r} for {factory!r} ({str(error).splitlines()[0]}); "
                "nprobe applies to IVF, efSearch to HNSW, k_factor_rf to a Refine stage."
            ) from error


def rebuilt_with(faiss: Any, index: Any, keep: np.ndarray, dim: int, search: Mapping[str, float]) -> Any:
    """A copy of the CPU `index` (same training) holding only the vectors of `keep`, re-added from their stored
    (possibly decoded) form: removal for structures faiss cannot delete from (HNSW graphs, refinement stages)."""
    vectors = reconstruct(index, keep, dim) if keep.size else None
    rebuilt = faiss.clone_index(index)
    rebuilt.reset()
    apply_search(faiss, rebuilt, search)
    if vectors is not None:
        rebuilt.add_with_ids(vectors, keep)
    return rebuilt
