"""Where to cut windows, and which store the stacks should get by default: the window study.

    python benchmarks/window_boundaries.py --model FOLDER --out runs/wb-minilm [--squad-articles 8 --reddit-posts 480]
    python benchmarks/window_boundaries.py --report --out runs/wb-minilm,runs/wb-e5   # tables and the rule's verdict

Whole documents (SQuAD-v2 dev articles, SQuADShifts reddit pages, the needle documents; benchmarks/pipelines_data.py)
go through each stack's default splitter (LlamaIndex `SentenceSplitter()`, LangChain
`RecursiveCharacterTextSplitter()`), the same chunks for every run. Runs, all through the stores as users build them
(`benchmarks/pipelines_runs.store_run`: LangChain `FaissVectorStore.from_texts`, LlamaIndex `VectorStoreIndex` over
`FairFaissVectorStore.create`, saved, then the stack's retriever with k = 10):

- small-to-big: the stack's own recipe (`ParentDocumentRetriever` / `IndexNode` + `RecursiveRetriever`), children of
  one window, embedded by `HuggingFaceEmbedding(s)` (`pipelines_runs.small_to_big_run`);
- <policy>/pooled and <policy>/<aggregate> for every window policy in POLICIES and aggregate in AGGREGATES: the store
  pooled (`multivector=False`) and multi-vector (`multivector=True, aggregate=...`), over one pass per policy (the
  windows of a text are remembered, `pipelines_runs.SharedWindows`);
- multi-scale/<aggregate>: every chunk keeps its windows of both sizes ("text" and "text-half") in one multi-vector
  store, scored by its best window of either size (the embedder hands the store both sets of windows).

Reported per run: nDCG@10 with 95 % paired-bootstrap intervals of the change vs token-pooled (today's default store)
and vs small-to-big, PSI over the chunk thirds, vectors per chunk, index bytes, build seconds, query p50 / p95 ms.
SciFact (`--scifact`): pooled and multi-vector nDCG@10 per policy (abstracts that fit one window are the same under
every policy, so only the longer ones are embedded again).

The rule (written before the run; docs/window_study.md) is applied by `window_rule.verdict`.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np
from pipelines import bundled_model, load_documents
from pipelines_data import DATA, Question, judgements, score, split
from pipelines_runs import SharedWindows, make_embedding, retrieve, small_to_big_run, store_run
from window_rule import AGGREGATES, ANCHOR, SHIPPED, SMALL_TO_BIG, STACKS, report

from fair_retrieval import FairEmbedder
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.stores.store_mode import default_windows

logger = logging.getLogger("window_boundaries")

POLICIES: dict[str, dict[str, Any]] = {
    "tokens": {},  # today's default: equal token windows, an eighth of a window of overlap
    "text": {"window_boundaries": "text"},  # whole paragraphs / sentences, an eighth of a window of whole units
    "text-half": {"window_boundaries": "text", "half": True},  # the same at half the model's window
    "text-stride": {"window_boundaries": "text", "overlap": 0.5},  # sentence stride: half a window of whole units
}
MULTI_SCALE = ("text", "text-half")


def policy_embedder(model: str, name: str) -> FairEmbedder:
    """The FairEmbedder of a window policy (POLICIES), the model's own window unless the policy halves it."""
    options = dict(POLICIES[name])
    probe = FairEmbedder(model, calibration=None)
    if options.pop("half", False):
        options["max_length"] = probe.max_length - probe.window_content_tokens // 2
    share = options.pop("overlap", None)
    if share is not None:
        options["window_overlap"] = int(probe.window_content_tokens * share)
    return FairEmbedder(model, **options)


class MultiScale:
    """Hands a store the windows of two embedders at once (the pooled vector of the first): multi-scale chunks."""

    def __init__(self, first: SharedWindows, second: SharedWindows) -> None:
        self.first, self.second = first, second
        embed = first.embedder.embed_document_windows

        def both(texts: Any, *args: Any, **kwargs: Any) -> DocumentWindows:
            return self.merged(
                embed(texts, *args, **kwargs), second.embedder.embed_document_windows(texts, *args, **kwargs)
            )

        first.embedder.embed_document_windows = both  # type: ignore[method-assign]
        self._restore = embed

    @staticmethod
    def merged(a: DocumentWindows, b: DocumentWindows) -> DocumentWindows:
        """The windows of both, each document's together (`a`'s first), with `a`'s pooled vectors."""
        order = np.argsort(np.concatenate([a.owners, b.owners]), kind="stable")
        stack = [np.concatenate([x, y])[order] for x, y in ((a.vectors, b.vectors), (a.owners, b.owners))]
        spans = np.concatenate([a.spans, b.spans])[order]
        weights = np.concatenate([a.weights, b.weights])[order]
        return DocumentWindows(a.pooled, stack[0], stack[1], spans, weights)

    def close(self) -> None:
        self.first.embedder.embed_document_windows = self._restore  # type: ignore[method-assign]


def run_pair(
    dataset: str, stack: str, model: str, args: argparse.Namespace, results: dict[str, Any], save: Any
) -> None:
    """Every run of one (dataset, stack) that `results` does not hold yet."""
    reference = FairEmbedder(model)
    documents, questions = load_documents(dataset, reference, args.reddit_posts, args.squad_articles)
    chunks = split(stack, documents, None, None)
    judged = judgements(questions, chunks, documents)
    kept: list[Question] = [q for q in questions if q.qid in judged["qrels"]]
    queries = reference.embed_queries([q.text for q in kept])
    table = {q.text: v for q, v in zip(kept, queries, strict=True)}
    entry = results.setdefault(f"{dataset}/{stack}", {"runs": {}})
    thirds = {str(t): [q for q, k in judged["chunk_third"].items() if k == t] for t in range(3)}
    entry.update(chunks=len(chunks), documents=len(documents), questions=len(kept), groups=thirds)
    runs = entry["runs"]

    def record(name: str, rankings: list[list[str]], costs: dict[str, Any], vectors: float | None) -> None:
        run = score(dict(zip([q.qid for q in kept], rankings, strict=True)), judged)
        run.update(costs, vectors_per_chunk=vectors)
        runs[name] = run
        logger.info("%s/%s %s: nDCG@10 %.4f PSI %.3f", dataset, stack, name, run["ndcg@10"], run["psi"])
        save()

    if SMALL_TO_BIG not in runs:
        rankings, costs = small_to_big_run(stack, model, chunks, kept, queries, reference)
        record(SMALL_TO_BIG, rankings, costs, costs["children"] / len(chunks))
    if args.shipped or args.only_shipped:
        run_shipped(stack, model, chunks, kept, queries, runs, record)
    if args.only_shipped:
        return
    shared: dict[str, SharedWindows] = {}
    for policy in POLICIES:
        names = [f"{policy}/pooled", *(f"{policy}/{a}" for a in AGGREGATES)]
        if all(n in runs for n in names) and not (policy in MULTI_SCALE and _multi_missing(runs)):
            continue
        windows = SharedWindows(policy_embedder(model, policy), table)
        windows.remember = True
        shared[policy] = windows
        plan = windows.embedder.plan_documents([c.text for c in chunks])
        vectors = len(plan.pieces) / len(chunks)
        for name, aggregate in zip(names, (None, *AGGREGATES), strict=True):
            if name not in runs:
                rankings, costs = store_run(stack, windows.embedding(stack), chunks, kept, queries, aggregate)
                record(name, rankings, costs, vectors if aggregate else 1.0)
    if _multi_missing(runs):
        first, second = (shared.get(p) or _remembered(model, p, table) for p in MULTI_SCALE)
        both = MultiScale(first, second)
        count = sum(len(s.embedder.plan_documents([c.text for c in chunks]).pieces) for s in (first, second))
        try:
            for aggregate in AGGREGATES:
                name = f"multi-scale/{aggregate}"
                if name not in runs:
                    rankings, costs = store_run(stack, first.embedding(stack), chunks, kept, queries, aggregate)
                    record(name, rankings, costs, count / len(chunks))
        finally:
            both.close()


def run_shipped(
    stack: str,
    model: str,
    chunks: list[Any],
    kept: list[Question],
    queries: np.ndarray,
    runs: dict[str, Any],
    record: Any,
) -> None:
    """The stores at their defaults over the adapters at theirs (LangChain `FaissVectorStore.from_texts(texts,
    FairEmbeddings(model=M))`, LlamaIndex `FairFaissVectorStore.create(dim, embed_model=FairEmbedding(M))`): the
    code path users run."""
    if ANCHOR not in runs:  # what users pick instead: HuggingFaceEmbedding(s) through the stack's default store
        rankings, seconds = retrieve(stack, make_embedding(stack, ANCHOR, model), chunks, queries)
        record(ANCHOR, rankings, {"build_s": seconds}, 1.0)
    if SHIPPED in runs:
        return
    embedding = make_embedding(stack, "default", model)
    rankings, costs = store_run(stack, embedding, chunks, kept, queries, None, store_default=True)
    probe = FairEmbedder(model)
    shape = default_windows(probe)
    texts = [c.text for c in chunks]
    pieces = (
        sum(len(probe.plan_documents(texts, n, shape.boundaries).pieces) for n in shape.tokens)
        if shape.tokens
        else len(probe.plan_documents(texts).pieces)
    )
    record(SHIPPED, rankings, costs, pieces / len(chunks))


def _multi_missing(runs: dict[str, Any]) -> bool:
    return any(f"multi-scale/{a}" not in runs for a in AGGREGATES)


def _remembered(model: str, policy: str, table: dict[str, np.ndarray]) -> SharedWindows:
    windows = SharedWindows(policy_embedder(model, policy), table)
    windows.remember = True
    return windows


def run_scifact(model: str, results: dict[str, Any], save: Any) -> None:
    """SciFact pooled and multi-vector nDCG@10 per policy; only abstracts longer than a window are embedded again."""
    from fair_retrieval.evaluation.data.beir import load_scifact

    task = load_scifact(DATA / "scifact")
    ids = list(task.corpus)
    texts = [task.corpus[i] for i in ids]
    entry = results.setdefault("scifact", {"runs": {}, "abstracts": len(texts)})
    queries = FairEmbedder(model).embed_queries(list(task.queries.values()))
    base: DocumentWindows | None = None
    kept: dict[str, DocumentWindows] = {}
    for policy in (*POLICIES, "multi-scale"):
        names = [f"{policy}/pooled", *(f"{policy}/{a}" for a in AGGREGATES)]
        if policy == "multi-scale":
            names = names[1:]
        if all(n in entry["runs"] for n in names):
            continue
        if policy == "multi-scale":  # the windows of both sizes of each abstract, the pooled vector of the first
            first, second = (kept.get(p) or _policy_windows(model, p, texts) for p in MULTI_SCALE)
            _score_scifact(task, ids, queries, MultiScale.merged(first, second), names, entry, with_pooled=False)
            save()
            continue
        embedder = policy_embedder(model, policy)
        if base is None:
            base = embedder.embed_document_windows(texts, show_progress_bar=True) if policy == "tokens" else None
            base = base or policy_embedder(model, "tokens").embed_document_windows(texts, show_progress_bar=True)
        windows = base
        if policy != "tokens":
            windows = _policy_windows(model, policy, texts, base, entry)
        kept[policy] = windows
        _score_scifact(task, ids, queries, windows, names, entry, with_pooled=True)
        save()


def _policy_windows(
    model: str, policy: str, texts: list[str], base: DocumentWindows | None = None, entry: dict[str, Any] | None = None
) -> DocumentWindows:
    """SciFact's windows under `policy`: `base` (the token policy's) with the abstracts longer than a window of the
    policy embedded again (the others are one window under every policy)."""
    embedder = policy_embedder(model, policy)
    if base is None:
        base = policy_embedder(model, "tokens").embed_document_windows(texts, show_progress_bar=True)
    overhead = embedder.token_lengths([""])[0]
    lengths = embedder.token_lengths(texts)
    long_ones = [i for i, n in enumerate(lengths) if n - overhead > embedder.window_content_tokens]
    if entry is not None:
        entry.setdefault("long", {})[policy] = len(long_ones)
    return _spliced(base, long_ones, embedder.embed_document_windows([texts[i] for i in long_ones]))


def _score_scifact(
    task: Any,
    ids: list[str],
    queries: np.ndarray,
    windows: DocumentWindows,
    names: list[str],
    entry: dict[str, Any],
    with_pooled: bool,
) -> None:
    """SciFact nDCG@10 of `windows` pooled (if `with_pooled`, the first name) and per aggregate (the others)."""
    from fair_retrieval import MultiVectorIndex
    from fair_retrieval.evaluation.metrics import per_query_metrics

    scored = {}
    if with_pooled:
        scored[names[0]] = np.argsort(-(queries @ windows.pooled.T), axis=1)[:, :10]
    for aggregate, name in zip(AGGREGATES, names[1:] if with_pooled else names, strict=True):
        index = MultiVectorIndex(windows.dim, aggregate=aggregate)
        index.add(windows)
        scored[name] = index.search(queries, 10)[1]
    for name, top in scored.items():
        rankings = {q: [ids[j] for j in row if j >= 0] for q, row in zip(task.queries, top, strict=True)}
        per_query = per_query_metrics(rankings, task.qrels, ndcg_k=(10,), recall_k=(10,))
        ndcg = {q: m["ndcg@10"] for q, m in per_query.items()}
        entry["runs"][name] = {"ndcg@10": float(np.mean(list(ndcg.values()))), "per_query": ndcg}
        logger.info("scifact %s: nDCG@10 %.4f", name, entry["runs"][name]["ndcg@10"])


def _spliced(base: DocumentWindows, replaced: list[int], fresh: DocumentWindows) -> DocumentWindows:
    """`base` with the windows of documents `replaced` (in order) taken from `fresh`."""
    parts, where = [], {d: j for j, d in enumerate(replaced)}
    for d in range(len(base)):
        source, row = (fresh, where[d]) if d in where else (base, d)
        rows = source.of(row)
        parts.append((source.vectors[rows], source.spans[rows], source.weights[rows], source.pooled[row]))
    counts = [p[0].shape[0] for p in parts]
    return DocumentWindows(
        np.stack([p[3] for p in parts]),
        np.concatenate([p[0] for p in parts]),
        np.repeat(np.arange(len(parts), dtype=np.int64), counts),
        np.concatenate([p[1] for p in parts]),
        np.concatenate([p[2] for p in parts]),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--out", default="runs/window-boundaries", help="results folder (comma-separated for --report)")
    parser.add_argument("--datasets", default="squad-v2,reddit,needle")
    parser.add_argument("--stacks", default=",".join(STACKS))
    parser.add_argument("--squad-articles", type=int, default=None, help="the first N SQuAD-v2 articles only")
    parser.add_argument("--reddit-posts", type=int, default=1000, help="the first N reddit posts")
    parser.add_argument("--scifact", action="store_true", help="also SciFact (pooled and multi-vector per policy)")
    parser.add_argument("--shipped", action="store_true", help="also the stores at their defaults (what ships)")
    parser.add_argument("--only-shipped", action="store_true", help="only small-to-big and the shipped default")
    parser.add_argument("--threads", type=int, default=None, help="torch and faiss threads")
    parser.add_argument("--report", action="store_true", help="only print the tables and the rule's verdict")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("fair_retrieval").setLevel(logging.ERROR)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if args.report:
        print(report(args.out.split(",")))
        return 0
    if args.threads:
        import faiss
        import torch

        torch.set_num_threads(args.threads)
        faiss.omp_set_num_threads(args.threads)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}

    def save() -> None:
        path.write_text(json.dumps(results))

    model = args.model or bundled_model()
    for dataset in [d for d in args.datasets.split(",") if d]:
        for stack in [s for s in args.stacks.split(",") if s]:
            run_pair(dataset, stack, model, args, results, save)
    if args.scifact:
        run_scifact(model, results, save)
    return 0


if __name__ == "__main__":
    sys.exit(main())
