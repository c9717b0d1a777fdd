"""A folder or JSONL file of documents → a FaissIndex, read and embedded on Ray: the whole `index --engine ray` job.

The documents are read by Ray Data tasks with the reader of `--engine local` (`documents.documents_dataset`, which
calls `fair_retrieval.inputs`), so both engines give the same documents or the same error; every document gets its
row number as vector id, and the documents file is streamed to disk batch by batch. The embedding shards are kept
in their folder, so an interrupted job continues where it stopped when started again with the same settings.
"""

from __future__ import annotations

import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from fair_retrieval.distributed.build import BuiltIndex, build_index
from fair_retrieval.distributed.documents import documents_dataset, write_documents_file
from fair_retrieval.distributed.embed import embed_to_shards
from fair_retrieval.distributed.index_sizing import PlanKind
from fair_retrieval.distributed.runtime import ensure_ray
from fair_retrieval.distributed.spec import EmbedderSpec
from fair_retrieval.index import Aggregate
from fair_retrieval.index.gpu import GpuChoice
from fair_retrieval.index.index_plan import IndexPlan
from fair_retrieval.index.multivector import DEFAULT_AGGREGATE

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class RayResources:
    """What the embedding job asks of Ray, as `embed_to_shards` takes it.

    Attributes:
        workers: embedding workers (model copies).
        cpus_per_worker: CPUs per worker, also its torch threads.
        gpus_per_worker: GPUs per worker (e.g. 1 or 0.5).
        shard_rows: documents per Parquet shard.
    """

    workers: int = 1
    cpus_per_worker: float = 1.0
    gpus_per_worker: float = 0.0
    shard_rows: int = 10_000


@dataclass(frozen=True)
class IndexedDocuments:
    """What `index_documents_on_ray` made: the index (ids 0..count-1 = rows of the documents file) and its size."""

    built: BuiltIndex
    count: int


def index_documents_on_ray(
    source: str | os.PathLike[str],
    shards: str | os.PathLike[str],
    documents_file: str | os.PathLike[str],
    spec: EmbedderSpec,
    *,
    text_field: str = "text",
    id_field: str = "id",
    resources: RayResources = RayResources(),
    index: PlanKind | IndexPlan = "auto",
    gpu: GpuChoice = "auto",
    gpu_shards: bool = False,
    fresh: bool = False,
    flat_limit: int | None = None,
    opq: bool = False,
    multivector: bool = False,
    aggregate: Aggregate = DEFAULT_AGGREGATE,
    **params: int,
) -> IndexedDocuments:
    """Read `source` on Ray workers, write `documents_file` (row i = vector id i), embed into `shards` with `spec`
    and build the FaissIndex.

    Args:
        source: a folder of .txt/.md files, or a JSONL file (as `fair_retrieval.inputs.read_documents` reads it).
        shards: the folder of embedding shards; shards already there (same input, same spec) are kept.
        documents_file: where the documents are written, one JSON line each, in vector-id order.
        spec: how each worker builds the embedder.
        text_field: the JSONL field holding the text.
        id_field: the JSONL field holding the id.
        resources: workers, their CPUs/GPUs, rows per shard.
        index: "auto" (flat up to the flat limit, IVF-PQ above), "flat", "ivfpq", or a ready `IndexPlan`.
        gpu: as for FaissIndex: "auto" uses faiss' GPU(s) when present.
        gpu_shards: with several GPUs, shard the vectors across them (True) or replicate the index (False).
        fresh: remove the shards of an earlier run first instead of continuing it.
        flat_limit: override the "auto" threshold (default `plan.FLAT_LIMIT`).
        opq: add an OPQ rotation before IVF-PQ.
        multivector: keep every window's vector and build a `MultiVectorIndex` (documents found by their windows).
        aggregate: the multi-vector aggregate ("max", "max-mean", "top2").
        **params: IVF-PQ parameters, as for `build_index` (nprobe, k_factor; nlist, m, nbits).

    Returns:
        The built index and the number of documents.

    Raises:
        ValueError: an empty or malformed input, or any error of `embed_to_shards` / `build_index`.
    """
    shards = Path(shards)
    if fresh and shards.exists():
        logger.info("Starting afresh: removing %s", shards)
        shutil.rmtree(shards)
    ensure_ray()
    dataset, key = documents_dataset(Path(source), text_field, id_field)
    count = write_documents_file(dataset, Path(documents_file))
    result = embed_to_shards(
        dataset.select_columns(["id", "text"]),
        shards,
        spec,
        workers=resources.workers,
        cpus_per_worker=resources.cpus_per_worker,
        gpus_per_worker=resources.gpus_per_worker,
        shard_rows=resources.shard_rows,
        input_key=key,
        multivector=multivector,
    )
    logger.info(
        "Ray embedding: %d documents, %d embedded now, %d from earlier shards",
        result.total,
        result.embedded,
        result.skipped,
    )
    built = build_index(
        shards,
        index,
        metric="ip",
        gpu=gpu,
        gpu_shards=gpu_shards,
        flat_limit=flat_limit,
        opq=opq,
        train_size=None,
        seed=0,
        show_progress_bar=True,
        aggregate=aggregate,
        **params,
    )
    logger.info("Built %s", built.plan.describe())
    return IndexedDocuments(built=built, count=count)
