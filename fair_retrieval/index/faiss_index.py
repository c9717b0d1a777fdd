"""FaissIndex: a FAISS vector index with int64 ids, deletion, restricted search, GPU when present, and pickle-free
save/load.

One class wraps faiss for the rest of fair-retrieval (the CLI, `fair_retrieval.distributed.build_index` and the
LangChain and LlamaIndex stores). It builds any faiss index-factory string, or one of four named kinds, whose plans
and default parameters `fair_retrieval.index.index_plan` defines:

- "flat": exact search ("Flat"); vectors are stored as given.
- "hnsw": graph search on CPU ("HNSW{M}"); vectors are stored as given.
- "ivf": inverted lists of raw vectors ("IVF{nlist},Flat"); needs training.
- "ivfpq": compressed. Without nlist/m/nbits it is sized to the training vectors when it trains
  (`fair_retrieval.index.index_plan.sized_ivfpq`: IVF-PQ with an SQ8 refinement stage); with them, plain
  "IVF{nlist},PQ{m}x{nbits}".

Indices that take ids natively (IVF) store them in their inverted lists; the others are wrapped in faiss'
`IDMap2`. Search parameters (nprobe, efSearch, k_factor_rf, …) go through `faiss.ParameterSpace`. On a machine
where faiss reports a GPU (faiss-gpu installed and a device visible), indices live on the GPU where faiss can put
them (`fair_retrieval.index.gpu`). Folders on disk and their format are `fair_retrieval.index.persistence`'s.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from fair_retrieval.index.gpu import GpuChoice, gpus_for_kind, import_faiss, index_to_cpu, index_to_gpus, train_on_cpu
from fair_retrieval.index.ids import IdSet, as_ids, as_vectors, distinct
from fair_retrieval.index.index_building import ID_MAP_PREFIX, apply_search, new_cpu_index, rebuilt_with
from fair_retrieval.index.index_plan import (
    POINTS_PER_CENTROID,
    PQ_CODEBOOK_BITS,
    IndexPlan,
    Kind,
    parse_search,
    requested_plan,
    sized_ivfpq,
)
from fair_retrieval.index.inspection import METRICS, Metric, params_of, reconstruct
from fair_retrieval.index.persistence import StoredIndex
from fair_retrieval.index.saving import SavedIndex
from fair_retrieval.index.selection import (
    Searchable,
    result_columns,
    search_among,
    short_rows_in_full,
    stored_selection,
)
from fair_retrieval.validate import dimension, is_int, is_positive_int

logger = logging.getLogger(__name__)

GPU_MAX_K = 2048  # faiss' GPU k-selection limit
_NATIVE = "native"


class FaissIndex(SavedIndex):
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
        **params: kind parameters, with the defaults of `fair_retrieval.index.index_plan.KIND_PARAMS`. hnsw: M,
            ef_construction, ef_search. ivf: nlist, nprobe. ivfpq: none for the sized default (nprobe and k_factor
            may override its search values); nlist, m (sub-quantizers; must divide dim), nbits (bits per code) for
            plain IVF-PQ.

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
          writes a CPU copy. faiss' GPU search returns at most k=`GPU_MAX_K` results.
        - Ids given by `add(vectors)` without ids continue after the largest id stored at that moment.
        - `search(queries, k, ids=...)` searches only among the given ids, inside faiss (an IDSelector in the
          search parameters, with the index's own nprobe / efSearch): k hits whenever k of those ids are stored,
          which filtering an unrestricted top-k cannot promise. Metadata filters
          (`fair_retrieval.stores.filters`) pick the ids in the stores.
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
        _stored: StoredIndex | None = None,  # private: the index `load` read (then kind/factory/params are unset)
        **params: int,
    ) -> None:
        self._faiss = import_faiss()
        dimension(dim)
        if metric not in METRICS:
            raise ValueError(f"metric must be 'ip' (inner product / cosine) or 'l2', got {metric!r}.")
        self._dim = int(dim)
        self._metric: Metric = metric
        self._pending: dict[str, int] = {}  # parameters of a sized ivfpq plan made when training
        self._search_override = parse_search(search)
        self._plan: IndexPlan | None = (
            _stored.plan if _stored is not None else self._initial_plan(kind, factory, params)
        )
        self._gpu_count = gpus_for_kind(self.kind, gpu, self._faiss)
        self._gpu_shards = bool(gpu_shards)
        self._gpu_resources: Any = None
        self._ids = IdSet(_stored.ids if _stored is not None else ())
        self._cpu_copy: Any = None  # CPU mirror of a GPU index, valid until the next change
        self._on_gpu = False
        self._uses_id_map = False
        self._index: Any = None
        self._saved_at: tuple[str, str | None] | None = None  # (folder, generation) loaded from or last saved to
        if _stored is not None:
            self._adopt(_stored)
        elif self._plan is not None:
            self._index = self._new_cpu_index()
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
        if not is_int(id_, numpy=True):
            return False
        return int(id_) in self._ids

    def __repr__(self) -> str:
        return (
            f"FaissIndex(dim={self._dim}, metric={self._metric!r}, kind={self.kind!r}, factory={self.factory!r}, "
            f"count={len(self)}, on_gpu={self._on_gpu}, params={self.params})"
        )

    # ------------------------------------------------------------------------------------------------ public API

    def min_training_size(self) -> int:
        """Fewest vectors `train` accepts (0 when no training is needed): nlist, 2**nbits for PQ codes, and
        2**PQ_CODEBOOK_BITS (`fair_retrieval.index.index_plan`) for the sized ivfpq default."""
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
        added; faiss recommends at least `POINTS_PER_CENTROID` (`fair_retrieval.index.index_plan`) vectors per list. A
        sized ivfpq index chooses its nlist from the sample size here. With a GPU, k-means runs there.

        Raises:
            ValueError: if the index is already trained, or the sample is too small or malformed.
        """
        vectors = as_vectors(sample, "sample", self._dim)
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
        if ivf is not None and vectors.shape[0] < POINTS_PER_CENTROID * int(ivf.nlist):
            logger.warning(
                "Training with %d vectors for nlist=%d lists; faiss recommends at least %d. Quality may suffer.",
                vectors.shape[0],
                int(ivf.nlist),
                POINTS_PER_CENTROID * int(ivf.nlist),
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
        matrix = as_vectors(vectors, "vectors", self._dim)
        count = matrix.shape[0]
        new_ids = self._ids.new_ids(ids, count)
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

        An unrestricted search returns min(k, len(self)) results for every query: a query the index's own search
        answers short (an IVF index whose nprobe lists hold fewer than k vectors, as after many removals) is
        searched again with every list probed.

        Returns:
            (scores, ids): float32 (n, c) and int64 (n, c), best first, where c = `result_columns(k, len(self))`:
            k, but never more than the index holds once k passes `PADDED_K` (k is clamped to what the index
            holds: faiss is never asked for more, so a huge k costs no memory). Scores are inner products for "ip"
            (larger is better) or squared L2 distances for "l2" (smaller is better). Where fewer than c vectors are
            found, ids are -1 and scores -inf ("ip") or +inf ("l2").

        Raises:
            ValueError: a k that is not a positive int (or above `GPU_MAX_K` on GPU), malformed queries, or `ids` that
                are not stored (the message lists some of them).
            TypeError: non-numeric queries or non-integer ids.
        """
        if not is_positive_int(k, numpy=True):
            raise ValueError(f"k must be a positive int, got {k!r}.")
        if self._on_gpu and k > GPU_MAX_K:
            raise ValueError(f"faiss on GPU returns at most k={GPU_MAX_K} results; ask for fewer, or use gpu=False.")
        matrix = as_vectors(queries, "queries", self._dim)
        width = result_columns(int(k), len(self))
        k = min(int(k), len(self))  # faiss is never asked for more than the index holds
        wanted = None if ids is None else stored_selection(ids, self._ids.ids())
        scores = np.full((matrix.shape[0], width), self._missing_score, dtype=np.float32)
        found = np.full((matrix.shape[0], width), -1, dtype=np.int64)
        if matrix.shape[0] == 0 or k == 0 or not self.is_trained or (wanted is not None and not wanted.size):
            return scores, found
        if wanted is not None and wanted.size < len(self):
            best, hits = search_among(self._searchable(), matrix, k, wanted)
        else:  # no restriction, or every stored id selected
            best, hits = self._index.search(matrix, k)
            if bool(((hits >= 0).sum(axis=1) < k).any()):  # probed lists too thin (after removals): in full
                best, hits = short_rows_in_full(self._searchable(), matrix, k, best, hits)
        scores[:, :k], found[:, :k] = best, hits
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
        targets = distinct(as_ids(ids, "ids"))
        if targets.size == 0:
            return 0
        self._ids.require_known(targets)
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
        wanted = as_ids(ids, "ids")
        if wanted.size == 0:
            return np.zeros((0, self._dim), dtype=np.float32)
        self._ids.require_known(distinct(wanted))
        return reconstruct(self._cpu_index(), wanted, self._dim)

    # ------------------------------------------------------------------------------------------------ internals

    @property
    def _missing_score(self) -> float:
        return float("-inf") if self._metric == "ip" else float("inf")

    def _searchable(self) -> Searchable:
        """What a restricted search needs of this index (`fair_retrieval.index.selection.search_among`)."""
        return Searchable(
            faiss=self._faiss,
            live=self._index,
            on_gpu=self._on_gpu,
            cpu_index=self._cpu_index,
            stored=self._ids.ids(),
            params=self.params,
            missing_score=self._missing_score,
            max_k=GPU_MAX_K if self._on_gpu else None,
            description=f"{self.kind} index ({self.factory})",
        )

    def _initial_plan(self, kind: str | None, factory: str | None, params: dict[str, Any]) -> IndexPlan | None:
        """The plan from the constructor's arguments; None for a sized ivfpq index (planned when it trains)."""
        plan = requested_plan(kind, factory, params, self._dim)
        if plan is None:
            self._pending = {key: int(value) for key, value in params.items()}
            return None
        return self._with_override(plan)

    def _with_override(self, plan: IndexPlan) -> IndexPlan:
        """`plan` with the constructor's `search` values on top of its own."""
        return replace(plan, search={**plan.search, **self._search_override}) if self._search_override else plan

    def _adopt(self, stored: StoredIndex) -> None:
        """Make the CPU index `load` read the live index, with its recorded search values applied."""
        self._uses_id_map = stored.uses_id_map
        self._apply_search(stored.index, stored.plan.search)
        self._index = stored.index
        self._plan = replace(stored.plan, params=self._read_params())

    def _new_cpu_index(self) -> Any:
        """A fresh, empty CPU index of the plan (`fair_retrieval.index.index_building.new_cpu_index`)."""
        assert self._plan is not None
        index, self._uses_id_map, self._plan = new_cpu_index(self._faiss, self._dim, self._metric, self._plan)
        return index

    def _apply_search(self, index: Any, values: Mapping[str, float]) -> None:
        """Set ParameterSpace values on `index` (GpuParameterSpace for the live GPU index)."""
        apply_search(self._faiss, index, values, on_gpu=self._on_gpu and index is self._index, factory=self.factory)

    def _read_params(self) -> dict[str, int]:
        return params_of(self._faiss, self._cpu_index())

    def _id_policy(self) -> str:
        """How ids are stored: "IDMap2" (faiss' id map around the index) or "native" (in IVF lists)."""
        return ID_MAP_PREFIX if self._uses_id_map else _NATIVE

    def _describe(self) -> str:
        return self._plan.describe() if self._plan is not None else "sized when it trains"

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
        copy = index_to_cpu(self._index, self._faiss)
        if cache:
            self._cpu_copy = copy
        return copy

    def _train_cpu(self, vectors: np.ndarray) -> None:
        """Train the (CPU, untrained) live index; k-means assignment runs on a GPU when one is used."""
        self._gpu_resources = train_on_cpu(self._faiss, self._index, vectors, self._gpu_count, self._gpu_resources)
        assert self._plan is not None
        self._plan = replace(self._plan, params=params_of(self._faiss, self._index))

    def _rebuilt_without(self, index: Any, targets: np.ndarray) -> Any:
        """A copy of `index` holding every stored vector except `targets` (for structures faiss cannot delete
        from)."""
        keep = np.setdiff1d(self._ids.ids(), targets, assume_unique=True)
        search = self._plan.search if self._plan is not None else {}
        rebuilt = rebuilt_with(self._faiss, index, keep, self._dim, search)
        logger.info("Rebuilt the %s index without %d ids (%d vectors remain).", self.kind, targets.size, keep.size)
        return rebuilt
