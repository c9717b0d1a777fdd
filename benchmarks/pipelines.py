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
share of chunks calibrated, chunks/s of indexing, and 95 % paired-bootstrap intervals of the nDCG@10 change and the
relative PSI change vs the anchor. Two experiments that no store offers, in the default pipelines: every chunk kept as
its window vectors and scored by its best window (max-of-windows) or by the mean of that and the pooled score.
SciFact (5,183 abstracts, no positions) checks that the window policies cost general retrieval nothing: abstracts
longer than the window are windowed too.

The rule that chooses the default (RULE): in both default pipelines (llamaindex, langchain) on squad-v2 and reddit,
PSI ≥ 70 % below the anchor's and nDCG@10 ≥ the anchor's + 0.04; SciFact nDCG@10 ≥ truncation − 0.005; among the
candidates meeting it, the highest mean nDCG@10 over those four runs.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval import FairEmbedder
from fair_retrieval.evaluation.bootstrap import paired_bootstrap
from fair_retrieval.evaluation.bundled import bundled_model
from fair_retrieval.evaluation.data.needle import build_needle_benchmark
from fair_retrieval.evaluation.data.squad import read_squad
from fair_retrieval.evaluation.metrics import per_query_metrics, position_sensitivity_index
from fair_retrieval.windows import pool_windows

DATA = Path(os.environ.get("FAIR_RETRIEVAL_DATA", Path(__file__).resolve().parents[2] / "shared" / "data"))
DATASETS = ("squad-v2", "reddit", "needle")
PIPELINES = ("llamaindex", "langchain", "llamaindex-fair-splitter", "langchain-fair-splitter")
DEFAULT_PIPELINES = ("llamaindex", "langchain")
RULE_DATASETS = ("squad-v2", "reddit")
PSI_CUT, NDCG_GAIN, SCIFACT_TOLERANCE = 0.70, 0.04, 0.005
POSTS_PER_PAGE = 8
REDDIT_POSTS = 1000  # of 2,035: about 4,800 questions, and half the embedding time on a 2-core machine
NEEDLE_TOKENS = 2048
# The long-document policies the default is chosen from (FairEmbedder keyword arguments).
CANDIDATES: dict[str, dict[str, Any]] = {
    "truncate": {"long_documents": "truncate", "max_length": 256},
    "windows-256": {"long_documents": "windows", "max_length": 256},
    "windows-256-overlap32": {"long_documents": "windows", "max_length": 256, "window_overlap": 32},
    "windows-512": {"long_documents": "windows", "max_length": 512},
    "windows-512-plain": {"long_documents": "windows", "max_length": 512, "calibration": None},
}
ANCHOR = "anchor"
MULTI_VECTOR = ("max-of-windows", "mix-of-max-and-mean")  # experiments: several vectors per chunk (no store has it)
LABELS = {"llamaindex": "HuggingFaceEmbedding", "langchain": "HuggingFaceEmbeddings"}

logger = logging.getLogger("pipelines")


@dataclass(frozen=True)
class Question:
    """A question whose answer starts at character `start` of document `document`."""

    qid: str
    text: str
    document: str
    start: int


@dataclass(frozen=True)
class Chunk:
    """A chunk of a document as a splitter made it: its text and its first character in the document."""

    cid: str
    document: str
    text: str
    start: int


# ---------------------------------------------------------------------------------------------------- documents


def squad_documents(path: Path) -> tuple[dict[str, str], list[Question]]:
    """Every SQuAD-v2 dev article as one document (paragraphs joined by blank lines); answerable questions only."""
    documents: dict[str, str] = {}
    questions: list[Question] = []
    for a, article in enumerate(read_squad(path)):
        doc_id, parts, offset = f"a{a:02d}", [], 0
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                if not qa.get("is_impossible") and qa["answers"]:
                    start = offset + int(qa["answers"][0]["answer_start"])
                    questions.append(Question(str(qa["id"]), qa["question"], doc_id, start))
            parts.append(paragraph["context"])
            offset += len(paragraph["context"]) + 2
        documents[doc_id] = "\n\n".join(parts)
    return documents, questions


def reddit_documents(
    path: Path, posts_per_page: int = POSTS_PER_PAGE, max_posts: int | None = None
) -> tuple[dict[str, str], list[Question]]:
    """SQuADShifts reddit as pages of `posts_per_page` consecutive posts (blank lines between posts)."""
    posts = [p for article in read_squad(path) for p in article["paragraphs"]][:max_posts]
    documents: dict[str, str] = {}
    questions: list[Question] = []
    for page in range(0, len(posts), posts_per_page):
        doc_id, parts, offset = f"p{page // posts_per_page:03d}", [], 0
        for post in posts[page : page + posts_per_page]:
            for qa in post["qas"]:
                if qa["answers"]:
                    questions.append(
                        Question(str(qa["id"]), qa["question"], doc_id, offset + qa["answers"][0]["answer_start"])
                    )
            parts.append(post["context"])
            offset += len(post["context"]) + 2
        documents[doc_id] = "\n\n".join(parts)
    return documents, questions


def needle_documents(count_tokens: Callable[[list[str]], list[int]]) -> tuple[dict[str, str], list[Question]]:
    """The needle documents of NEEDLE_TOKENS tokens, each with the question about its hidden fact."""
    task = build_needle_benchmark(count_tokens, max_tokens=NEEDLE_TOKENS, num_documents=None)
    questions = [
        Question(qid, task.queries[qid], next(iter(task.qrels[qid])), task.positions[qid].char_start)
        for qid in task.queries
    ]
    return dict(task.corpus), questions


# ---------------------------------------------------------------------------------------------------- splitters


def llama_chunks(documents: dict[str, str], splitter: Any) -> list[Chunk]:
    """Chunks as LlamaIndex makes them (`get_nodes_from_documents`), with the node's own start offset."""
    from llama_index.core import Document

    nodes = splitter.get_nodes_from_documents([Document(text=t, id_=d) for d, t in documents.items()])
    chunks = []
    for node in nodes:
        document = node.ref_doc_id
        text = node.get_content()
        chunks.append(Chunk(node.node_id, document, text, _placed(documents[document], text, node.start_char_idx)))
    return chunks


def langchain_chunks(documents: dict[str, str], splitter: Any) -> list[Chunk]:
    """Chunks as LangChain makes them (`split_documents`, `add_start_index=True`)."""
    from langchain_core.documents import Document

    pieces = splitter.split_documents(
        [Document(page_content=t, metadata={"document": d}) for d, t in documents.items()]
    )
    return [
        Chunk(
            f"c{i:05d}",
            p.metadata["document"],
            p.page_content,
            _placed(documents[p.metadata["document"]], p.page_content, p.metadata["start_index"]),
        )
        for i, p in enumerate(pieces)
    ]


def _placed(document: str, chunk: str, start: int | None) -> int:
    """The chunk's character offset: the splitter's own if it is right, else where the chunk first occurs."""
    if start is not None and start >= 0 and document[start : start + len(chunk)] == chunk:
        return int(start)
    found = document.find(chunk)
    if found < 0:
        raise RuntimeError("A splitter returned a chunk that is not verbatim in its document; cannot place it.")
    return found


def split(pipeline: str, documents: dict[str, str], fair_llama: Any, fair_langchain: Any) -> list[Chunk]:
    """The chunks of `pipeline`'s splitter (the default one of its stack, or the model-token splitter of ours)."""
    if pipeline == "llamaindex":
        from llama_index.core.node_parser import SentenceSplitter

        return llama_chunks(documents, SentenceSplitter())
    if pipeline == "langchain":
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        return langchain_chunks(documents, RecursiveCharacterTextSplitter(add_start_index=True))
    if pipeline == "llamaindex-fair-splitter":
        return llama_chunks(documents, fair_llama.text_splitter())
    return langchain_chunks(documents, fair_langchain.text_splitter())


# ---------------------------------------------------------------------------------------------------- embedders


def embedder_names(pipeline: str) -> list[str]:
    """The embedders run in `pipeline`: the anchor, ours as shipped and plain, and (default pipelines) candidates."""
    names = [ANCHOR, "default", "default-plain"]
    if pipeline in DEFAULT_PIPELINES:
        names += list(CANDIDATES)
    return names


def make_embedding(stack: str, name: str, model: str) -> Any:
    """The stack's embedding object for `name`, loaded as a user loads it (by model path)."""
    if stack == "llamaindex":
        from llama_index.embeddings.fair import FairEmbedding

        if name == ANCHOR:
            from llama_index.embeddings.huggingface import HuggingFaceEmbedding

            return HuggingFaceEmbedding(model_name=model)
        return FairEmbedding(model=model, **_options(name))
    from langchain_fair import FairEmbeddings

    if name == ANCHOR:
        from langchain_huggingface import HuggingFaceEmbeddings

        return HuggingFaceEmbeddings(model_name=model)
    return FairEmbeddings(model=model, **_options(name))


def _options(name: str) -> dict[str, Any]:
    if name == "default":
        return {}
    if name == "default-plain":
        return {"calibration": None}
    return dict(CANDIDATES[name])


def fair_embedder_of(embedding: Any) -> FairEmbedder | None:
    """The FairEmbedder behind one of our adapters (None for an anchor)."""
    for attribute in ("fair_embedder", "embedder"):
        value = getattr(embedding, attribute, None)
        if isinstance(value, FairEmbedder):
            return value
    return None


def query_vector_fn(stack: str, embedding: Any) -> Callable[[str], list[float]]:
    return embedding.get_query_embedding if stack == "llamaindex" else embedding.embed_query


def retrieve(stack: str, embedding: Any, chunks: list[Chunk], queries: np.ndarray) -> tuple[list[list[str]], float]:
    """Index `chunks` in the stack's own store with `embedding`, then top-10 chunk ids per query vector.

    Returns the rankings and the seconds indexing took (embedding the chunks is nearly all of it).
    """
    if stack == "llamaindex":
        from llama_index.core import VectorStoreIndex
        from llama_index.core.schema import QueryBundle, TextNode

        nodes = [TextNode(id_=c.cid, text=c.text) for c in chunks]
        started = time.perf_counter()
        index = VectorStoreIndex(nodes, embed_model=embedding)
        seconds = time.perf_counter() - started
        retriever = index.as_retriever(similarity_top_k=10)
        rankings = [
            [hit.node.node_id for hit in retriever.retrieve(QueryBundle(query_str="", embedding=vector.tolist()))]
            for vector in queries
        ]
        return rankings, seconds
    from langchain_fair import FaissVectorStore

    started = time.perf_counter()
    store = FaissVectorStore.from_texts([c.text for c in chunks], embedding, ids=[c.cid for c in chunks])
    seconds = time.perf_counter() - started
    return [[doc.id for doc in store.similarity_search_by_vector(v.tolist(), k=10)] for v in queries], seconds


# ---------------------------------------------------------------------------------------------------- scoring


def judgements(questions: list[Question], chunks: list[Chunk], documents: dict[str, str]) -> dict[str, Any]:
    """Relevant chunks per question (those holding the answer's first character) and its position groups."""
    by_document: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_document.setdefault(chunk.document, []).append(chunk)
    qrels: dict[str, dict[str, int]] = {}
    in_chunk: dict[str, int] = {}
    in_document: dict[str, int] = {}
    for q in questions:
        holding = [c for c in by_document.get(q.document, []) if c.start <= q.start < c.start + len(c.text)]
        if not holding:
            continue
        qrels[q.qid] = {c.cid: 1 for c in holding}
        first = min(holding, key=lambda c: c.start)
        in_chunk[q.qid] = min(2, int(3 * (q.start - first.start) / max(1, len(first.text))))
        in_document[q.qid] = min(2, int(3 * q.start / max(1, len(documents[q.document]))))
    return {"qrels": qrels, "chunk_third": in_chunk, "document_third": in_document}


def score(rankings: dict[str, list[str]], judged: dict[str, Any]) -> dict[str, Any]:
    """nDCG@10 and Recall@10 overall and by third, PSI over the chunk thirds; per-query nDCG@10 for the intervals."""
    per_query = per_query_metrics(rankings, judged["qrels"], ndcg_k=(10,), recall_k=(10,))
    ndcg = {q: m["ndcg@10"] for q, m in per_query.items()}
    result: dict[str, Any] = {
        "ndcg@10": float(np.mean(list(ndcg.values()))),
        "recall@10": float(np.mean([m["recall@10"] for m in per_query.values()])),
        "queries": len(ndcg),
        "per_query": ndcg,
    }
    for kind in ("chunk_third", "document_third"):
        thirds = [[q for q, t in judged[kind].items() if t == k] for k in range(3)]
        result[kind] = [float(np.mean([ndcg[q] for q in ids])) if ids else None for ids in thirds]
        result[f"{kind}_counts"] = [len(ids) for ids in thirds]
    result["psi"] = position_sensitivity_index([v for v in result["chunk_third"] if v is not None])
    return result


def coverage(embedding: Any, chunks: list[Chunk], reference: FairEmbedder) -> dict[str, float]:
    """Share of the chunks' tokens never embedded, and share of chunks calibrated, for `embedding`."""
    texts = [c.text for c in chunks]
    fair = fair_embedder_of(embedding)
    if fair is None:  # an anchor: sentence-transformers truncates at its max_seq_length
        limit = int(getattr(embedding, "max_length", None) or _anchor_limit(embedding))
        plan_embedder = FairEmbedder(reference.model, calibration=None, long_documents="truncate", max_length=limit)
        plan = plan_embedder.plan_documents(texts)
        return {"tokens_never_embedded": sum(plan.cut_tokens) / sum(plan.tokens), "chunks_calibrated": 0.0}
    plan = fair.plan_documents(texts)
    calibrated = fair.calibrated_texts(texts, fair.calibration)
    return {
        "tokens_never_embedded": sum(plan.cut_tokens) / sum(plan.tokens),
        "chunks_calibrated": sum(calibrated) / len(texts),
        "chunks_windowed": plan.windowed / len(texts),
    }


def _anchor_limit(embedding: Any) -> int:
    client = getattr(embedding, "_model", None) or getattr(embedding, "_client", None)
    return int(client.max_seq_length)


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
    parser.add_argument("--no-scifact", action="store_true", help="skip the SciFact check")
    parser.add_argument("--report", action="store_true", help="only write the tables and plot from results.json")
    return parser.parse_args(argv)


def load_documents(
    name: str, reference: FairEmbedder, reddit_posts: int = REDDIT_POSTS
) -> tuple[dict[str, str], list[Question]]:
    if name == "squad-v2":
        return squad_documents(DATA / "squad-v2-dev" / "dev-v2.0.json")
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
) -> None:
    documents, questions = load_documents(dataset, reference, reddit_posts)
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
    for name in embedder_names(pipeline):
        if name in entry["runs"]:
            continue
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
        run = score(dict(zip([q.qid for q in kept], rankings, strict=True)), judged)
        run.update(coverage(embedding, chunks, reference))
        run["chunks_per_s"] = len(chunks) / seconds
        run["embedder"] = repr(fair) if fair is not None else type(embedding).__name__
        entry["runs"][name] = run
        logger.info(
            "%s %s: nDCG@10 %.4f PSI %.3f (%.1f chunks/s)", key, name, run["ndcg@10"], run["psi"], run["chunks_per_s"]
        )
        save()
    if pipeline in DEFAULT_PIPELINES and not all(name in entry["runs"] for name in MULTI_VECTOR):
        multi_vector_runs(entry, chunks, judged, kept, query_vectors, reference)
        save()


def multi_vector_runs(
    entry: dict[str, Any],
    chunks: list[Chunk],
    judged: dict[str, Any],
    questions: list[Question],
    queries: np.ndarray,
    reference: FairEmbedder,
) -> None:
    """Experiments no store offers: each chunk kept as its window vectors, scored by the best window ("max") or by
    the mean of the best window's and the pooled vector's scores ("mix"). Exact top-10 by numpy (no store)."""
    windows = FairEmbedder(reference.model, calibration=None)  # the default's windows, plain
    plan = windows.plan_documents([c.text for c in chunks])
    started = time.perf_counter()
    vectors = windows.embed_documents(plan.pieces)  # every window as a text of its own: (W, d)
    seconds = time.perf_counter() - started
    owners = np.asarray(plan.owners)
    window_scores = queries @ vectors.T  # (Q, W)
    best = np.full((len(queries), len(chunks)), -np.inf, dtype=np.float32)
    np.maximum.at(best.T, owners, window_scores.T)  # best window per chunk
    pooled = queries @ pool_windows(vectors, plan.owners, plan.weights, len(chunks)).T
    for name, scores in (("max-of-windows", best), ("mix-of-max-and-mean", (best + pooled) / 2)):
        top = np.argsort(-scores, axis=1)[:, :10]
        rankings = {q.qid: [chunks[j].cid for j in row] for q, row in zip(questions, top, strict=True)}
        run = score(rankings, judged)
        run.update(tokens_never_embedded=0.0, chunks_calibrated=0.0, chunks_per_s=len(chunks) / seconds)
        run["embedder"] = f"{name} over {windows!r}"
        entry["runs"][name] = run
        logger.info("%s: nDCG@10 %.4f PSI %.3f", name, run["ndcg@10"], run["psi"])


def run_scifact(model: str, reference: FairEmbedder, results: dict[str, Any], save: Callable[[], None]) -> None:
    """SciFact nDCG@10 of each candidate policy vs truncation (abstracts longer than the window are windowed).

    Only abstracts that some candidate reads differently from truncation at 256 tokens (those over 256 tokens) are
    embedded per candidate; every candidate embeds the others exactly as truncation does (no window, no cut, and
    too short to calibrate: checked on a sample), so their vectors are shared.
    """
    from fair_retrieval.evaluation.data.beir import load_scifact

    task = load_scifact(DATA / "scifact")
    ids = list(task.corpus)
    texts = [task.corpus[i] for i in ids]
    lengths = np.array(reference.token_lengths(texts))
    long_ones = np.flatnonzero(lengths > 256)
    queries = reference.embed_queries(list(task.queries.values()))
    base_embedder = FairEmbedder(reference.model, **CANDIDATES["truncate"])
    base = base_embedder.embed_documents(texts, show_progress_bar=True)
    entry = results.setdefault("scifact", {"runs": {}, "abstracts": len(texts), "over_256_tokens": len(long_ones)})
    sample = np.flatnonzero(lengths <= 256)[:64]
    for name in ["truncate", *[n for n in CANDIDATES if n != "truncate"], "default", "default-plain"]:
        if name in entry["runs"]:
            continue
        embedder = FairEmbedder(reference.model, **_options(name))
        same = [n for n, r in entry["runs"].items() if r["embedder"] == repr(embedder)]
        if same:
            entry["runs"][name] = {**entry["runs"][same[0]], "same_as": same[0]}
            continue
        vectors = base.copy()
        if name != "truncate":
            short = embedder.embed_documents([texts[i] for i in sample])
            if np.abs(short - base[sample]).max() > 1e-5:
                raise RuntimeError(f"{name} changes abstracts that fit 256 tokens; embed them all instead.")
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

    if not args.report:
        model = args.model or bundled_model()
        reference = FairEmbedder(model, calibration=None, long_documents="truncate")
        datasets = [d for d in args.datasets.split(",") if d]
        missing = [d for d in datasets if d != "needle" and not DATA.exists()]
        if missing:
            print(f"Skipping {missing}: no evaluation data at {DATA} (set FAIR_RETRIEVAL_DATA).", file=sys.stderr)
            datasets = [d for d in datasets if d not in missing]
        for pipeline in [p for p in args.pipelines.split(",") if p]:
            for dataset in datasets:
                run_pipeline(dataset, pipeline, model, reference, results, save, args.reddit_posts)
        if not args.no_scifact and DATA.exists():
            run_scifact(model, reference, results, save)
    report = summarise(results)
    (out / "summary.json").write_text(json.dumps(report, indent=2))
    (out / "pipelines.md").write_text(markdown(results, report))
    (out / "readme_table.md").write_text(readme_table(results))
    (out / "candidates.md").write_text(candidate_table(results, report))
    plot(results, out / "pipelines.png")
    print(markdown(results, report))
    return 0


# ---------------------------------------------------------------------------------------------------- report


def summarise(results: dict[str, Any]) -> dict[str, Any]:
    """Intervals vs the anchor for every run, and the rule's verdict for every candidate."""
    for key, entry in results.items():
        if key == "scifact" or ANCHOR not in entry["runs"]:
            continue
        anchor = entry["runs"][ANCHOR]
        groups: dict[str, list[str]] = {}
        for qid, third in entry["chunk_third"].items():
            groups.setdefault(str(third), []).append(qid)
        for name, run in entry["runs"].items():
            if name == ANCHOR:
                continue
            run["vs_anchor"] = paired_bootstrap(anchor["per_query"], run["per_query"], groups)
            run["ndcg_gain"] = run["ndcg@10"] - anchor["ndcg@10"]
            run["psi_cut"] = 1 - run["psi"] / max(anchor["psi"], 1e-12)
    verdicts: dict[str, Any] = {}
    names = ["default", "default-plain", *CANDIDATES]
    scifact = results.get("scifact", {}).get("runs", {})
    for name in names:
        checks, ndcgs = [], []
        for dataset in RULE_DATASETS:
            for pipeline in DEFAULT_PIPELINES:
                run = results.get(f"{dataset}/{pipeline}", {}).get("runs", {}).get(name)
                if run is None or "psi_cut" not in run:
                    checks.append(None)
                    continue
                checks.append(run["psi_cut"] >= PSI_CUT and run["ndcg_gain"] >= NDCG_GAIN)
                ndcgs.append(run["ndcg@10"])
        sci = scifact.get(name, {}).get("ndcg@10")
        base = scifact.get("truncate", {}).get("ndcg@10")
        sci_ok = None if sci is None or base is None else sci >= base - SCIFACT_TOLERANCE
        verdicts[name] = {
            "position_checks": checks,
            "scifact_ok": sci_ok,
            "meets_rule": all(c is True for c in checks) and sci_ok is True,
            "mean_ndcg": float(np.mean(ndcgs)) if ndcgs else None,
        }
    qualifying = [n for n in CANDIDATES if verdicts[n]["meets_rule"]]
    chosen = max(qualifying, key=lambda n: verdicts[n]["mean_ndcg"]) if qualifying else None
    return {"verdicts": verdicts, "chosen": chosen}


def markdown(results: dict[str, Any], report: dict[str, Any]) -> str:
    lines = [
        "| data / pipeline | embedder | nDCG@10 [Δ vs anchor, 95 % CI] | R@10 | nDCG@10 begin / mid / end of chunk |"
        " PSI (change vs anchor) | doc thirds | never embedded | calibrated | chunks/s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.items():
        if key == "scifact":
            continue
        for name, run in entry["runs"].items():
            label = LABELS.get(key.split("/")[1].replace("-fair-splitter", ""), ANCHOR) if name == ANCHOR else name
            delta = ""
            if "vs_anchor" in run:
                lo, hi = run["vs_anchor"]["ndcg_delta_ci"]
                delta = f" [{run['ndcg_gain']:+.3f}, {lo:+.3f}…{hi:+.3f}]"
            cut = f" ({-run['psi_cut']:+.0%})" if "psi_cut" in run else ""
            thirds = " / ".join("–" if v is None else f"{v:.3f}" for v in run["chunk_third"])
            doc = " / ".join("–" if v is None else f"{v:.3f}" for v in run["document_third"])
            lines.append(
                f"| {key} ({entry['chunks']} chunks, {entry['questions']} q) | {label} | {run['ndcg@10']:.3f}{delta} |"
                f" {run['recall@10']:.3f} | {thirds} | {run['psi']:.2f}{cut} | {doc} |"
                f" {run['tokens_never_embedded']:.0%} | {run['chunks_calibrated']:.0%} | {run['chunks_per_s']:.1f} |"
            )
    if "scifact" in results:
        runs = results["scifact"]["runs"]
        base = runs.get("truncate", {}).get("ndcg@10")
        lines += ["", "| SciFact | nDCG@10 | Δ vs truncate |", "|---|---|---|"]
        for name, run in runs.items():
            diff = "" if base is None else f"{run['ndcg@10'] - base:+.4f}"
            lines.append(f"| {name} | {run['ndcg@10']:.4f} | {diff} |")
    lines += ["", f"Rule: {report['chosen'] or 'no candidate meets it'}"]
    for name, verdict in report["verdicts"].items():
        lines.append(f"- {name}: {verdict}")
    return "\n".join(lines) + "\n"


def readme_table(results: dict[str, Any]) -> str:
    """The README's first-screen table: each default pipeline, the anchor next to ours with its defaults."""
    lines = [
        "| documents → pipeline | embedder | nDCG@10 | Δ [95 % CI] | end-of-chunk nDCG@10 | PSI | tokens never embedded"
        " |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.items():
        dataset, _, pipeline = key.partition("/")
        if key == "scifact" or pipeline not in DEFAULT_PIPELINES or "default" not in entry["runs"]:
            continue
        where = f"{dataset} ({entry['documents']} documents, {entry['questions']} questions) → {pipeline}"
        for name, label in (
            (ANCHOR, LABELS[pipeline]),
            ("default", "FairEmbedding" if pipeline == "llamaindex" else "FairEmbeddings"),
        ):
            run = entry["runs"][name]
            delta = ""
            if "vs_anchor" in run:
                lo, hi = run["vs_anchor"]["ndcg_delta_ci"]
                delta = f"{run['ndcg_gain']:+.3f} [{lo:+.3f}, {hi:+.3f}]"
            end = run["chunk_third"][2]
            psi = f"{run['psi']:.2f}" + (f" ({-run['psi_cut']:+.0%})" if "psi_cut" in run else "")
            lines.append(
                f"| {where if name == ANCHOR else ''} | {label} | {run['ndcg@10']:.3f} | {delta} |"
                f" {'–' if end is None else f'{end:.3f}'} | {psi} | {run['tokens_never_embedded']:.0%} |"
            )
    return "\n".join(lines) + "\n"


def candidate_table(results: dict[str, Any], report: dict[str, Any]) -> str:
    """The rule's table: every candidate policy on each (rule dataset, default pipeline), SciFact, the verdict."""
    keys = [f"{d}/{p}" for d in RULE_DATASETS for p in DEFAULT_PIPELINES]
    head = " | ".join(f"{k} nDCG@10 (PSI vs anchor)" for k in keys)
    lines = [f"| policy | {head} | SciFact Δ vs truncate | rule |", "|---" * (len(keys) + 3) + "|"]
    scifact = results.get("scifact", {}).get("runs", {})
    base = scifact.get("truncate", {}).get("ndcg@10")
    for name in [ANCHOR, *CANDIDATES, *MULTI_VECTOR]:
        cells = []
        for key in keys:
            run = results.get(key, {}).get("runs", {}).get(name)
            if run is None:
                cells.append("–")
            else:
                cut = f" ({-run['psi_cut']:+.0%})" if "psi_cut" in run else f" (PSI {run['psi']:.2f})"
                cells.append(f"{run['ndcg@10']:.3f}{cut}")
        sci = scifact.get(name, {}).get("ndcg@10")
        sci_cell = "–" if sci is None or base is None else f"{sci - base:+.4f}"
        verdict = report["verdicts"].get(name, {})
        rule = "chosen" if name == report["chosen"] else ("meets" if verdict.get("meets_rule") else "–")
        if name in MULTI_VECTOR:
            rule = "experiment (no store)"
        label = "anchor (HuggingFaceEmbedding/-s)" if name == ANCHOR else name
        lines.append(f"| {label} | {' | '.join(cells)} | {sci_cell} | {rule} |")
    return "\n".join(lines) + "\n"


def plot(results: dict[str, Any], path: Path) -> None:
    """nDCG@10 by where the answer sits in its chunk, anchor vs ours, for the two default pipelines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = [k for k in results if k != "scifact" and k.split("/")[1] in DEFAULT_PIPELINES]
    if not keys:
        return
    fig, axes = plt.subplots(1, len(keys), figsize=(3.2 * len(keys), 3.2), sharey=True, squeeze=False)
    for ax, key in zip(axes[0], keys, strict=True):
        for name, style in ((ANCHOR, "o--"), ("default", "s-")):
            run = results[key]["runs"].get(name)
            if run is None:
                continue
            label = LABELS[key.split("/")[1]] if name == ANCHOR else "Fair (default)"
            ax.plot(["begin", "middle", "end"], [v or 0 for v in run["chunk_third"]], style, label=label)
        ax.set_title(key, fontsize=9)
        ax.set_xlabel("answer in its chunk")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("nDCG@10")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
