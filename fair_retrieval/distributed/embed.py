"""embed_to_shards: calibrated document embeddings of a whole corpus on Ray Data, written as resumable shards.

The pipeline is Ray Data's own: the input is read and split into blocks, `map_batches` runs `EmbedWorker` in a
pool of actors (each loads the model once; CPU or GPU), and the driver streams the results into Parquet shards as
they arrive. Ids already present in the shard folder are filtered out before embedding, so an interrupted job
started again embeds only what is missing.
"""

from __future__ import annotations

import hashlib
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from fair_retrieval.distributed.runtime import (
    check_capacity,
    ensure_ray,
    import_pyarrow,
    is_ray_error,
    worker_failure,
)
from fair_retrieval.distributed.shards import ID_COLUMN, ShardFolder
from fair_retrieval.distributed.source import as_dataset, scan
from fair_retrieval.distributed.spec import EmbedderSpec
from fair_retrieval.distributed.worker import EmbedWorker
from fair_retrieval.stores import StoreWindows
from fair_retrieval.validate import is_positive_int, number_in, positive_int

logger = logging.getLogger(__name__)

Concurrency = int | tuple[int, int]


@dataclass(frozen=True)
class EmbedResult:
    """What `embed_to_shards` did.

    Attributes:
        folder: the shard folder.
        total: rows in the input.
        skipped: rows that already had a vector from an earlier run (not embedded again).
        embedded: rows embedded by this run.
        shards_written: shard files written by this run.
        complete: whether every input row now has a vector (False when `max_shards` stopped the run early).
    """

    folder: Path
    total: int
    skipped: int
    embedded: int
    shards_written: int
    complete: bool


def embed_to_shards(
    data: Any,
    output: str | os.PathLike[str],
    spec: EmbedderSpec,
    *,
    text_column: str = "text",
    id_column: str = "id",
    workers: Concurrency = 1,
    cpus_per_worker: float = 1.0,
    gpus_per_worker: float = 0.0,
    batch_rows: int = 256,
    shard_rows: int = 10_000,
    max_shards: int | None = None,
    input_key: str | None = None,
    show_progress_bar: bool = True,
    multivector: bool = False,
    store_windows: StoreWindows | None = None,
) -> EmbedResult:
    """Embed every document of `data` with `spec` on Ray workers and write (id, embedding) Parquet shards.

    Ray is used as it is already connected, or `ray.init()` is called: that joins the cluster in RAY_ADDRESS when set
    and starts a local Ray otherwise. Shards are written by this (driver) process, so `output` only has to be
    writable here.

    Args:
        data: a `ray.data.Dataset`, or Parquet/JSONL paths (see `source.as_dataset`).
        output: the shard folder; a folder from an interrupted run of the same job is resumed.
        spec: the embedder recipe (model, calibration, …).
        text_column: column holding the documents (strings).
        id_column: column holding unique ids (integers or strings); kept with every vector.
        workers: number of embedding actors, or (min, max) for an autoscaling pool.
        cpus_per_worker: CPUs Ray reserves per actor (fractions allowed); its torch threads are this, rounded, ≥ 1.
            Leave one CPU of the Ray free for Ray Data's read tasks (checked on a single machine).
        gpus_per_worker: GPUs per actor (e.g. 1, or 0.5 to pack two actors on one GPU); > 0 embeds on "cuda".
        batch_rows: documents per Ray batch (the unit of work an actor receives).
        shard_rows: documents per shard file (the unit that survives an interruption).
        max_shards: stop after writing this many shards (a time-boxed run; start again to continue).
        input_key: an optional fingerprint of the input (e.g. a hash of the texts); a resume with a different key
            is refused, which protects against resuming with changed documents under the same ids.
        show_progress_bar: show a tqdm bar of documents embedded (Ray Data's own bars are then turned off).
        multivector: keep every window's vector (one row per window, a document's windows in one shard) for a
            `MultiVectorIndex` (`build_index` sees it in the job); a folder of the other mode is refused.
        store_windows: with `multivector`, the window shape of a store (`fair_retrieval.stores.StoreWindows`, e.g.
            the window study's multi-scale text windows), embedded by each worker as the store would; recorded in
            the job, so a resume with another shape is refused. None: the embedder's own windows.

    Returns:
        An `EmbedResult` with the counts of this run.

    Raises:
        ValueError: bad arguments, an empty input, missing columns, repeated or missing ids, or a shard folder made
            with other settings or holding ids the input no longer has.
        TypeError: texts that are not strings, or ids that are neither integers nor strings.
        DistributedJobError: a failure inside a worker (e.g. the model cannot be loaded there).
    """
    _check_arguments(workers, cpus_per_worker, gpus_per_worker, batch_rows, shard_rows, max_shards)
    if not isinstance(spec, EmbedderSpec):
        raise TypeError(f"spec must be an EmbedderSpec, got {type(spec).__name__}.")
    pa = import_pyarrow()
    ray = ensure_ray()
    check_capacity(ray, max(workers) if isinstance(workers, tuple) else workers, cpus_per_worker, gpus_per_worker)
    dataset = as_dataset(data)
    found = scan(dataset, text_column, id_column)

    folder = ShardFolder(output)
    job: dict[str, Any] = {
        "embedder": spec.fingerprint(),
        "text_column": text_column,
        "id_column": id_column,
        "input": input_key,
    }
    if multivector:  # only then: pooled folders of earlier releases resume unchanged
        job["multivector"] = True
        if store_windows is not None:
            job.update(store_windows.settings())
    folder.start(job)
    done = pa.compute.unique(folder.ids())  # a multi-vector shard repeats a document's id for each window
    _check_finished_ids(pa, done, found.ids, folder)
    remaining = found.count - len(done)
    logger.info("%d documents: %d already embedded in %s, %d to embed.", found.count, len(done), folder.path, remaining)
    if remaining == 0:
        return EmbedResult(folder.path, found.count, len(done), 0, 0, True)

    pending = dataset.select_columns([id_column, text_column])
    if len(done):
        pending = pending.map_batches(
            _drop_done, batch_format="pyarrow", fn_kwargs={"id_column": id_column, "done": done}
        )
    pending = pending.repartition(target_num_rows_per_block=batch_rows)  # streaming: lets every actor get work
    vectors = pending.map_batches(
        EmbedWorker,
        batch_size=batch_rows,
        batch_format="pyarrow",
        fn_constructor_kwargs={
            "spec": spec,
            "text_column": text_column,
            "id_column": id_column,
            "cpu_threads": max(1, round(cpus_per_worker)),
            "windows": multivector,
            "store_windows": store_windows if multivector else None,
        },
        compute=_actor_pool(ray, workers),
        num_cpus=cpus_per_worker,
        num_gpus=gpus_per_worker or None,
    )
    if show_progress_bar:
        vectors.context.enable_progress_bars = False

    embedded = written = 0
    bar = tqdm(total=found.count, initial=len(done), unit="doc", desc="Embedding on Ray", disable=not show_progress_bar)
    try:
        for shard in _batches(vectors, shard_rows, whole_documents=multivector):
            path = folder.write(shard)
            documents = len(pa.compute.unique(shard.column(ID_COLUMN))) if multivector else shard.num_rows
            embedded += documents
            written += 1
            bar.update(documents)
            logger.debug("Wrote %s (%d rows)", path.name, shard.num_rows)
            if max_shards is not None and written >= max_shards:
                break
    except Exception as error:
        if is_ray_error(error):
            raise worker_failure(error, "Embedding") from error
        raise
    finally:
        bar.close()
    complete = len(done) + embedded == found.count
    if not complete:
        logger.info("Stopped after %d shard(s); run again to embed the remaining documents.", written)
    return EmbedResult(folder.path, found.count, len(done), embedded, written, complete)


def texts_key(texts: Iterable[str]) -> str:
    """A SHA-256 fingerprint of documents in order, for `embed_to_shards(input_key=...)`."""
    digest = hashlib.sha256()
    for text in texts:
        encoded = text.encode("utf-8")
        digest.update(len(encoded).to_bytes(8, "little"))
        digest.update(encoded)
    return digest.hexdigest()


def _batches(dataset: Any, shard_rows: int, whole_documents: bool = False) -> Iterable[Any]:
    """The dataset's rows in pyarrow tables of about `shard_rows`, as they are produced.

    With `whole_documents` (one row per window, a document's windows consecutive) the rows of the last document of a
    table wait for the next one, so no document is split between two shards: a resumed job skips a document whose
    id is in a shard, which must then hold all of its windows.
    """
    pa = import_pyarrow()
    held = None
    for batch in dataset.iter_batches(batch_size=shard_rows, batch_format="pyarrow"):
        if not batch.num_rows:
            continue
        if not whole_documents:
            yield batch
            continue
        table = batch if held is None else pa.concat_tables([held, batch])
        ids = table.column(ID_COLUMN)
        last = ids[len(ids) - 1]
        first_of_last = len(ids) - int(pa.compute.sum(pa.compute.equal(ids, last)).as_py())
        held = table.slice(first_of_last)
        if first_of_last:
            yield table.slice(0, first_of_last)
    if held is not None and held.num_rows:
        yield held


def _drop_done(batch: Any, id_column: str, done: Any) -> Any:
    """The rows of `batch` whose id is not in `done` (runs in Ray tasks)."""
    from fair_retrieval.distributed.source import normalise_ids

    pa = import_pyarrow()
    finished = pa.compute.is_in(normalise_ids(batch.column(id_column)), value_set=done)
    return batch.filter(pa.compute.invert(finished))


def _check_finished_ids(pa: Any, done: Any, ids: Any, folder: ShardFolder) -> None:
    """Refuse to resume when the shards hold ids that the input does not have (the input changed)."""
    if not len(done):
        return
    if done.type != ids.type:
        raise ValueError(
            f"{folder.path} holds {done.type} ids but the input's ids are {ids.type}; the input changed. Use another "
            "output folder, or delete this one to start again."
        )
    unknown = pa.compute.filter(done, pa.compute.invert(pa.compute.is_in(done, value_set=ids)))
    if len(unknown):
        raise ValueError(
            f"{folder.path} holds {len(unknown)} vector(s) for ids the input does not have (e.g. "
            f"{unknown.slice(0, 5).to_pylist()}); the input changed since those shards were written. Use another "
            "output folder, or delete this one to start again."
        )


def _actor_pool(ray: Any, workers: Concurrency) -> Any:
    if isinstance(workers, tuple):
        return ray.data.ActorPoolStrategy(min_size=workers[0], max_size=workers[1])
    return ray.data.ActorPoolStrategy(size=workers)


def _check_arguments(
    workers: Concurrency,
    cpus_per_worker: float,
    gpus_per_worker: float,
    batch_rows: int,
    shard_rows: int,
    max_shards: int | None,
) -> None:
    sizes = list(workers) if isinstance(workers, tuple) else [workers]
    if (
        len(sizes) not in (1, 2)
        or not all(is_positive_int(s) for s in sizes)
        or (len(sizes) == 2 and sizes[0] > sizes[1])
    ):
        raise ValueError(f"workers must be a positive int or a (min, max) pair with min ≤ max, got {workers!r}.")
    for name, value, low in (("cpus_per_worker", cpus_per_worker, 0.0), ("gpus_per_worker", gpus_per_worker, 0.0)):
        number_in(value, name, low)
    if cpus_per_worker <= 0:
        raise ValueError(f"cpus_per_worker must be > 0, got {cpus_per_worker!r}.")
    for name, count in (("batch_rows", batch_rows), ("shard_rows", shard_rows)):
        positive_int(count, name)
    positive_int(max_shards, "max_shards", or_none=True)
