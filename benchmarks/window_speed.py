"""What token-window pooling costs: documents/s of windows vs truncation, and vs the same tokens as separate texts.

Documents of `--tokens` tokens (prose from Python's docs) are embedded by MiniLM (window 256) three ways, alternating
in one process, for `--rounds` rounds:
- truncate: `long_documents="truncate"` (what sentence-transformers does; reads one window of each document);
- windows: `long_documents="windows"` (the default; reads every token);
- pieces: the very windows the default cuts, embedded as separate texts by the truncating embedder — the same
  tokens, no pooling, no planning.
Reported: documents/s of each, and the per-round ratios windows/pieces (what windowing adds beyond its tokens; 1.0 =
nothing) and windows/truncate (≈ the share of tokens truncation drops), as medians with min–max, wall-clock and CPU
time. Calibration is off (the default calibration cannot act in 256-token windows) so only windowing is timed.

    python benchmarks/window_speed.py [--docs 48] [--tokens 1000] [--rounds 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, str(Path(__file__).parent))


def timed(run: Any) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def measure(windows: Any, truncate: Any, texts: list[str], rounds: int) -> dict[str, Any]:
    """Time truncate / windows / pieces on `texts` in alternating rounds; documents/s and the median ratios.

    `windows` embeds with long_documents="windows", `truncate` is the same model with "truncate"; both uncalibrated.
    """
    pieces = windows.plan_documents(texts).pieces
    modes = {
        "truncate": lambda: truncate.embed_documents(texts),
        "windows": lambda: windows.embed_documents(texts),
        "pieces": lambda: truncate.embed_documents(pieces),
    }
    modes["windows"]()  # warm-up
    times: dict[str, list[tuple[float, float]]] = {name: [] for name in modes}
    for round_index in range(rounds):
        order = list(modes) if round_index % 2 == 0 else list(reversed(modes))
        for name in order:
            times[name].append(timed(modes[name]))

    def ratios(a: str, b: str, which: int) -> list[float]:
        return [x[which] / y[which] for x, y in zip(times[a], times[b], strict=True)]

    result: dict[str, Any] = {
        "documents": len(texts),
        "tokens_per_document": statistics.median(windows.token_lengths(texts)),
        "windows_per_document": len(pieces) / len(texts),
        "documents_per_s": {name: len(texts) / statistics.median(t[0] for t in runs) for name, runs in times.items()},
    }
    for a, b in (("windows", "pieces"), ("windows", "truncate")):
        wall, cpu = ratios(a, b, 0), ratios(a, b, 1)
        result[f"{a}/{b}"] = {
            "wall_median": statistics.median(wall),
            "wall_range": [min(wall), max(wall)],
            "cpu_median": statistics.median(cpu),
        }
    return result


def main(argv: list[str] | None = None) -> int:
    import logging

    from speed_inputs import long_texts

    from fair_retrieval import FairEmbedder
    from fair_retrieval.evaluation.models import evaluation_model

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=48)
    parser.add_argument("--tokens", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    logging.getLogger("fair_retrieval").setLevel(logging.ERROR)  # truncation is on purpose here

    windows = FairEmbedder(evaluation_model("minilm"), calibration=None)
    truncate = FairEmbedder(windows.model, calibration=None, long_documents="truncate")
    result = measure(windows, truncate, long_texts(args.docs, args.tokens, windows.tokenizer), args.rounds)
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
