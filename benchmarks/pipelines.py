"""The pipelines users run: whole documents → a stack's splitter → a vector store → top-10, per embedder.

    python benchmarks/pipelines.py                       # squad-v2, reddit and needle; every pipeline; SciFact
    python benchmarks/pipelines.py --datasets needle     # no evaluation data needed
    python benchmarks/pipelines.py --report              # tables and plot from the saved results only

Documents: the 16 SQuAD-v2 dev articles whole (paragraphs joined by blank lines), the first 1,000 SQuADShifts reddit
posts as pages of eight consecutive posts (a forum page; posts of a page are unrelated), and the needle documents
(facts hidden in Python's docs, 2,048 tokens each). Each goes through
- llamaindex: `SentenceSplitter()` with its defaults → `VectorStoreIndex` (its default in-memory store) → retriever;
- langchain: `RecursiveCharacterTextSplitter(add_start_index=True)` with its defaults → fair-retrieval's
  `FaissVectorStore`;
- llamaindex-fair-splitter / langchain-fair-splitter: the same stacks with `FairEmbedding.text_splitter()` /
  `FairEmbeddings.text_splitter()` (chunks of one window, in model tokens).
Embedders: the anchor a user would pick instead (llama-index's `HuggingFaceEmbedding`, langchain's
`HuggingFaceEmbeddings`, same model, their defaults), `FairEmbedding`/`FairEmbeddings` with their defaults and with
`calibration=None`, and the candidate long-document policies the default is chosen from (CANDIDATES); a name whose
embedder has the same configuration as one already run (e.g. the default is a candidate) reuses its run. The chunks of a
(dataset, pipeline) are the same for every embedder. A question's relevant chunks are those holding its answer's first
character. Queries are plain for every embedder: they are embedded once in a batch, after checking on a sample that
each embedder's own query vectors are the same (≤ 1e-5), and passed to each stack's own retriever.

Reported per (dataset, pipeline, embedder): nDCG@10, Recall@10, nDCG@10 by where the answer sits in its chunk and in
its document (thirds, by characters), PSI over the chunk thirds, the share of document tokens never embedded, the
share of chunks calibrated, chunks/s of indexing, the mean number of distinct chunks returned for k = 10, and 95 %
paired-bootstrap intervals of the nDCG@10 change and the relative PSI change vs the anchor and vs our pooled default.
SciFact (5,183 abstracts, no positions) checks that the window policies cost general retrieval nothing: abstracts
longer than the window are windowed too.

The multi-vector study (docs/multivector_study.md), in the default pipelines:
- small-to-big: each stack's own recipe over the same chunks as parents, children at the model's window in model
  tokens, the anchor's embedding: LangChain `ParentDocumentRetriever` (`FaissVectorStore`, an `InMemoryStore`
  docstore, `search_kwargs={"k": 10}`), LlamaIndex `IndexNode` children + `RecursiveRetriever`
  (`similarity_top_k=10`); scored on the distinct parents they return (fewer than 10 as they are);
- pooled-store: our pooled default through the store the multi-vector rows use (LangChain `FaissVectorStore`,
  LlamaIndex `FairFaissVectorStore`), the reference for index size, build time and query latency;
- mv-<aggregate>: `multivector=True` with each aggregate, through the stores as a user builds them (LangChain
  `FaissVectorStore.from_texts(..., multivector=True, aggregate=...)` + `as_retriever(search_kwargs={"k": 10})`,
  LlamaIndex `VectorStoreIndex` over `FairFaissVectorStore.create(..., multivector=True, ...)` +
  `as_retriever(similarity_top_k=10)`), the embedder at its defaults;
- mv-calibrated-<aggregate>: the same with calibration that acts inside the window (MULTIVECTOR_CALIBRATION: for a
  window too short for the default calibration, baskets of 64 tokens from one full basket on; else the default).
Rows of one embedder configuration share its windows (one pass, remembered by text), so build time is that of the
first of them; index size is the bytes of the saved store folder; latency is per retriever call over the first
1,000 queries (query vectors precomputed, so it is the store's search and the stack's own overhead). SciFact adds
pooled vs multi-vector (`MultiVectorIndex`, flat, the stores' index) for the same embedder.

The rule that chose the window policy (RULE): in both default pipelines (llamaindex, langchain) on squad-v2 and reddit,
PSI ≥ 70 % below the anchor's and nDCG@10 ≥ the anchor's + 0.04; SciFact nDCG@10 ≥ truncation − 0.005; among the
candidates meeting it, the highest mean nDCG@10 over those four runs. The multi-vector rule (MULTIVECTOR_RULE, written
before its run in docs/multivector_study.md): on both stacks and both position sets, nDCG@10 ≥ pooled + 0.04 and ≥
the stack's small-to-big anchor, PSI ≤ pooled's; SciFact ≥ pooled − 0.005; the aggregate default is the highest
mean nDCG@10 over the four runs among the aggregates meeting it (equal to three decimals: "max", then "top2").

    python benchmarks/pipelines.py --pipelines llamaindex,langchain --runs anchor,default,small-to-big,pooled-store,\
        mv-max,mv-max-mean,mv-top2,mv-calibrated-max,mv-calibrated-max-mean,mv-calibrated-top2 --scifact multivector
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pipelines_data import (
    AGGREGATE_CHOICES,
    ANCHOR,
    CANDIDATES,
    DATA,
    DATASETS,
    DEFAULT_PIPELINES,
    LABELS,
    MULTIVECTOR_CALIBRATED,
    MULTIVECTOR_RUNS,
    OURS,
    PIPELINES,
    POOLED,
    REDDIT_POSTS,
    SMALL_TO_BIG,
    SMALL_TO_BIG_LABELS,
    STORE_RUNS,
    K,
    Question,
    judgements,
    logger,
    needle_documents,
    reddit_documents,
    score,
    split,
    squad_documents,
)
from pipelines_report import (
    candidate_table,
    markdown,
    multivector_rule_table,
    multivector_table,
    plot,
    readme_multivector_table,
    readme_table,
    summarise,
)
from pipelines_runs import (
    NoMultivectorError,
    SharedWindows,
    _options,
    coverage,
    embedder_names,
    fair_embedder_of,
    make_embedding,
    multivector_calibration,
    query_vector_fn,
    retrieve,
    small_to_big_run,
    store_run,
    with_model_prompts,
)

from fair_retrieval import FairEmbedder
from fair_retrieval.evaluation.default_model import bundled_model
from fair_retrieval.evaluation.metrics import per_query_metrics

# ---------------------------------------------------------------------------------------------------- run


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--datasets", default=",".join(DATASETS), help="comma-separated: " + ", ".join(DATASETS))
    parser.add_argument("--pipelines", default=",".join(PIPELINES), help="comma-separated: " + ", ".join(PIPELINES))
    parser.add_argument("--model", default=None, help="model folder (default: the bundled all-MiniLM-L6-v2)")
    parser.add_argument("--out", default="runs/pipelines", help="folder for results.json (resumed) and the plot")
    parser.add_argument(
        "--reddit-posts", type=int, default=REDDIT_POSTS, help=f"first N reddit posts (default {REDDIT_POSTS})"
    )
    parser.add_argument(
        "--squad-articles", type=int, default=None, help="first N SQuAD-v2 dev articles (default: all 16)"
    )
    parser.add_argument(
        "--runs",
        default=None,
        help="comma-separated run names to do (default: every run of each pipeline), e.g. "
        + ",".join([ANCHOR, POOLED, *MULTIVECTOR_RUNS]),
    )
    parser.add_argument(
        "--scifact",
        choices=("candidates", "multivector", "both"),
        default="both",
        help="SciFact: the window policies vs truncation, pooled vs multi-vector, or both (default)",
    )
    parser.add_argument("--no-scifact", action="store_true", help="skip the SciFact check")
    parser.add_argument(
        "--faiss-threads",
        type=int,
        default=1,
        help="faiss OpenMP threads (default 1: on a shared CPU, idle threads' barriers dominate small searches)",
    )
    parser.add_argument("--report", action="store_true", help="only write the tables and plot from results.json")
    parser.add_argument(
        "--merge",
        default="",
        help="comma-separated --out folders of other runs (same model and documents) whose runs are added first",
    )
    return parser.parse_args(argv)


def load_documents(
    name: str, reference: FairEmbedder, reddit_posts: int = REDDIT_POSTS, squad_articles: int | None = None
) -> tuple[dict[str, str], list[Question]]:
    if name == "squad-v2":
        documents, questions = squad_documents(DATA / "squad-v2-dev" / "dev-v2.0.json")
        if squad_articles is not None:
            documents = dict(list(documents.items())[:squad_articles])
            questions = [q for q in questions if q.document in documents]
        return documents, questions
    if name == "reddit":
        return reddit_documents(DATA / "squadshifts-reddit" / "reddit_v1.0.json", max_posts=reddit_posts)
    return needle_documents(reference.token_lengths)


def run_pipeline(
    dataset: str,
    pipeline: str,
    model: str,
    reference: FairEmbedder,
    results: dict[str, Any],
    save: Callable[[], None],
    reddit_posts: int = REDDIT_POSTS,
    only: list[str] | None = None,
    squad_articles: int | None = None,
) -> None:
    documents, questions = load_documents(dataset, reference, reddit_posts, squad_articles)
    stack = "llamaindex" if pipeline.startswith("llamaindex") else "langchain"
    default_llama = make_embedding("llamaindex", "default", model)
    from langchain_fair import FairEmbeddings

    chunks = split(pipeline, documents, default_llama, FairEmbeddings(embedder=default_llama.embedder))
    judged = judgements(questions, chunks, documents)
    kept = [q for q in questions if q.qid in judged["qrels"]]
    query_vectors = reference.embed_queries([q.text for q in kept])
    key = f"{dataset}/{pipeline}"
    entry = results.setdefault(key, {"runs": {}})
    entry.update(
        chunks=len(chunks),
        documents=len(documents),
        questions=len(kept),
        questions_unplaced=len(questions) - len(kept),
        median_chunk_tokens=float(np.median(reference.token_lengths([c.text for c in chunks]))),
        chunk_third=judged["chunk_third"],
    )
    shared: SharedWindows | None = None
    for name in embedder_names(pipeline, only):
        if name in entry["runs"]:
            continue
        qids = [q.qid for q in kept]
        if shared is None and pipeline in DEFAULT_PIPELINES and (name == POOLED or name in STORE_RUNS):
            shared = SharedWindows(
                fair_embedder_of(make_embedding(stack, "default", model)),
                {q.text: v for q, v in zip(kept, query_vectors, strict=True)},
            )
        # LangChain's default pipeline stores in our FaissVectorStore: its pooled default row goes through the store
        # (pooled-store measures it again in the process of the multi-vector rows, for size and latency side by side)
        langchain_pooled = stack == "langchain" and pipeline in DEFAULT_PIPELINES and name == POOLED
        if name in MULTIVECTOR_RUNS or langchain_pooled:
            if name == SMALL_TO_BIG:
                rankings, costs = small_to_big_run(stack, model, chunks, kept, query_vectors, reference)
                label = f"{SMALL_TO_BIG_LABELS[stack]} over {LABELS[stack]}"
            else:
                assert shared is not None
                calibrated = name in MULTIVECTOR_CALIBRATED
                embedding = shared.embedding(stack, multivector_calibration(shared.embedder) if calibrated else None)
                own = np.array([query_vector_fn(stack, embedding)(q.text) for q in kept[:16]], dtype=np.float32)
                if np.abs(own - query_vectors[:16]).max() > 1e-5:
                    raise RuntimeError(f"{name}: its query vectors differ from the plain ones.")
                aggregate = name.removeprefix("mv-").removeprefix("calibrated-") if name.startswith("mv-") else None
                shared.remember, hits, embedded = True, shared.hits, shared.embedded
                try:
                    rankings, costs = store_run(stack, embedding, chunks, kept, query_vectors, aggregate)
                except NoMultivectorError as error:
                    logger.warning("%s %s skipped: %s", key, name, error)
                    continue
                # texts whose windows an earlier row (or run) computed: then build_s is the store's part only
                costs.update(texts_reused=shared.hits - hits, texts_embedded=shared.embedded - embedded)
                costs["embedding_reused"] = costs["texts_reused"] > 0
                store = "FaissVectorStore" if stack == "langchain" else "FairFaissVectorStore"
                mode = "" if aggregate is None else f"multivector=True, aggregate={aggregate!r}"
                label = f"{OURS[stack]} in {store}({mode}) over {fair_embedder_of(embedding)!r}"
                if calibrated:
                    label += f", calibration={embedding.calibration!r}"
                if name == POOLED:
                    costs.update(coverage(embedding, chunks, reference))
            run = score(dict(zip(qids, rankings, strict=True)), judged)
            run.update({"tokens_never_embedded": None, "chunks_calibrated": None, **costs})
            run["distinct"] = float(np.mean([len(set(r)) for r in rankings]))
            run["embedder"] = label
            entry["runs"][name] = run
            logger.info(
                "%s %s: nDCG@10 %.4f PSI %.3f (distinct %.2f, build %.1f s, p50 %.2f ms, %s bytes)",
                key,
                name,
                run["ndcg@10"],
                run["psi"],
                run["distinct"],
                run["build_s"],
                run["latency_ms_p50"],
                run["index_bytes"],
            )
            save()
            continue
        if name == POOLED and shared is not None:  # LlamaIndex's default store, our default embedder (shared pass)
            embedding = shared.embedding(stack)
            shared.remember = True
        else:
            embedding = make_embedding(stack, name, model)
        fair = fair_embedder_of(embedding)
        same = [n for n, r in entry["runs"].items() if fair is not None and r["embedder"] == repr(fair)]
        if same:  # the same configuration under another name (e.g. the default is one of the candidates)
            entry["runs"][name] = {**entry["runs"][same[0]], "same_as": same[0]}
            save()
            continue
        own = np.array([query_vector_fn(stack, embedding)(q.text) for q in kept[:16]], dtype=np.float32)
        if np.abs(own - query_vectors[:16]).max() > 1e-5:
            raise RuntimeError(f"{name}: its query vectors differ from the plain ones; the benchmark assumes equality.")
        rankings, seconds = retrieve(stack, embedding, chunks, query_vectors)
        run = score(dict(zip(qids, rankings, strict=True)), judged)
        run.update(coverage(embedding, chunks, reference))
        run["chunks_per_s"] = len(chunks) / seconds
        run["distinct"] = float(np.mean([len(set(r)) for r in rankings]))
        run["embedder"] = repr(fair) if fair is not None else type(embedding).__name__
        entry["runs"][name] = run
        logger.info(
            "%s %s: nDCG@10 %.4f PSI %.3f (%.1f chunks/s)", key, name, run["ndcg@10"], run["psi"], run["chunks_per_s"]
        )
        save()


def truncation_of(reference: FairEmbedder) -> str:
    """The truncation candidate at the model's own window (`reference` is the embedder at its defaults): the
    baseline of the SciFact check."""
    window = reference.max_length
    names = [n for n, o in CANDIDATES.items() if o["long_documents"] == "truncate" and o["max_length"] == window]
    if not names:
        raise ValueError(f"No truncation candidate at {window} tokens in CANDIDATES; add one for this model.")
    return names[0]


def run_scifact(model: str, reference: FairEmbedder, results: dict[str, Any], save: Callable[[], None]) -> None:
    """SciFact nDCG@10 of each candidate policy vs truncation (abstracts longer than the window are windowed).

    Only abstracts that some candidate reads differently from truncation at the model's window (`truncation_of`:
    256 tokens for MiniLM, 512 for e5-small), those longer than it, are embedded per candidate; every candidate embeds
    the others exactly as truncation does (no window, no cut, and too short to calibrate: checked on a sample), so their
    vectors are shared.
    """
    from fair_retrieval.evaluation.data.beir import load_scifact

    task = load_scifact(DATA / "scifact")
    ids = list(task.corpus)
    texts = [task.corpus[i] for i in ids]
    lengths = np.array(reference.token_lengths(texts))
    truncation = truncation_of(reference)
    window = CANDIDATES[truncation]["max_length"]
    long_ones = np.flatnonzero(lengths > window)
    queries = reference.embed_queries(list(task.queries.values()))
    base_embedder = FairEmbedder(reference.model, **CANDIDATES[truncation])
    base = base_embedder.embed_documents(texts, show_progress_bar=True)
    entry = results.setdefault("scifact", {"runs": {}, "abstracts": len(texts), "over_256_tokens": len(long_ones)})
    entry["truncation"] = truncation
    sample = np.flatnonzero(lengths <= window)[:64]
    for name in [truncation, *[n for n in CANDIDATES if n != truncation], "default", "default-plain"]:
        if name in entry["runs"] or _options(name).get("max_length", window) < window:
            continue  # done, or a window shorter than the model's (it would cut abstracts truncation keeps whole)
        embedder = FairEmbedder(reference.model, **_options(name))
        same = [n for n, r in entry["runs"].items() if r["embedder"] == repr(embedder)]
        if same:
            entry["runs"][name] = {**entry["runs"][same[0]], "same_as": same[0]}
            continue
        vectors = base.copy()
        if name != truncation:
            short = embedder.embed_documents([texts[i] for i in sample])
            if np.abs(short - base[sample]).max() > 1e-5:
                raise RuntimeError(f"{name} changes abstracts that fit {window} tokens; embed them all instead.")
            vectors[long_ones] = embedder.embed_documents([texts[i] for i in long_ones], show_progress_bar=True)
        scores = queries @ vectors.T
        top = np.argsort(-scores, axis=1)[:, :10]
        rankings = {qid: [ids[j] for j in row] for qid, row in zip(task.queries, top, strict=True)}
        per_query = per_query_metrics(rankings, task.qrels, ndcg_k=(10,), recall_k=(10,))
        ndcg = {q: m["ndcg@10"] for q, m in per_query.items()}
        entry["runs"][name] = {
            "ndcg@10": float(np.mean(list(ndcg.values()))),
            "per_query": ndcg,
            "embedder": repr(embedder),
        }
        logger.info("scifact %s: nDCG@10 %.4f", name, entry["runs"][name]["ndcg@10"])
        save()


def run_scifact_multivector(
    model: str,
    reference: FairEmbedder,
    results: dict[str, Any],
    save: Callable[[], None],
    calibrated: bool = True,
) -> None:
    """SciFact nDCG@10 of pooled vs multi-vector for the store's embedder (defaults) and the calibrated one.

    One `embed_document_windows` pass per embedder gives both the pooled vectors (what `embed_documents` returns) and
    the windows; the windows go into a flat `MultiVectorIndex` (the index the stores keep) per aggregate.
    """
    from fair_retrieval import MultiVectorIndex
    from fair_retrieval.evaluation.data.beir import load_scifact

    task = load_scifact(DATA / "scifact")
    ids = list(task.corpus)
    texts = [task.corpus[i] for i in ids]
    entry = results.setdefault("scifact", {"runs": {}, "abstracts": len(texts)})
    embedder = FairEmbedder(reference.model)
    shared = SharedWindows(embedder, {})  # the windows are kept per text (benchmarks/index_recall.py reuses them)
    shared.remember = True
    configurations = (("", None), ("calibrated-", multivector_calibration(embedder)))[: 2 if calibrated else 1]
    queries = None
    for prefix, calibration in configurations:
        names = ["pooled-calibrated" if prefix else POOLED] + [f"mv-{prefix}{a}" for a in AGGREGATE_CHOICES]
        if all(n in entry["runs"] for n in names):
            continue
        if queries is None:
            queries = reference.embed_queries(list(task.queries.values()))
        started = time.perf_counter()
        windows = embedder.embed_document_windows(
            texts, calibration=embedder.calibration if calibration is None else calibration, show_progress_bar=True
        )
        seconds = time.perf_counter() - started
        label = repr(embedder) + ("" if calibration is None else f", calibration={calibration!r}")
        runs: dict[str, tuple[str, np.ndarray]] = {
            names[0]: (label, np.argsort(-(queries @ windows.pooled.T), axis=1)[:, :K])
        }
        for aggregate, name in zip(AGGREGATE_CHOICES, names[1:], strict=True):
            index = MultiVectorIndex(windows.dim, aggregate=aggregate)
            index.add(windows)
            runs[name] = (f"MultiVectorIndex(aggregate={aggregate!r}) over {label}", index.search(queries, K)[1])
        for name, (what, top) in runs.items():
            rankings = {qid: [ids[j] for j in row if j >= 0] for qid, row in zip(task.queries, top, strict=True)}
            per_query = per_query_metrics(rankings, task.qrels, ndcg_k=(10,), recall_k=(10,))
            ndcg = {q: m["ndcg@10"] for q, m in per_query.items()}
            entry["runs"][name] = {
                "ndcg@10": float(np.mean(list(ndcg.values()))),
                "per_query": ndcg,
                "embedder": what,
                "windows": int(windows.vectors.shape[0]),
                "embed_s": seconds,
            }
            logger.info("scifact %s: nDCG@10 %.4f", name, entry["runs"][name]["ndcg@10"])
        save()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    logging.getLogger("fair_retrieval").setLevel(logging.ERROR)  # the run logs windows and truncation on purpose
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.json"
    results: dict[str, Any] = json.loads(path.read_text()) if path.exists() else {}

    def save() -> None:
        path.write_text(json.dumps(results))

    for folder in [f for f in args.merge.split(",") if f]:
        for key, entry in json.loads((Path(folder) / "results.json").read_text()).items():
            mine = results.setdefault(key, {**entry, "runs": {}})
            for name, run in entry["runs"].items():
                mine["runs"].setdefault(name, run)

    if not args.report:
        import faiss

        faiss.omp_set_num_threads(args.faiss_threads)
        model = args.model or bundled_model()
        plain = {"calibration": None, "long_documents": "truncate"}
        reference = with_model_prompts(model, plain) or FairEmbedder(model, **plain)
        datasets = [d for d in args.datasets.split(",") if d]
        missing = [d for d in datasets if d != "needle" and not DATA.exists()]
        if missing:
            print(f"Skipping {missing}: no evaluation data at {DATA} (set FAIR_RETRIEVAL_DATA).", file=sys.stderr)
            datasets = [d for d in datasets if d not in missing]
        only = None if args.runs is None else [n for n in args.runs.split(",") if n]
        for pipeline in [p for p in args.pipelines.split(",") if p]:
            for dataset in datasets:
                run_pipeline(
                    dataset, pipeline, model, reference, results, save, args.reddit_posts, only, args.squad_articles
                )
        if not args.no_scifact and DATA.exists():
            if args.scifact in ("candidates", "both"):
                run_scifact(model, reference, results, save)
            if args.scifact in ("multivector", "both"):
                calibrated = only is None or any(n in only for n in MULTIVECTOR_CALIBRATED)
                run_scifact_multivector(model, reference, results, save, calibrated)
    report = summarise(results)
    (out / "summary.json").write_text(json.dumps(report, indent=2))
    (out / "pipelines.md").write_text(markdown(results, report))
    (out / "readme_table.md").write_text(readme_table(results))
    (out / "candidates.md").write_text(candidate_table(results, report))
    (out / "multivector.md").write_text(multivector_table(results) + "\n" + multivector_rule_table(results, report))
    (out / "readme_multivector.md").write_text(readme_multivector_table(results, report["multivector"]["aggregate"]))
    plot(results, out / "pipelines.png")
    print(markdown(results, report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
