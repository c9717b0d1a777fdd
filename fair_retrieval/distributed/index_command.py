"""The Ray engine of `fair-retrieval index --engine ray`: its options, and documents → shards → FaissIndex.

`fair_retrieval.cli.cmd_index` reads and checks the documents and writes the index folder (documents.jsonl,
index files, manifest) as for the local engine; this module does the part in between on Ray. The embedding shards
are kept in `<output>/shards`, so a run that was interrupted continues where it stopped when started again with
the same arguments (`--overwrite` starts from scratch).
"""

from __future__ import annotations

import argparse
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

from fair_retrieval.calibration import Calibration

logger = logging.getLogger(__name__)

SHARDS_FOLDER = "shards"
RAY_KINDS = ("flat", "ivfpq")
_ROWS_PER_BLOCK = 10_000


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --engine and the options of the Ray engine."""
    parser.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: embed in this process; ray: embed on Ray Data workers (a local Ray, or the cluster in "
        "RAY_ADDRESS), resumable (default: local)",
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
        help="without --kind, keep an exact flat index up to this many documents, IVF-PQ above (default: 1000000)",
    )


def index_on_ray(
    args: argparse.Namespace, texts: Sequence[str], calibration: Calibration | None, params: dict[str, int]
) -> Any:
    """Embed `texts` on Ray into `<output>/shards` and build the FaissIndex (vector id i = text i).

    Returns:
        The FaissIndex.

    Raises:
        ValueError: for options the Ray engine does not take, or any error of `embed_to_shards`/`build_index`.
    """
    from fair_retrieval.cli.cmd_index import gpu_choice, model_reference
    from fair_retrieval.distributed.build import build_index
    from fair_retrieval.distributed.embed import embed_to_shards, texts_key
    from fair_retrieval.distributed.plan import PlanKind, plan_index
    from fair_retrieval.distributed.runtime import import_pyarrow, import_ray
    from fair_retrieval.distributed.shards import ShardFolder
    from fair_retrieval.distributed.spec import EmbedderSpec

    kind = cast("PlanKind", args.kind or "auto")  # no --kind: flat up to --flat-limit documents, IVF-PQ above
    if kind not in (*RAY_KINDS, "auto"):
        raise ValueError(f"--engine ray builds {'/'.join(RAY_KINDS)} indices, not {kind!r}; use --engine local for it.")
    if args.opq and kind == "flat":
        raise ValueError("--opq applies to IVF-PQ; use --kind ivfpq (or no --kind).")
    pa, ray = import_pyarrow(), import_ray()
    spec = EmbedderSpec(
        model_reference(args.model),
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
    ids = pa.array(range(len(texts)), type=pa.int64())
    table = pa.table({"id": ids, "text": pa.array(list(texts), type=pa.string())})
    blocks = [table.slice(start, _ROWS_PER_BLOCK) for start in range(0, len(texts), _ROWS_PER_BLOCK)]
    dataset = ray.data.from_arrow(blocks)
    result = embed_to_shards(
        dataset,
        shards,
        spec,
        workers=args.workers,
        cpus_per_worker=args.cpus_per_worker,
        gpus_per_worker=args.gpus_per_worker,
        shard_rows=args.shard_size,
        input_key=texts_key(texts),
    )
    logger.info(
        "Ray embedding: %d documents, %d embedded now, %d from earlier shards",
        result.total,
        result.embedded,
        result.skipped,
    )
    limit = {"flat_limit": args.flat_limit} if args.flat_limit is not None else {}
    plan = plan_index(result.total, ShardFolder(shards).dimension(), kind, opq=args.opq, **limit, **params)
    built = build_index(shards, plan, gpu=gpu_choice(args.gpu), gpu_shards=args.gpu_shards)
    logger.info("Built %s", built.plan.describe())
    return built.index
