"""`fair-retrieval eval`: plain vs calibrated retrieval on a position benchmark — table, JSON report and plot."""

from __future__ import annotations

import argparse
from typing import Any

from fair_retrieval.cli.common import load_data, make_embedder, write_report
from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_command,
    add_data_arguments,
    add_report_arguments,
    calibration_from_args,
)


def register(subparsers: Any) -> None:
    """Add the `eval` subcommand."""
    parser = add_command(
        subparsers,
        "eval",
        help="measure position bias: plain vs calibrated documents, same queries and corpus",
        description="Embed a benchmark's corpus plainly and calibrated, retrieve with the same plain queries, and "
        "report nDCG@10 / Recall@k overall and by answer position (PSI, harmonic mean): a terminal table, a JSON "
        "report and a PNG plot.",
    )
    add_data_arguments(parser)
    add_report_arguments(parser, "eval")
    add_calibration_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Evaluate plain and calibrated documents; print the table; write the JSON report and the plot."""
    from fair_retrieval.evaluation.cache import EmbeddingCache
    from fair_retrieval.evaluation.compare import position_report

    calibration = calibration_from_args(args)
    embedder = make_embedder(args)
    task = load_data(args, embedder)
    report = position_report(
        embedder,
        task,
        calibration,
        grouping=args.grouping,
        n_bins=args.bins,
        cache=EmbeddingCache(args.cache_dir) if args.cache_dir else None,
    )
    write_report(report, args.output_dir)
    return 0
