"""Command-line options shared by several subcommands: the model and the calibration configuration."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from fair_retrieval.calibration import Calibration


def add_model_arguments(parser: argparse.ArgumentParser, default_model: str | None = None) -> None:
    """Add --model, --pooling, --max-length, --batch-size and --device."""
    parser.add_argument(
        "--model",
        default=default_model,
        required=default_model is None,
        help="Hub id or local folder of a sentence-transformers model"
        + (" (default: the bundled all-MiniLM-L6-v2)" if default_model else ""),
    )
    parser.add_argument("--pooling", choices=["cls", "mean", "last"], help="override the model's pooling")
    parser.add_argument("--max-length", type=int, help="token limit per text (default: the model's)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default: 32)")
    parser.add_argument("--device", help="cpu, cuda, mps (default: best available)")


def add_calibration_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --config (a Calibration JSON file), per-field overrides and --no-calibration."""
    group = parser.add_argument_group("calibration (defaults: the paper's, or those of --config)")
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
        help="special tokens ([SEP], EOS) count as content (paper) or keep their own attention mass",
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
    }
    fields.update({key: value for key, value in overrides.items() if value is not None})
    return Calibration.from_dict(fields)


def embedder_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """FairEmbedder keyword arguments from the model options (everything but the model and calibration)."""
    return {
        "pooling": args.pooling,
        "max_length": args.max_length,
        "batch_size": args.batch_size,
        "device": args.device,
    }


def dump_json(data: Any, path: Path) -> None:
    """Write `data` as indented UTF-8 JSON, creating parent folders."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
