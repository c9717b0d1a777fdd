"""`fair-retrieval eval`: plain vs calibrated retrieval on a position benchmark — table, JSON report and plot."""

from __future__ import annotations

import argparse
import logging
import re
from pathlib import Path
from typing import Any

from fair_retrieval.calibration import Calibration
from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_model_arguments,
    calibration_from_args,
    dump_json,
    embedder_kwargs,
)

logger = logging.getLogger(__name__)

DATA_HELP = (
    "needle | squad-v2 | xquad:LANG | scifact | PATH (SQuAD JSON, BEIR/PosIR/NanoBEIR folder, PosQ file) | "
    "hub:fineweb-posq | hub:squad-posq | hub:nanobeir:NAME | hub:posir:LANG/DOMAIN"
)


def register(subparsers: Any) -> None:
    """Add the `eval` subcommand."""
    from fair_retrieval.evaluation.bundled import bundled_model

    parser = subparsers.add_parser(
        "eval",
        help="measure position bias: plain vs calibrated documents, same queries and corpus",
        description="Embed a benchmark's corpus plainly and calibrated, retrieve with the same plain queries, and "
        "report nDCG@10 / Recall@k overall and by answer position (PSI, harmonic mean): a terminal table, a JSON "
        "report and a PNG plot.",
    )
    add_model_arguments(parser, default_model=bundled_model())
    add_data_arguments(parser)
    parser.add_argument("--output-dir", type=Path, default=Path("runs/eval"), help="where the report and plot go")
    parser.add_argument("--cache-dir", type=Path, help="reuse embeddings across runs (e.g. .fair_cache)")
    add_calibration_arguments(parser)
    parser.set_defaults(func=run)


def add_data_arguments(parser: argparse.ArgumentParser, default_data: str | None = None) -> None:
    """Options that choose the benchmark: --data, --max-tokens, --data-dir, --grouping, --max-queries, …"""
    from fair_retrieval.evaluation.groups import GROUPINGS

    parser.add_argument("--data", default=default_data, required=default_data is None, help=DATA_HELP)
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=512,
        help="token budget of joined documents, and the model's max length unless --max-length (default 512)",
    )
    parser.add_argument("--data-dir", type=Path, help="folder of the shared data (default: ../shared/data)")
    parser.add_argument(
        "--grouping",
        choices=["none", *GROUPINGS],
        help="how queries are grouped by answer position (default: thirds when positions are known)",
    )
    parser.add_argument("--bins", type=int, default=10, help="position bins in the plot (default 10)")
    parser.add_argument("--max-queries", type=int, help="evaluate a reproducible random subset of the queries")
    parser.add_argument("--needle-documents", type=int, default=60, help="size of the needle benchmark (default 60)")


def make_embedder(args: argparse.Namespace, calibration: Calibration | None = None) -> Any:
    """Load the model with the CLI's options; documents may be as long as --max-tokens unless --max-length."""
    from fair_retrieval.embedder import FairEmbedder

    kwargs = embedder_kwargs(args)
    kwargs["max_length"] = kwargs.get("max_length") or args.max_tokens
    return FairEmbedder(args.model, calibration=calibration, show_progress_bar=True, **kwargs)


def load_data(args: argparse.Namespace, embedder: Any) -> Any:
    """The task that --data names, built with the model's tokenizer, subsampled to --max-queries."""
    from fair_retrieval.evaluation.sources import load_task

    task = load_task(
        args.data,
        embedder.token_lengths,
        args.max_tokens,
        data_dir=args.data_dir,
        needle_documents=args.needle_documents,
    )
    return task.subsample_queries(args.max_queries)


def slug(text: str) -> str:
    """A file-name-safe version of a task name ("xquad:de@512" → "xquad-de-512")."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "task"


def run(args: argparse.Namespace) -> int:
    """Evaluate plain and calibrated documents; print the table; write the JSON report and the plot."""
    from fair_retrieval.evaluation.cache import EmbeddingCache
    from fair_retrieval.evaluation.metrics import metric_names
    from fair_retrieval.evaluation.plot import plot_by_position
    from fair_retrieval.evaluation.report import build_report, format_table
    from fair_retrieval.evaluation.runner import Evaluator

    calibration = calibration_from_args(args)
    embedder = make_embedder(args)
    task = load_data(args, embedder)
    evaluator = Evaluator(
        embedder,
        task,
        grouping=args.grouping,
        n_bins=args.bins,
        cache=EmbeddingCache(args.cache_dir) if args.cache_dir else None,
        show_progress_bar=True,
    )
    runs = [evaluator.run("plain", None)]
    if calibration is not None:
        runs.append(evaluator.run("calibrated", calibration))
    report = build_report(embedder, task, evaluator.grouping_name, runs, metric_names())
    print(format_table(report))
    name = slug(task.name)
    report_path = args.output_dir / f"{name}.json"
    dump_json(report, report_path)
    print(f"report: {report_path}")
    if report["bins"]:
        print(f"plot:   {plot_by_position(report, args.output_dir / f'{name}.png')}")
    return 0
