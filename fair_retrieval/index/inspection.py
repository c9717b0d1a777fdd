"""What a faiss index is made of, read from faiss' own objects (like faiss.contrib.inspect_tools).

`FaissIndex` builds indices from factory strings but loads them from files, where only faiss' structure is
recorded: these functions look through id maps, pre-transforms (OPQ, PCA) and refinement stages to the core
index, and read its kind, its parameters in FaissIndex's names, its metric, its stored ids and its vectors.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

Metric = Literal["ip", "l2"]
"""How vectors are compared: inner product (cosine for unit vectors; larger is better) or squared L2 distance."""
METRICS: tuple[str, ...] = get_args(Metric)

ID_MAPS = ("IndexIDMap", "IndexIDMap2")  # faiss' wrappers that map positions to caller ids


def native_ivf(faiss: Any, index: Any) -> bool:
    """Whether `index` is an IVF index (possibly under pre-transforms such as OPQ) keeping caller ids in its lists."""
    node = faiss.downcast_index(index)
    while type(node).__name__ == "IndexPreTransform":
        node = faiss.downcast_index(node.index)
    return isinstance(node, faiss.IndexIVF)


def takes_ids(faiss: Any, index: Any) -> bool:
    """Whether `index` stores caller ids itself: an IVF index (possibly under a pre-transform such as OPQ) or an
    id map."""
    node = faiss.downcast_index(index)
    while type(node).__name__ == "IndexPreTransform":
        node = faiss.downcast_index(node.index)
    return isinstance(node, faiss.IndexIVF) or type(node).__name__ in ID_MAPS


def unwrap(faiss: Any, index: Any) -> tuple[Any, Any]:
    """(core, refine): the index under id maps, pre-transforms and a refinement stage, and that stage (or None)."""
    node, refine = faiss.downcast_index(index), None
    while True:
        name = type(node).__name__
        if name in (*ID_MAPS, "IndexPreTransform"):
            node = faiss.downcast_index(node.index)
        elif name.startswith("IndexRefine"):
            refine, node = node, faiss.downcast_index(node.base_index)
        else:
            return node, refine


def kind_of(faiss: Any, index: Any) -> str:
    """Which FaissIndex kind a faiss index is ("custom" when none fits)."""
    core, _ = unwrap(faiss, index)
    name = type(core).__name__
    if name.startswith("IndexFlat"):
        return "flat"
    if name.startswith("IndexHNSW"):
        return "hnsw"
    return {"IndexIVFFlat": "ivf", "IndexIVFPQ": "ivfpq"}.get(name, "custom")


def params_of(faiss: Any, index: Any) -> dict[str, int]:
    """The parameters of `index` in FaissIndex's names, read from faiss (nlist, nprobe, m, nbits, k_factor, …)."""
    core, refine = unwrap(faiss, index)
    params: dict[str, int] = {}
    if isinstance(core, faiss.IndexIVF):
        params.update(nlist=int(core.nlist), nprobe=int(core.nprobe))
        pq = getattr(core, "pq", None)
        if pq is not None:
            params.update(m=int(pq.M), nbits=int(pq.nbits))
    elif type(core).__name__.startswith("IndexHNSW"):
        graph = core.hnsw
        params.update(
            M=int(graph.nb_neighbors(1)), ef_construction=int(graph.efConstruction), ef_search=int(graph.efSearch)
        )
    if refine is not None:
        params["k_factor"] = int(refine.k_factor)
    return params


def describe_structure(faiss: Any, index: Any) -> str:
    """A factory-like name for a loaded index whose factory string was not recorded (format version 1)."""
    core, refine = unwrap(faiss, index)
    params = params_of(faiss, index)
    kind = kind_of(faiss, index)
    text = {
        "flat": "Flat",
        "hnsw": f"HNSW{params.get('M')}",
        "ivf": f"IVF{params.get('nlist')},Flat",
        "ivfpq": f"IVF{params.get('nlist')},PQ{params.get('m')}x{params.get('nbits')}",
    }.get(kind, type(core).__name__)
    return text + (",Refine" if refine is not None else "")


def faiss_metric(faiss: Any, metric: Metric) -> int:
    """faiss' metric constant for "ip" or "l2"."""
    return int(faiss.METRIC_INNER_PRODUCT if metric == "ip" else faiss.METRIC_L2)


def metric_name(faiss: Any, index: Any, path: Path) -> Metric:
    """ "ip" or "l2" for the metric of `index` (read from `path`), or a ValueError for any other faiss metric."""
    if int(index.metric_type) == int(faiss.METRIC_INNER_PRODUCT):
        return "ip"
    if int(index.metric_type) == int(faiss.METRIC_L2):
        return "l2"
    raise ValueError(f"{path} uses faiss metric {index.metric_type}; FaissIndex reads inner-product and L2 indices.")


def reconstruct(index: Any, ids: np.ndarray, dim: int) -> np.ndarray:
    """The stored (possibly decoded) vectors of `ids` from a CPU index."""
    try:
        vectors = index.reconstruct_batch(ids)
    except (RuntimeError, AttributeError):  # older faiss, or structures without a batch path: one at a time
        vectors = np.stack([index.reconstruct(int(i)) for i in ids])
    return np.ascontiguousarray(vectors, dtype=np.float32).reshape(ids.size, dim)


def ivf_ids(faiss: Any, ivf: Any) -> np.ndarray:
    """All ids stored in the inverted lists of an IVF index."""
    chunks = [np.zeros(0, dtype=np.int64)]
    lists = ivf.invlists
    for list_no in range(ivf.nlist):
        size = lists.list_size(list_no)
        if size:
            pointer = lists.get_ids(list_no)
            chunks.append(faiss.rev_swig_ptr(pointer, size).astype(np.int64).copy())
            lists.release_ids(list_no, pointer)
    return np.concatenate(chunks)


def stored_ids(faiss: Any, index: Any) -> np.ndarray | None:
    """The caller ids a CPU index holds: from its IVF lists (which get a hash-table direct map, for lookups by id)
    or from its id map; None when it keeps none (an index FaissIndex did not write)."""
    if native_ivf(faiss, index):
        ivf = faiss.extract_index_ivf(index)
        ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
        return ivf_ids(faiss, ivf)
    if type(index).__name__ in ID_MAPS:
        return faiss.vector_to_array(index.id_map).astype(np.int64)
    return None
