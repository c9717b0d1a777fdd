"""The Ray engine of `fair-retrieval index --engine ray`: its options, and input → shards → FaissIndex on Ray.

This module only turns the command's arguments into calls of the library: the documents are read by Ray Data tasks
with the same reader as `--engine local` (`fair_retrieval.distributed.documents`, which calls
`fair_retrieval.inputs`), so both engines give the same documents or the same error; every document gets its row
number as vector id, and `documents.jsonl` is streamed to disk batch by batch. The embedding shards are kept in
`<output>/shards`, so an interrupted run continues where it stopped when started again with the same arguments
(`--overwrite` starts from scratch).
"""

from __future__ import annotations

import argparse
import logging
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

from fair_retrieval.calibration import Calibration
from fair_retrieval.distributed.plan import FLAT_LIMIT
from fair_retrieval.index.gpu import GpuChoice

logger = logging.getLogger(__name__)

SHARDS_FOLDER = "shards"
RAY_KINDS = ("flat", "ivfpq")


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --engine and the options of the Ray engine."""
    parser.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: embed in this process; ray: read and embed on Ray Data workers (a local Ray, or the cluster "
        "in RAY_ADDRESS), resumable (default: local)",
    )
    group = parser.add_argument_group("Ray engine (--engine ray; needs pip install 'fair-retrieval[ray]')")
    group.add_argument("--workers", type=int, default=1, help="embedding workers (model copies; default: 1)")
    group.add_argument(
        "--cpus-per-worker", type=float, default=1.0, help="CPUs per worker, also its torch threads (default: 1)"
    )
    group.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs per worker, e.g. 1 or 0.5 (default: 0)")
    group.add_argument("--shard-size", type=int, default=10_000, help="documents per Parquet shard (default: 10000)")
    group.add_argument("--opq", action="store_true", help="rotate with OPQ before IVF-PQ (slower training)")
    group.add_argument(
        "--gpu-shards",
        action="store_true",
        help="with several GPUs, split the index across them while building (default: a copy on each)",
    )
    group.add_argument(
        "--flat-limit",
        type=int,
        help="without --kind, keep an exact flat index up to this many documents, IVF-PQ above "
        f"(default: {FLAT_LIMIT})",
    )


def index_on_ray(
    args: argparse.Namespace,
    calibration: Calibration | None,
    params: dict[str, int],
    documents_path: Path,
    *,
    model: str,
    gpu: GpuChoice,
) -> tuple[Any, int]:
    """Read `args.input` on Ray workers, write `documents_path` (row i = vector id i), embed into
    `<output>/shards` with `model` and build the FaissIndex (on the GPU as `gpu` says).

    Returns:
        (index, number of documents).

    Raises:
        ValueError: for options the Ray engine does not take, an empty or malformed input, or any error of
            `embed_to_shards`/`build_index`.
    """
    from fair_retrieval.distributed.build import build_index
    from fair_retrieval.distributed.documents import documents_dataset, write_documents_file
    from fair_retrieval.distributed.embed import embed_to_shards
    from fair_retrieval.distributed.plan import MIN_TRAIN_SIZE, PlanKind, plan_index
    from fair_retrieval.distributed.runtime import ensure_ray
    from fair_retrieval.distributed.shards import ShardFolder
    from fair_retrieval.distributed.spec import EmbedderSpec
    from fair_retrieval.index.plan import factory_plan

    kind = cast("PlanKind", args.kind or "auto")  # no --kind: flat up to --flat-limit documents, IVF-PQ above
    if kind not in (*RAY_KINDS, "auto"):
        raise ValueError(f"--engine ray builds {'/'.join(RAY_KINDS)} indices, not {kind!r}; use --engine local for it.")
    if args.opq and kind == "flat":
        raise ValueError("--opq applies to IVF-PQ; use --kind ivfpq (or no --kind).")
    spec = EmbedderSpec(
        model,
        calibration=calibration,
        pooling=args.pooling,
        max_length=args.max_length,
        batch_size=args.batch_size,
        device=args.device,
    )
    shards = Path(args.output) / SHARDS_FOLDER
    if args.overwrite and shards.exists():
        logger.info("--overwrite: removing %s", shards)
        shutil.rmtree(shards)
    ensure_ray()
    dataset, key = documents_dataset(Path(args.input), args.text_field, args.id_field)
    count = write_documents_file(dataset, documents_path)
    result = embed_to_shards(
        dataset.select_columns(["id", "text"]),
        shards,
        spec,
        workers=args.workers,
        cpus_per_worker=args.cpus_per_worker,
        gpus_per_worker=args.gpus_per_worker,
        shard_rows=args.shard_size,
        input_key=key,
    )
    logger.info(
        "Ray embedding: %d documents, %d embedded now, %d from earlier shards",
        result.total,
        result.embedded,
        result.skipped,
    )
    limit = {"flat_limit": args.flat_limit} if args.flat_limit is not None else {}
    if getattr(args, "factory", None):
        plan = replace(factory_plan(args.factory, args.search), train_size=min(result.total, MIN_TRAIN_SIZE * 10))
    else:
        plan = plan_index(result.total, ShardFolder(shards).dimension(), kind, opq=args.opq, **limit, **params)
    built = build_index(shards, plan, gpu=gpu, gpu_shards=args.gpu_shards)
    logger.info("Built %s", built.plan.describe())
    return built.index, count
