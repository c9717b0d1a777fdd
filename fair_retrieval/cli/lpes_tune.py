"""`fair-retrieval tune --method lpes`: search per-layer RoPE scaling factors (LPES) on a dev set.

The search and its objective are the library's (`fair_retrieval.tuning.lpes_search.tune_lpes`, on
`fair_retrieval.tuning.genetic`); this module parses the options into its calls, prints the progress and the outcome,
and saves the record.

The `tune` command owns the shared options (model, data, output); this module adds the LPES ones with
`add_lpes_arguments` and runs the search with `run_lpes_tune(args)`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from fair_retrieval.cli.common import data_spec, dump_json
from fair_retrieval.embedding.embedder_building import build_embedder
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.lpes import install_positional_scaling
from fair_retrieval.tuning.genetic import GenerationRecord, GeneticConfig
from fair_retrieval.tuning.lpes_search import check_position_task, tune_lpes

DEFAULTS = GeneticConfig()
DEFAULT_OUTPUT = Path("lpes_scaling.json")
# The tune command's --output default is the calibration search's file; LPES factors never go there by default.
_CALIBRATION_OUTPUT = Path("calibration.json")


def add_lpes_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the LPES search options (control points, factor bounds, population, generations, budget)."""
    group = parser.add_argument_group(
        "LPES search (--method lpes)",
        "per-layer RoPE scaling factors on a Bézier curve, found by a genetic search; saved to --output, or to "
        f"{DEFAULT_OUTPUT} when --output is left at {_CALIBRATION_OUTPUT}",
    )
    low, high = DEFAULTS.bounds
    group.add_argument(
        "--control-points",
        type=int,
        default=DEFAULTS.num_control_points,
        help="Bézier control points K (default: %(default)s)",
    )
    group.add_argument("--scale-min", type=float, default=low, help="smallest scaling factor (default: %(default)s)")
    group.add_argument("--scale-max", type=float, default=high, help="largest scaling factor (default: %(default)s)")
    group.add_argument(
        "--population", type=int, default=DEFAULTS.population, help="individuals per generation (default: %(default)s)"
    )
    group.add_argument(
        "--generations", type=int, default=DEFAULTS.generations, help="maximum generations (default: %(default)s)"
    )
    group.add_argument(
        "--max-evaluations", type=int, help="budget of dev-set evaluations (default: population × generations)"
    )


def run_lpes_tune(args: argparse.Namespace) -> int:
    """Run the LPES genetic search described by `args`, print progress and the best factors, save them as JSON.

    Reads the model options (`model`, `pooling`, `max_length`, `batch_size`, `device`), the LPES options of
    `add_lpes_arguments`, `data` (None: the announced default of `common.data_spec`), and, when the tune command
    defines them: `data_dir`,
    `max_tokens` (default 512), `max_queries`, `needle_documents`, `grouping`, `cache_dir`, `seed`, `output` and
    the calibration options (documents are then embedded with that calibration plus the candidate factors, as
    `FairEmbedder` will embed them; `--no-calibration` tunes the factors alone).

    Returns:
        The process exit code (0).

    Raises:
        ValueError: for a model without RoPE, a task without answer positions, or invalid search settings.
    """
    from fair_retrieval.cli.options import embedder_options
    from fair_retrieval.embedding.loading import hf_model
    from fair_retrieval.evaluation.cache import EmbeddingCache
    from fair_retrieval.evaluation.data.load import load_task
    from fair_retrieval.evaluation.runner import Evaluator

    seed = int(getattr(args, "seed", None) or 0)
    output = Path(getattr(args, "output", None) or DEFAULT_OUTPUT)
    if output == _CALIBRATION_OUTPUT:
        output = DEFAULT_OUTPUT  # a Calibration file name would mislead: Calibration.load cannot read LPES factors
    calibration = _calibration(args)
    max_tokens = int(getattr(args, "max_tokens", None) or 512)
    # documents of the benchmark are built to max_tokens
    embedder = build_embedder(
        embedder_options(args, calibration=None, max_length=args.max_length or max_tokens), args.model
    )
    install_positional_scaling(hf_model(embedder.model), embedder.model_name)  # non-RoPE models fail here, clearly
    task = load_task(
        data_spec(args),
        embedder.token_lengths,
        max_tokens=max_tokens,
        data_dir=getattr(args, "data_dir", None),
        needle_documents=getattr(args, "needle_documents", None) or 60,
    ).subsample_queries(getattr(args, "max_queries", None), seed=seed)
    cache_dir = getattr(args, "cache_dir", None)
    evaluator = Evaluator(  # queries are embedded once, plainly (and cached on disk with --cache-dir)
        embedder,
        task,
        grouping=getattr(args, "grouping", None),
        cache=EmbeddingCache(cache_dir) if cache_dir is not None else None,
    )
    check_position_task(evaluator)
    tuning_config = GeneticConfig(
        num_control_points=args.control_points,
        bounds=(args.scale_min, args.scale_max),
        population=args.population,
        generations=args.generations,
        seed=seed,
        max_evaluations=args.max_evaluations,
    )
    summary = task.summary()
    print(
        f"LPES search on {task.name}: {summary.get('documents', len(task.corpus))} documents, "
        f"{len(task.queries)} queries, groups {', '.join(evaluator.grouping)} ({evaluator.grouping_name}); "
        f"model {embedder.model_name} ({embedder.num_layers} layers); "
        f"calibration {'none' if calibration is None else calibration.to_dict()}"
    )
    print(
        f"objective: harmonic mean of nDCG@10 over the position groups; K={args.control_points} control points in "
        f"[{args.scale_min}, {args.scale_max}], population {args.population}, generations {args.generations}, "
        f"seed {seed}"
    )

    def report(record: GenerationRecord) -> None:
        points = ", ".join(f"{p:.3f}" for p in record.best_control_points)
        tqdm.write(  # prints above the progress bar instead of through it
            f"generation {record.generation}: best HM {record.best_fitness:.4f} at [{points}], "
            f"generation best {record.generation_best:.4f}, mean {record.mean_fitness:.4f}, "
            f"{record.evaluations} evaluations"
        )

    tuning = tune_lpes(embedder, evaluator, calibration, tuning_config, show_progress_bar=True, on_generation=report)
    best = tuning.best
    print(f"best factors per layer: [{', '.join(f'{f:.4f}' for f in best.factors)}]")
    print(f"best control points: {list(best.control_points or ())}")
    _print_comparison(tuning.plain, tuning.tuned)
    print(f"{tuning.search.evaluations} evaluations in {tuning.seconds:.1f} s")
    dump_json(tuning.to_dict(evaluator, calibration), output)
    print(f"saved {output} (load it with PositionalScaling.load)")
    return 0


def _calibration(args: argparse.Namespace) -> Calibration | None:
    """The documents' calibration: the tune command's calibration options when it has them, else none."""
    if not hasattr(args, "strength") or getattr(args, "no_calibration", False):
        return None
    from fair_retrieval.cli.options import calibration_from_args

    return calibration_from_args(args)


def _print_comparison(plain: Any, tuned: Any) -> None:
    groups = list(plain.groups)
    header = f"{'':<8}{'nDCG@10':>9}{'HM':>8}{'PSI':>8}" + "".join(f"{name[:10]:>11}" for name in groups)
    print(header)
    for label, run in (("no LPES", plain), ("LPES", tuned)):
        cells = "".join(f"{run.groups[name]['ndcg@10']:>11.4f}" for name in groups)
        psi = "n/a" if run.psi is None else f"{run.psi:.4f}"
        print(f"{label:<8}{run.overall['ndcg@10']:>9.4f}{run.harmonic_mean:>8.4f}{psi:>8}{cells}")
