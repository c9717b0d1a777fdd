"""FaissIndex: a FAISS vector index with int64 ids, deletion, GPU when present, and pickle-free save/load.

One class wraps the four index kinds a retrieval user needs, so the rest of fair-retrieval (CLI, LangChain store)
never touches faiss directly:

- "flat": exact search (`IndexIDMap2` over `IndexFlat`); vectors are stored as given.
- "hnsw": graph search on CPU (`IndexIDMap2` over `IndexHNSWFlat`); vectors are stored as given.
- "ivf": inverted lists of raw vectors (`IndexIVFFlat`, ids stored natively); needs training.
- "ivfpq": inverted lists of product-quantised codes (`IndexIVFPQ`); needs training; compressed.

On a machine where faiss reports a GPU (faiss-gpu installed and a device visible), flat/ivf/ivfpq indices live on
the GPU; files on disk are always CPU indices (`index_gpu_to_cpu` before writing), so a folder saved on a GPU machine
loads on a CPU one and the other way round. A folder holds `index.faiss` (faiss' own binary format) and
`index.json` (dim, metric, kind, params, version): nothing is pickled, so loading cannot execute code.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np

logger = logging.getLogger(__name__)

Metric = Literal["ip", "l2"]
Kind = Literal["flat", "hnsw", "ivf", "ivfpq"]
GpuChoice = Literal["auto"] | bool

INDEX_FILE = "index.faiss"
META_FILE = "index.json"
FORMAT_NAME = "fair-retrieval-faiss-index"
FORMAT_VERSION = 1
GPU_MAX_K = 2048  # faiss' GPU k-selection limit
_RECOMMENDED_POINTS_PER_CENTROID = 39  # below this faiss' k-means warns

_DEFAULT_PARAMS: dict[str, dict[str, int]] = {
    "flat": {},
    "hnsw": {"M": 32, "ef_construction": 40, "ef_search": 64},
    "ivf": {"nlist": 100, "nprobe": 8},
    "ivfpq": {"nlist": 100, "nprobe": 8, "m": 8, "nbits": 8},
}
_METRICS = ("ip", "l2")


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


class FaissIndex:
    """A FAISS index of float32 vectors addressed by int64 ids.

    Args:
        dim: vector size.
        metric: "ip" (inner product; cosine for L2-normalised vectors, larger is better) or "l2" (squared
            Euclidean distance, smaller is better).
        kind: "flat" (exact), "hnsw" (graph, CPU only), "ivf" or "ivfpq" (inverted lists; need training, which
            happens on the first `add` when it brings enough vectors, or explicitly with `train`).
        gpu: "auto" uses the GPU when faiss reports one; True requires one (ValueError otherwise); False stays on
            CPU. HNSW has no faiss GPU implementation: "auto" keeps it on CPU, True is refused.
        gpu_shards: with more than one GPU, True shards the vectors across GPUs (more capacity), False replicates
            the index on every GPU (more query throughput). Ignored with one GPU.
        **params: kind parameters. hnsw: M=32, ef_construction=40, ef_search=64. ivf: nlist=100, nprobe=8.
            ivfpq: nlist=100, nprobe=8, m=8 (sub-quantizers; must divide dim), nbits=8 (bits per code).

    Behaviour worth knowing:
        - `get_vectors` is exact for flat, hnsw and ivf; for ivfpq it returns the PQ reconstruction (approximate,
          as stored) — no side copy of the raw vectors is kept, so compression keeps its memory benefit.
        - `remove` on hnsw rebuilds the graph from the stored vectors (faiss HNSW cannot delete): O(n) per call,
          so batch removals.
        - On GPU, `remove` runs on a CPU copy (`index_gpu_to_cpu`) and re-uploads the result; `get_vectors`
          reads from a CPU copy that is kept (host memory) until the next add/remove, so repeated calls (MMR)
          are cheap; `save` always writes a CPU copy. faiss' GPU search returns at most k=2048 results.
        - Ids given by `add(vectors)` without ids continue after the largest id stored at that moment.
    """

    def __init__(
        self,
        dim: int,
        metric: Metric = "ip",
        kind: Kind = "flat",
        gpu: GpuChoice = "auto",
        gpu_shards: bool = False,
        **params: int,
    ) -> None:
        self._faiss = import_faiss()
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
            raise ValueError(f"dim must be a positive int (the embedding size), got {dim!r}.")
        if metric not in _METRICS:
            raise ValueError(f"metric must be 'ip' (inner product / cosine) or 'l2', got {metric!r}.")
        if kind not in _DEFAULT_PARAMS:
            raise ValueError(f"kind must be one of {tuple(_DEFAULT_PARAMS)}, got {kind!r}.")
        self._dim = int(dim)
        self._metric: Metric = metric
        self._kind: Kind = kind
        self._params = _resolve_params(kind, self._dim, params)
        self._gpu_count = self._choose_gpus(gpu, kind)
        self._gpu_shards = bool(gpu_shards)
        self._gpu_resources: Any = None
        self._ids = np.zeros(0, dtype=np.int64)  # sorted ascending
        self._cpu_copy: Any = None  # CPU mirror of a GPU index, valid until the next change
        self._index = self._new_cpu_index()
        self._on_gpu = False
        if self.is_trained:
            self._to_gpu_if_wanted()

    # ------------------------------------------------------------------------------------------------ properties

    @property
    def dim(self) -> int:
        """Vector size."""
        return self._dim

    @property
    def metric(self) -> Metric:
        """ "ip" or "l2"."""
        return self._metric

    @property
    def kind(self) -> Kind:
        """ "flat", "hnsw", "ivf" or "ivfpq"."""
        return self._kind

    @property
    def params(self) -> dict[str, int]:
        """The kind parameters in effect (defaults filled in)."""
        return dict(self._params)

    @property
    def on_gpu(self) -> bool:
        """Whether the live index is on a GPU (ivf/ivfpq move there once trained)."""
        return self._on_gpu

    @property
    def is_trained(self) -> bool:
        """False for an ivf/ivfpq index that has not been trained yet; always True for flat and hnsw."""
        return bool(self._index.is_trained)

    @property
    def ids(self) -> np.ndarray:
        """The stored ids, int64, sorted ascending (a copy)."""
        return self._ids.copy()

    def __len__(self) -> int:
        return int(self._ids.size)

    def __contains__(self, id_: object) -> bool:
        if isinstance(id_, bool) or not isinstance(id_, int | np.integer):
            return False
        position = int(np.searchsorted(self._ids, id_))
        return position < self._ids.size and int(self._ids[position]) == int(id_)

    def __repr__(self) -> str:
        return (
            f"FaissIndex(dim={self._dim}, metric={self._metric!r}, kind={self._kind!r}, count={len(self)}, "
            f"on_gpu={self._on_gpu}, params={self._params})"
        )

    # ------------------------------------------------------------------------------------------------ public API

    def min_training_size(self) -> int:
        """Fewest vectors `train` accepts for this kind (0 for flat/hnsw): nlist, and 2**nbits for ivfpq."""
        if self._kind == "ivf":
            return self._params["nlist"]
        if self._kind == "ivfpq":
            return max(self._params["nlist"], 2 ** self._params["nbits"])
        return 0

    def train(self, sample: Any) -> None:
        """Train an ivf/ivfpq index on a representative sample of vectors (no-op for flat and hnsw).

        Training learns the coarse centroids (and PQ codebooks), so the sample should look like the data to be
        added; faiss recommends at least 39 vectors per list (39·nlist). With a GPU, k-means runs there.

        Raises:
            ValueError: if the index is already trained, or the sample is too small or malformed.
        """
        vectors = self._as_vectors(sample, "sample")
        if self._kind in ("flat", "hnsw"):
            logger.debug("train() does nothing for kind=%r: it needs no training.", self._kind)
            return
        if self.is_trained:
            raise ValueError(
                f"This {self._kind} index is already trained; create a new FaissIndex to train on another sample."
            )
        needed = self.min_training_size()
        if vectors.shape[0] < needed:
            raise ValueError(
                f"A {self._kind} index with {_describe(self._params)} needs at least {needed} training vectors "
                f"({_RECOMMENDED_POINTS_PER_CENTROID * self._params['nlist']} or more recommended), got "
                f"{vectors.shape[0]}. Train on a larger sample, or lower nlist"
                + (" / nbits." if self._kind == "ivfpq" else ".")
            )
        if vectors.shape[0] < _RECOMMENDED_POINTS_PER_CENTROID * self._params["nlist"]:
            logger.warning(
                "Training %s with %d vectors for nlist=%d lists; faiss recommends at least %d. Quality may suffer.",
                self._kind,
                vectors.shape[0],
                self._params["nlist"],
                _RECOMMENDED_POINTS_PER_CENTROID * self._params["nlist"],
            )
        self._train_cpu(vectors)
        self._to_gpu_if_wanted()

    def add(self, vectors: Any, ids: Any = None) -> np.ndarray:
        """Add vectors (n, dim) under `ids` (int64 ≥ 0), or under new ids following the largest stored id.

        An untrained ivf/ivfpq index is first trained on these vectors when there are enough of them.

        Returns:
            The int64 ids the vectors were stored under, in input order.

        Raises:
            ValueError: wrong shape or dimension, NaN/inf values, negative or duplicate ids (within the call or
                already stored; the message lists some), an ids length that differs from the vector count, or an
                untrained index and too few vectors to train it.
            TypeError: non-numeric vectors or non-integer ids.
        """
        matrix = self._as_vectors(vectors, "vectors")
        count = matrix.shape[0]
        new_ids = self._new_ids(ids, count)
        if count == 0:
            return new_ids
        if not self.is_trained:
            if count < self.min_training_size():
                raise ValueError(
                    f"This {self._kind} index is not trained and this add() brings only {count} vectors; training "
                    f"needs at least {self.min_training_size()} ({_describe(self._params)}). Call "
                    "train(sample) with enough representative vectors first, add more vectors at once, or lower "
                    "nlist."
                )
            self.train(matrix)
        self._index.add_with_ids(matrix, new_ids)
        self._ids = np.union1d(self._ids, new_ids).astype(np.int64)
        self._cpu_copy = None
        return new_ids

    def search(self, queries: Any, k: int) -> tuple[np.ndarray, np.ndarray]:
        """Return the k best stored vectors for every query row.

        Returns:
            (scores, ids): float32 (n, k) and int64 (n, k), best first. Scores are inner products for "ip" (larger
            is better) or squared L2 distances for "l2" (smaller is better). Where fewer than k vectors are found,
            ids are -1 and scores -inf ("ip") or +inf ("l2").
        """
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}.")
        if self._on_gpu and k > GPU_MAX_K:
            raise ValueError(f"faiss on GPU returns at most k={GPU_MAX_K} results; ask for fewer, or use gpu=False.")
        matrix = self._as_vectors(queries, "queries")
        k = int(k)
        if matrix.shape[0] == 0 or len(self) == 0 or not self.is_trained:
            scores = np.full((matrix.shape[0], k), self._missing_score, dtype=np.float32)
            return scores, np.full((matrix.shape[0], k), -1, dtype=np.int64)
        scores, found = self._index.search(matrix, k)
        scores = np.ascontiguousarray(scores, dtype=np.float32)
        found = np.ascontiguousarray(found, dtype=np.int64)
        scores[found < 0] = self._missing_score
        return scores, found

    def remove(self, ids: Any) -> int:
        """Remove the vectors stored under `ids`; returns how many were removed.

        Nothing is removed when any id is unknown. On hnsw the graph is rebuilt without them (O(n)).

        Raises:
            ValueError: if some ids are not stored (the message lists some of them).
        """
        targets = np.unique(self._as_ids(ids, "ids"))
        if targets.size == 0:
            return 0
        self._require_known(targets)
        index = self._cpu_index()
        if self._kind == "hnsw":
            index = self._rebuild_hnsw_without(index, targets)
        else:
            removed = int(index.remove_ids(targets))
            if removed != targets.size:  # pragma: no cover - would be a faiss bug
                raise RuntimeError(f"faiss removed {removed} vectors instead of {targets.size}.")
        self._ids = np.setdiff1d(self._ids, targets, assume_unique=True).astype(np.int64)
        self._index, self._on_gpu, self._cpu_copy = index, False, None
        self._to_gpu_if_wanted()
        return int(targets.size)

    def get_vectors(self, ids: Any) -> np.ndarray:
        """The stored vectors of `ids`, float32 (len(ids), dim), in the order asked (exact except for ivfpq).

        Raises:
            ValueError: if some ids are not stored (the message lists some of them).
        """
        wanted = self._as_ids(ids, "ids")
        if wanted.size == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        self._require_known(np.unique(wanted))
        index = self._cpu_index()
        try:
            vectors = index.reconstruct_batch(wanted)
        except (RuntimeError, AttributeError):  # older faiss: one at a time
            vectors = np.stack([index.reconstruct(int(i)) for i in wanted])
        return np.ascontiguousarray(vectors, dtype=np.float32).reshape(wanted.size, self._dim)

    def save(self, folder: str | os.PathLike[str]) -> Path:
        """Write `index.faiss` (a CPU faiss index) and `index.json` into `folder` (created if needed).

        Returns:
            The folder path.
        """
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        index = self._cpu_index(cache=False)  # GPU indices cannot be written: always a CPU copy
        temporary = path / (INDEX_FILE + ".tmp")
        self._faiss.write_index(index, str(temporary))
        os.replace(temporary, path / INDEX_FILE)
        meta = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "faiss_version": getattr(self._faiss, "__version__", None),
            "dim": self._dim,
            "metric": self._metric,
            "kind": self._kind,
            "params": self._params,
            "count": len(self),
            "trained": self.is_trained,
        }
        (path / META_FILE).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
        logger.info("Saved %s to %s", self, path)
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike[str], gpu: GpuChoice = "auto", gpu_shards: bool = False) -> FaissIndex:
        """Load an index written by `save`; `gpu` and `gpu_shards` as in the constructor.

        Raises:
            FileNotFoundError: if the folder lacks index.faiss or index.json.
            ValueError: if index.json is malformed or disagrees with index.faiss.
        """
        path = Path(folder)
        meta_path, index_path = path / META_FILE, path / INDEX_FILE
        for required in (meta_path, index_path):
            if not required.is_file():
                raise FileNotFoundError(f"{required} not found: is {path} a folder written by FaissIndex.save()?")
        meta = _read_meta(meta_path)
        params = meta.get("params") or {}
        if not isinstance(params, dict):
            raise ValueError(f"{meta_path}: 'params' must be an object, got {params!r}.")
        self = cls(meta["dim"], metric=meta["metric"], kind=meta["kind"], gpu=gpu, gpu_shards=gpu_shards, **params)
        faiss = self._faiss
        index = faiss.read_index(str(index_path))
        self._check_loaded(index, meta, index_path)
        if self._kind in ("ivf", "ivfpq"):
            ivf = faiss.extract_index_ivf(index)
            ivf.nprobe = self._params["nprobe"]
            if ivf.direct_map.type != faiss.DirectMap.Hashtable:
                ivf.set_direct_map_type(faiss.DirectMap.Hashtable)
            ids = _ivf_ids(faiss, ivf)
        else:
            if self._kind == "hnsw":
                faiss.downcast_index(index.index).hnsw.efSearch = self._params["ef_search"]
            ids = faiss.vector_to_array(index.id_map).astype(np.int64)
        self._ids = np.sort(ids)
        if np.unique(self._ids).size != self._ids.size:
            raise ValueError(f"{index_path} holds duplicate ids; it was not written by FaissIndex.")
        self._index, self._on_gpu, self._cpu_copy = index, False, None
        if self.is_trained:
            self._to_gpu_if_wanted()
        return self

    # ------------------------------------------------------------------------------------------------ internals

    @property
    def _missing_score(self) -> float:
        return float("-inf") if self._metric == "ip" else float("inf")

    def _faiss_metric(self) -> int:
        faiss = self._faiss
        return int(faiss.METRIC_INNER_PRODUCT if self._metric == "ip" else faiss.METRIC_L2)

    def _new_cpu_index(self) -> Any:
        """A fresh, empty CPU index of this kind, metric and params."""
        faiss, p = self._faiss, self._params
        if self._kind == "flat":
            return faiss.index_factory(self._dim, "IDMap2,Flat", self._faiss_metric())
        if self._kind == "hnsw":
            index = faiss.index_factory(self._dim, f"IDMap2,HNSW{p['M']}", self._faiss_metric())
            graph = faiss.downcast_index(index.index).hnsw
            graph.efConstruction = p["ef_construction"]
            graph.efSearch = p["ef_search"]
            return index
        codec = "Flat" if self._kind == "ivf" else f"PQ{p['m']}x{p['nbits']}"
        index = faiss.index_factory(self._dim, f"IVF{p['nlist']},{codec}", self._faiss_metric())
        ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
        ivf.nprobe = p["nprobe"]
        ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # lookup by id for remove() and get_vectors()
        if self._kind == "ivfpq":
            ivf.do_polysemous_training = False  # only serves Hamming-filtered search, which is not used; slow
        return index

    def _choose_gpus(self, gpu: GpuChoice, kind: Kind) -> int:
        """How many GPUs to use: 0 for CPU."""
        if gpu not in ("auto", True, False) or (gpu != "auto" and not isinstance(gpu, bool)):
            raise ValueError(f"gpu must be 'auto', True or False, got {gpu!r}.")
        if gpu is False:
            return 0
        count = faiss_gpu_count(self._faiss)
        if gpu is True:
            if count == 0:
                raise ValueError(
                    "gpu=True but faiss sees no GPU (faiss-cpu is installed, or no CUDA device is visible). "
                    "Install fair-retrieval[gpu] on a CUDA machine, or pass gpu='auto' / gpu=False."
                )
            if kind == "hnsw":
                raise ValueError("faiss has no GPU implementation of HNSW; use kind='flat'/'ivf'/'ivfpq' or gpu=False.")
        if kind == "hnsw":
            if count:
                logger.info("HNSW runs on CPU: faiss has no GPU implementation of it.")
            return 0
        return count

    def _to_gpu_if_wanted(self) -> None:
        """Move the (trained, CPU) live index to the GPU(s) chosen at construction."""
        if self._gpu_count == 0 or self._on_gpu:
            return
        faiss, cpu_index = self._faiss, self._index
        try:
            if self._gpu_count == 1:
                if self._gpu_resources is None:
                    self._gpu_resources = faiss.StandardGpuResources()
                gpu_index = faiss.index_cpu_to_gpu(self._gpu_resources, 0, cpu_index, faiss.GpuClonerOptions())
            else:
                options = faiss.GpuMultipleClonerOptions()
                options.shard = self._gpu_shards
                gpu_index = faiss.index_cpu_to_all_gpus(cpu_index, co=options, ngpu=self._gpu_count)
        except RuntimeError as error:
            raise ValueError(
                f"faiss could not move this {self._kind} index ({_describe(self._params)}) to the GPU: {error}. "
                "Pass gpu=False, or choose parameters the GPU supports."
            ) from error
        self._index, self._on_gpu, self._cpu_copy = gpu_index, True, None  # no host copy kept: saves memory
        logger.info("FaissIndex on %d GPU(s)%s", self._gpu_count, " (sharded)" if self._gpu_shards else "")

    def _cpu_index(self, cache: bool = True) -> Any:
        """The live index if on CPU; else a CPU copy of the GPU index (`index_gpu_to_cpu`), kept until the next
        change when `cache` (get_vectors is called repeatedly, e.g. by MMR; save is not)."""
        if not self._on_gpu:
            return self._index
        if self._cpu_copy is not None:
            return self._cpu_copy
        copy = self._faiss.index_gpu_to_cpu(self._index)
        if self._kind in ("ivf", "ivfpq"):
            self._faiss.extract_index_ivf(copy).set_direct_map_type(self._faiss.DirectMap.Hashtable)
        if cache:
            self._cpu_copy = copy
        return copy

    def _train_cpu(self, vectors: np.ndarray) -> None:
        """Train the (CPU, untrained) live index; k-means assignment runs on a GPU when one is used."""
        faiss = self._faiss
        ivf = faiss.extract_index_ivf(self._index)
        helper = None  # held here: faiss keeps only a raw pointer to the clustering index
        if self._gpu_count:
            resources = self._gpu_resources = self._gpu_resources or faiss.StandardGpuResources()
            helper = faiss.index_cpu_to_gpu(resources, 0, faiss.IndexFlat(self._dim, ivf.metric_type))
            ivf.clustering_index = helper
        try:
            self._index.train(vectors)
        finally:
            ivf.clustering_index = None
            del helper

    def _rebuild_hnsw_without(self, index: Any, targets: np.ndarray) -> Any:
        """A new HNSW index holding every stored vector except `targets` (faiss HNSW cannot delete)."""
        faiss = self._faiss
        stored_ids = faiss.vector_to_array(index.id_map).astype(np.int64)
        keep = ~np.isin(stored_ids, targets)
        vectors = faiss.downcast_index(index.index).reconstruct_n(0, index.ntotal) if index.ntotal else None
        rebuilt = self._new_cpu_index()
        if vectors is not None and keep.any():
            rebuilt.add_with_ids(np.ascontiguousarray(vectors[keep], dtype=np.float32), stored_ids[keep])
        logger.info("Rebuilt the HNSW graph without %d ids (%d vectors remain).", targets.size, int(keep.sum()))
        return rebuilt

    def _as_vectors(self, data: Any, name: str) -> np.ndarray:
        """`data` as a C-contiguous float32 (n, dim) array with finite values, or a clear error."""
        try:
            array = np.asarray(data)
        except (TypeError, ValueError) as error:
            raise TypeError(f"{name} must be a numeric array of shape (n, {self._dim}): {error}") from error
        if array.ndim == 1 and array.size == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        numeric = np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
        if array.dtype == bool or not numeric:
            raise TypeError(f"{name} must hold real numbers (float32 preferred), got dtype {array.dtype}.")
        if array.ndim != 2:
            hint = f"; for one vector use {name}[None, :]" if array.ndim == 1 else ""
            raise ValueError(f"{name} must be 2-D (n, {self._dim}), got shape {array.shape}{hint}.")
        if array.shape[1] != self._dim:
            raise ValueError(f"{name} have dimension {array.shape[1]}, but this index holds {self._dim}-d vectors.")
        with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf, reported below
            matrix = np.ascontiguousarray(array, dtype=np.float32)
        if not np.isfinite(matrix).all():
            bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
            raise ValueError(
                f"{name} contain NaN or infinite values (rows {bad[:5].tolist()}"
                + (f" and {bad.size - 5} more" if bad.size > 5 else "")
                + "); clean them before indexing."
            )
        return matrix

    def _as_ids(self, data: Any, name: str) -> np.ndarray:
        """`data` as a 1-D int64 array of non-negative ids, or a clear error."""
        if isinstance(data, int | np.integer) and not isinstance(data, bool):
            raise TypeError(f"{name} must be a list or array of ints; wrap a single id in a list: [{data}].")
        array = np.asarray(list(data) if isinstance(data, Iterable) and not isinstance(data, np.ndarray) else data)
        if array.size == 0:
            return np.zeros(0, dtype=np.int64)
        if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
            raise TypeError(f"{name} must be integers (int64), got dtype {array.dtype}.")
        if array.ndim != 1:
            raise ValueError(f"{name} must be 1-D, got shape {array.shape}.")
        if np.issubdtype(array.dtype, np.unsignedinteger) and (array > np.iinfo(np.int64).max).any():
            raise ValueError(f"{name} must fit in int64.")
        if (array < 0).any():
            negative = array[array < 0][:5].tolist()
            raise ValueError(f"{name} must be ≥ 0 (faiss uses -1 for 'no result'), got {negative}.")
        return array.astype(np.int64)

    def _new_ids(self, ids: Any, count: int) -> np.ndarray:
        """Validate caller ids (or allocate new ones after the largest stored id)."""
        if ids is None:
            start = int(self._ids[-1]) + 1 if self._ids.size else 0
            return np.arange(start, start + count, dtype=np.int64)
        new_ids = self._as_ids(ids, "ids")
        if new_ids.size != count:
            raise ValueError(f"Got {count} vectors but {new_ids.size} ids; pass one id per vector.")
        unique, counts = np.unique(new_ids, return_counts=True)
        if unique.size != new_ids.size:
            repeated = unique[counts > 1]
            raise ValueError(f"ids repeat within this call: {_some(repeated)}; every id must be unique.")
        clash = new_ids[np.isin(new_ids, self._ids)]
        if clash.size:
            raise ValueError(
                f"ids already in the index: {_some(clash)}. Remove them first to replace their vectors, "
                "or pass ids=None for new ones."
            )
        return new_ids

    def _require_known(self, unique_ids: np.ndarray) -> None:
        unknown = unique_ids[~np.isin(unique_ids, self._ids)]
        if unknown.size:
            raise ValueError(f"{unknown.size} id(s) are not in the index: {_some(unknown)}.")

    def _check_loaded(self, index: Any, meta: dict[str, Any], path: Path) -> None:
        faiss = self._faiss
        if int(index.d) != self._dim:
            raise ValueError(f"{path} holds {index.d}-d vectors but {META_FILE} says dim={self._dim}.")
        if int(index.metric_type) != self._faiss_metric():
            raise ValueError(f"{path} uses a different metric than {META_FILE} says ({self._metric!r}).")
        if _kind_of(faiss, index) != self._kind:
            raise ValueError(f"{path} does not hold a {self._kind!r} index as {META_FILE} says.")
        if self._kind in ("ivf", "ivfpq"):
            ivf = faiss.downcast_index(faiss.extract_index_ivf(index))
            stored = {"nlist": int(ivf.nlist)}
            if self._kind == "ivfpq":
                stored.update(m=int(ivf.pq.M), nbits=int(ivf.pq.nbits))
            differing = {key: value for key, value in stored.items() if self._params[key] != value}
            if differing:
                raise ValueError(f"{path} has {differing}, but {META_FILE} says {self._params}.")
        count = meta.get("count")
        if count is not None and int(count) != int(index.ntotal):
            raise ValueError(f"{path} holds {index.ntotal} vectors but {META_FILE} says {count}.")


def _resolve_params(kind: str, dim: int, given: dict[str, Any]) -> dict[str, int]:
    """Kind defaults updated with `given`, validated."""
    defaults = _DEFAULT_PARAMS[kind]
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        accepted = ", ".join(defaults) or "none"
        raise TypeError(f"kind={kind!r} takes no parameter(s) {unknown}; its parameters: {accepted}.")
    params = dict(defaults)
    for key, value in given.items():
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"{key} must be a positive int, got {value!r}.")
        params[key] = int(value)
    if "nprobe" in params and params["nprobe"] > params["nlist"]:
        raise ValueError(f"nprobe={params['nprobe']} exceeds nlist={params['nlist']}; use nprobe ≤ nlist.")
    if kind == "ivfpq":
        if dim % params["m"]:
            raise ValueError(f"m={params['m']} sub-quantizers must divide dim={dim}; pick a divisor of {dim}.")
        if params["nbits"] > 16:
            raise ValueError(f"nbits={params['nbits']} is too large; use 4–12 (8 is usual).")
    return params


def _read_meta(path: Path) -> dict[str, Any]:
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from error
    if not isinstance(meta, dict) or meta.get("format") != FORMAT_NAME:
        raise ValueError(f"{path} was not written by FaissIndex.save() (no format={FORMAT_NAME!r}).")
    if int(meta.get("version", 0)) > FORMAT_VERSION:
        raise ValueError(
            f"{path} has format version {meta['version']}, newer than this fair-retrieval reads ({FORMAT_VERSION}); "
            "upgrade fair-retrieval."
        )
    missing = [key for key in ("dim", "metric", "kind") if key not in meta]
    if missing:
        raise ValueError(f"{path} lacks {missing}.")
    return meta


def _ivf_ids(faiss: Any, ivf: Any) -> np.ndarray:
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


def _kind_of(faiss: Any, index: Any) -> str | None:
    """Which FaissIndex kind a faiss index object is (None if it is none of them)."""
    ivf = faiss.try_extract_index_ivf(index)
    if ivf is not None:
        name = type(faiss.downcast_index(ivf)).__name__
        return {"IndexIVFFlat": "ivf", "IndexIVFPQ": "ivfpq"}.get(name)
    if type(index).__name__ != "IndexIDMap2":
        return None
    inner = type(faiss.downcast_index(index.index)).__name__
    if inner.startswith("IndexFlat"):
        return "flat"
    return "hnsw" if inner.startswith("IndexHNSW") else None


def _some(ids: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(i)) for i in ids[:limit])
    return shown + (f" … ({ids.size - limit} more)" if ids.size > limit else "")


def _describe(params: dict[str, int]) -> str:
    return ", ".join(f"{key}={value}" for key, value in params.items())
