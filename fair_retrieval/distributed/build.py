"""build_index: a FaissIndex from a folder of embedding shards, exact or compressed, on CPU or GPU(s).

The shards are read one at a time, so memory holds the index, the training sample and one chunk of vectors. The
index is a regular `FaissIndex` (GPU when faiss sees one; with several GPUs sharded or replicated by faiss'
multi-GPU cloner), so it is saved, loaded and searched like any other, and `fair-retrieval search` reads it.

Ids: when the shards hold non-negative integer ids, vectors are stored under those ids. Otherwise (string or
negative ids) vector i is the i-th stored row and `doc_ids[i]` is its original id; `save` writes them to
`doc_ids.parquet` next to the index.

Shards of a multi-vector job (`embed_to_shards(multivector=True)`: one row per window) become a `MultiVectorIndex`
(the index plan is made for the window count; ids as above, per document).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from fair_retrieval.distributed.index_sizing import MIN_TRAIN_SIZE, PlanKind, plan_index
from fair_retrieval.distributed.runtime import import_pyarrow
from fair_retrieval.distributed.shards import ShardFolder
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.index import Aggregate, FaissIndex, GpuChoice, Metric, MultiVectorIndex
from fair_retrieval.index.index_plan import IndexPlan, for_windows
from fair_retrieval.index.multivector import DEFAULT_AGGREGATE

logger = logging.getLogger(__name__)

DOC_IDS_FILE = "doc_ids.parquet"
ADD_ROWS = 200_000  # vectors per FaissIndex.add call: few calls, bounded memory
FACTORY_TRAIN_SIZE = MIN_TRAIN_SIZE * 10
"""Training sample of a factory-string plan that names no size: 100,000 vectors (or the corpus, if smaller)."""


@dataclass
class BuiltIndex:
    """The result of `build_index`.

    Attributes:
        index: the FaissIndex holding every shard vector (a MultiVectorIndex for multi-vector shards).
        plan: the plan it was built with.
        doc_ids: None when vectors are stored under the shards' own integer ids; otherwise a pyarrow Array whose
            entry i is the original id of vector i.
    """

    index: FaissIndex | MultiVectorIndex
    plan: IndexPlan
    doc_ids: Any = None

    def save(self, folder: str | os.PathLike[str], *, overwrite: bool = False) -> Path:
        """Save the index (and doc_ids.parquet when ids were remapped) into `folder`; a folder that holds an index
        already is refused (`StoreConflictError`) unless `overwrite=True` (`FaissIndex.save`)."""
        path = self.index.save(folder, overwrite=overwrite)
        if self.doc_ids is not None:
            pa = import_pyarrow()
            pa.parquet.write_table(pa.table({"doc_id": self.doc_ids}), path / DOC_IDS_FILE)
        return path


def build_index(
    shards: str | os.PathLike[str] | ShardFolder,
    kind: PlanKind | IndexPlan = "auto",
    *,
    metric: Metric = "ip",
    gpu: GpuChoice = "auto",
    gpu_shards: bool = False,
    flat_limit: int | None = None,
    opq: bool = False,
    train_size: int | None = None,
    seed: int = 0,
    show_progress_bar: bool = True,
    aggregate: Aggregate = DEFAULT_AGGREGATE,
    **params: int,
) -> BuiltIndex:
    """Build a FaissIndex from the shards written by `embed_to_shards`.

    Args:
        shards: the shard folder (or a ShardFolder).
        kind: "auto" (flat up to `flat_limit` vectors, the sized compressed index above), "flat", "ivfpq", or a
            ready `IndexPlan` (any faiss factory string: `fair_retrieval.index.index_plan.factory_plan`); a plan that
            needs training but names no `train_size` is trained on `FACTORY_TRAIN_SIZE` sampled vectors.
        metric: "ip" (cosine for the normalised embeddings) or "l2".
        gpu: as for FaissIndex: "auto" uses faiss' GPU(s) when present for training, adding and search.
        gpu_shards: with several GPUs, shard the vectors across them (True) or replicate the index (False).
        flat_limit: override the "auto" threshold (default `plan.FLAT_LIMIT`).
        opq: add an OPQ rotation before IVF-PQ.
        train_size: IVF-PQ training sample size (default from the plan).
        seed: seed of the training sample.
        show_progress_bar: show a tqdm bar over the vectors added.
        aggregate: for shards of a multi-vector job, the `MultiVectorIndex` aggregate ("max", "max-mean", "top2").
        **params: IVF-PQ parameters: nprobe, k_factor override the sized plan's search values; nlist, m, nbits
            ask for plain IVF-PQ.

    Raises:
        ValueError: an empty shard folder, or parameters that do not fit the corpus.
    """
    folder = shards if isinstance(shards, ShardFolder) else ShardFolder(shards)
    count = folder.count()
    if count == 0:
        raise ValueError(f"{folder.path} holds no embedded rows; run embed_to_shards first.")
    dim = folder.dimension()
    if isinstance(kind, IndexPlan):
        if params or opq or flat_limit is not None or train_size is not None:
            raise ValueError(
                f"A ready IndexPlan ({kind.factory!r}) carries its own settings; pass kind='auto'/'ivfpq' to use "
                "opq, flat_limit, train_size or IVF-PQ parameters, or put them into the plan's factory string."
            )
        plan = kind
        if plan.needs_training and not plan.train_size:  # a factory plan: train on a sample of the corpus
            plan = replace(plan, train_size=min(count, FACTORY_TRAIN_SIZE))
    else:
        limit = {} if flat_limit is None else {"flat_limit": flat_limit}
        plan = plan_index(count, dim, kind, opq=opq, train_size=train_size, **limit, **params)
    multivector = bool(folder.job().get("multivector"))
    if multivector and not isinstance(kind, IndexPlan) and "nprobe" not in params:
        plan = for_windows(plan)  # documents found by their windows: an IVF plan visits more lists
    logger.info("Building %s for %d %d-d vectors from %s", plan.describe(), count, dim, folder.path)
    windows_index = _empty_index(plan, folder, dim, metric, gpu, gpu_shards, seed)
    if multivector:
        return _build_multivector(folder, windows_index, plan, aggregate, show_progress_bar)
    index = windows_index
    remap = _needs_remap(folder)
    doc_ids: list[Any] = []
    next_id = 0
    bar = tqdm(total=count, unit="vec", desc="Building index", disable=not show_progress_bar)
    try:
        for ids, vectors in _chunks(folder, ADD_ROWS):
            if remap:
                doc_ids.append(ids)
                vector_ids = np.arange(next_id, next_id + len(ids), dtype=np.int64)
                next_id += len(ids)
            else:
                vector_ids = ids.to_numpy().astype(np.int64)
            index.add(vectors, vector_ids)
            bar.update(len(vector_ids))
    finally:
        bar.close()
    mapping = None
    if remap:
        pa = import_pyarrow()
        mapping = pa.concat_arrays(doc_ids)
    return BuiltIndex(index=index, plan=plan, doc_ids=mapping)


def _build_multivector(
    folder: ShardFolder, windows: FaissIndex, plan: IndexPlan, aggregate: Aggregate, show_progress_bar: bool
) -> BuiltIndex:
    """A MultiVectorIndex from multi-vector shards (a document's windows are consecutive rows of one shard)."""
    pa = import_pyarrow()
    index = MultiVectorIndex.over(windows, aggregate=aggregate)
    remap = _needs_remap(folder)
    doc_ids: list[Any] = []
    next_id = 0
    bar = tqdm(total=folder.count(), unit="vec", desc="Building index", disable=not show_progress_bar)
    try:
        for path in folder.files():
            ids, vectors, spans, weights = folder.read_windows(path)
            starts = np.flatnonzero(np.r_[True, pa.compute.not_equal(ids[1:], ids[:-1]).to_numpy(zero_copy_only=False)])
            owners = np.repeat(np.arange(starts.size), np.diff(np.r_[starts, len(ids)]))
            unique = ids.take(pa.array(starts))
            pooled = np.zeros((starts.size, windows.dim), dtype=np.float32)  # unused by the index: it pools itself
            if remap:
                doc_ids.append(unique)
                document_ids = np.arange(next_id, next_id + starts.size, dtype=np.int64)
                next_id += starts.size
            else:
                document_ids = unique.to_numpy().astype(np.int64)
            index.add(DocumentWindows(pooled, vectors, owners.astype(np.int64), spans, weights), document_ids)
            bar.update(len(ids))
    finally:
        bar.close()
    return BuiltIndex(index=index, plan=plan, doc_ids=pa.concat_arrays(doc_ids) if remap else None)


def _empty_index(
    plan: IndexPlan, folder: ShardFolder, dim: int, metric: Metric, gpu: GpuChoice, gpu_shards: bool, seed: int
) -> FaissIndex:
    """An empty FaissIndex for `plan`, trained on a sample of the shards when the plan needs training."""
    if not plan.needs_training:
        return FaissIndex(dim, metric=metric, factory=plan.factory, search=plan.search, gpu=gpu, gpu_shards=gpu_shards)
    sample = folder.sample(plan.train_size, seed=seed)
    logger.info("Training on %d sampled vectors", sample.shape[0])
    index = FaissIndex(dim, metric=metric, factory=plan.factory, search=plan.search, gpu=gpu, gpu_shards=gpu_shards)
    index.train(sample)
    return index


def _needs_remap(folder: ShardFolder) -> bool:
    """True unless every shard id is a non-negative integer (then the ids are used as they are)."""
    pa = import_pyarrow()
    ids = folder.ids()
    if not pa.types.is_integer(ids.type):
        return True
    return bool(len(ids)) and int(pa.compute.min(ids).as_py()) < 0


def _chunks(folder: ShardFolder, rows: int) -> Any:
    """(ids, vectors) in chunks of about `rows`, concatenating consecutive shards (fewer, larger adds)."""
    pa = import_pyarrow()
    ids_parts: list[Any] = []
    vector_parts: list[np.ndarray] = []
    pending = 0
    for ids, vectors in folder:
        ids_parts.append(ids)
        vector_parts.append(vectors)
        pending += len(ids)
        if pending >= rows:
            yield pa.concat_arrays(ids_parts), np.concatenate(vector_parts)
            ids_parts, vector_parts, pending = [], [], 0
    if pending:
        yield pa.concat_arrays(ids_parts), np.concatenate(vector_parts)
