"""A folder or JSONL file of documents → a store of texts (or a FaissIndex), read and embedded on Ray: the whole
`index --engine ray` job.

`store_documents_on_ray` makes the store a store folder holds (`fair_retrieval.stores.store_folder`): the workers
embed each document's windows in the store's shape (the window study's multi-scale text windows by default, one
`embed_document_windows` pass per size, as the stores call it), and the shards are added, one at a time, to one
store built through the stores' core. `index_documents_on_ray` makes the index folder of earlier releases.

The documents are read by Ray Data tasks with the reader of `--engine local` (`documents.documents_dataset`, which
calls `fair_retrieval.inputs`), so both engines give the same documents or the same error; every document gets its
row number as vector id, and the documents file is streamed to disk batch by batch. The embedding shards are kept
in their folder, so an interrupted job continues where it stopped when started again with the same settings.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from fair_retrieval.distributed.build import ADD_ROWS, BuiltIndex, build_index
from fair_retrieval.distributed.documents import documents_dataset, write_documents_file
from fair_retrieval.distributed.embed import embed_to_shards
from fair_retrieval.distributed.index_sizing import PlanKind
from fair_retrieval.distributed.runtime import ensure_ray
from fair_retrieval.distributed.shards import ShardFolder
from fair_retrieval.distributed.spec import EmbedderSpec
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.index import Aggregate
from fair_retrieval.index.gpu import GpuChoice
from fair_retrieval.index.index_plan import IndexPlan
from fair_retrieval.index.multivector import DEFAULT_AGGREGATE
from fair_retrieval.stores import DocumentStore, StoreWindows, TextDocument
from fair_retrieval.stores.store_folder import new_folder_store
from fair_retrieval.stores.store_mode import default_windows
from fair_retrieval.stores.text_documents import checked_documents

if TYPE_CHECKING:
    from fair_retrieval.embedding.embedder import FairEmbedder

T = TypeVar("T")

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
    count = _embed_on_ray(
        source,
        shards,
        spec,
        text_field,
        id_field,
        resources,
        fresh,
        lambda dataset: write_documents_file(dataset, Path(documents_file)),
        multivector=multivector,
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


def store_documents_on_ray(
    source: str | os.PathLike[str],
    shards: str | os.PathLike[str],
    spec: EmbedderSpec,
    *,
    text_field: str = "text",
    id_field: str = "id",
    resources: RayResources = RayResources(),
    multivector: bool | None = None,
    aggregate: Aggregate | None = None,
    windows: StoreWindows | None = None,
    kind: str | None = None,
    gpu: GpuChoice = "auto",
    fresh: bool = False,
    into: Callable[[FairEmbedder], DocumentStore[TextDocument]] | None = None,
    **index_params: int,
) -> DocumentStore[TextDocument]:
    """Read `source` on Ray workers, embed it into `shards` as a store keeps it, and add the shards to one store of
    texts (`fair_retrieval.stores.store_folder.new_folder_store`: the stores' default unless told otherwise; or the
    store `into` makes, e.g. a `QdrantStore` over a collection, which then receives the workers' windows).

    The embedder is also built here, once, for what the store records of it (its identity) and for the window
    study's shape (`default_windows`), which the workers then embed.

    Args:
        source: a folder of .txt/.md files, or a JSONL file (as `fair_retrieval.inputs.read_documents` reads it).
        shards: the folder of embedding shards; shards already there (same input, spec and windows) are kept.
        spec: how each worker (and this process) builds the embedder.
        text_field: the JSONL field holding the text.
        id_field: the JSONL field holding the id.
        resources: workers, their CPUs/GPUs, rows per shard.
        multivector: None: the stores' default (documents kept as their windows); False: pooled vectors.
        aggregate: the multi-vector aggregate (None: the default, max).
        windows: the windows a multi-vector store keeps (None: the window study's; `StoreWindows()`: the
            embedder's own).
        kind: the index kind (None: the stores' default, `DocumentMode.new_index`: compressed windows for a
            multi-vector store where the codes fit the vector size, else flat).
        gpu: as `DocumentStore`.
        fresh: remove the shards of an earlier run first instead of continuing it.
        into: makes the store to fill from the embedder built here (its own settings: multivector, windows); None:
            a new folder store from `multivector`, `aggregate`, `windows`, `kind` and `index_params`, which must then
            be left unset.
        **index_params: the kind's parameters.

    Returns:
        The store, its documents in input order (not saved: `store_folder.save_store_folder`).

    Raises:
        ValueError, TypeError: an empty or malformed input, or any error of `embed_to_shards` / the store.
    """
    if into is not None:
        given = [name for name, value in (("aggregate", aggregate), ("kind", kind)) if value is not None]
        if given or index_params or multivector is not None or windows is not None:
            raise ValueError(
                "into= makes the store with its own settings: set multivector, aggregate, windows, kind and index "
                f"parameters there, not here (got {', '.join(given + sorted(index_params)) or 'multivector/windows'})."
            )
    embedder = spec.build()
    store = (
        into(embedder)
        if into is not None
        else new_folder_store(
            embedder,
            multivector=multivector,
            aggregate=aggregate,
            windows=windows,
            kind=kind,
            gpu=gpu,
            index_params=dict(index_params),
        )
    )  # every setting checked before Ray starts
    shape = (store.windows or default_windows(embedder)) if store.multivector else None
    shards = Path(shards)
    documents = _embed_on_ray(
        source,
        shards,
        spec,
        text_field,
        id_field,
        resources,
        fresh,
        _documents_in_order,
        multivector=store.multivector,
        store_windows=shape,
    )
    _add_shards(store, ShardFolder(shards), documents)
    return store


def _embed_on_ray(
    source: str | os.PathLike[str],
    shards: Path,
    spec: EmbedderSpec,
    text_field: str,
    id_field: str,
    resources: RayResources,
    fresh: bool,
    read: Callable[[Any], T],
    **options: Any,
) -> T:
    """The Ray part of both jobs: `shards` emptied first if `fresh`, the documents of `source` read on the workers,
    `read(dataset)` (what the job keeps of them, before the embedding), then embedded into `shards` with `spec`
    (`options`: `embed_to_shards`' multivector and store_windows). Returns what `read` returned."""
    if fresh and shards.exists():
        logger.info("Starting afresh: removing %s", shards)
        shutil.rmtree(shards)
    ensure_ray()
    dataset, key = documents_dataset(Path(source), text_field, id_field)
    kept = read(dataset)
    result = embed_to_shards(
        dataset.select_columns(["id", "text"]),
        shards,
        spec,
        workers=resources.workers,
        cpus_per_worker=resources.cpus_per_worker,
        gpus_per_worker=resources.gpus_per_worker,
        shard_rows=resources.shard_rows,
        input_key=key,
        **options,
    )
    logger.info(
        "Ray embedding: %d documents, %d embedded now, %d from earlier shards",
        result.total,
        result.embedded,
        result.skipped,
    )
    return kept


def _documents_in_order(dataset: Any) -> list[TextDocument]:
    """The documents of `documents_dataset` in id (row) order, as a store keeps them."""
    documents: list[TextDocument] = []
    for batch in dataset.sort("id").select_columns(["document"]).iter_batches(batch_format="pyarrow"):
        for line in batch.column("document").to_pylist():
            row = json.loads(line)
            documents.append(TextDocument(row["id"], row["text"], row.get("metadata") or {}))
    return documents


def _add_shards(store: DocumentStore[TextDocument], folder: ShardFolder, documents: list[TextDocument]) -> None:
    """Add every document of the shards to `store` in input order (the workers finish them in any order), about
    `ADD_ROWS` vectors per add: a multi-vector store takes their windows (a document's windows stay together, in their
    order), a pooled one their vectors. An index that needs training is trained on the first add's vectors.

    The shards' vectors are read whole (the store's index holds them all too), then sorted by row.
    """
    spans = weights = np.zeros(0, dtype=np.int64)
    if store.multivector:
        parts = [folder.read_windows(path) for path in folder.files()]
        rows = np.concatenate([part[0].to_numpy().astype(np.int64) for part in parts])
        order = np.argsort(rows, kind="stable")  # by document, each one's windows in the order they were written
        vectors = np.concatenate([part[1] for part in parts])[order]
        spans = np.concatenate([part[2] for part in parts])[order]
        weights = np.concatenate([part[3] for part in parts])[order]
    else:
        pooled_parts = [folder.read(path) for path in folder.files()]
        rows = np.concatenate([part[0].to_numpy().astype(np.int64) for part in pooled_parts])
        order = np.argsort(rows, kind="stable")
        vectors = np.concatenate([part[1] for part in pooled_parts])[order]
    rows = rows[order]
    starts = np.flatnonzero(np.r_[True, rows[1:] != rows[:-1]])  # each document's first vector
    ends = np.r_[starts[1:], len(rows)]
    first = 0
    while first < starts.size:
        last = int(np.searchsorted(starts, starts[first] + ADD_ROWS, side="left"))  # documents of about ADD_ROWS
        last = max(last, first + 1)
        low, high = int(starts[first]), int(ends[last - 1])
        records = _records(documents, rows[starts[first:last]])
        if store.multivector:
            owners = np.repeat(np.arange(last - first), ends[first:last] - starts[first:last]).astype(np.int64)
            pooled = np.zeros((last - first, vectors.shape[1]), dtype=np.float32)
            np.add.at(pooled, owners, vectors[low:high])  # the windows' mean direction (unit once stored)
            batch = DocumentWindows(pooled, vectors[low:high], owners, spans[low:high], weights[low:high])
            store.add_windows(records, batch, "the Ray workers' windows")
        else:
            store.add(records, vectors[low:high], "the Ray workers' vectors", lengths=[len(r.text) for r in records])
        first = last


def _records(documents: list[Any], rows: np.ndarray) -> list[Any]:
    """The checked records of `documents` at `rows` (ids, texts and JSON metadata, as an add checks them)."""
    chosen = [documents[int(row)] for row in rows]
    return checked_documents([d.text for d in chosen], [d.metadata for d in chosen], [d.key for d in chosen])
