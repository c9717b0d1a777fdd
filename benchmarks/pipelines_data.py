"""The pipelines benchmark's inputs and scoring: its settings (datasets, pipelines, candidate policies), the
documents of each dataset, the chunks of each stack's splitter, and how a ranking is judged
(benchmarks/pipelines.py)."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.evaluation.data.needle import build_needle_benchmark
from fair_retrieval.evaluation.data.squad import read_squad
from fair_retrieval.evaluation.metrics import per_query_metrics, position_sensitivity_index

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
    # Overlaps are pinned: a name keeps its meaning when the library's default overlap changes.
    "truncate": {"long_documents": "truncate", "max_length": 256},
    "windows-256": {"long_documents": "windows", "max_length": 256, "window_overlap": 0},
    "windows-256-overlap32": {"long_documents": "windows", "max_length": 256, "window_overlap": 32},
    "windows-512": {"long_documents": "windows", "max_length": 512, "window_overlap": 0},
    "windows-512-plain": {"long_documents": "windows", "max_length": 512, "window_overlap": 0, "calibration": None},
    # A model whose own window is 512 tokens (multilingual-e5-small): truncation and the default's overlap there.
    "truncate-512": {"long_documents": "truncate", "max_length": 512},
    "windows-512-overlap64": {"long_documents": "windows", "max_length": 512, "window_overlap": 64},
    "windows-512-overlap64-plain": {
        "long_documents": "windows",
        "max_length": 512,
        "window_overlap": 64,
        "calibration": None,
    },
}
ANCHOR = "anchor"
POOLED = "default"  # our pooled default: what the multi-vector rows are compared with
SMALL_TO_BIG = "small-to-big"  # the stack's own parent/child recipe with the anchor's embedding
POOLED_STORE = "pooled-store"  # our pooled default through the store of the multi-vector rows (size, latency)
AGGREGATE_CHOICES = ("max", "max-mean", "top2")  # the stores' `aggregate=` options, "max" first (ties go to it)
MULTIVECTOR = tuple(f"mv-{a}" for a in AGGREGATE_CHOICES)
MULTIVECTOR_CALIBRATED = tuple(f"mv-calibrated-{a}" for a in AGGREGATE_CHOICES)
STORE_RUNS = (*MULTIVECTOR, POOLED_STORE, *MULTIVECTOR_CALIBRATED)  # pooled-store after mv-*: it reuses their pass
MULTIVECTOR_RUNS = (SMALL_TO_BIG, *STORE_RUNS)
TIE_ORDER = ("max", "top2", "max-mean")  # the simplest first: a tie of mean nDCG@10 goes to the earlier
MV_GAIN, LATENCY_QUERIES, K = 0.04, 1000, 10
LABELS = {"llamaindex": "HuggingFaceEmbedding", "langchain": "HuggingFaceEmbeddings"}
CACHE = Path(__file__).resolve().parents[1] / ".bench_cache" / "pipelines"  # windows per text (ignored by git)
SMALL_TO_BIG_LABELS = {"llamaindex": "IndexNode + RecursiveRetriever", "langchain": "ParentDocumentRetriever"}
OURS = {"llamaindex": "FairEmbedding", "langchain": "FairEmbeddings"}

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
    """Chunks as LlamaIndex makes them (`get_nodes_from_documents`), with the node's own start offset, named by
    their position (LlamaIndex names nodes anew on every split, which would pair a resumed study's saved rankings
    with other chunks)."""
    from llama_index.core import Document

    nodes = splitter.get_nodes_from_documents([Document(text=t, id_=d) for d, t in documents.items()])
    chunks = []
    for position, node in enumerate(nodes):
        document = node.ref_doc_id
        text = node.get_content()
        chunks.append(
            Chunk(f"n{position:05d}", document, text, _placed(documents[document], text, node.start_char_idx))
        )
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
