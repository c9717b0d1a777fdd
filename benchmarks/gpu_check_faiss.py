"""The faiss checks of benchmarks/gpu_check.py: window pooling on the GPU, and faiss-gpu against faiss on the CPU
(flat, IVF, IVF-PQ search; save on GPU, load on CPU and back)."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
from gpu_check_common import (
    DIM,
    DOCS,
    QUERIES,
    SPEED_DOCS,
    SPEED_ROUNDS,
    VECTORS,
    K,
    Result,
    expect,
    long_texts,
    run_check,
)

# ---------------------------------------------------------------------------------------------------- faiss


def window_checks(results: list[Result], model: str) -> None:
    """Windowed documents: CUDA float32 = CPU float32; documents/s of windows vs truncation vs the bare pieces."""
    from fair_retrieval import FairEmbedder

    texts = long_texts(DOCS, words=1800)

    def same_on_cuda() -> str:
        cpu = FairEmbedder(model, device="cpu", precision="float32").embed_documents(texts)
        cuda_embedder = FairEmbedder(model, device="cuda", precision="float32")
        cuda = cuda_embedder.embed_documents(texts)
        report = cuda_embedder.last_report
        diff = float(np.abs(cpu - cuda).max())
        expect(report is not None and report.windowed == len(texts), "the long texts were not windowed")
        expect(diff <= 2e-4, f"windowed CUDA fp32 vs CPU fp32 max abs diff {diff:.2e} > 2e-4")
        return f"{report.windows if report else 0} windows for {len(texts)} documents; max|cuda−cpu| {diff:.1e}"

    run_check(results, "windows: CUDA float32 = CPU float32", same_on_cuda)

    def speed() -> str:
        import torch

        windows = FairEmbedder(model, device="cuda", calibration=None)
        truncate = FairEmbedder(windows.model, device="cuda", calibration=None, long_documents="truncate")
        docs = long_texts(SPEED_DOCS, words=1800)
        pieces = windows.plan_documents(docs).pieces
        runs = {
            "truncate": lambda: truncate.embed_documents(docs),
            "windows": lambda: windows.embed_documents(docs),
            "pieces": lambda: truncate.embed_documents(pieces),
        }
        runs["windows"]()  # warm-up
        seconds: dict[str, list[float]] = {name: [] for name in runs}
        for round_index in range(SPEED_ROUNDS):
            for name in runs if round_index % 2 == 0 else reversed(list(runs)):
                torch.cuda.synchronize()
                start = time.perf_counter()
                runs[name]()
                torch.cuda.synchronize()
                seconds[name].append(time.perf_counter() - start)
        ratio = float(np.median(np.array(seconds["windows"]) / np.array(seconds["pieces"])))
        rates = {name: len(docs) / float(np.median(times)) for name, times in seconds.items()}
        return (
            f"documents/s truncate {rates['truncate']:.0f}, windows {rates['windows']:.0f} "
            f"({len(pieces) / len(docs):.1f} windows each); windows/pieces {ratio:.2f}×"
        )

    run_check(results, "windows: speed on CUDA", speed)


def clustered_vectors(n: int, seed: int) -> np.ndarray:
    """Unit vectors around 200 random centres (so IVF partitions mean something)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((200, DIM)).astype(np.float32)
    x = centres[rng.integers(0, 200, n)] + 0.35 * rng.standard_normal((n, DIM)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def overlap(a: np.ndarray, b: np.ndarray) -> float:
    """Mean fraction of shared ids per row of two (n, k) result arrays."""
    return float(np.mean([len(set(x) & set(y)) / len(x) for x, y in zip(a.tolist(), b.tolist(), strict=True)]))


def faiss_checks(results: list[Result]) -> None:
    """FaissIndex on GPU against CPU; remove/get_vectors/save/load on GPU; multi-GPU sharding and replication."""
    from fair_retrieval import FaissIndex
    from fair_retrieval.index import Kind, faiss_gpu_count

    gpus = faiss_gpu_count()
    if gpus == 0:
        run_check(results, "faiss: GPU", lambda: "SKIP: faiss has no GPU support (install fair-retrieval[gpu])")
        return
    base, queries = clustered_vectors(VECTORS, 0), clustered_vectors(QUERIES, 1)
    truth = FaissIndex(DIM, kind="flat", gpu=False)
    truth.add(base)
    true_scores, true_ids = truth.search(queries, K)

    def flat() -> str:
        index = FaissIndex(DIM, kind="flat", gpu=True)
        index.add(base)
        expect(index.on_gpu, "FaissIndex(gpu=True) is not on the GPU")
        scores, ids = index.search(queries, K)
        same, diff = float((ids == true_ids).mean()), float(np.abs(scores - true_scores).max())
        expect(same >= 0.995 and diff <= 1e-4, f"GPU flat vs CPU: {same:.4f} ids equal, max score diff {diff:.1e}")
        return f"{same:.4f} ids equal, max score diff {diff:.1e}"

    run_check(results, "faiss: flat GPU = CPU", flat)

    kinds: tuple[tuple[Kind, dict[str, Any]], ...] = (
        ("ivf", {"nlist": 256, "nprobe": 16}),
        ("ivfpq", {"nlist": 256, "nprobe": 16, "m": 32}),
    )
    for kind, params in kinds:

        def ivf_like(kind: Kind = kind, params: dict[str, Any] = params) -> str:
            cpu = FaissIndex(DIM, kind=kind, gpu=False, **params)
            cpu.add(base)
            with tempfile.TemporaryDirectory() as folder:
                cpu.save(folder)
                same_centroids = FaissIndex.load(folder, gpu=True)
            expect(same_centroids.on_gpu, f"loaded {kind} index is not on the GPU")
            agreement = overlap(same_centroids.search(queries, K)[1], cpu.search(queries, K)[1])
            trained_on_gpu = FaissIndex(DIM, kind=kind, gpu=True, **params)
            trained_on_gpu.add(base)  # k-means with the GPU helper, then upload
            recall_gpu = overlap(trained_on_gpu.search(queries, K)[1], true_ids)
            recall_cpu = overlap(cpu.search(queries, K)[1], true_ids)
            detail = f"GPU∩CPU {agreement:.3f}; recall@{K} GPU-trained {recall_gpu:.3f}, CPU {recall_cpu:.3f}"
            expect(agreement >= (0.98 if kind == "ivf" else 0.9), f"{detail}: GPU and CPU disagree")
            expect(recall_gpu >= recall_cpu - 0.05, f"{detail}: GPU-trained index is worse")
            return detail

        run_check(results, f"faiss: {kind} GPU ≈ CPU", ivf_like)

    def mutate_and_persist() -> str:
        index = FaissIndex(DIM, kind="flat", gpu=True)
        index.add(base, np.arange(VECTORS) * 10)
        removed = np.arange(0, 1000) * 10
        expect(index.remove(removed) == 1000 and len(index) == VECTORS - 1000, "remove on GPU miscounted")
        expect(index.on_gpu, "index left the GPU after remove")
        scores, ids = index.search(queries, K)
        expect(not np.isin(ids, removed).any(), "removed ids are still returned on GPU")
        vectors = index.get_vectors([10_000, 19_990])
        expect(np.array_equal(vectors, base[[1000, 1999]]), "get_vectors on GPU differs from the added vectors")
        with tempfile.TemporaryDirectory() as folder:
            index.save(folder)
            expect((Path(folder) / "index.faiss").is_file(), "save wrote no index.faiss")
            on_gpu, on_cpu = FaissIndex.load(folder, gpu=True), FaissIndex.load(folder, gpu=False)
        expect(on_gpu.on_gpu and not on_cpu.on_gpu, "load did not honour gpu=")
        for name, loaded in (("GPU", on_gpu), ("CPU", on_cpu)):
            s, i = loaded.search(queries, K)
            expect(np.array_equal(loaded.ids, index.ids), f"ids changed through save/load ({name})")
            expect(float((i == ids).mean()) >= 0.995, f"search changed through save/load ({name})")
            expect(float(np.abs(s - scores).max()) <= 1e-4, f"scores changed through save/load ({name})")
        return "remove, get_vectors, save → load on GPU and CPU: equal"

    run_check(results, "faiss: GPU remove/get_vectors/save/load", mutate_and_persist)

    def multi_gpu() -> str:
        if gpus < 2:
            return f"SKIP: {gpus} GPU (sharding/replication need ≥ 2)"
        details = []
        for shards in (True, False):
            index = FaissIndex(DIM, kind="flat", gpu=True, gpu_shards=shards)
            index.add(base)
            same = float((index.search(queries, K)[1] == true_ids).mean())
            expect(same >= 0.995, f"{'sharded' if shards else 'replicated'}: {same:.4f} ids equal to CPU")
            details.append(f"{'sharded' if shards else 'replicated'} {same:.4f}")
        return f"{gpus} GPUs: " + ", ".join(details)

    run_check(results, "faiss: multi-GPU shards/replicas", multi_gpu)
