"""Where faiss indices run: importing faiss, counting its GPUs, and the one rule for `gpu="auto" | True | False`.

`FaissIndex` places its indices with these helpers (the LlamaIndex store only checks its own `gpu` argument with
`gpu_count`, and reads legacy index files with `import_faiss`), so the choice and its error messages are written
once:

- `gpu_count(gpu)`: how many GPUs a `gpu` argument means here (0 for CPU), refusing `gpu=True` without a GPU;
- `index_to_gpus(index, count)`: a CPU index cloned onto those GPUs (replicated or sharded), with float16 lookup
  tables when an IVF-PQ code size needs them. Parts faiss cannot run on a GPU (a refinement stage, an HNSW graph)
  stay on the CPU; the log says so.
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from fair_retrieval.index.inspection import native_ivf

logger = logging.getLogger(__name__)

GpuChoice = Literal["auto"] | bool
GPU_FLOAT32_TABLE_ENTRIES = 16_384  # faiss' GPU IVF-PQ: m · 2^nbits above this needs float16 lookup tables


def import_faiss() -> Any:
    """Import faiss, or raise an ImportError that says which extra to install."""
    try:
        import faiss
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError(
            "FaissIndex needs the faiss package: pip install 'fair-retrieval[faiss]' (CPU) or "
            "pip install 'fair-retrieval[gpu]' (CUDA). Install only one of them: both provide the `faiss` module."
        ) from error
    return faiss


def faiss_gpu_count(faiss: Any | None = None) -> int:
    """Number of GPUs faiss can use (0 with faiss-cpu, whose GPU helpers exist but raise)."""
    faiss = faiss or import_faiss()
    if not hasattr(faiss, "StandardGpuResources"):
        return 0
    return int(faiss.get_num_gpus())


def gpu_count(gpu: GpuChoice, faiss: Any | None = None) -> int:
    """How many GPUs to use for `gpu`: "auto" → all faiss sees (maybe 0), True → all (at least one), False → 0.

    Raises:
        ValueError: for a value other than "auto"/True/False, or True when faiss sees no GPU.
    """
    if gpu not in ("auto", True, False) or (gpu != "auto" and not isinstance(gpu, bool)):
        raise ValueError(f"gpu must be 'auto', True or False, got {gpu!r}.")
    if gpu is False:
        return 0
    count = faiss_gpu_count(faiss)
    if gpu is True and count == 0:
        raise ValueError(
            "gpu=True but faiss sees no GPU (faiss-cpu is installed, or no CUDA device is visible). "
            "Install fair-retrieval[gpu] on a CUDA machine, or pass gpu='auto' / gpu=False."
        )
    return count


def needs_float16_tables(index: Any, faiss: Any | None = None) -> bool:
    """True when `index` holds an IVF-PQ whose m · 2^nbits exceeds what float32 GPU lookup tables allow."""
    faiss = faiss or import_faiss()
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is None:
        return False
    ivf = faiss.downcast_index(ivf)
    pq = getattr(ivf, "pq", None)
    return pq is not None and int(pq.M) * 2 ** int(pq.nbits) > GPU_FLOAT32_TABLE_ENTRIES


def index_to_gpus(index: Any, count: int, *, shards: bool = False, resources: Any = None) -> tuple[Any, Any]:
    """Clone a CPU faiss index onto `count` GPUs (count ≥ 1).

    Args:
        index: a CPU index.
        count: GPUs to use; with several, the vectors are sharded across them (`shards`) or the index replicated.
        resources: a `StandardGpuResources` to reuse with one GPU (otherwise faiss' all-GPU cloner makes its own).

    Returns:
        (gpu_index, resources): keep `resources` alive as long as the GPU index (faiss holds a raw pointer).

    Raises:
        RuntimeError: whatever faiss raises when the index cannot be moved.
    """
    faiss = import_faiss()
    float16 = needs_float16_tables(index, faiss)
    if float16:
        logger.info("IVF-PQ on GPU with float16 lookup tables (m · 2^nbits > %d).", GPU_FLOAT32_TABLE_ENTRIES)
    for part in _cpu_only_parts(faiss, index):
        logger.info("%s stays on the CPU (faiss has no GPU version of it); the rest runs on the GPU.", part)
    if count == 1 and resources is not None:
        options = faiss.GpuClonerOptions()
        options.useFloat16 = float16
        return faiss.index_cpu_to_gpu(resources, 0, index, options), resources
    multiple = faiss.GpuMultipleClonerOptions()  # all-GPU cloner: it keeps its own GPU resources referenced
    multiple.shard = shards
    multiple.useFloat16 = float16
    return faiss.index_cpu_to_all_gpus(index, co=multiple, ngpu=count), resources


def gpus_for_kind(kind: str, gpu: GpuChoice, faiss: Any | None = None) -> int:
    """How many GPUs an index of `kind` uses for a `gpu` argument (0: CPU); HNSW, which faiss cannot run on a GPU,
    always stays on the CPU and refuses gpu=True."""
    count = gpu_count(gpu, faiss)
    if kind != "hnsw":
        return count
    if gpu is True:
        raise ValueError("faiss has no GPU implementation of HNSW; use kind='flat'/'ivf'/'ivfpq' or gpu=False.")
    if count:
        logger.info("HNSW runs on CPU: faiss has no GPU implementation of it.")
    return 0


def train_on_cpu(faiss: Any, index: Any, vectors: Any, gpus: int, resources: Any = None) -> Any:
    """Train the CPU `index` on `vectors`; with `gpus`, an IVF index's k-means assignment runs on GPU 0. Returns the
    GPU resources used (`resources`, created if needed), or `resources` unchanged on CPU."""
    ivf = faiss.try_extract_index_ivf(index)
    helper = None  # held here: faiss keeps only a raw pointer to the clustering index
    if gpus and ivf is not None:
        resources = resources or faiss.StandardGpuResources()
        helper = faiss.index_cpu_to_gpu(resources, 0, faiss.IndexFlat(int(index.d), ivf.metric_type))
        ivf.clustering_index = helper
    try:
        index.train(vectors)
    finally:
        if ivf is not None:
            ivf.clustering_index = None
        del helper
    return resources


def index_to_cpu(index: Any, faiss: Any | None = None) -> Any:
    """A CPU copy of an index that may live on GPUs (faiss writes only CPU indices); a CPU index as it is. A copy
    of an IVF index that holds ids in its lists gets a hashtable direct map, so that it can reconstruct by id."""
    faiss = faiss or import_faiss()
    if faiss_gpu_count(faiss) == 0:
        return index  # faiss-cpu: there are no GPU indices
    copy = faiss.index_gpu_to_cpu(index)
    if native_ivf(faiss, copy):
        faiss.extract_index_ivf(copy).set_direct_map_type(faiss.DirectMap.Hashtable)
    return copy


def _cpu_only_parts(faiss: Any, index: Any) -> list[str]:
    """Names of the parts of `index` that faiss keeps on the CPU when cloning it to a GPU."""
    parts = []
    node = faiss.downcast_index(index)
    while node is not None:
        name = type(node).__name__
        if name.startswith("IndexRefine"):
            parts.append("The refinement stage (re-ranking with finer codes)")
            node = faiss.downcast_index(node.base_index)
        elif name.startswith("IndexHNSW"):
            parts.append("The HNSW graph")
            node = None
        elif hasattr(node, "index") and name in ("IndexIDMap", "IndexIDMap2", "IndexPreTransform"):
            node = faiss.downcast_index(node.index)
        else:
            node = None
    return parts
