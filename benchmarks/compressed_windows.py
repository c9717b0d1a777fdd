"""The compressed window study: which compact first pass, re-ranked by the exact float32 vectors on disk, keeps the
flat multi-vector store's order at no more memory than one float32 vector a chunk (docs/compressed_window_study.md
has the rule, written before the run).

Per model: the default store's windows (whole + half, cut at the text's boundaries) of every (set, stack), read from
the dense window study's cache when `--cache` holds them (`<cache>/<set>/<stack>/{whole,half,quarter}.npz`), else
embedded into `--out`; queries embedded by the stores' query path. Two settings: each set alone (the compressed
store stays in its exact Flat stage at these sizes), and a pool per stack (every set's real windows plus synthetic
documents up to `--pool-windows`), where each first pass trains and is searched at every candidate factor against
the flat `MultiVectorIndex` over the same windows.

    python benchmarks/compressed_windows.py --out runs/compressed-windows-minilm \\
        --cache ../study/runs/dense-windows-minilm/windows
    python benchmarks/compressed_windows.py --report --out runs/compressed-windows-minilm,runs/compressed-windows-e5
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import dense_windows
import hybrid
import numpy as np
import pipelines_runs

from fair_retrieval import FairEmbedder
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.evaluation.bootstrap import paired_bootstrap
from fair_retrieval.index import MultiVectorIndex

logger = logging.getLogger("compressed_windows")

FIRST_PASSES = ("SQ4", "PQ48", "LSH", "IVF,PQ48", "IVF,PQ24")
"""The compact first passes of the rule ("IVF" sized by the vectors when it trains)."""
FACTORS = (2, 4, 8, 16)
"""Candidates scored exactly per window wanted."""
SIZES = ("whole", "half")  # the default store's windows
BANDWIDTH = 0.7  # synthetic windows: a real window plus N(0, BANDWIDTH² Σ), re-normalised
RECALL, FLOOR, TIE = 0.97, -0.005, 0.10
K = 10


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--sets", default="squad-v2,reddit,needle,xquad-en,scifact", help="comma-separated sets")
    parser.add_argument("--stacks", default="llamaindex,langchain", help="comma-separated stacks")
    parser.add_argument("--squad-articles", type=int, default=6)
    parser.add_argument("--reddit-posts", type=int, default=320)
    parser.add_argument("--xquad-articles", type=int, default=12)
    parser.add_argument("--scifact-abstracts", type=int, default=800, help="corpus: judged abstracts + others")
    parser.add_argument("--cache", default=None, help="a folder of window vectors <set>/<stack>/<size>.npz to read")
    parser.add_argument("--pool-windows", type=int, default=50_000, help="real + synthetic windows of a pool")
    parser.add_argument("--pool-questions", type=int, default=300, help="questions a set asks of the pool (sampled)")
    parser.add_argument("--passes", default=";".join(FIRST_PASSES), help="first passes, separated by ';'")
    parser.add_argument("--out", default="runs/compressed-windows", help="folder of results.json")
    parser.add_argument("--threads", type=int, default=1, help="torch and faiss threads")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--report", action="store_true", help="only the tables and the rule's outcome; --out may name several folders"
    )
    args = parser.parse_args(argv)
    args.passes = [codes for codes in args.passes.split(";") if codes]
    return args


# ---------------------------------------------------------------------------------------------------- data


def set_windows(name: str, stack: str, reference: FairEmbedder, args: argparse.Namespace) -> dict[str, Any]:
    """A set as one stack sees it, with the default store's windows of its chunks (sorted by chunk)."""
    chunks, questions, qrels, _ = hybrid.set_chunks(name, stack, args.model, reference, args)
    cache = Path(args.cache) / name / stack if args.cache else None
    if cache is None or not all((cache / f"{size}.npz").exists() for size in dense_windows.SHARES):
        cache = Path(args.out) / "windows" / name / stack  # our own: a given cache is only read
    complete = all((cache / f"{size}.npz").exists() for size in dense_windows.SHARES)
    embedder = None if complete else pipelines_runs.make_embedding("llamaindex", "default", args.model).embedder
    passes = dense_windows.window_passes(embedder, [c.text for c in chunks], cache, SIZES)
    vectors, owners = dense_windows.shape_windows(passes, SIZES)
    spans, _ = dense_windows.shape_windows({s: {**p, "vectors": p["spans"]} for s, p in passes.items()}, SIZES)
    if owners.max() + 1 != len(chunks):
        raise ValueError(
            f"{cache} holds windows of {owners.max() + 1} chunks where {name}/{stack} has {len(chunks)}: it was made "
            "with other set sizes; pass the same --squad-articles, --reddit-posts, --xquad-articles and "
            "--scifact-abstracts as that study, or no --cache."
        )
    order = np.argsort(owners, kind="stable")
    queries = reference.embed_queries([q.text for q in questions])
    return {
        "cids": [c.cid for c in chunks],
        "vectors": np.ascontiguousarray(vectors[order], dtype=np.float32),
        "owners": owners[order].astype(np.int64),
        "spans": spans[order].astype(np.int64),
        "qids": [q.qid for q in questions],
        "queries": (queries / np.linalg.norm(queries, axis=1, keepdims=True)).astype(np.float32),
        "qrels": qrels,
    }


def sampled(entry: dict[str, Any], limit: int, seed: int) -> dict[str, Any]:
    """The set with at most `limit` of its questions (a seeded sample, in their order)."""
    count = len(entry["qids"])
    if count <= limit:
        return entry
    keep = np.sort(np.random.default_rng(seed).choice(count, size=limit, replace=False))
    qids = [entry["qids"][i] for i in keep]
    return {**entry, "qids": qids, "queries": entry["queries"][keep], "qrels": {q: entry["qrels"][q] for q in qids}}


def document_windows(vectors: np.ndarray, owners: np.ndarray, spans: np.ndarray) -> DocumentWindows:
    """Windows as a MultiVectorIndex takes them (owners sorted 0..n-1; pooled vectors unused here)."""
    documents = int(owners.max()) + 1
    weights = np.maximum(spans[:, 1] - spans[:, 0], 1).astype(np.int64)
    return DocumentWindows(np.zeros((documents, vectors.shape[1]), np.float32), vectors, owners, spans, weights)


def synthetic(real: list[dict[str, Any]], count: int, seed: int) -> tuple[np.ndarray, np.ndarray, dict[str, float]]:
    """`count` synthetic windows in documents shaped like real chunks (the study's rule says how): each a real
    window plus N(0, BANDWIDTH² Σ), re-normalised; with how close they sit (mean cosines)."""
    rng = np.random.default_rng(seed)
    vectors = np.concatenate([s["vectors"] for s in real]).astype(np.float64)
    offsets = np.cumsum([0] + [int(s["owners"].max()) + 1 for s in real])
    owners = np.concatenate([s["owners"] + offsets[i] for i, s in enumerate(real)])
    _, starts, sizes = np.unique(owners, return_index=True, return_counts=True)
    factor = np.linalg.cholesky(np.cov(vectors.T) + 1e-6 * np.eye(vectors.shape[1]))
    picks = rng.integers(len(starts), size=max(1, count // max(1, int(sizes.min()))) + 1)
    picks = picks[: int(np.searchsorted(np.cumsum(sizes[picks]), count)) + 1] if count else picks[:0]
    if picks.size == 0:
        return np.zeros((0, vectors.shape[1]), np.float32), np.zeros(0, np.int64), {}
    rows = np.concatenate([np.arange(starts[p], starts[p] + sizes[p]) for p in picks])  # whole documents
    made_owners = np.repeat(np.arange(picks.size), sizes[picks])
    source = vectors[rows]
    made = source + BANDWIDTH * rng.standard_normal(source.shape) @ factor.T
    made /= np.linalg.norm(made, axis=1, keepdims=True)
    to_source = np.einsum("ij,ij->i", made, source)
    probe = rng.choice(len(vectors), size=min(500, len(vectors)), replace=False)
    similarity = vectors[probe] @ vectors.T
    similarity[owners[probe][:, None] == owners[None, :]] = -np.inf
    closeness = {
        "draw_to_its_source": float(to_source.mean()),
        "real_to_nearest_window_of_another_chunk": float(similarity.max(axis=1).mean()),
    }
    return made.astype(np.float32), made_owners, closeness


# ---------------------------------------------------------------------------------------------------- runs


def searched(index: MultiVectorIndex, queries: np.ndarray) -> tuple[list[list[int]], list[float]]:
    """Each query's top-k document ids and the seconds of each search."""
    found, seconds = [], []
    for query in queries:
        started = time.perf_counter()
        hits = index.search_documents(query, K)
        seconds.append(time.perf_counter() - started)
        found.append([hit.id for hit in hits])
    return found, seconds


def scored(found: list[list[int]], names: list[str], entry: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """nDCG@10 (hybrid.scored) of document ids named by `names`; in a pool every chunk is named `<set/stack>:<id>`
    (`prefix`), so no chunk of another set shares a judged name."""
    rankings = {q: [names[i] for i in ids] for q, ids in zip(entry["qids"], found, strict=True)}
    qrels = {q: {prefix + d: r for d, r in rels.items()} for q, rels in entry["qrels"].items()}
    return hybrid.scored(rankings, qrels)


def latency(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"p50_ms": float(np.percentile(ms, 50)), "p95_ms": float(np.percentile(ms, 95))}


def overlap(found: list[list[int]], reference: list[list[int]]) -> float:
    """Document recall@10 against the reference: the share of its top 10 found, averaged over queries."""
    return float(np.mean([len(set(a) & set(b)) / max(1, len(b)) for a, b in zip(found, reference, strict=True)]))


def compared(
    found: list[list[int]], seconds: list[float], flat: dict[str, Any], names: list[str], entry: dict, prefix: str = ""
) -> dict[str, Any]:
    """A candidate's run against the flat one: recall vs flat, nDCG@10 and its paired difference, latency."""
    result = scored(found, names, entry, prefix)
    low, high = paired_bootstrap(flat["per_query"], result["per_query"], {})["ndcg_delta_ci"]
    return {
        "recall_vs_flat": overlap(found, flat["found"]),
        "ndcg@10": result["ndcg@10"],
        "delta": result["ndcg@10"] - flat["ndcg@10"],
        "delta_ci": [low, high],
        **latency(seconds),
    }


def memory(index: MultiVectorIndex) -> dict[str, float]:
    """Bytes a window of the windows index in memory and on disk (float file + index.faiss)."""
    windows = index.windows
    count = max(1, index.window_count)
    faiss = windows._faiss if hasattr(windows, "_faiss") else windows.compact._faiss
    if hasattr(windows, "memory_bytes"):
        in_memory = windows.memory_bytes
        disk = windows.rows.row_bytes * len(windows.rows) + faiss.serialize_index(windows.compact._index).size
    else:
        in_memory = disk = faiss.serialize_index(windows._index).size
    return {"memory_bytes_per_window": in_memory / count, "disk_bytes_per_window": disk / count}


def dev_set(key: str, entry: dict[str, Any]) -> dict[str, Any]:
    """Flat vs the compressed default over the set's windows alone."""
    names = entry["cids"]
    windows = document_windows(entry["vectors"], entry["owners"], entry["spans"])
    out: dict[str, Any] = {"windows": len(windows.owners), "chunks": len(names), "questions": len(entry["qids"])}
    out["windows_per_chunk"] = out["windows"] / out["chunks"]
    flat = MultiVectorIndex(windows.dim, kind="flat")
    flat.add(windows)
    found, seconds = searched(flat, entry["queries"])
    out["flat"] = {**scored(found, names, entry), "found": found, **latency(seconds), **memory(flat)}
    compressed = MultiVectorIndex(windows.dim, compressed=True)
    compressed.add(windows)
    found, seconds = searched(compressed, entry["queries"])
    out["compressed"] = {**compared(found, seconds, out["flat"], names, entry), **memory(compressed)}
    out["compressed"]["stage"] = compressed.windows.factory
    logger.info("%s alone: recall %.3f, Δ %+.4f", key, out["compressed"]["recall_vs_flat"], out["compressed"]["delta"])
    return out


def pool_run(stack: str, sets: dict[str, dict[str, Any]], args: argparse.Namespace, results: dict[str, Any]) -> None:
    """Every set's windows of one stack plus synthetic documents; flat and each candidate over them, kept in
    `results["pool"][stack]` and saved after each first pass (a resumed run skips the passes done: the pool is
    drawn with the same seed)."""
    real = list(sets.values())
    pieces, owners, names, first = [], [], [], 0
    for key, entry in sets.items():
        pieces.append(entry["vectors"])
        owners.append(entry["owners"] + first)
        names += [f"{key}:{c}" for c in entry["cids"]]
        first += len(entry["cids"])
    real_count = sum(len(p) for p in pieces)
    made, made_owners, closeness = synthetic(real, max(0, args.pool_windows - real_count), args.seed)
    pieces.append(made)
    owners.append(made_owners + first)
    names += [f"synthetic:{i}" for i in range(int(made_owners.max(initial=-1)) + 1)]
    vectors = np.concatenate(pieces)
    all_owners = np.concatenate(owners)
    spans = np.zeros((len(all_owners), 2), dtype=np.int64)
    spans[:, 1] = 1
    windows = document_windows(vectors, all_owners, spans)
    previous = results["pool"].get(stack) or {}
    out: dict[str, Any] = {
        "windows": len(all_owners),
        "real_windows": real_count,
        "documents": len(names),
        "closeness": closeness,
        "flat": previous.get("flat", {}) if previous.get("windows") == len(all_owners) else {},
        "candidates": previous.get("candidates", {}) if previous.get("windows") == len(all_owners) else {},
    }
    results["pool"][stack] = out
    evaluated = {
        key: sampled(entry, args.pool_questions, args.seed) for key, entry in sets.items() if key.endswith(f"/{stack}")
    }
    out["questions"] = {key: len(entry["qids"]) for key, entry in evaluated.items()}
    flat = MultiVectorIndex(windows.dim, kind="flat")
    flat.add(windows)
    out["flat_memory"] = memory(flat)
    for key, entry in evaluated.items():
        if key in out["flat"]:
            continue
        found, seconds = searched(flat, entry["queries"])
        out["flat"][key] = {**scored(found, names, entry, f"{key}:"), "found": found, **latency(seconds)}
    del flat
    save(results, args)
    for codes in args.passes:
        if all(f"{codes}@{factor}" in out["candidates"] for factor in FACTORS):
            continue
        started = time.perf_counter()
        index = MultiVectorIndex(windows.dim, compressed=codes)
        index.add(windows)
        build = time.perf_counter() - started
        cost = memory(index)
        for factor in FACTORS:
            index.windows.candidate_factor = factor
            name = f"{codes}@{factor}"
            runs = {}
            for key, entry in evaluated.items():
                found, seconds = searched(index, entry["queries"])
                runs[key] = compared(found, seconds, out["flat"][key], names, entry, f"{key}:")
            out["candidates"][name] = {"build_s": build, "factory": index.windows.factory, **cost, "sets": runs}
            worst = min(r["recall_vs_flat"] for r in runs.values())
            logger.info(
                "pool %s %s: worst recall %.3f, %.0f B/window", stack, name, worst, cost["memory_bytes_per_window"]
            )
        save(results, args)


def save(results: dict[str, Any], args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json.partial").write_text(json.dumps(results))
    (out / "results.json.partial").replace(out / "results.json")


# ---------------------------------------------------------------------------------------------------- report


def verdicts(models: dict[str, dict[str, Any]], dim: int = 384) -> dict[str, Any]:
    """The rule of docs/compressed_window_study.md applied to every candidate over every model's results."""
    budget = 4 * dim
    names = sorted({c for r in models.values() for p in r["pool"].values() for c in p["candidates"]})
    report: dict[str, Any] = {"candidates": {}, "dev_failures": []}
    for model, results in models.items():
        for key, dev in results["dev"].items():
            if dev["compressed"]["recall_vs_flat"] < 1.0 or dev["compressed"]["delta"] != 0.0:
                report["dev_failures"].append(f"{model} {key}")
    for name in names:
        failures, worst_bytes = [], 0.0
        for model, results in models.items():
            for stack, pool in results["pool"].items():
                candidate = pool["candidates"].get(name)
                if candidate is None:
                    failures.append(f"{model} {stack}: not run")
                    continue
                for key, run in candidate["sets"].items():
                    per_chunk = candidate["memory_bytes_per_window"] * results["dev"][key]["windows_per_chunk"]
                    worst_bytes = max(worst_bytes, per_chunk)
                    if run["recall_vs_flat"] < RECALL:
                        failures.append(f"{model} {key}: recall {run['recall_vs_flat']:.3f}")
                    if run["delta_ci"][0] < FLOOR:
                        failures.append(f"{model} {key}: Δ lower bound {run['delta_ci'][0]:+.4f}")
                    if per_chunk > budget:
                        failures.append(f"{model} {key}: {per_chunk:.0f} B a chunk")
        report["candidates"][name] = {"failures": failures, "worst_bytes_per_chunk": worst_bytes}
    passing = [n for n, v in report["candidates"].items() if not v["failures"]]
    if report["dev_failures"]:
        passing = []
    per_window = {
        n: max(p["candidates"][n]["memory_bytes_per_window"] for r in models.values() for p in r["pool"].values())
        for n in passing
    }
    chosen = None
    if passing:
        least = min(per_window.values())
        tied = [n for n in passing if per_window[n] <= least * (1 + TIE)]
        chosen = min(tied, key=lambda n: (int(n.rsplit("@", 1)[1]), p95_of(models, n)))
    report["adopted"] = chosen
    return report


def p95_of(models: dict[str, dict[str, Any]], name: str) -> float:
    values = [
        run["p95_ms"]
        for r in models.values()
        for p in r["pool"].values()
        for run in p["candidates"].get(name, {"sets": {}})["sets"].values()
    ]
    return float(np.mean(values)) if values else float("inf")


def markdown(models: dict[str, dict[str, Any]], report: dict[str, Any]) -> str:
    lines = ["## Dev sets alone (the compressed store's Flat stage)", ""]
    lines.append(
        "| model | set | windows | windows/chunk | flat nDCG@10 | recall vs flat | Δ | flat p50/p95 ms | "
        "compressed p50/p95 ms |"
    )
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for model, results in models.items():
        for key, dev in results["dev"].items():
            c, f = dev["compressed"], dev["flat"]
            lines.append(
                f"| {model} | {key} ({dev['questions']} q) | {dev['windows']} | {dev['windows_per_chunk']:.1f} | "
                f"{f['ndcg@10']:.3f} | {c['recall_vs_flat']:.3f} | {c['delta']:+.4f} | {f['p50_ms']:.2f} / "
                f"{f['p95_ms']:.2f} | {c['p50_ms']:.2f} / {c['p95_ms']:.2f} |"
            )
    lines += ["", "## Pool: worst case over the sets, per candidate", ""]
    lines.append(
        "| candidate | bytes/window in memory | worst bytes/chunk | worst recall vs flat | worst Δ lower bound | "
        "mean p95 ms | verdict |"
    )
    lines.append("|---|---|---|---|---|---|---|")
    for name, verdict in report["candidates"].items():
        runs = [
            run
            for r in models.values()
            for p in r["pool"].values()
            for run in p["candidates"].get(name, {"sets": {}})["sets"].values()
        ]
        per_window = max(
            p["candidates"][name]["memory_bytes_per_window"]
            for r in models.values()
            for p in r["pool"].values()
            if name in p["candidates"]
        )
        fails = verdict["failures"]
        lines.append(
            f"| `{name}` | {per_window:.0f} | {verdict['worst_bytes_per_chunk']:.0f} | "
            f"{min(r['recall_vs_flat'] for r in runs):.3f} | {min(r['delta_ci'][0] for r in runs):+.4f} | "
            f"{p95_of(models, name):.2f} | {'passes' if not fails else f'fails ({len(fails)})'} |"
        )
    flat_runs = [run for r in models.values() for p in r["pool"].values() for run in p["flat"].values()]
    flat_bytes = max(p["flat_memory"]["memory_bytes_per_window"] for r in models.values() for p in r["pool"].values())
    lines.append(
        f"| flat float32 (the reference) | {flat_bytes:.0f} | — | 1.000 | — | "
        f"{float(np.mean([r['p95_ms'] for r in flat_runs])):.2f} | — |"
    )
    shown = report["adopted"] or min(report["candidates"], key=lambda n: len(report["candidates"][n]["failures"]))
    lines += ["", f"Adopted: {report['adopted'] or 'none'}", "", *set_table(models, shown), ""]
    return "\n".join(lines)


def set_table(models: dict[str, dict[str, Any]], name: str) -> list[str]:
    """Per (model, set) in the pool: one candidate against the flat store."""
    lines = [
        f"### `{name}` per set (pool)",
        "",
        "| model | set | questions | flat nDCG@10 | nDCG@10 | Δ [95 % CI] | recall vs flat | bytes/chunk | "
        "flat p50/p95 ms | p50/p95 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for model, results in models.items():
        for pool in results["pool"].values():
            candidate = pool["candidates"].get(name)
            if candidate is None:
                continue
            for key, run in candidate["sets"].items():
                flat = pool["flat"][key]
                per_chunk = candidate["memory_bytes_per_window"] * results["dev"][key]["windows_per_chunk"]
                low, high = run["delta_ci"]
                lines.append(
                    f"| {model} | {key} | {pool['questions'][key]} | {flat['ndcg@10']:.3f} | {run['ndcg@10']:.3f} | "
                    f"{run['delta']:+.4f} [{low:+.4f}, {high:+.4f}] | {run['recall_vs_flat']:.3f} | {per_chunk:.0f} | "
                    f"{flat['p50_ms']:.1f} / {flat['p95_ms']:.1f} | {run['p50_ms']:.1f} / {run['p95_ms']:.1f} |"
                )
    return lines


def write_report(folders: list[Path]) -> int:
    models = {}
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        models[hybrid.model_name(results["meta"]["model"])] = results
    report = verdicts(models)
    text = markdown(models, report)
    (folders[0] / "report.md").write_text(text)
    (folders[0] / "report.json").write_text(json.dumps(report, indent=1))
    sys.stdout.write(text)
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.report:
        return write_report([Path(folder) for folder in args.out.split(",")])
    results, reference = hybrid.prepared(args)
    results["dev"] = {}
    results.setdefault("pool", {})
    sets = {}
    for name, stack in hybrid.study_runs(args):
        key = f"{name}/{stack}"
        sets[key] = set_windows(name, stack, reference, args)
        results["dev"][key] = dev_set(key, sets[key])
    save(results, args)
    for stack in args.stacks.split(","):
        members = {k: v for k, v in sets.items() if k.endswith(f"/{stack}") or k.startswith("scifact/")}
        pool_run(stack, members, args, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
