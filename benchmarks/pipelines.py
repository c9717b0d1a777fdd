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
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding.embedder import INSTANCE_DEFAULT
from fair_retrieval.evaluation.bootstrap import paired_bootstrap
from fair_retrieval.evaluation.bundled import bundled_model
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


def embedder_names(pipeline: str, only: list[str] | None = None) -> list[str]:
    """The runs of `pipeline`: the anchor, ours as shipped and plain, and (default pipelines) the candidate policies
    and the multi-vector study's rows; `only` keeps those named (in this order)."""
    names = [ANCHOR, "default", "default-plain"]
    if pipeline in DEFAULT_PIPELINES:
        names += [*CANDIDATES, *MULTIVECTOR_RUNS]
    return names if only is None else [n for n in names if n in only]


def make_embedding(stack: str, name: str, model: str) -> Any:
    """The stack's embedding object for `name`, loaded as a user loads it (by model path).

    An anchor gets the model's own prompts when it has them (e.g. multilingual-e5's "query: " / "passage: ", as its
    model card asks and as FairEmbedder applies them); for a model without prompts it is the stack's default.
    """
    query, document = model_prompts(model)
    if stack == "llamaindex":
        from llama_index.embeddings.fair import FairEmbedding

        if name == ANCHOR:
            from llama_index.embeddings.huggingface import HuggingFaceEmbedding

            prompts = {"query_instruction": query, "text_instruction": document} if query or document else {}
            return HuggingFaceEmbedding(model_name=model, **prompts)
        fixed = with_model_prompts(model, _options(name))
        return FairEmbedding(model=model, **_options(name)) if fixed is None else FairEmbedding(embedder=fixed)
    from langchain_fair import FairEmbeddings

    if name == ANCHOR:
        from langchain_huggingface import HuggingFaceEmbeddings

        prompts = (
            {"encode_kwargs": {"prompt": document or ""}, "query_encode_kwargs": {"prompt": query or ""}}
            if query or document
            else {}
        )
        return HuggingFaceEmbeddings(model_name=model, **prompts)
    fixed = with_model_prompts(model, _options(name))
    return FairEmbeddings(model=model, **_options(name)) if fixed is None else FairEmbeddings(embedder=fixed)


def with_model_prompts(model: str, options: dict[str, Any]) -> FairEmbedder | None:
    """A FairEmbedder with `options` whose document prompt is the model's configured one, where loading the model
    plainly resolves another (None when it resolves the configured one, or the model has none).

    sentence-transformers 6 adds an empty "document" prompt to every model, which hides multilingual-e5's
    "passage: " from `fair_retrieval.embedding.loading.document_prompt`; the prompt is then given explicitly, as
    `build_embedder(options, model, prompts=...)` allows, so that ours and the anchors read the same texts.
    """
    from fair_retrieval.embedding.building import build_embedder
    from fair_retrieval.embedding.options import EmbedderOptions

    _, document = model_prompts(model)
    if document is None:
        return None
    plain = FairEmbedder(model, **options)
    if plain._document_prompt == document:
        return None
    return build_embedder(EmbedderOptions(**options), model, prompts={"document": document})


def model_prompts(model: str) -> tuple[str | None, str | None]:
    """The (query, document) prompts of a sentence-transformers folder's config, (None, None) if it has none."""
    config = Path(model) / "config_sentence_transformers.json"
    prompts = json.loads(config.read_text()).get("prompts", {}) if config.is_file() else {}
    document = next((prompts[n] for n in ("document", "passage", "corpus") if prompts.get(n)), None)
    return prompts.get("query") or None, document


def multivector_calibration(embedder: FairEmbedder) -> Calibration:
    """Calibration that acts inside one window: the default where a window holds its baskets, else baskets of 64
    tokens from one full basket on (MiniLM's 256-token window cannot hold the default's 2 × 192)."""
    default = Calibration()
    if embedder.window_content_tokens >= default.min_content_tokens:
        return default
    return Calibration(basket_size=64, min_full_baskets=1)


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


class SharedWindows:
    """One FairEmbedder for our rows of a (dataset, pipeline): its windows remembered, its queries looked up.

    While `remember` is on, `embed_document_windows` answers a text it has embedded before (with the same embedder
    configuration and calibration) from a cache kept per text in CACHE (so a later run reuses it); `embed_documents`
    is the pooled part of `embed_document_windows` (the library computes it so). So the pooled rows and one
    multi-vector row per aggregate embed the chunks once. `embed_query` returns the batch-embedded plain query
    vector of a benchmark question (checked equal on a sample by the caller), so latency is the store's search, not
    the model's.
    """

    def __init__(self, embedder: FairEmbedder, queries: dict[str, np.ndarray]) -> None:
        self.embedder = embedder
        self.remember = False
        self.hits = 0  # texts answered from remembered windows
        self.embedded = 0  # texts embedded
        self._caches: dict[str, dict[str, tuple[np.ndarray, ...]]] = {}
        embed_windows, embed_query = embedder.embed_document_windows, embedder.embed_query

        def windows(
            texts: Any,
            calibration: Any = INSTANCE_DEFAULT,
            show_progress_bar: Any = None,
            positional_scaling: Any = INSTANCE_DEFAULT,
        ) -> Any:
            calibration = embedder.calibration if calibration is INSTANCE_DEFAULT else calibration
            if not self.remember or positional_scaling is not INSTANCE_DEFAULT:
                return embed_windows(texts, calibration, show_progress_bar, positional_scaling)
            cache, name = self._cache(calibration)
            missing = list(dict.fromkeys(t for t in texts if _text_key(t) not in cache))
            if missing:
                fresh = embed_windows(missing, calibration, show_progress_bar)
                for i, text in enumerate(missing):
                    rows = np.flatnonzero(fresh.owners == i)
                    cache[_text_key(text)] = (
                        fresh.pooled[i],
                        fresh.vectors[rows],
                        fresh.spans[rows],
                        fresh.weights[rows],
                    )
                self._save(name, cache)
            self.hits += len(texts) - len(missing)
            self.embedded += len(missing)
            return _assemble([cache[_text_key(t)] for t in texts])

        def query(text: str) -> np.ndarray:
            return queries[text] if text in queries else embed_query(text)

        embedder.embed_document_windows = windows  # type: ignore[method-assign]  # embed_documents pools these
        embedder.embed_query = query  # type: ignore[method-assign]

    def _cache(self, calibration: Calibration | None) -> tuple[dict[str, tuple[np.ndarray, ...]], str]:
        import hashlib

        name = hashlib.sha256(f"{self.embedder!r}|{calibration!r}".encode()).hexdigest()[:20]
        if name not in self._caches:
            self._caches[name] = _load_windows(name)
        return self._caches[name], name

    def _save(self, name: str, cache: dict[str, tuple[np.ndarray, ...]]) -> None:
        CACHE.mkdir(parents=True, exist_ok=True)
        cache.update({k: v for k, v in _load_windows(name).items() if k not in cache})  # another run's, kept
        values = list(cache.values())
        partial = CACHE / f"windows-{name}.{os.getpid()}.partial.npz"
        np.savez(
            partial,
            keys=np.array(list(cache), dtype=str),
            counts=np.array([v[1].shape[0] for v in values]),
            pooled=np.stack([v[0] for v in values]),
            vectors=np.concatenate([v[1] for v in values]),
            spans=np.concatenate([v[2] for v in values]),
            weights=np.concatenate([v[3] for v in values]),
        )
        partial.replace(CACHE / f"windows-{name}.npz")

    def embedding(self, stack: str, calibration: Calibration | None = None) -> Any:
        """The stack's adapter over the shared embedder (its own calibration unless `calibration` is given)."""
        options = {} if calibration is None else {"calibration": calibration}
        if stack == "llamaindex":
            from llama_index.embeddings.fair import FairEmbedding

            return FairEmbedding(embedder=self.embedder, **options)
        from langchain_fair import FairEmbeddings

        return FairEmbeddings(embedder=self.embedder, **options)


def _load_windows(name: str) -> dict[str, tuple[np.ndarray, ...]]:
    """The windows per text saved under `name` (empty if none)."""
    path = CACHE / f"windows-{name}.npz"
    if not path.exists():
        return {}
    with np.load(path) as stored:  # each array read once (an npz member is read again at every access)
        keys, counts, pooled, vectors, spans, weights = (
            stored[k] for k in ("keys", "counts", "pooled", "vectors", "spans", "weights")
        )
    starts = np.concatenate([[0], np.cumsum(counts)])
    return {
        key: (
            pooled[i],
            vectors[starts[i] : starts[i + 1]],
            spans[starts[i] : starts[i + 1]],
            weights[starts[i] : starts[i + 1]],
        )
        for i, key in enumerate(keys.tolist())
    }


def _text_key(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def _assemble(parts: list[tuple[np.ndarray, ...]]) -> Any:
    """DocumentWindows of texts from their cached (pooled, vectors, spans, weights)."""
    from fair_retrieval.embedding.windows import DocumentWindows

    counts = [p[1].shape[0] for p in parts]
    return DocumentWindows(
        np.stack([p[0] for p in parts]).astype(np.float32),
        np.concatenate([p[1] for p in parts]).astype(np.float32),
        np.repeat(np.arange(len(parts), dtype=np.int64), counts),
        np.concatenate([p[2] for p in parts]).astype(np.int64),
        np.concatenate([p[3] for p in parts]).astype(np.int64),
    )


class QueryTable:
    """A LangChain `Embeddings` that embeds documents with `inner` and answers known queries from a table."""

    def __new__(cls, inner: Any, queries: dict[str, np.ndarray]) -> Any:
        from langchain_core.embeddings import Embeddings

        class _Table(Embeddings):
            def embed_documents(self, texts: list[str]) -> list[list[float]]:
                return inner.embed_documents(texts)  # type: ignore[no-any-return]

            def embed_query(self, text: str) -> list[float]:
                return queries[text].tolist() if text in queries else inner.embed_query(text)  # type: ignore[no-any-return]

        return _Table()


def folder_bytes(path: Path) -> int:
    """Bytes of every file under `path`."""
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def _timed_rankings(ask: Callable[[Question, np.ndarray], list[str]], questions: list[Question], queries: np.ndarray):
    """Every question's ranking, and the seconds of each of the first LATENCY_QUERIES calls."""
    rankings, seconds = [], []
    for i, (question, vector) in enumerate(zip(questions, queries, strict=True)):
        started = time.perf_counter()
        rankings.append(ask(question, vector))
        if i < LATENCY_QUERIES:
            seconds.append(time.perf_counter() - started)
    return rankings, seconds


def _costs(build: float, seconds: list[float], size: int | None, chunks: int) -> dict[str, Any]:
    ms = np.asarray(seconds) * 1000
    return {
        "build_s": build,
        "chunks_per_s": chunks / build,
        "latency_ms_p50": float(np.percentile(ms, 50)),
        "latency_ms_p95": float(np.percentile(ms, 95)),
        "latency_queries": len(seconds),
        "index_bytes": size,
    }


class NoMultivectorError(RuntimeError):
    """The installed adapter's store has no multi-vector mode (the run is skipped, not failed)."""


def store_run(
    stack: str,
    embedding: Any,
    chunks: list[Chunk],
    questions: list[Question],
    queries: np.ndarray,
    aggregate: str | None,
) -> tuple[list[list[str]], dict[str, Any]]:
    """Index `chunks` in our store for `stack` (multi-vector with `aggregate`, or pooled when None) as a user does,
    save it, and retrieve top-10 through the stack's retriever. Returns the rankings and the costs."""
    import inspect

    options = {} if aggregate is None else {"multivector": True, "aggregate": aggregate}
    with tempfile.TemporaryDirectory(prefix="pipelines-store-") as folder:
        if stack == "langchain":
            from langchain_fair import FaissVectorStore

            if options and "multivector" not in inspect.signature(FaissVectorStore.__init__).parameters:
                raise NoMultivectorError("This langchain-fair's FaissVectorStore has no multivector mode.")
            started = time.perf_counter()
            store = FaissVectorStore.from_texts(
                [c.text for c in chunks], embedding, ids=[c.cid for c in chunks], **options
            )
            build = time.perf_counter() - started
            store.save_local(folder)
            retriever = store.as_retriever(search_kwargs={"k": K})

            def ask(question: Question, vector: np.ndarray) -> list[str]:
                return [doc.id for doc in retriever.invoke(question.text)]
        else:
            from llama_index.core import StorageContext, VectorStoreIndex
            from llama_index.core.schema import QueryBundle, TextNode

            try:
                from llama_index.vector_stores.fair import FairFaissVectorStore
            except ImportError:  # an installed release from before the store had its own distribution
                from llama_index.embeddings.fair import FairFaissVectorStore

            if options and "multivector" not in inspect.signature(FairFaissVectorStore.create).parameters:
                raise NoMultivectorError("The installed FairFaissVectorStore has no multivector mode.")
            vector_store = FairFaissVectorStore.create(embedding.embedder.dimension, embed_model=embedding, **options)
            nodes = [TextNode(id_=c.cid, text=c.text) for c in chunks]
            started = time.perf_counter()
            index = VectorStoreIndex(
                nodes, storage_context=StorageContext.from_defaults(vector_store=vector_store), embed_model=embedding
            )
            build = time.perf_counter() - started
            index.storage_context.persist(persist_dir=folder)
            retriever = index.as_retriever(similarity_top_k=K)

            def ask(question: Question, vector: np.ndarray) -> list[str]:
                bundle = QueryBundle(query_str=question.text, embedding=vector.tolist())
                return [hit.node.node_id for hit in retriever.retrieve(bundle)]

        size = folder_bytes(Path(folder))
    rankings, seconds = _timed_rankings(ask, questions, queries)
    return rankings, _costs(build, seconds, size, len(chunks))


def small_to_big_run(
    stack: str,
    model: str,
    chunks: list[Chunk],
    questions: list[Question],
    queries: np.ndarray,
    reference: FairEmbedder,
) -> tuple[list[list[str]], dict[str, Any]]:
    """The stack's own small-to-big over `chunks` as parents: children of one window (model tokens, the window's
    overlap), embedded by the anchor; the distinct parents returned for k = 10, in the order the retriever gives."""
    size, overlap = reference.window_content_tokens, reference.window_overlap
    anchor = make_embedding(stack, ANCHOR, model)
    own = np.array([query_vector_fn(stack, anchor)(q.text) for q in questions[:16]], dtype=np.float32)
    if np.abs(own - queries[:16]).max() > 1e-5:
        raise RuntimeError("The anchor's query vectors differ from the plain ones; the benchmark assumes equality.")
    table = {q.text: v for q, v in zip(questions, queries, strict=True)}
    if stack == "langchain":
        from langchain_core.documents import Document
        from langchain_core.stores import InMemoryStore
        from langchain_fair import FaissVectorStore
        from langchain_text_splitters import RecursiveCharacterTextSplitter

        try:
            from langchain_classic.retrievers import ParentDocumentRetriever
        except ImportError:  # langchain < 1.0
            from langchain.retrievers import ParentDocumentRetriever

        children = RecursiveCharacterTextSplitter.from_huggingface_tokenizer(
            reference.tokenizer, chunk_size=size, chunk_overlap=overlap
        )
        retriever = ParentDocumentRetriever(
            vectorstore=FaissVectorStore(QueryTable(anchor, table)),
            docstore=InMemoryStore(),
            child_splitter=children,
            search_kwargs={"k": K},
        )
        started = time.perf_counter()
        retriever.add_documents(
            [Document(page_content=c.text, metadata={"chunk": c.cid}) for c in chunks], ids=[c.cid for c in chunks]
        )
        build = time.perf_counter() - started
        child_count = sum(len(children.split_text(c.text)) for c in chunks)  # as add_documents splits them

        def ask(question: Question, vector: np.ndarray) -> list[str]:
            return _distinct(doc.metadata["chunk"] for doc in retriever.invoke(question.text))
    else:
        from llama_index.core import VectorStoreIndex
        from llama_index.core.node_parser import SentenceSplitter
        from llama_index.core.retrievers import RecursiveRetriever
        from llama_index.core.schema import IndexNode, QueryBundle, TextNode

        parents = [TextNode(id_=c.cid, text=c.text) for c in chunks]
        splitter = SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=reference.tokenizer.tokenize)
        started = time.perf_counter()
        nodes = [
            IndexNode.from_text_node(child, parent.node_id)
            for parent in parents
            for child in splitter.get_nodes_from_documents([parent])
        ]
        vector_retriever = VectorStoreIndex(nodes, embed_model=anchor).as_retriever(similarity_top_k=K)
        build = time.perf_counter() - started
        child_count = len(nodes)
        retriever = RecursiveRetriever(
            "vector", retriever_dict={"vector": vector_retriever}, node_dict={p.node_id: p for p in parents}
        )

        def ask(question: Question, vector: np.ndarray) -> list[str]:
            bundle = QueryBundle(query_str=question.text, embedding=vector.tolist())
            return _distinct(hit.node.node_id for hit in retriever.retrieve(bundle))

    rankings, seconds = _timed_rankings(ask, questions, queries)
    costs = _costs(build, seconds, None, len(chunks))
    costs["children"] = child_count
    return rankings, costs


def _distinct(ids: Any) -> list[str]:
    """`ids` without repeats, first occurrence kept."""
    return list(dict.fromkeys(ids))


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
            pooled = entry["runs"].get(POOLED)
            if pooled is not None and name != POOLED:
                run["vs_pooled"] = paired_bootstrap(pooled["per_query"], run["per_query"], groups)
                run["gain_vs_pooled"] = run["ndcg@10"] - pooled["ndcg@10"]
            small = entry["runs"].get(SMALL_TO_BIG)
            if small is not None and name.startswith("mv-"):
                run["vs_small_to_big"] = paired_bootstrap(small["per_query"], run["per_query"], groups)
                run["gain_vs_small_to_big"] = run["ndcg@10"] - small["ndcg@10"]
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
        base = scifact.get(results.get("scifact", {}).get("truncation", "truncate"), {}).get("ndcg@10")
        sci_ok = None if sci is None or base is None else sci >= base - SCIFACT_TOLERANCE
        verdicts[name] = {
            "position_checks": checks,
            "scifact_ok": sci_ok,
            "meets_rule": all(c is True for c in checks) and sci_ok is True,
            "mean_ndcg": float(np.mean(ndcgs)) if ndcgs else None,
        }
    qualifying = [n for n in CANDIDATES if verdicts[n]["meets_rule"]]
    chosen = max(qualifying, key=lambda n: verdicts[n]["mean_ndcg"]) if qualifying else None
    return {"verdicts": verdicts, "chosen": chosen, "multivector": multivector_verdicts(results)}


def multivector_verdicts(results: dict[str, Any]) -> dict[str, Any]:
    """The multi-vector rule (docs/multivector_study.md) for every multi-vector run, and the aggregate it picks.

    Per (position set, default pipeline): nDCG@10 ≥ pooled + MV_GAIN, ≥ the stack's small-to-big, PSI ≤ pooled's;
    SciFact ≥ pooled − SCIFACT_TOLERANCE. The aggregate: the highest mean nDCG@10 over the four runs among the
    aggregates meeting it (rounded to three decimals; a tie goes to the earlier of AGGREGATE_CHOICES, "max" first);
    if none meets it, the same among those meeting the PSI and SciFact parts.
    """
    scifact = results.get("scifact", {}).get("runs", {})
    verdicts: dict[str, Any] = {}
    for name in (*MULTIVECTOR, *MULTIVECTOR_CALIBRATED):
        parts: dict[str, Any] = {}
        ndcgs = []
        for dataset in RULE_DATASETS:
            for pipeline in DEFAULT_PIPELINES:
                runs = results.get(f"{dataset}/{pipeline}", {}).get("runs", {})
                run, pooled, small = runs.get(name), runs.get(POOLED), runs.get(SMALL_TO_BIG)
                if run is None or pooled is None:
                    parts[f"{dataset}/{pipeline}"] = None
                    continue
                ndcgs.append(run["ndcg@10"])
                parts[f"{dataset}/{pipeline}"] = {
                    "gain": run["ndcg@10"] >= pooled["ndcg@10"] + MV_GAIN,
                    "small_to_big": None if small is None else run["ndcg@10"] >= small["ndcg@10"],
                    "psi": run["psi"] <= pooled["psi"],
                }
        pooled_name = "pooled-calibrated" if name in MULTIVECTOR_CALIBRATED else POOLED
        sci, base = scifact.get(name, {}).get("ndcg@10"), scifact.get(POOLED, {}).get("ndcg@10")
        sci_ok = None if sci is None or base is None else sci >= base - SCIFACT_TOLERANCE
        complete = all(v is not None and None not in v.values() for v in parts.values())
        verdicts[name] = {
            "runs": parts,
            "scifact_ok": sci_ok,
            "scifact_vs": POOLED,
            "scifact_pooled_same_embedder": pooled_name,
            "meets_rule": complete and all(all(v.values()) for v in parts.values()) and sci_ok is True,
            "meets_psi_and_scifact": complete and all(v["psi"] for v in parts.values()) and sci_ok is True,
            "mean_ndcg": float(np.mean(ndcgs)) if ndcgs else None,
        }

    def pick(names: list[str]) -> str | None:
        if not names:
            return None
        return max(names, key=lambda n: (round(verdicts[n]["mean_ndcg"], 3), -TIE_ORDER.index(n.removeprefix("mv-"))))

    meeting = [n for n in MULTIVECTOR if verdicts[n]["meets_rule"]]
    fallback = [n for n in MULTIVECTOR if verdicts[n]["meets_psi_and_scifact"]]
    chosen = pick(meeting) or pick(fallback)
    return {
        "verdicts": verdicts,
        "rule_holds": bool(meeting),
        "aggregate": None if chosen is None else chosen.removeprefix("mv-"),
        "aggregate_by": "rule" if meeting else ("psi and scifact parts" if fallback else None),
    }


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
                f" {_share(run['tokens_never_embedded'])} | {_share(run['chunks_calibrated'])} |"
                f" {run['chunks_per_s']:.1f} |"
            )
    if "scifact" in results:
        runs = results["scifact"]["runs"]
        base = runs.get(results["scifact"].get("truncation", "truncate"), {}).get("ndcg@10")
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
        if key == "scifact" or pipeline not in DEFAULT_PIPELINES or not {"default", ANCHOR} <= set(entry["runs"]):
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
                f" {'–' if end is None else f'{end:.3f}'} | {psi} | {_share(run['tokens_never_embedded'])} |"
            )
    return "\n".join(lines) + "\n"


def _share(value: float | None) -> str:
    return "–" if value is None else f"{value:.0%}"


def _ci(run: dict[str, Any], versus: str = "vs_pooled", gain: str = "gain_vs_pooled") -> str:
    if versus not in run:
        return ""
    lo, hi = run[versus]["ndcg_delta_ci"]
    return f"{run[gain]:+.3f} [{lo:+.3f}, {hi:+.3f}]"


def _row_label(name: str, pipeline: str) -> str:
    if name == ANCHOR:
        return LABELS[pipeline]
    if name == SMALL_TO_BIG:
        return SMALL_TO_BIG_LABELS[pipeline]
    if name == POOLED:
        return f"{OURS[pipeline]} (pooled, default)"
    if name == POOLED_STORE:
        return f"{OURS[pipeline]} pooled in {'FaissVectorStore' if pipeline == 'langchain' else 'FairFaissVectorStore'}"
    calibrated = name in MULTIVECTOR_CALIBRATED
    aggregate = name.removeprefix("mv-").removeprefix("calibrated-")
    return f"multivector=True, aggregate={aggregate!r}" + (", calibrated windows" if calibrated else "")


def multivector_table(results: dict[str, Any]) -> str:
    """The multi-vector study: every row of the default pipelines with Δ vs pooled, distinct results, costs."""
    lines = [
        "| data → pipeline | run | nDCG@10 | Δ vs pooled [95 % CI] | Δ vs small-to-big [95 % CI] |"
        " begin / mid / end of chunk | PSI | distinct of 10 | build s | index MB | p50 / p95 ms |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.items():
        dataset, _, pipeline = key.partition("/")
        if key == "scifact" or pipeline not in DEFAULT_PIPELINES:
            continue
        where = f"{dataset} ({entry['documents']} docs, {entry['chunks']} chunks, {entry['questions']} q) → {pipeline}"
        first = True
        for name in (ANCHOR, SMALL_TO_BIG, POOLED, POOLED_STORE, *MULTIVECTOR, *MULTIVECTOR_CALIBRATED):
            run = entry["runs"].get(name)
            if run is None or (name == POOLED_STORE and run.get("same_as") == POOLED):
                continue
            thirds = " / ".join("–" if v is None else f"{v:.3f}" for v in run["chunk_third"])
            build = (
                ""
                if "build_s" not in run
                else f"{run['build_s']:.1f}" + (" (reused)" if run.get("embedding_reused") else "")
            )
            size = "" if run.get("index_bytes") is None else f"{run['index_bytes'] / 1e6:.2f}"
            latency = (
                "" if "latency_ms_p50" not in run else f"{run['latency_ms_p50']:.2f} / {run['latency_ms_p95']:.2f}"
            )
            lines.append(
                f"| {where if first else ''} | {_row_label(name, pipeline)} | {run['ndcg@10']:.3f} | {_ci(run)} |"
                f" {_ci(run, 'vs_small_to_big', 'gain_vs_small_to_big')} |"
                f" {thirds} | {run['psi']:.2f} | {run.get('distinct', 10.0):.2f} | {build} | {size} | {latency} |"
            )
            first = False
    scifact = results.get("scifact", {}).get("runs", {})
    if POOLED in scifact:
        base = scifact[POOLED]
        lines += ["", "| SciFact (300 claims, 5,183 abstracts) | nDCG@10 | Δ vs pooled [95 % CI] |", "|---|---|---|"]
        for name in (POOLED, *MULTIVECTOR, "pooled-calibrated", *MULTIVECTOR_CALIBRATED):
            run = scifact.get(name)
            if run is None:
                continue
            delta = ""
            if name != POOLED:
                lo, hi = paired_bootstrap(base["per_query"], run["per_query"], {})["ndcg_delta_ci"]
                delta = f"{run['ndcg@10'] - base['ndcg@10']:+.4f} [{lo:+.4f}, {hi:+.4f}]"
            lines.append(f"| {name} | {run['ndcg@10']:.4f} | {delta} |")
    return "\n".join(lines) + "\n"


def multivector_rule_table(results: dict[str, Any], report: dict[str, Any]) -> str:
    """The rule's table: each multi-vector run on the four rule runs (vs pooled and small-to-big), SciFact, verdict."""
    keys = [f"{d}/{p}" for d in RULE_DATASETS for p in DEFAULT_PIPELINES]
    lines = [
        "| run | " + " | ".join(f"{k} nDCG@10 (PSI)" for k in keys) + " | mean | SciFact Δ vs pooled | rule |",
        "|---" * (len(keys) + 4) + "|",
    ]
    mv = report["multivector"]
    scifact = results.get("scifact", {}).get("runs", {})
    base = scifact.get(POOLED, {}).get("ndcg@10")
    for name in (ANCHOR, SMALL_TO_BIG, POOLED, *MULTIVECTOR, *MULTIVECTOR_CALIBRATED):
        cells, ndcgs = [], []
        for key in keys:
            run = results.get(key, {}).get("runs", {}).get(name)
            cells.append("–" if run is None else f"{run['ndcg@10']:.3f} ({run['psi']:.2f})")
            if run is not None:
                ndcgs.append(run["ndcg@10"])
        sci = scifact.get(name, {}).get("ndcg@10")
        sci_cell = "–" if sci is None or base is None or name == POOLED else f"{sci - base:+.4f}"
        verdict = mv["verdicts"].get(name)
        rule = "–"
        if verdict is not None:
            failed = [
                f"{k}: {part}"
                for k, parts in verdict["runs"].items()
                if parts
                for part, ok in parts.items()
                if ok is False
            ]
            if verdict["scifact_ok"] is False:
                failed.append("scifact")
            rule = "meets" if verdict["meets_rule"] else "fails " + ", ".join(failed) if failed else "incomplete"
            missing = [k for k, parts in verdict["runs"].items() if parts is None or None in parts.values()]
            if missing or verdict["scifact_ok"] is None:
                rule += (
                    " (not measured: "
                    + ", ".join(missing + (["scifact"] if verdict["scifact_ok"] is None else []))
                    + ")"
                )
            if name.removeprefix("mv-") == mv["aggregate"]:
                rule += " — chosen aggregate"
        mean = f"{np.mean(ndcgs):.3f}" if len(ndcgs) == len(keys) else "–"
        label = {ANCHOR: "anchor", SMALL_TO_BIG: "small-to-big (stack's own)", POOLED: "pooled (default)"}.get(
            name, name
        )
        lines.append(f"| {label} | {' | '.join(cells)} | {mean} | {sci_cell} | {rule} |")
    lines.append("")
    lines.append(f"Rule holds: {mv['rule_holds']}; aggregate: {mv['aggregate']} (by {mv['aggregate_by']}).")
    return "\n".join(lines) + "\n"


def readme_multivector_table(results: dict[str, Any], aggregate: str | None) -> str:
    """The README's first-screen block: per default pipeline the anchor, small-to-big, pooled and multi-vector."""
    name = f"mv-{aggregate or 'max'}"
    lines = [
        "| documents → pipeline | run | nDCG@10 | Δ vs pooled [95 % CI] | end-of-chunk nDCG@10 | PSI | results of 10 |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, entry in results.items():
        dataset, _, pipeline = key.partition("/")
        if key == "scifact" or pipeline not in DEFAULT_PIPELINES or dataset not in RULE_DATASETS:
            continue
        where = f"{dataset} ({entry['documents']} documents, {entry['questions']} questions) → {pipeline}"
        first = True
        for row in (ANCHOR, SMALL_TO_BIG, POOLED, name):
            run = entry["runs"].get(row)
            if run is None:
                continue
            end = run["chunk_third"][2]
            lines.append(
                f"| {where if first else ''} | {_row_label(row, pipeline)} | {run['ndcg@10']:.3f} | {_ci(run)} |"
                f" {'–' if end is None else f'{end:.3f}'} | {run['psi']:.2f} | {run.get('distinct', 10.0):.1f} |"
            )
            first = False
    return "\n".join(lines) + "\n"


def candidate_table(results: dict[str, Any], report: dict[str, Any]) -> str:
    """The rule's table: every candidate policy on each (rule dataset, default pipeline), SciFact, the verdict."""
    keys = [f"{d}/{p}" for d in RULE_DATASETS for p in DEFAULT_PIPELINES]
    head = " | ".join(f"{k} nDCG@10 (PSI vs anchor)" for k in keys)
    lines = [f"| policy | {head} | SciFact Δ vs truncate | rule |", "|---" * (len(keys) + 3) + "|"]
    scifact = results.get("scifact", {}).get("runs", {})
    base = scifact.get(results.get("scifact", {}).get("truncation", "truncate"), {}).get("ndcg@10")
    for name in [ANCHOR, *CANDIDATES]:
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
