"""Plain vs calibrated document encoding time, alternating in one process.

Single configuration (default): MiniLM at 512 tokens, default Calibration. Each round times one plain and one
calibrated pass over all texts (order alternates between rounds so neither mode always runs first); the reported
figure is the median of the per-round ratios, which cancels most of the machine's drift. Both wall-clock time and
this process's CPU time (time.process_time, all threads) are recorded: on a shared, loaded machine the CPU-time
ratio is the steadier of the two, since time spent waiting for a core is not counted.

`--matrix` repeats this, in one run, for the default and every value of the tuning search space (`SearchSpace()`:
strength, basket_size, layers, isolated, partial_basket, special_tokens, min_full_baskets; one field changed at a
time) on four setups — MiniLM at 512 tokens (mean pooling, bundled) and tiny random BERT (CLS and mean pooling) and
Qwen3 (last-token pooling) models at `--long-tokens` — and prints a table: option → median wall ratio (min–max over
rounds), median CPU-time ratio; each option's rounds pair it with its own adjacent plain pass. It ends with window
pooling (benchmarks/window_speed.py's measurement): documents/s of windows vs truncation and vs the same windows
embedded as separate texts (equal tokens).

    python benchmarks/calibration_speed.py [--docs 64] [--rounds 7] [--batch-size 32] [--json out.json]
    python benchmarks/calibration_speed.py --matrix [--docs 16] [--rounds 5] [--long-tokens 2048] [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from speed_inputs import long_texts

from fair_retrieval.evaluation.models import e5_small_folder, evaluation_model

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).parent))


def time_pairs(embedder: Any, texts: list[str], calibration: Any, rounds: int) -> dict[str, Any]:
    """Alternating plain/calibrated passes: per-round wall and CPU-time ratios and their medians."""
    ratios, cpu_ratios, plain_times, calibrated_times = [], [], [], []
    for round_index in range(rounds):
        timings, cpu = {}, {}
        modes = [None, calibration] if round_index % 2 == 0 else [calibration, None]
        for mode in modes:
            name = "plain" if mode is None else "calibrated"
            start, start_cpu = time.perf_counter(), time.process_time()
            embedder.embed_documents(texts, calibration=mode)
            timings[name] = time.perf_counter() - start
            cpu[name] = time.process_time() - start_cpu
        plain_times.append(timings["plain"])
        calibrated_times.append(timings["calibrated"])
        ratios.append(timings["calibrated"] / timings["plain"])
        cpu_ratios.append(cpu["calibrated"] / cpu["plain"])
    return {
        "median_plain_s": statistics.median(plain_times),
        "median_calibrated_s": statistics.median(calibrated_times),
        "median_ratio": statistics.median(ratios),
        "median_cpu_time_ratio": statistics.median(cpu_ratios),
        "ratios": ratios,
        "cpu_time_ratios": cpu_ratios,
    }


def option_values(base: Any) -> dict[str, Any]:
    """The default, then every value of the tuning search space (`SearchSpace()`) that differs from it, one field
    at a time: label → Calibration."""
    from fair_retrieval import Calibration
    from fair_retrieval.tuning.calibration_search import SEARCH_FIELDS, SearchSpace

    space = SearchSpace()
    options = {"default": base, "paper": Calibration.paper()}
    for name in SEARCH_FIELDS:
        for value in space.values(name):
            if value != getattr(base, name):
                options[f"{name}={value!r}"] = replace(base, **{name: value})
    return options


def matrix_setups(args: argparse.Namespace, folder: Path) -> list[tuple[str, str, int, int, Any]]:
    """(label, model, tokens, documents, text maker or None for prose): MiniLM (bundled) and multilingual-e5-small
    (when its folder is built) at `--max-length`, both mean pooling, and tiny random CLS / mean / last-token models at
    `--long-tokens`, built as tests/models.py does."""
    from calibration_memory import build_model, documents

    setups: list[tuple[str, str, int, int, Any]] = [
        ("MiniLM, mean", evaluation_model("minilm"), args.max_length, args.docs, None)
    ]
    if e5_small_folder().is_dir():  # the second real model, built offline (fair_retrieval.evaluation.models)
        setups.append(("e5-small, mean", evaluation_model("e5-small"), args.max_length, args.docs, None))
    for label, arch, pooling in (
        ("tiny BERT, CLS", "bert", "cls"),
        ("tiny BERT, mean", "bert", "mean"),
        ("tiny Qwen3, last", "qwen3", "lasttoken"),
    ):
        model = build_model(folder / pooling, args.long_tokens, arch, pooling)
        setups.append((label, model, args.long_tokens, args.long_docs, documents))
    return [setup for setup in setups if not args.only or any(part in setup[0] for part in args.only)]


def matrix(args: argparse.Namespace) -> dict[str, Any]:
    """Time every option value on the four setups, then window pooling; print the table as it goes."""
    from window_speed import measure

    from fair_retrieval import Calibration, FairEmbedder

    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'setup':<28} {'option':<28} {'wall ratio (min–max)':<22} {'CPU-time ratio':<14} plain s")
        for label, model, tokens, docs, make_texts in matrix_setups(args, Path(tmp)):
            embedder = FairEmbedder(model, max_length=tokens, batch_size=docs)
            texts = make_texts(docs, tokens) if make_texts else long_texts(docs, tokens, embedder.tokenizer)
            for name, calibration in option_values(Calibration()).items():
                if args.option and name not in args.option:
                    continue
                embedder.embed_documents(texts, calibration=calibration)  # warm-up
                report = embedder.last_report
                calibrated = report.calibrated if report is not None else None  # texts this option calibrates
                result = time_pairs(embedder, texts, calibration, args.rounds)
                row = {"setup": f"{label}, {tokens} tokens", "option": name, "calibrated_texts": calibrated, **result}
                rows.append(row)
                spread = f"{result['median_ratio']:.3f} ({min(result['ratios']):.2f}–{max(result['ratios']):.2f})"
                print(
                    f"{row['setup']:<28} {name:<28} {spread:<22} {result['median_cpu_time_ratio']:<14.3f} "
                    f"{result['median_plain_s']:.2f}" + ("" if calibrated else "  (no text calibrated)"),
                    flush=True,
                )
    windows_result = None
    if args.window_docs:
        windows = FairEmbedder(evaluation_model("minilm"), calibration=None)
        truncate = FairEmbedder(windows.model, calibration=None, long_documents="truncate")
        texts = long_texts(args.window_docs, args.window_tokens, windows.tokenizer)
        windows_result = measure(windows, truncate, texts, args.rounds)
        rates, equal = windows_result["documents_per_s"], windows_result["windows/pieces"]
        print(
            f"windows: {rates['windows']:.2f} documents/s, truncation {rates['truncate']:.2f}, the same windows as "
            f"separate texts {rates['pieces']:.2f}; windows/pieces (equal tokens) {equal['wall_median']:.3f} wall "
            f"({equal['wall_range'][0]:.2f}–{equal['wall_range'][1]:.2f}), {equal['cpu_median']:.3f} CPU time",
            flush=True,
        )
    return {
        "docs": args.docs,
        "long_docs": args.long_docs,
        "rounds": args.rounds,
        "rows": rows,
        "windows": windows_result,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model",
        default=None,
        help="an evaluation model's name (minilm, e5-small) or a folder or Hub id (default: minilm)",
    )
    parser.add_argument("--docs", type=int, default=None, help="default: 64 (16 with --matrix)")
    parser.add_argument("--rounds", type=int, default=None, help="default: 7 (5 with --matrix)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--matrix", action="store_true", help="every option value on three setups")
    parser.add_argument("--long-tokens", type=int, default=2048, help="input length of the tiny models (--matrix)")
    parser.add_argument("--long-docs", type=int, default=4, help="documents for the tiny models (--matrix)")
    parser.add_argument("--window-docs", type=int, default=8, help="--matrix: documents for window pooling (0: skip)")
    parser.add_argument("--window-tokens", type=int, default=1000, help="--matrix: tokens per windowed document")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    parser.add_argument("--only", nargs="+", help="--matrix: setups whose label contains one of these (e.g. MiniLM)")
    parser.add_argument("--option", nargs="+", help="--matrix: only these option labels (e.g. default basket_size=32)")
    parser.add_argument(
        "--calibration", help="single configuration: Calibration fields as JSON (default: the library default)"
    )
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    logging.getLogger("fair_retrieval").setLevel(logging.ERROR)  # every text is truncated on purpose
    if args.matrix:
        args.docs = args.docs or 16
        args.rounds = args.rounds or 5
        result: dict[str, Any] = {"torch_threads": torch.get_num_threads(), **matrix(args)}
    else:
        from fair_retrieval import Calibration, FairEmbedder

        args.docs = args.docs or 64
        args.rounds = args.rounds or 7
        embedder = FairEmbedder(evaluation_model(args.model), max_length=args.max_length, batch_size=args.batch_size)
        texts = long_texts(args.docs, args.max_length, embedder.tokenizer)
        calibration = Calibration.from_json(args.calibration) if args.calibration else Calibration()
        embedder.embed_documents(texts[: args.batch_size], calibration=None)  # warm-up
        embedder.embed_documents(texts[: args.batch_size], calibration=calibration)
        timing = time_pairs(embedder, texts, calibration, args.rounds)
        for index, (wall, cpu) in enumerate(zip(timing["ratios"], timing["cpu_time_ratios"], strict=True)):
            print(f"round {index + 1}: wall ratio {wall:.3f}  CPU-time ratio {cpu:.3f}")
        result = {
            "model": embedder.model_name,
            "docs": args.docs,
            "tokens_per_doc": args.max_length,
            "batch_size": args.batch_size,
            "calibration": calibration.to_dict(),
            "torch_threads": torch.get_num_threads(),
            **timing,
        }
        print(
            f"median ratio calibrated/plain: {result['median_ratio']:.3f} "
            f"(CPU time {result['median_cpu_time_ratio']:.3f}; plain {result['median_plain_s']:.2f}s, "
            f"calibrated {result['median_calibrated_s']:.2f}s "
            f"for {args.docs} docs × {args.max_length} tokens)"
        )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
