"""The Qdrant store's collection default against exact search on the study's real sets: nDCG@10 of each set's
questions when its windows sit in Qdrant's engine with the default's graph and codes (HNSW m 32 / ef_construct 256,
int8 codes in RAM re-scoring 2 × k candidates with the float windows on disk, searched with `hnsw_ef` 1,024: what
`fair_retrieval.stores.qdrant_collection` gives a new collection), beside the exact best-window ranking of the same
windows.

The windows are a dense window study's cache (`benchmarks/dense_windows.py`; each (set, LangChain) chunk's whole and
half windows, what the default store keeps); the questions and judgements are the study's (`hybrid.set_chunks`, the
same set sizes). The engine is Qdrant Edge (`pip install qdrant-edge-py`: the server's segment, HNSW and
quantization code, in process, one shard). A server scans a collection this small exactly (below its
`full_scan_threshold`); here the graph is built and used at every size, so what is measured is the approximation a
large collection has. A query asks for the top `store_scale.QDRANT_WINDOWS` windows and keeps the first 10 distinct
chunks (what the store's grouped query returns).

    python benchmarks/qdrant_hnsw_sets.py --windows-cache runs/dense-windows-minilm/windows
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import dense_windows
import hybrid
import numpy as np
import store_scale

DEFAULT = {
    "quantization": "int8",
    "on_disk": True,
    "m": 32,
    "ef_construct": 256,
    "full_scan_threshold": 1,  # KB: the graph searched at every size
    "indexing_threshold": 1,
}
"""The collection default, as `store_scale.qdrant_config` options."""
HNSW_EF = 1024


def set_windows(cache: Path) -> tuple[np.ndarray, np.ndarray]:
    """One (set, stack)'s whole and half windows: vectors (W, d) and their chunk numbers (W,)."""
    passes = [np.load(cache / f"{size}.npz") for size in store_scale.SIZES]
    vectors = np.concatenate([p["vectors"] for p in passes]).astype(np.float32)
    owners = np.concatenate([p["owners"] for p in passes]).astype(np.int64)
    return vectors, owners


def exact_top(queries: np.ndarray, vectors: np.ndarray, owners: np.ndarray, chunks: int) -> np.ndarray:
    """Each query's top-10 chunks by its best window's inner product."""
    best = np.full((len(queries), chunks), -np.inf, dtype=np.float32)
    np.maximum.at(best.T, owners, (queries @ vectors.T).T)  # (chunks, Q) per window's chunk
    return np.argsort(-best, axis=1, kind="stable")[:, : hybrid.K]


def qdrant_top(queries: np.ndarray, vectors: np.ndarray, owners: np.ndarray, folder: str) -> tuple[np.ndarray, int]:
    """Each query's top-10 chunks from a Qdrant Edge shard of the windows, built with the default; and how many
    window points its graph indexed."""
    import qdrant_edge as q

    shard = q.EdgeShard.create(folder, store_scale.qdrant_config(DEFAULT, vectors.shape[1]))
    for start in range(0, len(vectors), 1_000):
        rows = vectors[start : start + 1_000].tolist()
        points = [
            q.Point(id=start + i, vector={"window": row}, payload={"fr_doc": int(owners[start + i])})
            for i, row in enumerate(rows)
        ]
        shard.update(q.UpdateOperation.upsert_points(points))
    shard.optimize()
    indexed = shard.info().indexed_vectors_count
    rescoring = q.QuantizationSearchParams(rescore=True, oversampling=store_scale.QDRANT_OVERSAMPLING["int8"])
    params = q.SearchParams(hnsw_ef=HNSW_EF, quantization=rescoring)
    found = np.full((len(queries), hybrid.K), -1, dtype=np.int64)
    for row, query in enumerate(queries):
        request = q.QueryRequest(
            limit=store_scale.QDRANT_WINDOWS,
            query=q.Query.Nearest(query.tolist(), using="window"),
            params=params,
            with_payload=True,
        )
        chunks = list(dict.fromkeys(int(p.payload["fr_doc"]) for p in shard.query(request)))[: hybrid.K]
        found[row, : len(chunks)] = chunks
    shard.close()
    return found, indexed


def run_set(name: str, args: argparse.Namespace, reference: Any) -> dict[str, Any]:
    chunks, questions, qrels, _ = hybrid.set_chunks(name, "langchain", args.model, reference, args)
    vectors, owners = set_windows(Path(args.windows_cache) / name / "langchain")
    if int(owners.max()) + 1 != len(chunks):
        raise SystemExit(f"{name}: the cache holds windows of {int(owners.max()) + 1} chunks, the set {len(chunks)}")
    queries = np.asarray(reference.embed_queries([question.text for question in questions]), dtype=np.float32)
    exact = exact_top(queries, vectors, owners, len(chunks))
    with tempfile.TemporaryDirectory() as folder:
        approximate, indexed = qdrant_top(queries, vectors, owners, folder)
    ids = np.array([chunk.cid for chunk in chunks])
    runs = {
        label: {question.qid: ids[row[row >= 0]].tolist() for question, row in zip(questions, top, strict=True)}
        for label, top in (("exact", exact), ("qdrant", approximate))
    }
    scores = {label: hybrid.scored(ranking, qrels)["ndcg@10"] for label, ranking in runs.items()}
    same = int(sum(a == b for a, b in zip(runs["exact"].values(), runs["qdrant"].values(), strict=True)))
    return {
        "chunks": len(chunks),
        "windows": len(vectors),
        "indexed": indexed,
        "questions": len(questions),
        "exact_ndcg@10": scores["exact"],
        "qdrant_ndcg@10": scores["qdrant"],
        "same_top10": same,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--windows-cache", required=True, help="a dense window study's windows/ folder")
    parser.add_argument("--out", type=Path, default=Path("runs/qdrant-hnsw-sets"))
    own, rest = parser.parse_known_args(argv)
    args = dense_windows.parse_args(rest)  # the study's set sizes and model, as the cache was made
    args.windows_cache, args.out = own.windows_cache, own.out
    results, reference = hybrid.prepared(args)
    sets = [name for name in args.sets.split(",") if (Path(args.windows_cache) / name / "langchain").is_dir()]
    for name in sets:
        results[name] = run_set(name, args, reference)
        print(name, json.dumps(results[name]), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(results, indent=2, default=str))
    print("| set | chunks | windows (indexed) | questions | nDCG@10 exact → Qdrant default | same top 10 |")
    print("|---|---|---|---|---|---|")
    for name in sets:
        row = results[name]
        print(
            f"| {name} | {row['chunks']} | {row['windows']} ({row['indexed']}) | {row['questions']} | "
            f"{row['exact_ndcg@10']:.4f} → {row['qdrant_ndcg@10']:.4f} | {row['same_top10']} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
