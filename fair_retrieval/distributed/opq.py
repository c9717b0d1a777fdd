"""trained_opq_index: an empty, trained OPQ + IVF-PQ index wrapped as a FaissIndex.

FaissIndex builds plain IVF-PQ itself, but has no OPQ option. OPQ learns a rotation that balances the variance
across PQ sub-vectors, which lowers quantisation error when embedding dimensions are correlated. This module trains
faiss' `OPQ{m},IVF{nlist},PQ{m}x{nbits}` and hands it to `FaissIndex.load` through a folder in FaissIndex's own
format (declared as kind "ivfpq": the IVF-PQ inside is what FaissIndex inspects, and faiss applies the rotation on
add and search). From there it is an ordinary FaissIndex: GPU placement, adding, search, save and load all apply.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.index import (
    FORMAT_NAME,
    FORMAT_VERSION,
    INDEX_FILE,
    META_FILE,
    FaissIndex,
    GpuChoice,
    Metric,
    faiss_gpu_count,
    import_faiss,
)

logger = logging.getLogger(__name__)


def trained_opq_index(
    dim: int,
    metric: Metric,
    params: dict[str, int],
    sample: np.ndarray,
    scratch: Path,
    gpu: GpuChoice = "auto",
    gpu_shards: bool = False,
) -> FaissIndex:
    """Train OPQ + IVF-PQ on `sample` and return it as an empty FaissIndex (on GPU when `gpu` allows).

    Args:
        dim: vector size.
        metric: "ip" or "l2".
        params: nlist, nprobe, m, nbits (as for FaissIndex kind "ivfpq").
        sample: float32 (n, dim) training vectors.
        scratch: an empty folder for the hand-over to `FaissIndex.load`.
        gpu: as for FaissIndex; k-means of the coarse quantiser runs on a GPU when one is used.
        gpu_shards: as for FaissIndex.

    Raises:
        ValueError: too few training vectors.
    """
    faiss = import_faiss()
    needed = max(params["nlist"], 2 ** params["nbits"])
    if sample.shape[0] < needed:
        raise ValueError(f"OPQ+IVF-PQ with {params} needs at least {needed} training vectors, got {sample.shape[0]}.")
    faiss_metric = faiss.METRIC_INNER_PRODUCT if metric == "ip" else faiss.METRIC_L2
    m, nlist, nbits = params["m"], params["nlist"], params["nbits"]
    index = faiss.index_factory(dim, f"OPQ{m},IVF{nlist},PQ{m}x{nbits}", faiss_metric)
    ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
    ivf.do_polysemous_training = False  # only serves Hamming-filtered search, which FaissIndex does not use
    resources = helper = None  # faiss keeps only raw pointers to these: hold them until training ends
    if gpu is not False and faiss_gpu_count(faiss) > 0:
        resources = faiss.StandardGpuResources()
        helper = faiss.index_cpu_to_gpu(resources, 0, faiss.IndexFlat(dim, ivf.metric_type))
        ivf.clustering_index = helper
    try:
        index.train(np.ascontiguousarray(sample, dtype=np.float32))
    finally:
        ivf.clustering_index = None
        del helper, resources
    faiss.write_index(index, str(scratch / INDEX_FILE))
    meta: dict[str, Any] = {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "dim": dim,
        "metric": metric,
        "kind": "ivfpq",
        "params": dict(params),
        "count": 0,
        "trained": True,
    }
    (scratch / META_FILE).write_text(json.dumps(meta), encoding="utf-8")
    logger.info("Trained OPQ%d,IVF%d,PQ%dx%d on %d vectors", m, nlist, m, nbits, sample.shape[0])
    return FaissIndex.load(scratch, gpu=gpu, gpu_shards=gpu_shards)
