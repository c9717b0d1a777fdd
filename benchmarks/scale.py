"""Scale-out benchmark: Ray Data embedding throughput, and recall of the compressed index.

1. Throughput: the same documents (prose from Python's own docs, ~200 tokens each, so the default 128-token
   baskets calibrate them) embedded with calibration by
   - the single-process `FairEmbedder` (torch on all cores; model already loaded; and with loading),
   - `embed_to_shards` on a local Ray with 1 worker (all cores) and with 2 workers (cores split between them).
   Ray timings are whole jobs: input scan, worker start-up, model loading in every worker, embedding and shard
   writing; Ray's own start-up is reported apart. Every Ray result is checked against the single-process vectors.
2. Recall: ≥ 100k random-but-clustered unit vectors (`clustered_vectors`, 384-d like MiniLM) written as shards;
   `build_index` trains IVF-PQ on a sample, once per `--m` (PQ bytes per vector; "auto" is the plan's default);
   recall@10 (overlap with the exact top 10, and the fraction of queries whose exact nearest neighbour is in the
   top 10) on held-out queries.

    python benchmarks/scale.py                       # defaults: 400 documents, 100,000 vectors
    python benchmarks/scale.py --docs 2000 --vectors 1000000 --json scale.json
    python benchmarks/scale.py --skip-throughput --m auto --nlist 256 --opq

Local Ray is started with one logical CPU more than the workers use, for Ray Data's read tasks.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")


def prose_texts(count: int, words: int) -> list[str]:
    """`count` distinct passages of `words` words, cut from the pydoc topics shipped with Python."""
    from pydoc_data.topics import topics

    vocabulary = " ".join(" ".join(topics[key].split()) for key in sorted(topics)).split()
    step = max(1, (len(vocabulary) - words) // max(1, count))
    return [" ".join(vocabulary[(i * step) % (len(vocabulary) - words) :][:words]) for i in range(count)]


def throughput(args: argparse.Namespace, model: str) -> dict[str, Any]:
    """docs/s of the single-process embedder and of Ray jobs with 1 and 2 workers, on the same documents."""
    import pyarrow as pa
    import ray
    import torch

    from fair_retrieval import FairEmbedder
    from fair_retrieval.distributed import EmbedderSpec, ShardFolder, embed_to_shards

    cores = args.cores or os.cpu_count() or 1
    texts = prose_texts(args.docs, args.words)
    torch.set_num_threads(cores)
    started = time.perf_counter()
    embedder = FairEmbedder(model, batch_size=args.batch_size, device="cpu")
    loaded = time.perf_counter()
    reference = embedder.embed_documents(texts)
    done = time.perf_counter()
    tokens = embedder.token_lengths(texts)
    result: dict[str, Any] = {
        "documents": len(texts),
        "mean_tokens": float(np.mean(tokens)),
        "cores": cores,
        "single_process": {
            "seconds": done - loaded,
            "docs_per_s": len(texts) / (done - loaded),
            "with_loading_seconds": done - started,
            "with_loading_docs_per_s": len(texts) / (done - started),
        },
    }
    print(f"single process: {result['single_process']}", flush=True)

    started = time.perf_counter()
    ray.init(num_cpus=cores + 1, include_dashboard=False, log_to_driver=False, configure_logging=False)
    result["ray_init_seconds"] = time.perf_counter() - started
    table = pa.table({"id": pa.array(range(len(texts)), pa.int64()), "text": pa.array(texts, pa.string())})
    dataset = ray.data.from_arrow([table.slice(s, 100) for s in range(0, len(texts), 100)])
    spec = EmbedderSpec(model, batch_size=args.batch_size)
    with tempfile.TemporaryDirectory() as scratch:
        for workers in (1, 2):
            folder = Path(scratch) / f"w{workers}"
            started = time.perf_counter()
            job = embed_to_shards(
                dataset,
                folder,
                spec,
                workers=workers,
                cpus_per_worker=cores / workers,
                batch_rows=args.batch_rows,
                shard_rows=args.shard_rows,
                show_progress_bar=False,
            )
            seconds = time.perf_counter() - started
            ids, vectors = [], []
            for shard_ids, shard_vectors in ShardFolder(folder):
                ids.append(shard_ids.to_numpy())
                vectors.append(shard_vectors)
            order = np.concatenate(ids)
            error = float(np.abs(np.concatenate(vectors) - reference[order]).max())
            rate = job.embedded / seconds
            result[f"ray_{workers}_worker{'s' if workers > 1 else ''}"] = {
                "seconds": seconds,
                "docs_per_s": rate,
                "threads_per_worker": max(1, round(cores / workers)),
                "max_abs_diff_vs_single_process": error,
            }
            print(f"ray {workers} worker(s): {seconds:.1f} s, {rate:.2f} docs/s, max diff {error:.1e}", flush=True)
    ray.shutdown()
    return result


def recall(args: argparse.Namespace) -> dict[str, Any]:
    """Recall@10 against exact search of IVF-PQ indices built from shards of clustered vectors, one per `--m`."""
    import faiss
    import pyarrow as pa

    from fair_retrieval.distributed import ShardFolder, build_index, plan_index
    from fair_retrieval.distributed.shards import embeddings_to_arrow
    from fair_retrieval.index._synthetic import clustered_vectors
    from fair_retrieval.index.recall import exact_neighbours, knn_recall_at_k, top1_in_k

    faiss.omp_set_num_threads(args.cores or os.cpu_count() or 1)
    data = clustered_vectors(args.vectors + args.queries, args.dim, clusters=args.clusters, seed=0)
    vectors, queries = data[: args.vectors], data[args.vectors :]
    started = time.perf_counter()
    truth = exact_neighbours(vectors, queries, 10)
    exact_ms = 1000 * (time.perf_counter() - started) / args.queries
    result: dict[str, Any] = {
        "vectors": args.vectors,
        "dim": args.dim,
        "clusters": args.clusters,
        "queries": args.queries,
        "float32_bytes": args.vectors * args.dim * 4,
        "ms_per_query_exact": exact_ms,
        "indices": [],
    }
    overrides = {key: getattr(args, key) for key in ("nlist", "nprobe") if getattr(args, key) is not None}
    with tempfile.TemporaryDirectory() as scratch:
        shards = ShardFolder(Path(scratch) / "shards")
        shards.start({"benchmark": "clustered", "dim": args.dim})
        for start in range(0, args.vectors, 50_000):
            chunk = vectors[start : start + 50_000]
            ids = pa.array(np.arange(start, start + len(chunk), dtype=np.int64))
            shards.write(pa.table({"id": ids, "embedding": embeddings_to_arrow(chunk)}))
        for m in args.m:
            chosen = {} if m == "auto" else {"m": int(m)}
            plan = plan_index(args.vectors, args.dim, "ivfpq", opq=args.opq, **overrides, **chosen)
            started = time.perf_counter()
            built = build_index(shards, plan, gpu="auto", show_progress_bar=False)
            build_seconds = time.perf_counter() - started
            index_bytes = (built.save(Path(scratch) / f"index-{m}") / "index.faiss").stat().st_size
            started = time.perf_counter()
            _, found = built.index.search(queries, 10)
            search_ms = 1000 * (time.perf_counter() - started) / args.queries
            entry = {
                "m": "auto" if m == "auto" else int(m),
                "plan": built.plan.describe(),
                "params": built.plan.params,
                "on_gpu": built.index.on_gpu,
                "build_seconds": build_seconds,
                "recall_at_10": knn_recall_at_k(found, truth, 10),
                "top1_in_10": top1_in_k(found, truth, 10),
                "index_bytes": index_bytes,
                "ms_per_query": search_ms,
            }
            result["indices"].append(entry)
            print(f"recall: {entry}", flush=True)
    return result


def driver_rss_child(count: int, words: int) -> dict[str, Any]:
    """In a fresh process: the Ray engine's reading, documents.jsonl, embedding and index build for `count`
    synthetic JSONL documents, with a tiny random BERT as the (cheap) embedder; the driver's peak RSS after each."""
    import resource

    import ray

    from fair_retrieval.distributed import EmbedderSpec, build_index, embed_to_shards
    from fair_retrieval.distributed.documents import documents_dataset, write_documents_file
    from tests.models import build_tiny_model

    def peak_mib() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        model = build_tiny_model("bert", "mean", root / "model")
        source = root / "docs.jsonl"
        vocabulary = prose_texts(200, words)
        with source.open("w", encoding="utf-8") as handle:
            for i in range(count):
                handle.write(json.dumps({"id": f"doc-{i}", "text": f"{i} {vocabulary[i % 200]}"}) + "\n")
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
        before = peak_mib()
        started = time.perf_counter()
        dataset, key = documents_dataset(source)
        rows = write_documents_file(dataset, root / "documents.jsonl")
        embed_to_shards(
            dataset.select_columns(["id", "text"]), root / "shards", EmbedderSpec(model, max_length=64),
            workers=1, shard_rows=10_000, input_key=key, show_progress_bar=False,
        )  # fmt: skip
        after_embedding = peak_mib()
        build_index(root / "shards", "flat", gpu=False, show_progress_bar=False)
        result = {
            "documents": rows,
            "jsonl_mib": round(source.stat().st_size / 2**20, 1),
            "driver_peak_rss_mib_after_ray_init": round(before, 1),
            "driver_peak_rss_mib_after_read_and_embed": round(after_embedding, 1),
            "driver_peak_rss_mib_after_flat_index_build": round(peak_mib(), 1),
            "seconds": round(time.perf_counter() - started, 1),
        }
        ray.shutdown()
    return result


def driver_rss(sizes: list[int], words: int) -> list[dict[str, Any]]:
    """Run `driver_rss_child` in a fresh interpreter per size (peak RSS is per process)."""
    import subprocess
    import sys

    results = []
    for count in sizes:
        command = [sys.executable, __file__, "--rss-child", str(count), "--words", str(words)]
        output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
        results.append(json.loads(output.strip().splitlines()[-1]))
        print(json.dumps(results[-1]), flush=True)
    return results


def many_small_adds(total: int, adds: int, dim: int = 8) -> dict[str, Any]:
    """`total` ids added to a flat FaissIndex in `adds` calls: total time, and the time of the first and last tenth
    of the calls (equal when the id checks cost O(batch), growing when they cost O(stored))."""
    from fair_retrieval import FaissIndex

    batch = total // adds
    vectors = np.random.default_rng(0).standard_normal((batch, dim)).astype(np.float32)
    index = FaissIndex(dim, gpu=False)
    times = []
    for step in range(adds):
        started = time.perf_counter()
        index.add(vectors, np.arange(step * batch, (step + 1) * batch))
        times.append(time.perf_counter() - started)
    tenth = max(1, adds // 10)
    return {
        "ids": len(index),
        "adds": adds,
        "total_s": round(sum(times), 2),
        "first_tenth_ms_per_add": round(1000 * sum(times[:tenth]) / tenth, 3),
        "last_tenth_ms_per_add": round(1000 * sum(times[-tenth:]) / tenth, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--model",
        default=None,
        help="an evaluation model's name (minilm, e5-small) or a folder or Hub id (default: minilm)",
    )
    parser.add_argument("--docs", type=int, default=400, help="documents for the throughput part (default: 400)")
    parser.add_argument("--words", type=int, default=100, help="words per document (default: 100, ~200 tokens)")
    parser.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default: 32)")
    parser.add_argument("--batch-rows", type=int, default=64, help="documents per Ray batch (default: 64)")
    parser.add_argument("--shard-rows", type=int, default=100, help="documents per shard (default: 100)")
    parser.add_argument("--cores", type=int, help="CPU cores to use (default: all)")
    parser.add_argument("--vectors", type=int, default=100_000, help="vectors for the recall part (default: 100000)")
    parser.add_argument("--queries", type=int, default=1_000)
    parser.add_argument("--dim", type=int, default=384)
    parser.add_argument("--clusters", type=int, default=200)
    parser.add_argument("--nlist", type=int)
    parser.add_argument("--nprobe", type=int)
    parser.add_argument(
        "--m",
        nargs="+",
        default=["auto", "96", "192"],
        help="PQ sub-quantizers per index built: 'auto' (the plan's GPU-compatible default) and/or numbers "
        "(default: auto 96 192)",
    )
    parser.add_argument("--opq", action="store_true")
    parser.add_argument("--skip-throughput", action="store_true")
    parser.add_argument("--skip-recall", action="store_true")
    parser.add_argument(
        "--driver-rss",
        type=lambda text: [int(part) for part in text.split(",")],
        help="instead: the Ray engine driver's peak RSS for these document counts, e.g. 10000,100000",
    )
    parser.add_argument("--rss-child", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--small-adds", action="store_true", help="instead: 1,000,000 ids added to a FaissIndex in 1,000 calls"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.rss_child:
        print(json.dumps(driver_rss_child(args.rss_child, args.words)))
        return
    if args.small_adds:
        print(json.dumps(many_small_adds(1_000_000, 1_000)))
        return
    if args.driver_rss:
        driver_rss(args.driver_rss, args.words)
        return
    logging.basicConfig(level=logging.WARNING)

    from fair_retrieval.evaluation.models import evaluation_model

    results: dict[str, Any] = {}
    if not args.skip_throughput:
        results["throughput"] = throughput(args, evaluation_model(args.model))
    if not args.skip_recall:
        results["recall"] = recall(args)
    print(json.dumps(results, indent=2))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
