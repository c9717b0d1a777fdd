"""`fair-retrieval tune`: choose a configuration for a model on a dev set, print the frontier, save the choice.

The search method is a switch (`--method`); each method is one function in `METHODS` taking the parsed arguments.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, get_args

from fair_retrieval.cli.common import dump_json, load_data, make_embedder, slug
from fair_retrieval.cli.lpes_tune import add_lpes_arguments, run_lpes_tune
from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_command,
    add_data_arguments,
    calibration_from_args,
    parse_layers,
)
from fair_retrieval.evaluation.runner import format_score as _fmt
from fair_retrieval.tuning.calibration_search import SearchStrategy

logger = logging.getLogger(__name__)


def register(subparsers: Any) -> None:
    """Add the `tune` subcommand."""
    parser = add_command(
        subparsers,
        "tune",
        help="search calibration settings on a dev set or, label-free, on your own corpus; save the best as JSON",
        description="Search settings on a dev set, or on your own corpus with no queries (--data FOLDER of "
        ".txt/.md files or a JSONL of documents: probe queries are drawn from its sentences at known depths). "
        "Objective: the harmonic mean of nDCG@10 over answer-position "
        "groups, among configurations whose overall nDCG@10 is not below plain. Embeddings are cached, so a "
        "re-run (or a wider search) does not recompute plain or already-tried configurations.",
    )
    add_data_arguments(parser)
    parser.add_argument("--method", choices=sorted(METHODS), default="calibration", help="what to search")
    parser.add_argument(
        "--output",
        type=Path,
        default=Path("calibration.json"),
        help="where the chosen configuration is saved (default: calibration.json)",
    )
    parser.add_argument("--report-dir", type=Path, default=Path("runs/tune"), help="where every trial is logged")
    parser.add_argument("--cache-dir", type=Path, default=Path(".fair_cache"), help="embedding cache")
    parser.add_argument(
        "--tolerance",
        type=float,
        default=0.0,
        help="allowed overall nDCG@10 loss relative to plain (default 0: not below plain)",
    )
    group = parser.add_argument_group("calibration search (--method calibration)")
    group.add_argument(
        "--strategy",
        choices=list(get_args(SearchStrategy)),
        default=None,
        help="trusted: only the configurations labelled dev sets support (the default on your own corpus, "
        "label-free); coordinate: one field at a time from the start configuration (the default on a labelled "
        "benchmark); grid: every combination",
    )
    group.add_argument("--rounds", type=int, default=2, help="passes of the coordinate search (default 2)")
    group.add_argument("--strengths", help="comma-separated λ values (default 0.25,0.5,0.75,1.0)")
    group.add_argument("--basket-sizes", help="comma-separated basket sizes (default 32,64,128,192,256)")
    group.add_argument("--layer-shares", help="comma-separated layer fractions or counts (default 0.25,0.5,0.75,1.0)")
    group.add_argument("--isolated-modes", help="comma-separated: preserve,equal")
    group.add_argument("--partial-basket-modes", help="comma-separated: equal,proportional")
    group.add_argument("--special-tokens-modes", help="comma-separated: content,preserve")
    group.add_argument("--min-full-baskets-values", help="comma-separated minimum full baskets (default 1,2,3)")
    add_lpes_arguments(parser)
    add_calibration_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Dispatch to the chosen search method."""
    return METHODS[args.method](args)


def search_space(args: argparse.Namespace) -> Any:
    """The SearchSpace the --strengths/--basket-sizes/… lists describe (defaults for the ones not given)."""
    from fair_retrieval.tuning.calibration_search import SearchSpace

    fields: dict[str, Any] = {}
    lists: dict[str, tuple[str | None, Callable[[str], Any]]] = {
        "strength": (args.strengths, float),
        "basket_size": (args.basket_sizes, int),
        "layers": (args.layer_shares, parse_layers),
        "isolated": (args.isolated_modes, str),
        "partial_basket": (args.partial_basket_modes, str),
        "special_tokens": (args.special_tokens_modes, str),
        "min_full_baskets": (args.min_full_baskets_values, int),
    }
    for name, (text, convert) in lists.items():
        if text:
            try:
                fields[name] = tuple(convert(part.strip()) for part in text.split(",") if part.strip())
            except ValueError as error:
                raise ValueError(f"Cannot read the {name} values {text!r}: {error}") from error
    return SearchSpace(**fields)


def run_calibration_search(args: argparse.Namespace) -> int:
    """Search Calibration settings, print the frontier, save the chosen configuration."""
    from fair_retrieval.evaluation.cache import EmbeddingCache
    from fair_retrieval.evaluation.probes import is_label_free
    from fair_retrieval.tuning.calibration_search import tune_on_task

    space = search_space(args)
    start = calibration_from_args(args)
    embedder = make_embedder(args)
    task = load_data(args, embedder)
    label_free = is_label_free(task)
    result = tune_on_task(
        embedder,
        task,
        space=space,
        strategy=args.strategy,
        start=start,
        tolerance=args.tolerance,
        max_rounds=args.rounds,
        grouping=args.grouping,
        cache=EmbeddingCache(args.cache_dir),
    )
    print(
        f"{task.name}: {len(task.queries)} queries, {len(task.corpus)} documents; "
        f"{len(result.trials)} configurations evaluated ({result.strategy} search)"
    )
    print(
        format_trials(
            "Pareto frontier (overall nDCG@10 vs harmonic mean over position groups)", result.frontier, result.plain
        )
    )
    best = result.best
    if result.improved:
        assert best.calibration is not None
        best.calibration.save(args.output)
        print(
            f"chosen: {best.label} — nDCG@10 {best.ndcg:.4f} (plain {result.plain.ndcg:.4f}), "
            f"harmonic mean {_fmt(best.harmonic_mean)} (plain {_fmt(result.plain.harmonic_mean)}), "
            f"PSI {_fmt(best.psi)} (plain {_fmt(result.plain.psi)})"
        )
        print(f"saved:  {args.output}  (use it with --config {args.output}, or Calibration.load)")
    else:
        print(
            "No configuration beat plain embeddings within the nDCG@10 constraint; nothing saved."
            + (
                " On this corpus plain embeddings are the label-free choice."
                if label_free
                else " Try --tolerance 0.005 or a wider search (--strategy grid)."
            )
        )
    report_path = args.report_dir / f"tune-{slug(task.name)}.json"
    dump_json({"task": task.summary(), "method": "calibration", **result.to_dict()}, report_path)
    print(f"trials: {report_path}")
    return 0


def format_trials(title: str, trials: list[Any], plain: Any) -> str:
    """A table of trials: label, nDCG@10 (Δ vs plain), harmonic mean, PSI."""
    rows = [("configuration", "nDCG@10", "Δ", "harm. mean", "PSI")]
    for t in trials:
        rows.append((t.label, f"{t.ndcg:.4f}", f"{t.ndcg - plain.ndcg:+.4f}", _fmt(t.harmonic_mean), _fmt(t.psi)))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = [title]
    for index, row in enumerate(rows):
        lines.append(
            "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True)))
        )
        if index == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


# Search methods selectable with --method; each takes the parsed arguments and returns an exit code.
METHODS: dict[str, Callable[[argparse.Namespace], int]] = {"calibration": run_calibration_search, "lpes": run_lpes_tune}
