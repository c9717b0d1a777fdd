"""The default store's index at scale: build time, peak RAM, bytes per chunk on disk and in memory, query latency and
recall@10 against exact search, for the window index of the default store beside the pooled store and small-to-big's
vector count, at up to millions of chunks on one machine.

The corpus: the real chunks of the dense window study (every (set, stack) of one model's window cache: the default
store's whole and half text windows of SQuAD-v2, reddit, needle, XQuAD-en and SciFact chunks, a span kept once),
then synthetic chunks drawn to match them (`ChunkModel`): a chunk's centre is drawn from a Gaussian fitted to the real
chunks' centres (their mean and the 64 leading principal directions with their variances, the rest as one isotropic
variance), a real chunk is picked at random for its number of windows and its windows' offsets from its own
centre, and those offsets are added to the drawn centre (window vectors then unit length). The pooled vector of a
chunk is its windows' normalised mean; small-to-big's vectors are drawn the same way with `--s2b-vectors` windows a
chunk. Queries: real SQuAD-v2 dev questions embedded by the model (the answers of some sit in the real chunks).
Batches are drawn from fixed seeds, so every configuration and the exact search see the same corpus.

Every configuration is built, saved, loaded and queried in fresh processes (peak RSS per process). Recall@10 is
document recall: the share of the exact top-10 chunks (the best window's inner product over all windows, or over the
pooled / small-to-big vectors for those) that the index returns.

The `qdrant-*` configurations hold the same windows in Qdrant's engine, run in process by Qdrant Edge
(`pip install qdrant-edge-py`: the server's segment, HNSW and quantization code, one shard), laid out as the Qdrant
store lays out a collection: one point per window, the chunk's key in its payload. HNSW is Qdrant's default
(m = 16, ef_construct = 100), built by the engine's optimizer after the upserts; quantization, where named, keeps
int8 or binary codes in RAM and re-scores `QDRANT_OVERSAMPLING` candidates per result with the float vectors (held in
RAM, or on disk with "-disk"). A query asks for the top `QDRANT_WINDOWS` windows and keeps the first K distinct
chunks: what the store's grouped query (`query_points_groups`, which Edge does not have) returns. Each is queried
with the engine's default beam and with `hnsw_ef` 256.

    python benchmarks/store_scale.py --windows-cache runs/dense-windows-minilm/windows --chunks 100000
    python benchmarks/store_scale.py --windows-cache ... --chunks 1000000 --configs pooled,small-to-big,windows-ivfpq
"""

from __future__ import annotations

import argparse
import itertools
import json
import logging
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
logger = logging.getLogger("store_scale")

DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
SIZES = ("whole", "half")  # the default store's windows (`--sizes` measures another shape's)
COMPONENTS = 64
BATCH = 20_000  # chunks per add
K = 10
CONFIGS: dict[str, dict[str, Any]] = {
    "pooled": {"vectors": "pooled", "index": "faiss", "options": {"kind": "flat"}},
    "small-to-big": {"vectors": "small-to-big", "index": "faiss", "options": {"kind": "flat"}},
    "windows-flat": {"vectors": "windows", "index": "multivector", "options": {"kind": "flat"}},
    "windows-ivfpq": {"vectors": "windows", "index": "multivector", "options": {"kind": "ivfpq"}},
    "windows-compressed": {"vectors": "windows", "index": "multivector", "options": {"compressed": True}},
    "qdrant-hnsw": {"vectors": "windows", "index": "qdrant", "options": {}},
    "qdrant-hnsw-int8": {"vectors": "windows", "index": "qdrant", "options": {"quantization": "int8"}},
    "qdrant-hnsw-int8-disk": {
        "vectors": "windows",
        "index": "qdrant",
        "options": {"quantization": "int8", "on_disk": True},
    },
    "qdrant-hnsw-binary": {"vectors": "windows", "index": "qdrant", "options": {"quantization": "binary"}},
    # a second round, after the first's frontier: a denser graph, wider beams, and the engine's exact scan
    "qdrant-hnsw32-int8-disk": {
        "vectors": "windows",
        "index": "qdrant",
        "options": {"quantization": "int8", "on_disk": True, "m": 32, "ef_construct": 256, "ef": (256, 1024)},
    },
    "qdrant-exact-int8-disk": {
        "vectors": "windows",
        "index": "qdrant",
        "options": {"quantization": "int8", "on_disk": True, "ef": ("exact",), "graph": False},
    },
}
"""What each configuration keeps and how its index is made (`FaissIndex` / `MultiVectorIndex` keywords; for
"qdrant" the collection settings `qdrant_config` makes)."""
QDRANT_OVERSAMPLING = {"int8": 2.0, "binary": 3.0}
"""Candidates re-scored with the float vectors, per result wanted: Qdrant's documented starting points."""
QDRANT_WINDOWS = 100
"""Windows a Qdrant query asks for, whose first K distinct chunks are its answer (what a grouped query returns)."""
QDRANT_WARM_UP = 20
"""Queries run, untimed, before each beam width's timed queries."""
QDRANT_EF = (None, 256)
"""HNSW beam widths a Qdrant configuration is queried with unless its options name others ("ef"; None: the
engine's default; "exact": the engine's full scan, `SearchParams(exact=True)`)."""


# ---------------------------------------------------------------------------------------------------- the corpus


def real_chunks(cache: Path, sizes: tuple[str, ...] = SIZES) -> list[np.ndarray]:
    """Every cached (set, stack)'s chunks as their window vectors (the windows of `sizes`, by default the default
    store's whole and half windows, a span kept once); the (set, stack)s cached with every size."""
    chunks: list[np.ndarray] = []
    cached = (path for path in cache.glob("*/*") if all((path / f"{size}.npz").exists() for size in sizes))
    for folder in sorted(cached):
        passes = [np.load(folder / f"{size}.npz") for size in sizes]
        vectors = np.concatenate([p["vectors"] for p in passes]).astype(np.float32)
        owners = np.concatenate([p["owners"] for p in passes])
        spans = np.concatenate([p["spans"] for p in passes])
        _, first = np.unique(np.column_stack([owners, spans]), axis=0, return_index=True)
        keep = np.sort(first)
        vectors, owners = vectors[keep], owners[keep]
        order = np.argsort(owners, kind="stable")
        vectors, owners = vectors[order], owners[order]
        bounds = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1], True])
        chunks.extend(vectors[a:b] for a, b in itertools.pairwise(bounds))
    if not chunks:
        raise SystemExit(
            f"{cache} holds no window cache of {sizes} (<set>/<stack>/<size>.npz); run benchmarks/dense_windows.py."
        )
    return distinct(chunks)


def distinct(chunks: list[np.ndarray]) -> list[np.ndarray]:
    """The chunks without the windows an earlier chunk already has (rounded to 1e-4), and without the chunks left
    empty: the two stacks' chunks of one document, and SQuAD-v2 and XQuAD-en, share paragraphs, and exact ties
    between chunks would make the recall of an exact index depend on the order of equal scores."""
    seen: set[bytes] = set()
    kept = []
    for chunk in chunks:
        keys = [np.round(row, 4).tobytes() for row in chunk]
        new = [i for i, key in enumerate(keys) if key not in seen]
        seen.update(keys)
        if new:
            kept.append(chunk[new])
    return kept


def unit(vectors: np.ndarray) -> np.ndarray:
    return (vectors / np.maximum(np.linalg.norm(vectors, axis=-1, keepdims=True), 1e-12)).astype(np.float32)


@dataclass
class ChunkModel:
    """Synthetic chunks drawn to match real ones (see the module docstring)."""

    mean: np.ndarray  # (d,)
    directions: np.ndarray  # (c, d), principal directions of the real centres
    scales: np.ndarray  # (c,), their standard deviations
    rest: float  # the isotropic standard deviation of what the directions leave
    offsets: np.ndarray  # (windows of every real chunk, d): each window minus its chunk's centre
    starts: np.ndarray  # (real chunks + 1,): where each real chunk's windows start in `offsets`

    @classmethod
    def fit(cls, chunks: list[np.ndarray]) -> ChunkModel:
        centres = unit(np.stack([c.mean(axis=0) for c in chunks]))
        mean = centres.mean(axis=0)
        _, singular, directions = np.linalg.svd(centres - mean, full_matrices=False)
        variances = singular**2 / max(1, len(chunks) - 1)
        components = min(COMPONENTS, len(variances))
        rest = float(np.sqrt(variances[components:].sum() / centres.shape[1])) if len(variances) > components else 0.0
        offsets = np.concatenate([c - centre for c, centre in zip(chunks, centres, strict=True)])
        starts = np.r_[0, np.cumsum([len(c) for c in chunks])]
        return cls(mean, directions[:components], np.sqrt(variances[:components]), rest, offsets, starts)

    def draw(self, count: int, seed: int, sizes: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """`count` chunks: their window vectors (W, d) and owners (W,); `sizes` fixes each chunk's window count
        (windows drawn from the picked real chunk's offsets, with replacement)."""
        rng = np.random.default_rng(seed)
        dim = self.mean.shape[0]
        centres = self.mean + (rng.standard_normal((count, len(self.scales))) * self.scales) @ self.directions
        centres = unit(centres + self.rest * rng.standard_normal((count, dim)))
        picked = rng.integers(0, len(self.starts) - 1, size=count)
        lengths = self.starts[picked + 1] - self.starts[picked]
        counts = lengths if sizes is None else np.asarray(sizes, dtype=np.int64)
        owners = np.repeat(np.arange(count, dtype=np.int64), counts)
        if sizes is None:  # every window of the picked chunk, in order
            within = np.arange(owners.size) - np.repeat(np.cumsum(counts) - counts, counts)
        else:
            within = (rng.random(owners.size) * lengths[owners]).astype(np.int64)
        rows = self.starts[picked][owners] + within
        return unit(centres[owners] + self.offsets[rows]), owners


def corpus(
    real: list[np.ndarray], model: ChunkModel, total: int, what: str, s2b: float, batch: int = BATCH
) -> Iterator[tuple[int, np.ndarray, np.ndarray]]:
    """The corpus in batches: (first chunk id, vectors, owners within the batch). `what`: "windows", "pooled" (a
    chunk's windows' normalised mean) or "small-to-big" (`s2b` vectors a chunk on average)."""
    for first in range(0, total, batch):
        count = min(batch, total - first)
        if what == "small-to-big":  # every chunk drawn (vector counts are what this configuration measures)
            low = int(np.floor(s2b))
            sizes = low + (np.random.default_rng(first).random(count) < s2b - low)
            yield first, *model.draw(count, seed=first + 1, sizes=sizes)
            continue
        take_real = real[first : first + count]
        drawn = count - len(take_real)
        parts = list(take_real)
        owners = [np.full(len(c), i, dtype=np.int64) for i, c in enumerate(take_real)]
        if drawn:
            vectors, drawn_owners = model.draw(drawn, seed=first + 1)
            parts.append(vectors)
            owners.append(drawn_owners + len(take_real))
        vectors, owner = np.concatenate(parts).astype(np.float32), np.concatenate(owners)
        if what == "pooled":
            sums = np.zeros((count, vectors.shape[1]), dtype=np.float64)
            np.add.at(sums, owner, vectors)
            yield first, unit(sums), np.arange(count, dtype=np.int64)
        else:
            yield first, vectors, owner


def questions(model: str, count: int) -> np.ndarray:
    """`count` SQuAD-v2 dev questions embedded as queries."""
    from fair_retrieval import FairEmbedder

    data = json.loads((DATA / "squad-v2-dev" / "dev-v2.0.json").read_text())
    texts = [qa["question"] for article in data["data"] for p in article["paragraphs"] for qa in p["qas"]]
    rng = np.random.default_rng(0)
    chosen = [texts[i] for i in rng.choice(len(texts), size=min(count, len(texts)), replace=False)]
    return np.asarray(FairEmbedder(model).embed_queries(chosen), dtype=np.float32)


def exact_top(
    queries: np.ndarray, real: list[np.ndarray], model: ChunkModel, total: int, what: str, s2b: float
) -> np.ndarray:
    """Each query's exact top-K chunk ids: a chunk scored by its best vector."""
    best_scores = np.full((len(queries), K), -np.inf, dtype=np.float32)
    best_ids = np.full((len(queries), K), -1, dtype=np.int64)
    for first, vectors, owners in corpus(real, model, total, what, s2b):
        scores = queries @ vectors.T  # (Q, W)
        chunks = int(owners.max()) + 1
        per_chunk = np.full((len(queries), chunks), -np.inf, dtype=np.float32)
        starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
        per_chunk[:, owners[starts]] = np.maximum.reduceat(scores, starts, axis=1)
        merged_scores = np.concatenate([best_scores, per_chunk], axis=1)
        merged_ids = np.concatenate([best_ids, np.broadcast_to(np.arange(chunks) + first, per_chunk.shape)], axis=1)
        top = np.argsort(-merged_scores, axis=1, kind="stable")[:, :K]
        best_scores = np.take_along_axis(merged_scores, top, axis=1)
        best_ids = np.take_along_axis(merged_ids, top, axis=1)
    return best_ids


# ---------------------------------------------------------------------------------------------------- children


def peak_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def rss_mib() -> float:
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def new_index(config: dict[str, Any], dim: int) -> Any:
    from fair_retrieval import FaissIndex, MultiVectorIndex

    if config["index"] == "faiss":
        return FaissIndex(dim, gpu=False, **config["options"])
    return MultiVectorIndex(dim, gpu=False, **config["options"])


def qdrant_config(options: dict[str, Any], dim: int) -> Any:
    """A Qdrant Edge shard's settings: one dense vector per window point, Qdrant's default HNSW (and the server's
    default thresholds, in KB) unless `options` name others, the named quantization kept in RAM."""
    import qdrant_edge as q

    quantization = {
        None: None,
        "int8": q.ScalarQuantizationConfig(type=q.ScalarType.Int8, quantile=0.99, always_ram=True),
        "binary": q.BinaryQuantizationConfig(always_ram=True),
    }[options.get("quantization")]
    vectors = q.EdgeVectorParams(size=dim, distance=q.Distance.Dot, on_disk=options.get("on_disk", False))
    return q.EdgeConfig(
        vectors={"window": vectors},
        hnsw_config=q.HnswIndexConfig(
            m=options.get("m", 16),
            ef_construct=options.get("ef_construct", 100),
            full_scan_threshold=options.get("full_scan_threshold", 10_000),
        ),
        quantization_config=quantization,
        optimizers=q.EdgeOptimizersConfig(indexing_threshold=options.get("indexing_threshold", 10_000)),
    )


def qdrant_build(args: argparse.Namespace, config: dict[str, Any], real: list[np.ndarray], model: ChunkModel) -> dict:
    """Upsert every window as a point of a new shard, then let the engine build its segments' HNSW graphs."""
    import qdrant_edge as q

    shard = q.EdgeShard.create(str(Path(args.folder) / "index"), qdrant_config(config["options"], real[0].shape[1]))
    upserting = 0.0
    point = 0
    for first, vectors, owners in corpus(real, model, args.chunks, "windows", args.s2b_vectors):
        started = time.perf_counter()
        for start in range(0, len(vectors), 1_000):  # Python lists of 1,000 rows at a time (bounded memory)
            points = [
                q.Point(id=point + i, vector={"window": row}, payload={"fr_doc": int(first + owners[start + i])})
                for i, row in enumerate(vectors[start : start + 1_000].tolist())
            ]
            shard.update(q.UpdateOperation.upsert_points(points))
            point += len(points)
        upserting += time.perf_counter() - started
        logger.info("%s: %d / %d chunks", args.config, first + BATCH, args.chunks)
    started = time.perf_counter()
    if config["options"].get("graph", True):  # an exact scan needs no graph (a server would build one anyway)
        shard.optimize()
    indexing = time.perf_counter() - started
    info = shard.info()
    started = time.perf_counter()
    shard.flush()
    shard.close()
    return {
        "build_s": upserting + indexing,
        "upsert_s": upserting,
        "index_s": indexing,
        "save_s": time.perf_counter() - started,
        "vectors": point,
        "segments": info.segments_count,
        "indexed_vectors": info.indexed_vectors_count,
        "build_peak_mib": peak_mib(),
    }


def qdrant_query(args: argparse.Namespace, config: dict[str, Any]) -> dict:
    """Open the saved shard, then time K-chunk queries one at a time with each beam width of `QDRANT_EF`, saving each
    width's answers (`found-<width>.npy`; the default beam's are also `found.npy`)."""
    import qdrant_edge as q

    queries = np.load(Path(args.folder) / "queries.npy")
    base = rss_mib()
    started = time.perf_counter()
    shard = q.EdgeShard.load(str(Path(args.folder) / "index"))
    loading = time.perf_counter() - started
    loaded = rss_mib() - base
    quantized = config["options"].get("quantization")
    latency: dict[str, dict[str, float]] = {}
    short = 0
    for ef in config["options"].get("ef", QDRANT_EF):
        quantization = (
            q.QuantizationSearchParams(rescore=True, oversampling=QDRANT_OVERSAMPLING[quantized]) if quantized else None
        )
        params = (
            q.SearchParams(exact=True, quantization=quantization)
            if ef == "exact"
            else q.SearchParams(hnsw_ef=ef, quantization=quantization)
        )
        found = np.full((len(queries), K), -1, dtype=np.int64)
        seconds = []
        for row, query in enumerate([*queries[:QDRANT_WARM_UP], *queries]):  # the first queries warm the caches
            request = q.QueryRequest(
                limit=QDRANT_WINDOWS,
                query=q.Query.Nearest(query.tolist(), using="window"),
                params=params,
                with_payload=True,
            )
            started = time.perf_counter()
            points = shard.query(request)
            chunks = list(dict.fromkeys(int(p.payload["fr_doc"]) for p in points))[:K]
            if row < QDRANT_WARM_UP:
                continue
            seconds.append(time.perf_counter() - started)
            found[row - QDRANT_WARM_UP, : len(chunks)] = chunks
            short += len(chunks) < K
        label = "default" if ef is None else "exact" if ef == "exact" else f"ef{ef}"
        latency[label] = {
            "p50_ms": float(np.percentile(seconds, 50) * 1e3),
            "p95_ms": float(np.percentile(seconds, 95) * 1e3),
        }
        np.save(Path(args.folder) / f"found-{label}.npy", found)
    first = next(iter(latency))  # the configuration's first query setting is its scored one
    np.save(Path(args.folder) / "found.npy", np.load(Path(args.folder) / f"found-{first}.npy"))
    after = rss_mib() - base
    shard.close()
    return {"load_s": loading, "loaded_mib": loaded, "after_queries_mib": after, "latency": latency, "short": short}


def child_build(args: argparse.Namespace, config: dict[str, Any], real: list[np.ndarray], model: ChunkModel) -> dict:
    """Build the configuration's index over the corpus, save it; the time of the adds and saves only."""
    from fair_retrieval.embedding.windows import DocumentWindows

    if config["index"] == "qdrant":
        return qdrant_build(args, config, real, model)
    index = new_index(config, real[0].shape[1])
    adding = vectors_added = 0.0
    for first, vectors, owners in corpus(real, model, args.chunks, config["vectors"], args.s2b_vectors):
        started = time.perf_counter()
        if config["index"] == "faiss" and config["vectors"] == "pooled":
            index.add(vectors, ids=np.arange(first, first + len(vectors), dtype=np.int64))
        elif config["index"] == "faiss":  # small-to-big: child vectors, each mapped to its chunk afterwards
            start = int(vectors_added)
            index.add(vectors, ids=np.arange(start, start + len(vectors), dtype=np.int64))
            np.save(Path(args.folder) / f"owners-{first}.npy", owners + first)
        else:
            count = int(owners.max()) + 1
            sums = np.zeros((count, vectors.shape[1]), dtype=np.float64)
            np.add.at(sums, owners, vectors)
            spans = np.zeros((len(owners), 2), dtype=np.int64)
            windows = DocumentWindows(unit(sums), vectors, owners, spans, np.ones(len(owners), dtype=np.int64))
            index.add(windows, ids=np.arange(first, first + count, dtype=np.int64))
        adding += time.perf_counter() - started
        vectors_added += len(vectors)
        logger.info("%s: %d / %d chunks", args.config, first + BATCH, args.chunks)
    started = time.perf_counter()
    index.save(Path(args.folder) / "index")
    saving = time.perf_counter() - started
    return {"build_s": adding, "save_s": saving, "vectors": int(vectors_added), "build_peak_mib": peak_mib()}


def child_query(args: argparse.Namespace, config: dict[str, Any]) -> dict:
    """Load the saved index, then time K-queries one at a time with one thread and with all."""
    import faiss

    from fair_retrieval import FaissIndex, MultiVectorIndex

    if config["index"] == "qdrant":
        return qdrant_query(args, config)
    queries = np.load(Path(args.folder) / "queries.npy")
    base = rss_mib()
    started = time.perf_counter()
    folder = Path(args.folder) / "index"
    loader = FaissIndex if config["index"] == "faiss" else MultiVectorIndex
    index = loader.load(folder, gpu=False)
    loading = time.perf_counter() - started
    loaded = rss_mib() - base
    owners = None
    if config["vectors"] == "small-to-big":
        parts = sorted(Path(args.folder).glob("owners-*.npy"), key=lambda p: int(p.stem.split("-")[1]))
        owners = np.concatenate([np.load(p) for p in parts])
    found = np.full((len(queries), K), -1, dtype=np.int64)
    latency: dict[str, dict[str, float]] = {}
    for threads in (1, os.cpu_count() or 1):
        faiss.omp_set_num_threads(threads)
        seconds = []
        for row, query in enumerate(queries):
            started = time.perf_counter()
            if owners is None:
                _, ids = index.search(query[None, :], K)
                found[row] = ids[0]
            else:  # a child's chunk, k distinct chunks from the top children (as the stacks' retrievers do)
                _, ids = index.search(query[None, :], K * 8)
                chunks = list(dict.fromkeys(owners[ids[0][ids[0] >= 0]].tolist()))[:K]
                found[row, : len(chunks)] = chunks
            seconds.append(time.perf_counter() - started)
        latency[str(threads)] = {
            "p50_ms": float(np.percentile(seconds, 50) * 1e3),
            "p95_ms": float(np.percentile(seconds, 95) * 1e3),
        }
    np.save(Path(args.folder) / "found.npy", found)
    return {"load_s": loading, "loaded_mib": loaded, "after_queries_mib": rss_mib() - base, "latency": latency}


def run_child(stage: str, name: str, folder: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One stage of one configuration in a fresh process; its JSON result."""
    out = folder / f"{stage}.json"
    command = [
        sys.executable,
        __file__,
        "--child",
        stage,
        "--config",
        name,
        "--folder",
        str(folder),
        "--windows-cache",
        str(args.windows_cache),
        "--chunks",
        str(args.chunks),
        "--s2b-vectors",
        str(args.s2b_vectors),
        "--sizes",
        args.sizes,
    ]
    subprocess.run(command, check=True)
    return json.loads(out.read_text())


def per_query_recall(found: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """Each query's recall@10: the share of its exact top-K chunks found."""
    return np.array([len(set(f) & set(t)) / K for f, t in zip(found, truth, strict=True)])


def recall_against(report: dict[str, Any], name: str, setting: str, reference: str) -> str:
    """A configuration's recall@10 (mean over queries) and, beside a reference configuration in the same run, the
    95 % paired-bootstrap interval of the difference."""
    from fair_retrieval.evaluation.bootstrap import paired_bootstrap

    row = report["configs"][name]
    values = row["recall_at_10" if setting.isdigit() else f"recall_at_10_{setting}"]
    text = f"{np.mean(values):.3f}"
    if reference in report["configs"] and name != reference:
        base = report["configs"][reference]["recall_at_10"]
        ids = [str(i) for i in range(len(values))]
        low, high = paired_bootstrap(dict(zip(ids, base, strict=True)), dict(zip(ids, values, strict=True)), {})[
            "ndcg_delta_ci"
        ]
        text += f" ({np.mean(values) - np.mean(base):+.3f} [{low:+.3f}, {high:+.3f}])"
    return text


def folder_bytes(folder: Path) -> int:
    """The disk a folder takes: its files' allocated blocks (a preallocated, sparse file such as Qdrant's
    write-ahead log counts what it holds, not its length)."""
    return sum(path.stat().st_blocks * 512 for path in folder.rglob("*") if path.is_file())


# ---------------------------------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows-cache", type=Path, required=True, help="a dense window study's windows/ folder")
    parser.add_argument("--model", default=None, help="the model of that cache (default: the bundled MiniLM)")
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--configs", default=",".join(CONFIGS), help=f"comma-separated, of {sorted(CONFIGS)}")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--s2b-vectors", type=float, default=4.5, help="small-to-big's vectors a chunk")
    parser.add_argument(
        "--sizes",
        default=",".join(SIZES),
        help="the cached window sizes a chunk keeps (comma-separated; default: the default store's)",
    )
    parser.add_argument("--out", type=Path, default=Path("runs/store-scale"))
    parser.add_argument("--work", type=Path, default=None, help="where the indices are built (default: a temp dir)")
    parser.add_argument("--child", choices=("build", "query"), help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    args = parse_args(argv)
    sizes = tuple(args.sizes.split(","))
    real = real_chunks(args.windows_cache, sizes)
    model = ChunkModel.fit(real)
    if args.child:
        config = CONFIGS[args.config]
        result = child_build(args, config, real, model) if args.child == "build" else child_query(args, config)
        (Path(args.folder) / f"{args.child}.json").write_text(json.dumps(result))
        return 0
    names = args.configs.split(",")
    unknown = sorted(set(names) - set(CONFIGS))
    if unknown:
        raise SystemExit(f"unknown configuration(s) {unknown}; choose from {sorted(CONFIGS)}")
    from fair_retrieval.embedding.loading import DEFAULT_MODEL

    queries = questions(args.model or DEFAULT_MODEL, args.queries)
    windows_per_chunk = float(np.mean([len(c) for c in real]))
    report: dict[str, Any] = {
        "chunks": args.chunks,
        "real_chunks": len(real),
        "real_windows_per_chunk": windows_per_chunk,
        "sizes": list(sizes),
        "queries": len(queries),
        "cores": os.cpu_count(),
        "configs": {},
    }
    args.out.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(dir=args.work))
    truths: dict[str, np.ndarray] = {}
    try:
        for name in names:
            config = CONFIGS[name]
            folder = work / name
            folder.mkdir()
            np.save(folder / "queries.npy", queries)
            built = run_child("build", name, folder, args)
            disk = folder_bytes(folder / "index")
            wal = sum(folder_bytes(path) for path in (folder / "index").rglob("wal") if path.is_dir())
            queried = run_child("query", name, folder, args)
            what = config["vectors"]
            if what not in truths:
                started = time.perf_counter()
                truths[what] = exact_top(queries, real, model, args.chunks, what, args.s2b_vectors)
                logger.info("exact top-%d over %s in %.0f s", K, what, time.perf_counter() - started)
            found = {"": np.load(folder / "found.npy")}
            found.update({f"_{path.stem[6:]}": np.load(path) for path in folder.glob("found-*.npy")})  # Qdrant's beams
            for suffix, rows in found.items():
                queried[f"recall_at_10{suffix}"] = per_query_recall(rows, truths[what]).tolist()
            report["configs"][name] = {
                **built,
                **queried,
                "disk_bytes_per_chunk": disk / args.chunks,
                "wal_bytes": wal,  # Qdrant's write-ahead log (preallocated segments), in the disk figure
                "memory_bytes_per_chunk": queried["loaded_mib"] * 2**20 / args.chunks,
                "vectors_per_chunk": built["vectors"] / args.chunks,
            }
            logger.info("%s: %s", name, {k: v for k, v in report["configs"][name].items() if "recall" not in k})
            shutil.rmtree(folder)
            shape = "" if sizes == SIZES else "-" + "+".join(sizes)
            (args.out / f"store-scale-{args.chunks}{shape}.json").write_text(json.dumps(report, indent=2))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(markdown(report))
    return 0


def markdown(report: dict[str, Any]) -> str:
    """The report as a table: a row per configuration and query setting (FAISS: one thread or all; Qdrant: the
    engine's default beam or `hnsw_ef` 256, the engine's own search threads)."""
    lines = [
        f"{report['chunks']:,} chunks ({report['real_chunks']:,} real, {report['real_windows_per_chunk']:.1f} windows "
        f"a real chunk), {report['queries']} queries, {report['cores']} cores",
        "",
        "| configuration | query | vectors/chunk | build s | peak RAM MiB | disk B/chunk | memory B/chunk "
        "| p50 / p95 ms | recall@10 (− FAISS default [95 %]) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, row in report["configs"].items():
        for setting, latency in row["latency"].items():
            if setting.isdigit():
                query = f"{setting} thread{'s' if setting != '1' else ''}"
            else:
                query = {"default": "default beam", "exact": "exact scan"}.get(setting, f"hnsw_ef {setting[2:]}")
            recall = recall_against(report, name, setting, "windows-compressed")
            lines.append(
                f"| {name} | {query} | {row['vectors_per_chunk']:.1f} | {row['build_s']:.0f} | "
                f"{row['build_peak_mib']:.0f} | {row['disk_bytes_per_chunk']:.0f} | "
                f"{row['memory_bytes_per_chunk']:.0f} | {latency['p50_ms']:.2f} / {latency['p95_ms']:.2f} | "
                f"{recall} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
