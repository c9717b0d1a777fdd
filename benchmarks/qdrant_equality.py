"""The Qdrant stores against the FAISS stores on the same chunks: the same top 10 for dense, sparse and hybrid
queries, the same nDCG@10, and what a query costs.

Per (set, stack): the stack's default splitter makes the chunks (SciFact, CACM: abstracts unsplit, LangChain), our
default FAISS store is built through the stack's adapter as a user builds it (flat windows: exact), and the stack's
Qdrant store (`FairQdrantVectorStore`, local mode: exact) is filled with the same documents: by `--fill add` through
the store's own add (the model embeds again) or, the default, `copy` (`copy_from`: the FAISS store's windows written
by the same `QdrantStore` write, no second model pass). Every question is asked of both stores through the stack's
own entry point in each mode (its top 20); two top 10s are the same when they list the same chunks in the same
order, up to exact ties (chunks of equal scores, to 1e-5, in either order, also across the 10th place).

    python benchmarks/qdrant_equality.py --model MODEL --sets squad-v2,reddit,xquad-en,scifact --out runs/qdrant-minilm
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from pathlib import Path
from typing import Any

import hybrid
import numpy as np

logger = logging.getLogger("qdrant_equality")

MODES = ("dense", "sparse", "hybrid")
TIE = 1e-5


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--sets", default="squad-v2,reddit,xquad-en,scifact")
    parser.add_argument("--stacks", default="llamaindex,langchain")
    parser.add_argument("--fill", choices=("copy", "add"), default="copy")
    parser.add_argument("--out", default="runs/qdrant-equality")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--report", action="store_true", help="only print the table of the folders in --out")
    args = parser.parse_args(argv)
    study = hybrid.parse_args(["--model", args.model] if args.model else [])  # the hybrid study's set sizes
    for name in ("squad_articles", "reddit_posts", "xquad_articles", "scifact_abstracts"):
        setattr(args, name, getattr(study, name))
    return args


def qdrant_store(stack: str, faiss: Any, chunks: list[Any], fill: str) -> tuple[Any, float]:
    """The stack's Qdrant store of the same documents as `faiss` (local mode, exact), and its fill seconds."""
    from qdrant_client import QdrantClient

    started = time.perf_counter()
    if stack == "langchain":
        from langchain_fair import FairQdrantVectorStore

        store = FairQdrantVectorStore(QdrantClient(":memory:"), "chunks", faiss.embeddings, metric=faiss.metric)
        if fill == "copy":
            store.copy_from(faiss)
        else:
            store.add_texts([c.text for c in chunks], ids=[c.cid for c in chunks])
        return store, time.perf_counter() - started
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.fair import FairQdrantVectorStore as LlamaQdrant

    embed_model = faiss._store.embedder
    store = LlamaQdrant(QdrantClient(":memory:"), "chunks", embed_model=embed_model, metric=faiss.metric)
    if fill == "copy":
        store._store.copy_from(faiss._store)
    else:
        nodes = [TextNode(id_=c.cid, text=c.text) for c in chunks]
        context = StorageContext.from_defaults(vector_store=store)
        VectorStoreIndex(nodes, storage_context=context, embed_model=embed_model)
    return store, time.perf_counter() - started


def same_up_to_ties(a: list[tuple[str, float]], b: list[tuple[str, float]], k: int) -> bool:
    """Whether two rankings (each at least k deep where they can be) give the same top k up to exact ties: at every
    rank the same score (to `TIE`), and the same id or two ids of that score in both rankings (chunks whose best
    windows are the same text, e.g. the overlap of consecutive chunks, tie exactly and come in either order, also
    across the k-th place)."""
    top_a, top_b = a[:k], b[:k]
    if len(top_a) != len(top_b):
        return False

    def tied(ranking: list[tuple[str, float]], score: float) -> set[str]:
        return {i for i, s in ranking if abs(s - score) <= TIE * max(1.0, abs(score))}

    for (ia, sa), (ib, sb) in zip(top_a, top_b, strict=True):
        if abs(sa - sb) > TIE * max(1.0, abs(sa)):
            return False
        if ia != ib and not ({ia, ib} <= tied(a, sa) and {ia, ib} <= tied(b, sa)):
            return False
    return True


def run_set(name: str, stack: str, args: argparse.Namespace, reference: Any, results: dict[str, Any]) -> None:
    chunks, questions, qrels, _ = hybrid.set_chunks(name, stack, args.model, reference, args)
    queries = reference.embed_queries([q.text for q in questions])
    faiss, build = hybrid.default_store(stack, args.model, chunks, kind="flat")
    qdrant, fill = qdrant_store(stack, faiss, chunks, args.fill)
    entry: dict[str, Any] = {"chunks": len(chunks), "questions": len(questions), "faiss_build_s": build}
    entry["qdrant_fill_s"], entry["fill"] = fill, args.fill
    for mode in MODES:
        same, rankings, seconds = 0, {"faiss": {}, "qdrant": {}}, {"faiss": [], "qdrant": []}
        for question, vector in zip(questions, queries, strict=True):
            found = {}
            for label, store in (("faiss", faiss), ("qdrant", qdrant)):
                started = time.perf_counter()
                found[label] = hybrid.store_query(stack, store, vector, hybrid.DEPTH, question.text, mode)
                seconds[label].append(time.perf_counter() - started)
                rankings[label][question.qid] = [i for i, _ in found[label][: hybrid.K]]
            same += same_up_to_ties(found["faiss"], found["qdrant"], hybrid.K)
        entry[mode] = {
            "same_top10": same,
            **{f"{label}_ndcg@10": hybrid.scored(rankings[label], qrels)["ndcg@10"] for label in rankings},
            **{f"{label}_ms_p50": float(np.percentile(np.asarray(s) * 1000, 50)) for label, s in seconds.items()},
            **{f"{label}_ms_p95": float(np.percentile(np.asarray(s) * 1000, 95)) for label, s in seconds.items()},
        }
        logger.info("%s/%s %s: %d of %d top 10s the same", name, stack, mode, same, len(questions))
    results[f"{name}/{stack}"] = entry


def table(folders: list[Path]) -> str:
    lines = [
        "| model | set/stack | chunks | questions | same top 10 (dense / sparse / hybrid) | nDCG@10 FAISS → Qdrant "
        "(dense / sparse / hybrid) | dense p50 ms FAISS / Qdrant |",
        "|---|---|---|---|---|---|---|",
    ]
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        model = results.get("meta", {}).get("model", "?")
        for key, e in results.items():
            if key == "meta":
                continue
            same = " / ".join(f"{e[m]['same_top10']}" for m in MODES)
            ndcg = " / ".join(f"{e[m]['faiss_ndcg@10']:.4f} → {e[m]['qdrant_ndcg@10']:.4f}" for m in MODES)
            ms = f"{e['dense']['faiss_ms_p50']:.2f} / {e['dense']['qdrant_ms_p50']:.2f}"
            lines.append(f"| {model} | {key} | {e['chunks']} | {e['questions']} | {same} | {ndcg} | {ms} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.report:
        sys.stdout.write(table([Path(folder) for folder in args.out.split(",")]))
        return 0
    results, reference = hybrid.prepared(args)
    for name, stack in hybrid.study_runs(args):
        if f"{name}/{stack}" in results:
            continue
        run_set(name, stack, args, reference, results)
        hybrid.save(results, args)
    sys.stdout.write(table([Path(args.out)]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
