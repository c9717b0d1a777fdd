"""The Ray engine of `fair-retrieval index --engine ray`: its options, turned into one call of the library's job
(`fair_retrieval.distributed.indexing.index_documents_on_ray`: input → shards → FaissIndex on Ray).

The embedding shards are kept in `<output>/shards`, so an interrupted run continues where it stopped when started
again with the same arguments (`--overwrite` starts from scratch).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, cast

from fair_retrieval.distributed.index_sizing import FLAT_LIMIT, PlanKind
from fair_retrieval.embedding.embedder_options import EmbedderOptions
from fair_retrieval.index.gpu import GpuChoice

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
    group.add_argument(
        "--shards",
        type=Path,
        help="where the embedding shards are kept, so an interrupted run continues (default: <output>/shards; "
        "needed with --qdrant)",
    )
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


def shards_folder(args: argparse.Namespace) -> Path:
    """Where a Ray job keeps its embedding shards: --shards, else `<output>/shards`."""
    return Path(args.shards) if args.shards is not None else Path(args.output) / SHARDS_FOLDER


def index_on_ray(
    args: argparse.Namespace,
    options: EmbedderOptions,
    params: dict[str, int],
    documents_path: Path,
    *,
    model: str,
    gpu: GpuChoice,
) -> tuple[Any, int]:
    """Run `index_documents_on_ray` as the command's arguments say: shards in `<output>/shards` (removed first with
    --overwrite), `documents_path` written, the index kind from --kind/--factory/--flat-limit/--opq.

    Returns:
        (index, number of documents).

    Raises:
        ValueError: for options the Ray engine does not take, or any error of `index_documents_on_ray`.
    """
    from fair_retrieval.distributed.indexing import RayResources, index_documents_on_ray
    from fair_retrieval.distributed.spec import EmbedderSpec
    from fair_retrieval.index.index_plan import factory_plan

    kind = cast("PlanKind", args.kind or "auto")  # no --kind: flat up to --flat-limit documents, IVF-PQ above
    if kind not in (*RAY_KINDS, "auto"):
        raise ValueError(f"--engine ray builds {'/'.join(RAY_KINDS)} indices, not {kind!r}; use --engine local for it.")
    if args.opq and kind == "flat":
        raise ValueError("--opq applies to IVF-PQ; use --kind ivfpq (or no --kind).")
    if args.factory and (args.opq or args.flat_limit is not None or params):
        raise ValueError(
            "--factory names the whole index: drop --opq, --flat-limit and --index-param (write them into the "
            "factory string, and search values into --search)."
        )
    indexed = index_documents_on_ray(
        args.input,
        shards_folder(args),
        documents_path,
        EmbedderSpec.from_options(model, options),
        text_field=args.text_field,
        id_field=args.id_field,
        resources=RayResources(args.workers, args.cpus_per_worker, args.gpus_per_worker, args.shard_size),
        index=factory_plan(args.factory, args.search) if args.factory else kind,
        gpu=gpu,
        gpu_shards=args.gpu_shards,
        fresh=args.overwrite,
        flat_limit=args.flat_limit,  # with --factory these are unset (refused above)
        opq=args.opq,
        multivector=args.multivector,
        aggregate=args.aggregate,
        **params,
    )
    return indexed.built.index, indexed.count


def store_on_ray(
    args: argparse.Namespace,
    options: EmbedderOptions,
    params: dict[str, int],
    *,
    model: str,
    gpu: GpuChoice,
    windows: Any,
    into: Any = None,
) -> Any:
    """Run `store_documents_on_ray` as the command's arguments say: shards in `<output>/shards` (or --shards;
    removed first with --overwrite), the store's mode, aggregate, windows and index kind from the flags, or the
    store `into` makes from the embedder (a Qdrant collection's, which takes those flags itself).

    Returns:
        The store of texts (a `fair_retrieval.stores.DocumentStore`), not saved yet.

    Raises:
        ValueError: for options the store on Ray does not take (--factory, --opq, --flat-limit, --gpu-shards), or
            any error of `store_documents_on_ray`.
    """
    from fair_retrieval.distributed.indexing import RayResources, store_documents_on_ray
    from fair_retrieval.distributed.spec import EmbedderSpec

    if args.factory or args.opq or args.flat_limit is not None or args.gpu_shards:
        raise ValueError(
            "A store folder built on Ray takes --kind and --index-param (default: the stores' default); "
            "--factory, --opq, --flat-limit and --gpu-shards build the earlier index folder: add --output-format index."
        )
    settings: dict[str, Any] = (
        {"multivector": args.multivector, "aggregate": args.aggregate, "windows": windows, "kind": args.kind, **params}
        if into is None
        else {"into": into}
    )
    return store_documents_on_ray(
        args.input,
        shards_folder(args),
        EmbedderSpec.from_options(model, options),
        text_field=args.text_field,
        id_field=args.id_field,
        resources=RayResources(args.workers, args.cpus_per_worker, args.gpus_per_worker, args.shard_size),
        gpu=gpu,
        fresh=args.overwrite,
        **settings,
    )
