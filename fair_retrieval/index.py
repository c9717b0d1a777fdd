"""FaissIndex: a FAISS vector index with int64 ids, deletion, GPU when present, and pickle-free save/load.

One class wraps faiss for the rest of fair-retrieval (CLI, LangChain and LlamaIndex stores). It builds any faiss
index-factory string, or one of four named kinds (plans in `fair_retrieval.index_plan`):

- "flat": exact search ("Flat"); vectors are stored as given.
- "hnsw": graph search on CPU ("HNSW{M}"); vectors are stored as given.
- "ivf": inverted lists of raw vectors ("IVF{nlist},Flat"); needs training.
- "ivfpq": compressed. Without nlist/m/nbits it is sized to the training vectors when it trains:
  "IVF{nlist},PQ{m}x8,Refine(SQ8)" (≥ 0.95 recall@10 at about 30% of the flat size, see the README); with them,
  plain "IVF{nlist},PQ{m}x{nbits}".

Indices that take ids natively (IVF) store them in their inverted lists; the others are wrapped in faiss'
`IDMap2`. Search parameters (nprobe, efSearch, k_factor_rf, …) go through `faiss.ParameterSpace`.

On a machine where faiss reports a GPU (faiss-gpu installed and a device visible), indices live on the GPU where
faiss can put them (`fair_retrieval.gpu`); files on disk are always CPU indices, so a folder saved on a GPU machine
loads on a CPU one and the other way round. A folder holds `index.faiss` (faiss' own binary format, which also
records dim, metric, structure and search parameters) and `index.json` (format version, id policy, count):
nothing is pickled, so loading cannot execute code. Folders written by the first format version still load.

Saving is atomic as a whole (`fair_retrieval.jsonio.Publication`): index.faiss is written under a temporary name,
then index.json, written last and read first, commits it with its size and CRC-32, and the file is renamed into
place. A save killed at any point (even by SIGKILL) leaves the previous index or the new one, a load running
meanwhile returns one of them, and a truncated or corrupted file is refused by a `DamagedFileError` (a ValueError)
that names it. Stores that embed an index folder publish their own files in the same commit (`save(companions=...)`).
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from fair_retrieval.gpu import (
    GpuChoice,
    faiss_gpu_count,
    gpu_count,
    import_faiss,
    index_to_cpu,
    index_to_gpus,
)
from fair_retrieval.index_plan import (
    KIND_PARAMS,
    PQ_CODEBOOK_BITS,
    IndexPlan,
    factory_plan,
    ivfpq_plan,
    kind_plan,
    parse_search,
    sized_ivfpq,
)
from fair_retrieval.jsonio import (
    ChangedWhileReadingError,
    DamagedFileError,
    Publication,
    Snapshot,
    retry_while_changing,
)

logger = logging.getLogger(__name__)

Metric = Literal["ip", "l2"]
Kind = Literal["flat", "hnsw", "ivf", "ivfpq"]

__all__ = ["FaissIndex", "GpuChoice", "Kind", "Metric", "faiss_gpu_count", "import_faiss"]

INDEX_FILE = "index.faiss"
META_FILE = "index.json"
FORMAT_NAME = "fair-retrieval-faiss-index"
FORMAT_VERSION = 2
GPU_MAX_K = 2048  # faiss' GPU k-selection limit
_REMEDY = "Rebuild the index and save it again (or restore the folder from a backup)."
_RECOMMENDED_POINTS_PER_CENTROID = 39  # below this faiss' k-means warns
_METRICS = ("ip", "l2")
_ID_MAP = "IDMap2"  # id policy of indices that cannot store ids themselves
_NATIVE = "native"
_EXHAUSTIVE_SELECTION = 1024  # searches restricted to at most this many ids score each of them
_HNSW_SELECTIVE = 10  # an HNSW search restricted to under 1/10 of the graph scores the selection on its storage


class IdSet:
    """The stored ids, with membership checks that cost O(batch) (a hash set), not O(stored).

    `lookups` counts the ids looked up (so tests can check the cost by counting); `ids()` is sorted on demand and
    cached until the next change.
    """

    def __init__(self, ids: Iterable[int] = ()) -> None:
        self._set: set[int] = set(int(i) for i in ids)
        self._largest = max(self._set, default=-1)
        self._sorted: np.ndarray | None = None
        self.lookups = 0

    def __len__(self) -> int:
        return len(self._set)

    def __contains__(self, id_: int) -> bool:
        self.lookups += 1
        return id_ in self._set

    def present(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of `ids` are stored."""
        self.lookups += int(ids.size)
        members = self._set
        return np.fromiter((int(i) in members for i in ids.tolist()), dtype=bool, count=ids.size)

    def add(self, ids: np.ndarray) -> None:
        """Store `ids` (already checked to be new)."""
        values = ids.tolist()
        self._set.update(values)
        if values:
            self._largest = max(self._largest, max(values))
        self._sorted = None

    def discard(self, ids: np.ndarray) -> None:
        """Forget `ids` (already checked to be stored)."""
        values = ids.tolist()
        self._set.difference_update(values)
        if self._largest in values:
            self._largest = max(self._set, default=-1)
        self._sorted = None

    @property
    def largest(self) -> int:
        """The largest stored id (-1 when empty)."""
        return self._largest

    def ids(self) -> np.ndarray:
        """All stored ids, int64, ascending."""
        if self._sorted is None:
            self._sorted = np.sort(np.fromiter(self._set, dtype=np.int64, count=len(self._set)))
        return self._sorted


class FaissIndex:
    """A FAISS index of float32 vectors addressed by int64 ids.

    Args:
        dim: vector size.
        metric: "ip" (inner product; cosine for L2-normalised vectors, larger is better) or "l2" (squared
            Euclidean distance, smaller is better).
        kind: "flat" (exact; the default), "hnsw" (graph, CPU only), "ivf" or "ivfpq" (inverted lists; need
            training, which happens on the first `add` when it brings enough vectors, or explicitly with `train`).
        gpu: "auto" uses the GPU when faiss reports one; True requires one (ValueError otherwise); False stays on
            CPU. HNSW has no faiss GPU implementation: "auto" keeps it on CPU, True is refused.
        gpu_shards: with more than one GPU, True shards the vectors across GPUs (more capacity), False replicates
            the index on every GPU (more query throughput). Ignored with one GPU.
        factory: instead of `kind`, any faiss index-factory string, e.g. "OPQ48,IVF4096,PQ48x8,Refine(SQ8)".
        search: search parameters by their faiss ParameterSpace names, e.g. "nprobe=64,k_factor_rf=16" (for
            `factory`, or to override a kind's).
        **params: kind parameters. hnsw: M=32, ef_construction=40, ef_search=64. ivf: nlist=100, nprobe=8.
            ivfpq: none for the sized default (nprobe and k_factor may override its search values); nlist, m
            (sub-quantizers; must divide dim), nbits (bits per code) for plain IVF-PQ (defaults 100, 8, 8).

    Behaviour worth knowing:
        - `get_vectors` is exact for flat, hnsw and ivf; compressed indices return their reconstruction (the SQ8
          refinement codes of the sized ivfpq default, the PQ codes of plain ivfpq): no side copy of the raw
          vectors is kept, so compression keeps its memory benefit.
        - `remove` works for every index. Where faiss cannot delete (HNSW, a refinement stage) the index is
          rebuilt from its stored vectors (O(n) per call, so batch removals); compressed vectors are re-encoded
          from their reconstruction.
        - Id checks in `add` and `remove` cost O(batch), so many small adds stay linear overall.
        - On GPU, `remove` runs on a CPU copy and re-uploads the result; `get_vectors` reads from a CPU copy that
          is kept (host memory) until the next add/remove, so repeated calls (MMR) are cheap; `save` always
          writes a CPU copy. faiss' GPU search returns at most k=2048 results.
        - Ids given by `add(vectors)` without ids continue after the largest id stored at that moment.
        - `search(queries, k, ids=...)` searches only among the given ids, inside faiss (an IDSelector in the
          search parameters, with the index's own nprobe / efSearch): k hits whenever k of those ids are stored,
          which filtering an unrestricted top-k cannot promise. Metadata filters (`fair_retrieval.filters`) pick
          the ids in the stores.
    """

    def __init__(
        self,
        dim: int,
        metric: Metric = "ip",
        kind: Kind | None = None,
        gpu: GpuChoice = "auto",
        gpu_shards: bool = False,
        *,
        factory: str | None = None,
        search: str | dict[str, float] | None = None,
        **params: int,
    ) -> None:
        self._faiss = import_faiss()
        if isinstance(dim, bool) or not isinstance(dim, int | np.integer) or dim < 1:
            raise ValueError(f"dim must be a positive int (the embedding size), got {dim!r}.")
        if metric not in _METRICS:
            raise ValueError(f"metric must be 'ip' (inner product / cosine) or 'l2', got {metric!r}.")
        self._dim = int(dim)
        self._metric: Metric = metric
        self._pending: dict[str, int] = {}  # parameters of a sized ivfpq plan made when training
        self._search_override = parse_search(search)
        self._plan: IndexPlan | None = self._initial_plan(kind, factory, params)
        self._gpu_count = self._choose_gpus(gpu)
        self._gpu_shards = bool(gpu_shards)
        self._gpu_resources: Any = None
        self._ids = IdSet()
        self._cpu_copy: Any = None  # CPU mirror of a GPU index, valid until the next change
        self._on_gpu = False
        self._uses_id_map = False
        self._index: Any = None
        self._index = self._new_cpu_index() if self._plan is not None else None
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
    def kind(self) -> str:
        """ "flat", "hnsw", "ivf", "ivfpq", or "custom" for another factory string."""
        return self._plan.kind if self._plan is not None else "ivfpq"

    @property
    def factory(self) -> str | None:
        """The faiss index-factory string built (None for a sized ivfpq index before it trains)."""
        return self._plan.factory if self._plan is not None else None

    @property
    def params(self) -> dict[str, int]:
        """The kind parameters in effect (nlist, nprobe, m, nbits, k_factor, M, ef_search, …), read from faiss."""
        if self._plan is None:
            return dict(self._pending)
        return dict(self._plan.params)

    @property
    def search_params(self) -> str:
        """The search parameters applied, as a ParameterSpace string ("nprobe=64,k_factor_rf=16")."""
        return self._plan.search_string() if self._plan is not None else ""

    @property
    def on_gpu(self) -> bool:
        """Whether the live index is on a GPU (indices that need training move there once trained)."""
        return self._on_gpu

    @property
    def is_trained(self) -> bool:
        """False for an index that needs training and has not had it; always True for flat and hnsw."""
        return self._index is not None and bool(self._index.is_trained)

    @property
    def ids(self) -> np.ndarray:
        """The stored ids, int64, sorted ascending (a copy)."""
        return self._ids.ids().copy()

    def __len__(self) -> int:
        return len(self._ids)

    def __contains__(self, id_: object) -> bool:
        if isinstance(id_, bool) or not isinstance(id_, int | np.integer):
            return False
        return int(id_) in self._ids

    def __repr__(self) -> str:
        return (
            f"FaissIndex(dim={self._dim}, metric={self._metric!r}, kind={self.kind!r}, factory={self.factory!r}, "
            f"count={len(self)}, on_gpu={self._on_gpu}, params={self.params})"
        )

    # ------------------------------------------------------------------------------------------------ public API

    def min_training_size(self) -> int:
        """Fewest vectors `train` accepts (0 when no training is needed): nlist, 2**nbits for PQ codes, and 256 for
        the sized ivfpq default."""
        if self._plan is None:
            return 2**PQ_CODEBOOK_BITS
        if not self._plan.needs_training:
            return 0
        faiss, index = self._faiss, self._index
        ivf = faiss.try_extract_index_ivf(index)
        needed = int(ivf.nlist) if ivf is not None else 1
        pq = getattr(faiss.downcast_index(ivf), "pq", None) if ivf is not None else None
        if pq is not None:
            needed = max(needed, 2 ** int(pq.nbits))
        return needed

    def train(self, sample: Any) -> None:
        """Train an index that needs it on a representative sample of vectors (no-op for flat and hnsw).

        Training learns the coarse centroids (and PQ codebooks), so the sample should look like the data to be
        added; faiss recommends at least 39 vectors per list (39·nlist). A sized ivfpq index chooses its nlist from
        the sample size here. With a GPU, k-means runs there.

        Raises:
            ValueError: if the index is already trained, or the sample is too small or malformed.
        """
        vectors = self._as_vectors(sample, "sample")
        if self._plan is not None and not self._plan.needs_training:
            logger.debug("train() does nothing for kind=%r: it needs no training.", self.kind)
            return
        if self.is_trained:
            raise ValueError(
                f"This {self.kind} index is already trained; create a new FaissIndex to train on another sample."
            )
        needed = self.min_training_size()
        if vectors.shape[0] < needed:
            raise ValueError(
                f"This {self.kind} index ({self._describe()}) needs at least {needed} training vectors, got "
                f"{vectors.shape[0]}. Train on a larger sample, or choose smaller parameters (nlist, nbits)."
            )
        if self._plan is None:
            self._plan = self._with_override(sized_ivfpq(vectors.shape[0], self._dim, **self._pending))
            self._index = self._new_cpu_index()
            logger.info("Sized ivfpq index for %d training vectors: %s", vectors.shape[0], self._plan.describe())
        ivf = self._faiss.try_extract_index_ivf(self._index)
        if ivf is not None and vectors.shape[0] < _RECOMMENDED_POINTS_PER_CENTROID * int(ivf.nlist):
            logger.warning(
                "Training with %d vectors for nlist=%d lists; faiss recommends at least %d. Quality may suffer.",
                vectors.shape[0],
                int(ivf.nlist),
                _RECOMMENDED_POINTS_PER_CENTROID * int(ivf.nlist),
            )
        self._train_cpu(vectors)
        self._to_gpu_if_wanted()

    def add(self, vectors: Any, ids: Any = None) -> np.ndarray:
        """Add vectors (n, dim) under `ids` (int64 ≥ 0), or under new ids following the largest stored id.

        An untrained index is first trained on these vectors when there are enough of them. The id checks cost
        O(n) for n new vectors, whatever the number stored.

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
                    f"This {self.kind} index is not trained and this add() brings only {count} vectors; training "
                    f"needs at least {self.min_training_size()} ({self._describe()}). Call train(sample) with "
                    "enough representative vectors first, add more vectors at once, or lower nlist."
                )
            self.train(matrix)
        self._index.add_with_ids(matrix, new_ids)
        self._ids.add(new_ids)
        self._cpu_copy = None
        return new_ids

    def search(self, queries: Any, k: int, *, ids: Any = None) -> tuple[np.ndarray, np.ndarray]:
        """Return the k best stored vectors for every query row, optionally only among `ids`.

        Args:
            queries: float vectors (n, dim).
            k: results per query.
            ids: restrict the search to these stored ids (e.g. the documents a metadata filter keeps). Every query
                then gets min(k, number of distinct `ids`) results, all from `ids`, however few of the stored
                vectors they are: the restriction is applied inside faiss' search (an `IDSelectorBatch` in
                `SearchParameters`), not by filtering an unrestricted top-k. The index's own search values are
                kept (nprobe for IVF, efSearch for HNSW, k_factor for a refinement stage). A selection too small
                for the approximate structure to find reliably is scored exhaustively instead (every selected
                vector: all lists of an IVF index, the flat storage of an HNSW graph), and queries that still come
                back short are searched again exhaustively. On a GPU the live index takes the selector where faiss
                supports it there; otherwise its CPU copy is searched. Index types whose faiss search takes no
                selector (custom factories such as "PQ16", "LSH", "NSG32") fall back to searching ever more
                unrestricted candidates (4x each round) until k selected ones are found or every vector was seen.

        Returns:
            (scores, ids): float32 (n, k) and int64 (n, k), best first. Scores are inner products for "ip" (larger
            is better) or squared L2 distances for "l2" (smaller is better). Where fewer than k vectors are found,
            ids are -1 and scores -inf ("ip") or +inf ("l2").

        Raises:
            ValueError: a k that is not a positive int (or above 2048 on GPU), malformed queries, or `ids` that
                are not stored (the message lists some of them).
            TypeError: non-numeric queries or non-integer ids.
        """
        if isinstance(k, bool) or not isinstance(k, int | np.integer) or k < 1:
            raise ValueError(f"k must be a positive int, got {k!r}.")
        if self._on_gpu and k > GPU_MAX_K:
            raise ValueError(f"faiss on GPU returns at most k={GPU_MAX_K} results; ask for fewer, or use gpu=False.")
        matrix = self._as_vectors(queries, "queries")
        k = int(k)
        wanted = None if ids is None else self._stored_selection(ids)
        if matrix.shape[0] == 0 or len(self) == 0 or not self.is_trained or (wanted is not None and not wanted.size):
            scores = np.full((matrix.shape[0], k), self._missing_score, dtype=np.float32)
            return scores, np.full((matrix.shape[0], k), -1, dtype=np.int64)
        if wanted is not None and wanted.size < len(self):
            scores, found = self._search_among(matrix, k, wanted)
        else:  # no restriction, or every stored id selected
            scores, found = self._index.search(matrix, k)
        scores = np.ascontiguousarray(scores, dtype=np.float32)
        found = np.ascontiguousarray(found, dtype=np.int64)
        scores[found < 0] = self._missing_score
        return scores, found

    def set_search(self, search: str | dict[str, float]) -> None:
        """Change search parameters by their faiss ParameterSpace names, e.g. "nprobe=128,k_factor_rf=32".

        Raises:
            ValueError: a malformed string, or a name faiss does not know for this index.
        """
        values = parse_search(search)
        if self._plan is None:
            self._search_override.update(values)
            return
        self._plan = replace(self._plan, search={**self._plan.search, **values})
        self._apply_search(self._index, values)
        if self._cpu_copy is not None:
            self._apply_search(self._cpu_copy, values)
        self._plan = replace(self._plan, params=self._read_params())

    def remove(self, ids: Any) -> int:
        """Remove the vectors stored under `ids`; returns how many were removed.

        Nothing is removed when any id is unknown. Where faiss cannot delete (HNSW, a refinement stage), the index
        is rebuilt without them (O(n)).

        Raises:
            ValueError: if some ids are not stored (the message lists some of them).
        """
        targets = np.unique(self._as_ids(ids, "ids"))
        if targets.size == 0:
            return 0
        self._require_known(targets)
        index = self._cpu_index()
        try:
            removed = int(index.remove_ids(targets))
        except RuntimeError:  # faiss: "remove_ids not implemented" for this structure, nothing changed
            index = self._rebuilt_without(index, targets)
        else:
            if removed != targets.size:  # pragma: no cover - would be a faiss bug
                raise RuntimeError(f"faiss removed {removed} vectors instead of {targets.size}.")
        self._ids.discard(targets)
        self._index, self._on_gpu, self._cpu_copy = index, False, None
        self._to_gpu_if_wanted()
        return int(targets.size)

    def get_vectors(self, ids: Any) -> np.ndarray:
        """The stored vectors of `ids`, float32 (len(ids), dim), in the order asked (exact for uncompressed kinds).

        Raises:
            ValueError: if some ids are not stored (the message lists some of them).
        """
        wanted = self._as_ids(ids, "ids")
        if wanted.size == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        self._require_known(np.unique(wanted))
        return _reconstruct(self._cpu_index(), wanted, self._dim)

    def save(
        self, folder: str | os.PathLike[str], *, companions: Mapping[str, str | os.PathLike[str]] | None = None
    ) -> Path:
        """Write `index.faiss` (a CPU faiss index) and `index.json` into `folder` (created if needed), atomically.

        index.faiss is written under a temporary name and fsynced; index.json, written last, commits it (with its
        size and CRC-32); then it is renamed into place (`fair_retrieval.jsonio.Publication`). Killed at any point,
        even by SIGKILL, the folder holds the previous index or this one, never a mix, and a `load` running
        meanwhile reads one of them. Saves into one folder run one after the other; the next save removes what a
        killed one left.

        Args:
            folder: the index folder.
            companions: files of an enclosing format to publish in the same commit, so that they change together
                with the index: name relative to `folder` (it may lead out of it, e.g. "../store.json") → a
                finished file with the new content, on the same file system, which is moved (not copied). Readers
                find them through index.json with `jsonio.Snapshot`.

        Returns:
            The folder path.
        """
        path = Path(folder)
        path.mkdir(parents=True, exist_ok=True)
        meta: dict[str, Any] = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "faiss_version": getattr(self._faiss, "__version__", None),
            "factory": self.factory,
            "ids": self._id_policy(),
            "search": self.search_params,
            "count": len(self),
        }
        extra = {name: Path(source) for name, source in (companions or {}).items()}
        with Publication(path / META_FILE, [INDEX_FILE, *extra], keep=extra.values()) as publication:
            for name, source in extra.items():
                publication.add(name, source)
            if self._index is None:  # a sized ivfpq index that has not trained: nothing for faiss to write yet
                meta.update(dim=self._dim, metric=self._metric, kind="ivfpq", params=self._pending)
                meta["search"] = ",".join(f"{key}={value}" for key, value in self._search_override.items())
                publication.commit(meta, remove=[INDEX_FILE])
            else:
                index = self._cpu_index(cache=False)  # GPU indices cannot be written: always a CPU copy
                self._faiss.write_index(index, str(publication.stage(INDEX_FILE)))
                publication.commit(meta)
        logger.info("Saved %s to %s", self, path)
        return path

    @classmethod
    def load(cls, folder: str | os.PathLike[str], gpu: GpuChoice = "auto", gpu_shards: bool = False) -> FaissIndex:
        """Load an index written by `save` (either format version); `gpu` and `gpu_shards` as in the constructor.

        dim, metric, structure and search parameters come from the faiss file; index.json adds the format
        version, the id policy and the count (checked). index.json is read first and index.faiss checked against
        the size and CRC-32 it records (folders of earlier releases record none); a save that replaces the folder
        meanwhile makes the load read it again, so it returns the index before or after that save.

        Raises:
            FileNotFoundError: if the folder lacks index.faiss or index.json.
            DamagedFileError: (a ValueError) if index.json or index.faiss is truncated, corrupted or unreadable by
                this faiss; the message names the file.
            ValueError: if index.json is malformed or disagrees with index.faiss.
        """
        path = Path(folder)
        return retry_while_changing(path / META_FILE, lambda: cls._load_snapshot(path, gpu, gpu_shards))

    @classmethod
    def _load_snapshot(cls, path: Path, gpu: GpuChoice, gpu_shards: bool) -> FaissIndex:
        """One consistent read of the folder; ChangedWhileReadingError when a save replaced index.json meanwhile."""
        snapshot = Snapshot.read(
            path / META_FILE,
            format_name=FORMAT_NAME,
            max_version=FORMAT_VERSION,
            writer="FaissIndex.save()",
            remedy=_REMEDY,
        )
        try:
            index = cls._from_snapshot(snapshot, path, gpu, gpu_shards)
        except (OSError, ValueError, RuntimeError) as error:
            if not snapshot.is_current():
                raise ChangedWhileReadingError from error
            raise
        if snapshot.files is None and not snapshot.is_current():  # an earlier release's folder: nothing is checked
            raise ChangedWhileReadingError
        return index

    @classmethod
    def _from_snapshot(cls, snapshot: Snapshot, path: Path, gpu: GpuChoice, gpu_shards: bool) -> FaissIndex:
        meta, index_path = snapshot.value, path / INDEX_FILE
        listed = snapshot.files
        has_file = INDEX_FILE in listed if listed is not None else index_path.is_file()
        if not has_file:
            if meta.get("version") == FORMAT_VERSION and meta.get("factory") is None and meta.get("kind") == "ivfpq":
                return cls(  # a sized ivfpq index saved before training
                    int(meta["dim"]),
                    metric=meta["metric"],
                    kind="ivfpq",
                    gpu=gpu,
                    gpu_shards=gpu_shards,
                    search=meta.get("search") or None,
                    **(meta.get("params") or {}),
                )
            raise FileNotFoundError(f"{index_path} not found: is {path} a folder written by FaissIndex.save()?")
        faiss = import_faiss()
        index = _read_faiss(faiss, snapshot, index_path)
        metric = _metric_name(faiss, index, index_path)
        for key, value in (("dim", int(index.d)), ("metric", metric)):
            if key in meta and meta[key] != value:
                raise ValueError(f"{index_path} holds {key}={value!r} but {META_FILE} says {meta[key]!r}.")
        kind = _kind_of(faiss, index)
        if "kind" in meta and meta["kind"] != kind:
            raise ValueError(f"{index_path} does not hold a {meta['kind']!r} index as {META_FILE} says.")
        self = cls.__new__(cls)
        self._faiss = faiss
        self._dim, self._metric = int(index.d), metric
        self._pending, self._search_override = {}, {}
        search = parse_search(meta.get("search") or None)
        if meta.get("version", 1) < 2:  # version 1 kept the search values as kind parameters only
            ivf_or_hnsw = meta.get("params") or {}
            search = {"nprobe": ivf_or_hnsw["nprobe"]} if "nprobe" in ivf_or_hnsw else {}
            if "ef_search" in ivf_or_hnsw:
                search = {"efSearch": ivf_or_hnsw["ef_search"]}
        self._plan = IndexPlan(kind, meta.get("factory") or _describe_structure(faiss, index), search=search)
        self._gpu_count = self._choose_gpus(gpu)
        self._gpu_shards = bool(gpu_shards)
        self._gpu_resources = None
        self._cpu_copy = None
        self._on_gpu = False
        self._uses_id_map = False
        native = _native_ivf(faiss, index)
        if native:
            faiss.extract_index_ivf(index).set_direct_map_type(faiss.DirectMap.Hashtable)
            stored = _ivf_ids(faiss, faiss.extract_index_ivf(index))
        elif type(index).__name__ in ("IndexIDMap2", "IndexIDMap"):
            self._uses_id_map = True
            stored = faiss.vector_to_array(index.id_map).astype(np.int64)
        else:
            raise ValueError(
                f"{index_path} stores no ids (neither IVF lists nor an IDMap2); it was not written by FaissIndex."
            )
        if np.unique(stored).size != stored.size:
            raise ValueError(f"{index_path} holds duplicate ids; it was not written by FaissIndex.")
        count = meta.get("count")
        if count is not None and int(count) != int(index.ntotal):
            raise ValueError(f"{index_path} holds {index.ntotal} vectors but {META_FILE} says {count}.")
        self._ids = IdSet(stored.tolist())
        self._apply_search(index, search)
        self._index, self._on_gpu = index, False
        self._plan = replace(self._plan, params=self._read_params())
        if self.is_trained:
            self._to_gpu_if_wanted()
        return self

    # ------------------------------------------------------------------------------------------------ internals

    @property
    def _missing_score(self) -> float:
        return float("-inf") if self._metric == "ip" else float("inf")

    def _stored_selection(self, ids: Any) -> np.ndarray:
        """`ids` as sorted unique int64, all stored (a vectorised lookup in the sorted ids, not one by one)."""
        wanted = np.unique(self._as_ids(ids, "ids"))
        stored = self._ids.ids()
        if wanted.size:
            at = np.searchsorted(stored, wanted)
            known = at < stored.size
            known[known] = stored[at[known]] == wanted[known]
            if not known.all():
                unknown = wanted[~known]
                raise ValueError(
                    f"{unknown.size} id(s) to search among are not in the index: {_some(unknown)}. Pass stored ids "
                    "only (FaissIndex.ids lists them)."
                )
        return wanted

    def _search_among(self, matrix: np.ndarray, k: int, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The k best of `wanted` (sorted, stored, not all of them) for every query row (see `search`)."""
        expected = min(k, int(wanted.size))
        exhaustive = _prefers_exhaustive(self.params, int(wanted.size), len(self))
        result = self._selector_search(matrix, k, wanted, exhaustive)
        if result is None:
            logger.debug("The %s index (%s) takes no id selector; widening the candidates.", self.kind, self.factory)
            return self._widened_search(matrix, k, wanted)
        scores, found = result
        short = (found >= 0).sum(axis=1) < expected
        if short.any() and not exhaustive:  # the graph or the probed lists held too few selected vectors
            again = self._selector_search(matrix[short], k, wanted, exhaustive=True)
            if again is not None:
                scores[short], found[short] = again
                short = (found >= 0).sum(axis=1) < expected
        if short.any():
            scores[short], found[short] = self._widened_search(matrix[short], k, wanted)
        return scores, found

    def _selector_search(
        self, matrix: np.ndarray, k: int, wanted: np.ndarray, exhaustive: bool
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Search with a faiss id selector: on the live GPU index where faiss takes one there, else on the CPU
        (copy); None when this index type takes none."""
        stored = self._ids.ids()
        if self._on_gpu:
            result = _search_with_selector(self._faiss, self._index, matrix, k, wanted, stored, exhaustive)
            if result is not None:
                return result
            logger.debug("faiss takes no id selector for this GPU index; searching its CPU copy.")
        return _search_with_selector(self._faiss, self._cpu_index(), matrix, k, wanted, stored, exhaustive)

    def _widened_search(self, matrix: np.ndarray, k: int, wanted: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Unrestricted searches over ever more candidates (4x a round) until every row holds min(k, selected)
        selected ids or every stored vector was a candidate; the selected ones, best first."""
        total, expected = len(self), min(k, int(wanted.size))
        fetch = min(total, max(4 * k, 64))
        while True:
            index = self._cpu_index() if self._on_gpu and fetch > GPU_MAX_K else self._index
            scores, found = index.search(matrix, fetch)
            members = np.isin(found, wanted)
            if fetch >= total or bool((members.sum(axis=1) >= expected).all()):
                break
            fetch = min(total, fetch * 4)
        return _first_members(np.asarray(scores), np.asarray(found), members, k, self._missing_score)

    def _faiss_metric(self) -> int:
        faiss = self._faiss
        return int(faiss.METRIC_INNER_PRODUCT if self._metric == "ip" else faiss.METRIC_L2)

    def _initial_plan(self, kind: str | None, factory: str | None, params: dict[str, Any]) -> IndexPlan | None:
        """The plan from the constructor's arguments; None for a sized ivfpq index (planned when it trains)."""
        if factory is not None:
            if kind is not None or params:
                raise ValueError(
                    "Pass either kind (with its parameters) or factory (with search=...), not both; got "
                    f"kind={kind!r}, factory={factory!r}, parameters {sorted(params)}."
                )
            return self._with_override(factory_plan(factory))
        kind = kind or "flat"
        if kind not in KIND_PARAMS:
            raise ValueError(f"kind must be one of {tuple(KIND_PARAMS)}, got {kind!r} (or pass factory=...).")
        if kind != "ivfpq":
            return self._with_override(kind_plan(kind, self._dim, **params))
        plan = ivfpq_plan(None, self._dim, **params)
        if plan is None:
            self._pending = {key: int(value) for key, value in params.items()}
            return None
        return self._with_override(plan)

    def _with_override(self, plan: IndexPlan) -> IndexPlan:
        """`plan` with the constructor's `search` values on top of its own."""
        return replace(plan, search={**plan.search, **self._search_override}) if self._search_override else plan

    def _new_cpu_index(self) -> Any:
        """A fresh, empty CPU index of the plan, holding ids natively (IVF) or through IDMap2."""
        faiss, plan = self._faiss, self._plan
        assert plan is not None
        try:
            index = faiss.index_factory(self._dim, plan.factory, self._faiss_metric())
            self._uses_id_map = not _takes_ids(faiss, index)
            if self._uses_id_map:
                index = faiss.index_factory(self._dim, f"{_ID_MAP},{plan.factory}", self._faiss_metric())
        except RuntimeError as error:
            raise ValueError(
                f"faiss cannot build {plan.factory!r} for {self._dim}-d vectors: {str(error).splitlines()[0]}"
            ) from error
        ivf = faiss.try_extract_index_ivf(index)
        if ivf is not None:
            ivf = faiss.downcast_index(ivf)
            if hasattr(ivf, "do_polysemous_training"):
                ivf.do_polysemous_training = False  # only serves Hamming-filtered search, which is not used; slow
            if _native_ivf(faiss, index):
                ivf.set_direct_map_type(faiss.DirectMap.Hashtable)  # lookup by id for remove() and get_vectors()
        self._apply_search(index, plan.build)
        self._apply_search(index, plan.search)
        kind = plan.kind if plan.kind != "custom" else _kind_of(faiss, index)  # "HNSW8,Flat" is an hnsw index
        self._plan = replace(plan, kind=kind, params=_params_of(faiss, index))
        return index

    def _apply_search(self, index: Any, values: Mapping[str, float]) -> None:
        """Set ParameterSpace values on `index` (GpuParameterSpace for a GPU index)."""
        if not values:
            return
        faiss = self._faiss
        on_gpu = self._on_gpu and index is self._index
        space = getattr(faiss, "GpuParameterSpace", faiss.ParameterSpace)() if on_gpu else faiss.ParameterSpace()
        for key, value in values.items():
            try:
                space.set_index_parameter(index, key, float(value))
            except RuntimeError as error:
                raise ValueError(
                    f"faiss has no search parameter {key!r} for {self.factory!r} ({str(error).splitlines()[0]}); "
                    "nprobe applies to IVF, efSearch to HNSW, k_factor_rf to a Refine stage."
                ) from error

    def _read_params(self) -> dict[str, int]:
        return _params_of(self._faiss, self._cpu_index())

    def _id_policy(self) -> str:
        """How ids are stored: "IDMap2" (faiss' id map around the index) or "native" (in IVF lists)."""
        return _ID_MAP if self._uses_id_map else _NATIVE

    def _describe(self) -> str:
        return self._plan.describe() if self._plan is not None else "sized when it trains"

    def _choose_gpus(self, gpu: GpuChoice) -> int:
        """How many GPUs to use: 0 for CPU."""
        count = gpu_count(gpu, self._faiss)
        if self.kind == "hnsw":
            if gpu is True:
                raise ValueError("faiss has no GPU implementation of HNSW; use kind='flat'/'ivf'/'ivfpq' or gpu=False.")
            if count:
                logger.info("HNSW runs on CPU: faiss has no GPU implementation of it.")
            return 0
        return count

    def _to_gpu_if_wanted(self) -> None:
        """Move the (trained, CPU) live index to the GPU(s) chosen at construction."""
        if self._gpu_count == 0 or self._on_gpu:
            return
        try:
            gpu_index, self._gpu_resources = index_to_gpus(
                self._index, self._gpu_count, shards=self._gpu_shards, resources=self._gpu_resources
            )
        except RuntimeError as error:
            raise ValueError(
                f"faiss could not move this {self.kind} index ({self._describe()}) to the GPU: {error}. "
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
        copy = index_to_cpu(self._index)
        if _native_ivf(self._faiss, copy):
            self._faiss.extract_index_ivf(copy).set_direct_map_type(self._faiss.DirectMap.Hashtable)
        if cache:
            self._cpu_copy = copy
        return copy

    def _train_cpu(self, vectors: np.ndarray) -> None:
        """Train the (CPU, untrained) live index; k-means assignment runs on a GPU when one is used."""
        faiss = self._faiss
        ivf = faiss.try_extract_index_ivf(self._index)
        helper = None  # held here: faiss keeps only a raw pointer to the clustering index
        if self._gpu_count and ivf is not None:
            resources = self._gpu_resources = self._gpu_resources or faiss.StandardGpuResources()
            helper = faiss.index_cpu_to_gpu(resources, 0, faiss.IndexFlat(self._dim, ivf.metric_type))
            ivf.clustering_index = helper
        try:
            self._index.train(vectors)
        finally:
            if ivf is not None:
                ivf.clustering_index = None
            del helper
        assert self._plan is not None
        self._plan = replace(self._plan, params=_params_of(faiss, self._index))

    def _rebuilt_without(self, index: Any, targets: np.ndarray) -> Any:
        """A copy of `index` (same training) holding every stored vector except `targets`, for structures faiss
        cannot delete from (HNSW graphs, refinement stages)."""
        faiss = self._faiss
        keep = np.setdiff1d(self._ids.ids(), targets, assume_unique=True)
        vectors = _reconstruct(index, keep, self._dim) if keep.size else None
        rebuilt = faiss.clone_index(index)
        rebuilt.reset()
        self._apply_search(rebuilt, self._plan.search if self._plan is not None else {})
        if vectors is not None:
            rebuilt.add_with_ids(vectors, keep)
        logger.info("Rebuilt the %s index without %d ids (%d vectors remain).", self.kind, targets.size, keep.size)
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
        """Validate caller ids (or allocate new ones after the largest stored id); O(count)."""
        if ids is None:
            start = self._ids.largest + 1
            return np.arange(start, start + count, dtype=np.int64)
        new_ids = self._as_ids(ids, "ids")
        if new_ids.size != count:
            raise ValueError(f"Got {count} vectors but {new_ids.size} ids; pass one id per vector.")
        unique, counts = np.unique(new_ids, return_counts=True)
        if unique.size != new_ids.size:
            repeated = unique[counts > 1]
            raise ValueError(f"ids repeat within this call: {_some(repeated)}; every id must be unique.")
        clash = new_ids[self._ids.present(new_ids)]
        if clash.size:
            raise ValueError(
                f"ids already in the index: {_some(clash)}. Remove them first to replace their vectors, "
                "or pass ids=None for new ones."
            )
        return new_ids

    def _require_known(self, unique_ids: np.ndarray) -> None:
        unknown = unique_ids[~self._ids.present(unique_ids)]
        if unknown.size:
            raise ValueError(f"{unknown.size} id(s) are not in the index: {_some(unknown)}.")


def _prefers_exhaustive(params: Mapping[str, int], selected: int, total: int) -> bool:
    """Whether a restricted search should score every selected vector rather than trust the approximate structure.

    Small selections always are (cheap, and exact). For IVF, a selection no larger a share of the vectors than the
    probed lists are (nprobe / nlist) costs no more scanned in full, and probing few lists would miss much of it.
    An HNSW graph walk finds selected neighbours poorly once they are under a tenth of the graph (recall@10 falls
    from 0.98 at 10 % to about 0.5 at 2 % with efSearch=64), so such selections are scored on its flat storage.
    """
    if selected <= _EXHAUSTIVE_SELECTION:
        return True
    if "nlist" in params and "nprobe" in params:
        return selected * params["nlist"] <= params["nprobe"] * total
    if "ef_search" in params:
        return selected * _HNSW_SELECTIVE <= total
    return False


def _search_with_selector(
    faiss: Any,
    index: Any,
    matrix: np.ndarray,
    k: int,
    wanted: np.ndarray,
    stored: np.ndarray,
    exhaustive: bool,
) -> tuple[np.ndarray, np.ndarray] | None:
    """Search `index` (CPU or GPU) for the k best of the `wanted` ids with a faiss IDSelector in SearchParameters.

    Returns None where faiss takes no selector for this structure (it raised, or it ignored the selector and
    returned other ids).
    """
    top = faiss.downcast_index(index)
    node, id_map = top, None
    if type(top).__name__ in ("IndexIDMap", "IndexIDMap2"):
        node, id_map = faiss.downcast_index(top.index), top.id_map
    if 2 * wanted.size > stored.size:  # most ids selected: faiss checks the smaller set of those left out
        batch = faiss.IDSelectorBatch(np.setdiff1d(stored, wanted, assume_unique=True))
        selector = faiss.IDSelectorNot(batch)
    else:
        batch = selector = faiss.IDSelectorBatch(wanted)
    # Below an id map faiss sees positions: translate them to ids (IndexIDMap leaves a translated selector as is).
    # faiss keeps raw pointers to these selectors: the local names hold them until the search is done.
    inner = faiss.IDSelectorTranslated(id_map, selector) if id_map is not None else selector
    try:
        if exhaustive and id_map is not None and type(node).__name__.startswith("IndexHNSW"):
            storage = faiss.downcast_index(node.storage)  # the graph's vectors, by position: scored one by one
            scores, positions = storage.search(matrix, k, params=faiss.SearchParameters(sel=inner))
            labels = faiss.rev_swig_ptr(id_map.data(), id_map.size())
            found = np.where(positions >= 0, labels[np.maximum(positions, 0)], -1)
        else:
            params = _selector_params(faiss, node, inner, exhaustive)
            if params is None:
                return None
            scores, found = index.search(matrix, k, params=params)
    except RuntimeError as error:  # faiss: "search params not supported", "selector not supported", …
        logger.debug("faiss refused an id selector for %s: %s", type(node).__name__, str(error).splitlines()[0])
        return None
    if not np.isin(found[found >= 0], wanted).all():  # checked, not trusted: k·n lookups
        name = type(node).__name__
        on_gpu = name.startswith("Gpu")  # then the CPU copy is searched next: expected, not worth a warning
        logger.log(logging.DEBUG if on_gpu else logging.WARNING, "faiss ignored the id selector of a %s search.", name)
        return None
    return np.asarray(scores), np.asarray(found)


def _selector_params(faiss: Any, node: Any, selector: Any, exhaustive: bool) -> Any:
    """SearchParameters carrying `selector` for `node` and what lies below it, with the node's own search values
    (nprobe and max_codes, efSearch, k_factor); `exhaustive` probes every IVF list. None for structures whose
    faiss search takes no selector (IndexPQ, IndexLSH, IndexNSG, …)."""
    node = faiss.downcast_index(node)
    name = type(node).__name__
    if name == "IndexPreTransform":  # passes the parameters on to the index it transforms for
        return _selector_params(faiss, node.index, selector, exhaustive)
    if name.startswith("IndexRefine"):  # the selector must reach the base index, which picks the candidates
        base = _selector_params(faiss, node.base_index, selector, exhaustive)
        if base is None:
            return None
        return faiss.IndexRefineSearchParameters(k_factor=float(node.k_factor), base_index_params=base, sel=selector)
    if isinstance(node, faiss.IndexIVF) or name.startswith("GpuIndexIVF"):
        params = faiss.SearchParametersIVF(sel=selector, nprobe=int(node.nlist) if exhaustive else int(node.nprobe))
        if not exhaustive and hasattr(node, "max_codes"):
            params.max_codes = int(node.max_codes)
        return params
    if name.startswith("IndexHNSW"):
        graph = node.hnsw
        return faiss.SearchParametersHNSW(
            sel=selector,
            efSearch=int(graph.efSearch),
            check_relative_distance=bool(graph.check_relative_distance),
            bounded_queue=bool(graph.search_bounded_queue),
        )
    if name.startswith(("IndexFlat", "GpuIndexFlat")) or name == "IndexScalarQuantizer":
        return faiss.SearchParameters(sel=selector)
    return None


def _first_members(
    scores: np.ndarray, found: np.ndarray, members: np.ndarray, k: int, missing: float
) -> tuple[np.ndarray, np.ndarray]:
    """Per row, the first k results flagged in `members` (order kept), padded with -1 / `missing` to k columns."""
    rows = found.shape[0]
    order = np.argsort(~members, axis=1, kind="stable")[:, :k]
    picked = np.take_along_axis(members, order, axis=1)
    kept_ids = np.where(picked, np.take_along_axis(found, order, axis=1), -1)
    kept_scores = np.where(picked, np.take_along_axis(scores, order, axis=1), missing)
    if kept_ids.shape[1] < k:
        pad = k - kept_ids.shape[1]
        kept_ids = np.hstack([kept_ids, np.full((rows, pad), -1, dtype=np.int64)])
        kept_scores = np.hstack([kept_scores, np.full((rows, pad), missing, dtype=np.float32)])
    return kept_scores.astype(np.float32), kept_ids.astype(np.int64)


def _native_ivf(faiss: Any, index: Any) -> bool:
    """Whether `index` is an IVF index (possibly under pre-transforms such as OPQ) keeping caller ids in its lists."""
    node = faiss.downcast_index(index)
    while type(node).__name__ == "IndexPreTransform":
        node = faiss.downcast_index(node.index)
    return isinstance(node, faiss.IndexIVF)


def _takes_ids(faiss: Any, index: Any) -> bool:
    """Whether `index` stores caller ids itself: an IVF index (possibly under a pre-transform such as OPQ) or an
    id map."""
    node = faiss.downcast_index(index)
    while type(node).__name__ == "IndexPreTransform":
        node = faiss.downcast_index(node.index)
    return isinstance(node, faiss.IndexIVF) or type(node).__name__ in ("IndexIDMap", "IndexIDMap2")


def _unwrap(faiss: Any, index: Any) -> tuple[Any, Any]:
    """(core, refine): the index under id maps, pre-transforms and a refinement stage, and that stage (or None)."""
    node, refine = faiss.downcast_index(index), None
    while True:
        name = type(node).__name__
        if name in ("IndexIDMap", "IndexIDMap2", "IndexPreTransform"):
            node = faiss.downcast_index(node.index)
        elif name.startswith("IndexRefine"):
            refine, node = node, faiss.downcast_index(node.base_index)
        else:
            return node, refine


def _kind_of(faiss: Any, index: Any) -> str:
    """Which FaissIndex kind a faiss index is ("custom" when none fits)."""
    core, _ = _unwrap(faiss, index)
    name = type(core).__name__
    if name.startswith("IndexFlat"):
        return "flat"
    if name.startswith("IndexHNSW"):
        return "hnsw"
    return {"IndexIVFFlat": "ivf", "IndexIVFPQ": "ivfpq"}.get(name, "custom")


def _params_of(faiss: Any, index: Any) -> dict[str, int]:
    """The parameters of `index` in FaissIndex's names, read from faiss (nlist, nprobe, m, nbits, k_factor, …)."""
    core, refine = _unwrap(faiss, index)
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


def _describe_structure(faiss: Any, index: Any) -> str:
    """A factory-like name for a loaded index whose factory string was not recorded (format version 1)."""
    core, refine = _unwrap(faiss, index)
    params = _params_of(faiss, index)
    kind = _kind_of(faiss, index)
    text = {
        "flat": "Flat",
        "hnsw": f"HNSW{params.get('M')}",
        "ivf": f"IVF{params.get('nlist')},Flat",
        "ivfpq": f"IVF{params.get('nlist')},PQ{params.get('m')}x{params.get('nbits')}",
    }.get(kind, type(core).__name__)
    return text + (",Refine" if refine is not None else "")


def _read_faiss(faiss: Any, snapshot: Snapshot, index_path: Path) -> Any:
    """The faiss index of index.faiss as `snapshot` lists it: checked against the recorded size and CRC-32 first,
    then parsed from the same open file (so a concurrent rename cannot slip another file in between)."""
    try:
        handle = snapshot.open(INDEX_FILE)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"{index_path} not found: is {index_path.parent} a folder written by FaissIndex.save()?"
        ) from None
    with handle:
        problem = snapshot.mismatch(INDEX_FILE, handle)
        if problem is not None:
            if not snapshot.is_current():
                raise ChangedWhileReadingError
            raise DamagedFileError(index_path, f"{problem} (truncated, corrupted or replaced)", _REMEDY)
        try:
            return faiss.read_index(faiss.PyCallbackIOReader(handle.read))
        except RuntimeError as error:
            written = snapshot.value.get("faiss_version")
            by = f" (written by faiss {written})" if written else ""
            raise DamagedFileError(
                index_path,
                f"faiss {getattr(faiss, '__version__', '')} cannot read it{by}: {_faiss_reason(error)}",
                f"{_REMEDY} If it was written by a newer faiss, upgrade faiss.",
            ) from None


def _faiss_reason(error: RuntimeError) -> str:
    """The useful end of a faiss error ("Index type … not recognized", "read error …"), without its C++ location."""
    text = " ".join(str(error).split())
    found = re.search(r"\bat \S+:\d+: (.*)$", text)
    reason = found.group(1) if found else text
    return reason.removeprefix("Error: ")[:200]


def _metric_name(faiss: Any, index: Any, path: Path) -> Metric:
    if int(index.metric_type) == int(faiss.METRIC_INNER_PRODUCT):
        return "ip"
    if int(index.metric_type) == int(faiss.METRIC_L2):
        return "l2"
    raise ValueError(f"{path} uses faiss metric {index.metric_type}; FaissIndex reads inner-product and L2 indices.")


def _reconstruct(index: Any, ids: np.ndarray, dim: int) -> np.ndarray:
    """The stored (possibly decoded) vectors of `ids` from a CPU index."""
    try:
        vectors = index.reconstruct_batch(ids)
    except (RuntimeError, AttributeError):  # older faiss, or structures without a batch path: one at a time
        vectors = np.stack([index.reconstruct(int(i)) for i in ids])
    return np.ascontiguousarray(vectors, dtype=np.float32).reshape(ids.size, dim)


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


def _some(ids: np.ndarray, limit: int = 5) -> str:
    shown = ", ".join(str(int(i)) for i in ids[:limit])
    return shown + (f" … ({ids.size - limit} more)" if ids.size > limit else "")
