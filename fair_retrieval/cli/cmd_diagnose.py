"""`fair-retrieval diagnose`: a position-bias report of your own corpus, with no queries and no labels.

Probe queries are drawn from the corpus' own sentences at known depths (begin / middle / end of each document, see
`fair_retrieval.evaluation.probes`); plain and calibrated document embeddings are scored on them exactly like a
labelled position benchmark: nDCG@10 by depth, PSI and the harmonic mean, as a terminal table, JSON and a PNG plot.
With `--compare-with huggingface` the plain, truncating sentence-transformers model that HuggingFaceEmbedding and
HuggingFaceEmbeddings run (loaded from the same --model) is measured first on the same probes, so the report shows
what is run today next to ours, with the share of document tokens each never embeds.
"""

from __future__ import annotations

import argparse
from typing import Any

from fair_retrieval.cli.common import make_embedder, probe_corpus, write_report
from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_command,
    add_document_arguments,
    add_input_argument,
    add_probe_arguments,
    add_report_arguments,
    calibration_from_args,
)


def register(subparsers: Any) -> None:
    """Add the `diagnose` subcommand."""
    parser = add_command(
        subparsers,
        "diagnose",
        help="measure position bias on your own documents (no queries needed): plain vs calibrated",
        description="Draw probe queries from your documents' own sentences at known depths, then report how well "
        "plain and calibrated document embeddings retrieve them by depth (nDCG@10, PSI, harmonic mean): a "
        "terminal table (or --json), a JSON report and a PNG plot in --output-dir.",
    )
    add_input_argument(parser)
    add_document_arguments(parser)
    add_probe_arguments(parser)
    parser.add_argument(
        "--max-tokens", type=int, default=512, help="the model's max length unless --max-length (default 512)"
    )
    parser.add_argument("--bins", type=int, default=10, help="depth bins in the plot (default 10)")
    add_report_arguments(parser, "diagnose")
    parser.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    parser.add_argument(
        "--compare-with",
        choices=["huggingface"],
        help="also measure what you run today, first, on the same probes: huggingface = the plain "
        "sentence-transformers model as llama-index's HuggingFaceEmbedding and langchain's HuggingFaceEmbeddings run "
        "it (truncated at the model's own max_seq_length unless --max-length; loaded a second time)",
    )
    add_calibration_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Probe the corpus, evaluate --compare-with's embedder, then plain and calibrated documents; print and write the
    report."""
    from fair_retrieval.evaluation.cache import EmbeddingCache
    from fair_retrieval.evaluation.compare import position_report
    from fair_retrieval.evaluation.external_embedders import huggingface_anchor

    if not args.input.exists():
        raise FileNotFoundError(f"--input {args.input} does not exist.")
    calibration = calibration_from_args(args)
    embedder = make_embedder(args)
    task = probe_corpus(args, args.input, embedder)
    baseline = None
    if args.compare_with == "huggingface":
        baseline = huggingface_anchor(
            args.model, max_length=args.max_length, device=args.device, batch_size=args.batch_size
        )
    report = position_report(
        embedder,
        task,
        calibration,
        n_bins=args.bins,
        cache=EmbeddingCache(args.cache_dir) if args.cache_dir else None,
        baseline=baseline,
    )
    write_report(report, args.output_dir, as_json=args.json)
    return 0
