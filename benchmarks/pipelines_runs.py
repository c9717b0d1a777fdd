"""The pipelines benchmark's runs: the embedders of each run (anchors, ours, the candidate policies), retrieval
through each stack's own retriever, the multi-vector stores and the stacks' small-to-big recipes
(benchmarks/pipelines.py)."""

from __future__ import annotations

import inspect
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from pipelines_data import (
    ANCHOR,
    CACHE,
    CANDIDATES,
    DEFAULT_PIPELINES,
    LATENCY_QUERIES,
    MULTIVECTOR_RUNS,
    Chunk,
    K,
    Question,
)

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding.embedder import INSTANCE_DEFAULT

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
    from fair_retrieval.embedding.embedder_building import build_embedder
    from fair_retrieval.embedding.embedder_options import EmbedderOptions

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
    texts, ids = [c.text for c in chunks], [c.cid for c in chunks]  # pooled: the embeddings' vectors compared
    store = FaissVectorStore.from_texts(texts, embedding, ids=ids, multivector=False)
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


def _check_mode(constructor: Any, options: dict[str, Any], what: str) -> None:
    if options.get("multivector") and "multivector" not in inspect.signature(constructor).parameters:
        raise NoMultivectorError(f"{what} has no multivector mode.")


def store_run(
    stack: str,
    embedding: Any,
    chunks: list[Chunk],
    questions: list[Question],
    queries: np.ndarray,
    aggregate: str | None,
    store_default: bool = False,
) -> tuple[list[list[str]], dict[str, Any]]:
    """Index `chunks` in our store for `stack` as a user does (multi-vector with `aggregate`, pooled when None, the
    store's own default with `store_default`), save it, retrieve top-10 by the stack's retriever; rankings, costs."""
    options: dict[str, Any] = {"multivector": True, "aggregate": aggregate} if aggregate else {"multivector": False}
    options = {} if store_default else options
    with tempfile.TemporaryDirectory(prefix="pipelines-store-") as folder:
        if stack == "langchain":
            from langchain_fair import FaissVectorStore

            _check_mode(FaissVectorStore.__init__, options, "This langchain-fair's FaissVectorStore")
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
            from llama_index.vector_stores.fair import FairFaissVectorStore

            _check_mode(FairFaissVectorStore.create, options, "The installed FairFaissVectorStore")
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
    anchor = make_embedding(stack, ANCHOR, model)
    own = np.array([query_vector_fn(stack, anchor)(q.text) for q in questions[:16]], dtype=np.float32)
    if np.abs(own - queries[:16]).max() > 1e-5:
        raise RuntimeError("The anchor's query vectors differ from the plain ones; the benchmark assumes equality.")
    table = {q.text: v for q, v in zip(questions, queries, strict=True)}
    embedding = QueryTable(anchor, table) if stack == "langchain" else anchor
    retriever, build, child_count = build_small_to_big(stack, embedding, chunks, reference)
    if stack == "langchain":

        def ask(question: Question, vector: np.ndarray) -> list[str]:
            return _distinct(doc.metadata["chunk"] for doc in retriever.invoke(question.text))
    else:
        from llama_index.core.schema import QueryBundle

        def ask(question: Question, vector: np.ndarray) -> list[str]:
            bundle = QueryBundle(query_str=question.text, embedding=vector.tolist())
            return _distinct(hit.node.node_id for hit in retriever.retrieve(bundle))

    rankings, seconds = _timed_rankings(ask, questions, queries)
    costs = _costs(build, seconds, None, len(chunks))
    costs["children"] = child_count
    return rankings, costs


def build_small_to_big(
    stack: str, embedding: Any, chunks: list[Chunk], reference: FairEmbedder
) -> tuple[Any, float, int]:
    """The stack's own one-window small-to-big over `chunks` as parents, built with `embedding`: children of one
    window (model tokens, the window's overlap) — LangChain's `ParentDocumentRetriever` over our store as the plain
    vector store, LlamaIndex's `IndexNode` children under a `VectorStoreIndex` and a `RecursiveRetriever` (k = 10).

    Returns:
        (the retriever, its build seconds, the children embedded).
    """
    size, overlap = reference.window_content_tokens, reference.window_overlap
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
            vectorstore=FaissVectorStore(embedding),
            docstore=InMemoryStore(),
            child_splitter=children,
            search_kwargs={"k": K},
        )
        started = time.perf_counter()
        retriever.add_documents(
            [Document(page_content=c.text, metadata={"chunk": c.cid}) for c in chunks], ids=[c.cid for c in chunks]
        )
        build = time.perf_counter() - started
        return retriever, build, sum(len(children.split_text(c.text)) for c in chunks)  # as add_documents splits
    from llama_index.core import VectorStoreIndex
    from llama_index.core.node_parser import SentenceSplitter
    from llama_index.core.retrievers import RecursiveRetriever
    from llama_index.core.schema import IndexNode, TextNode

    parents = [TextNode(id_=c.cid, text=c.text) for c in chunks]
    splitter = SentenceSplitter(chunk_size=size, chunk_overlap=overlap, tokenizer=reference.tokenizer.tokenize)
    started = time.perf_counter()
    nodes = [
        IndexNode.from_text_node(child, parent.node_id)
        for parent in parents
        for child in splitter.get_nodes_from_documents([parent])
    ]
    vector_retriever = VectorStoreIndex(nodes, embed_model=embedding).as_retriever(similarity_top_k=K)
    build = time.perf_counter() - started
    retriever = RecursiveRetriever(
        "vector", retriever_dict={"vector": vector_retriever}, node_dict={p.node_id: p for p in parents}
    )
    return retriever, build, len(nodes)


def _distinct(ids: Any) -> list[str]:
    return list(dict.fromkeys(ids))  # without repeats, first occurrence kept


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
