"""FairFaissVectorStore(multivector=True): nodes kept as their window vectors, k distinct nodes by their best window.

Everything runs through LlamaIndex's own entry points: `VectorStoreIndex.from_documents` with the store in a
`StorageContext`, retrievers and a query engine, `delete_ref_doc`, `IngestionPipeline` upserts with a docstore,
`StorageContext.persist` / `load_index_from_storage`. The results are checked against brute force over every window
vector, computed here independently of the store (`FairEmbedder.embed_document_windows` on the texts LlamaIndex
embeds), on a flat index, with a tiny random model whose 32-token window splits every node into several windows.
The real MiniLM checks that the best window's span covers a planted answer.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters, VectorStoreQuery
from llama_index.embeddings.fair import FairEmbedding
from llama_index.vector_stores.fair import FairFaissVectorStore
from llama_index.vector_stores.fair.faiss_vector_store import BEST_WINDOW_KEY

from fair_retrieval import Calibration, FairEmbedder, FaissIndex, MultiVectorIndex
from fair_retrieval.index import DEFAULT_AGGREGATE
from fair_retrieval.index.exact_rerank import RerankedIndex
from fair_retrieval.stores import StoreWindows
from fair_retrieval.stores.embedded_windows import content_offset
from tests.ranking import assert_same_ranking

WORDS = (
    "harbour ferry lantern orchard granite violin comet meadow basalt quarry falcon tundra copper saffron "
    "glacier marble walnut canyon pepper thistle beacon cobalt lagoon willow"
).split()
QUERIES = ["the ferry crosses the harbour", "granite quarry", "saffron pepper walnut", "a comet over the tundra"]
SPLITTER = SentenceSplitter(chunk_size=60, chunk_overlap=0)  # tiktoken tokens: two or more 32-token windows


def _text(document: int, sentences: int = 10) -> str:
    rng = np.random.default_rng(document)
    return " ".join(
        " ".join(str(word) for word in rng.choice(WORDS, size=7)).capitalize() + "." for _ in range(sentences)
    )


def _documents(count: int = 8) -> list[Document]:
    return [
        Document(text=_text(position), id_=f"d{position}", metadata={"group": position % 3})
        for position in range(count)
    ]


@pytest.fixture(scope="module")
def embedder(tiny_model: str) -> FairEmbedder:
    """32-token windows (so nodes are windowed) and a calibration that acts inside one."""
    return FairEmbedder(tiny_model, max_length=32, device="cpu", calibration=Calibration(basket_size=4))


@pytest.fixture()
def embed_model(embedder: FairEmbedder) -> FairEmbedding:
    return FairEmbedding(embedder=embedder, embed_batch_size=4)


@pytest.fixture()
def embedded_texts(embedder: FairEmbedder, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every text the embedder embeds (as documents) during the test."""
    seen: list[str] = []
    original = embedder.embed_document_windows

    def spy(texts: Any, *args: Any, **kwargs: Any) -> Any:
        seen.extend(texts)
        return original(texts, *args, **kwargs)

    monkeypatch.setattr(embedder, "embed_document_windows", spy)
    yield seen


def _build(
    embed_model: FairEmbedding, documents: list[Document] | None = None, **store_options: Any
) -> tuple[VectorStoreIndex, FairFaissVectorStore]:
    store_options.setdefault("default_query_mode", "dense")  # these tests hold the dense side against brute force
    store = FairFaissVectorStore.create(
        dim=embed_model.embedder.dimension,
        gpu=False,
        multivector=True,
        windows=StoreWindows(),
        embed_model=embed_model,
        **store_options,
    )
    context = StorageContext.from_defaults(vector_store=store)
    index = VectorStoreIndex.from_documents(
        documents if documents is not None else _documents(),
        storage_context=context,
        embed_model=embed_model,
        transformations=[SPLITTER],
    )
    return index, store


def _brute_force(
    store: FairFaissVectorStore,
    embedder: FairEmbedder,
    query: list[float],
    k: int,
    aggregate: str = DEFAULT_AGGREGATE,
    keep: Callable[[BaseNode], bool] = lambda node: True,
) -> list[tuple[str, float, tuple[int, int]]]:
    """(node id, score, best window's span in the node's text) of the k best stored nodes, from every window."""
    nodes = [node for node in store.get_nodes() if keep(node)]
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    windows = embedder.embed_document_windows(texts)
    vector = np.asarray(query, dtype=np.float64)
    ranked = []
    for position, node in enumerate(nodes):
        rows = windows.of(position)
        scores = windows.vectors[rows].astype(np.float64) @ vector
        best = int(np.argmax(scores))
        if aggregate == "max":
            score = float(scores[best])
        elif aggregate == "top2":
            score = float(np.sort(scores)[-2:].mean())
        else:  # "max-mean"
            score = float((scores[best] + windows.pooled[position].astype(np.float64) @ vector) / 2)
        offset = content_offset(texts[position], node.get_content())
        start, end = (int(value) - offset for value in windows.spans[rows][best])
        ranked.append((node.node_id, score, (max(start, 0), end)))
    ranked.sort(key=lambda hit: -hit[1])
    return ranked[:k]


def _hits(index: VectorStoreIndex, query: str, k: int, **options: Any) -> list[tuple[str, float, tuple[int, int]]]:
    found = index.as_retriever(similarity_top_k=k, **options).retrieve(query)
    spans = [hit.node.metadata[BEST_WINDOW_KEY] for hit in found]
    return [
        (hit.node.node_id, float(hit.score or 0.0), (span["start"], span["end"]))
        for hit, span in zip(found, spans, strict=True)
    ]


def _assert_same(found: list[tuple[str, float, tuple[int, int]]], expected: list[tuple[str, float, Any]]) -> None:
    assert [node_id for node_id, _, _ in found] == [node_id for node_id, _, _ in expected]
    np.testing.assert_allclose([score for _, score, _ in found], [score for _, score, _ in expected], atol=1e-5)
    assert [span for _, _, span in found] == [span for _, _, span in expected]


# ---------------------------------------------------------------------------------------------------- building


@pytest.mark.parametrize("aggregate", ["max", "top2", "max-mean"])
def test_retriever_returns_k_distinct_nodes_as_brute_force_over_every_window(
    embed_model: FairEmbedding, embedder: FairEmbedder, aggregate: str
) -> None:
    index, store = _build(embed_model, aggregate=aggregate)
    assert isinstance(store.client, MultiVectorIndex) and store.client.aggregate == aggregate
    nodes = store.get_nodes()
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    windows = embedder.embed_document_windows(texts)
    assert store.client.window_count == windows.vectors.shape[0] > 1.5 * len(nodes)  # most nodes are windowed
    first = store._store.records.int_ids[nodes[0].node_id]
    np.testing.assert_allclose(store.client.get_window_vectors(first), windows.vectors[windows.of(0)], atol=1e-5)
    np.testing.assert_allclose(  # get_nodes gives the pooled vector LlamaIndex was given
        np.array([node.embedding for node in nodes]), embedder.embed_documents(texts), atol=1e-5
    )
    for query in QUERIES:
        found = _hits(index, query, 4)
        assert len({node_id for node_id, _, _ in found}) == 4
        _assert_same(found, _brute_force(store, embedder, embed_model.get_query_embedding(query), 4, aggregate))


def test_spans_are_in_the_nodes_own_text_and_windows_cover_it(embed_model: FairEmbedding) -> None:
    _, store = _build(embed_model)
    assert isinstance(store.client, MultiVectorIndex)
    counts = []
    for node in store.get_nodes():
        text = node.get_content()
        assert node.get_content(metadata_mode=MetadataMode.EMBED) != text  # the metadata lines come first
        spans = store.client.window_spans(store._store.records.int_ids[node.node_id])
        assert spans[0][0] == 0 and spans[-1][1] == len(text)
        assert all(start < end <= len(text) for start, end in spans)
        counts.append(len(spans))
    assert max(counts) > 1


def test_hnsw_also_returns_k_distinct_nodes(embed_model: FairEmbedding) -> None:
    index, store = _build(embed_model, kind="hnsw", M=8)
    assert isinstance(store.client, MultiVectorIndex) and store.client.kind == "hnsw"
    found = _hits(index, QUERIES[0], 5)
    assert len({node_id for node_id, _, _ in found}) == 5


# ---------------------------------------------------------------------------------------------------- one pass


def _read_again(embedder: FairEmbedder, texts: list[str]) -> Counter[str]:
    """What a store of the embed model's own windows reads again of nodes it was given embedded: the texts that
    are several windows (their windows cannot come from a pooled vector); when none is, the longest text alone,
    to check the given vectors before it takes them."""
    (whole,) = embedder.whole_windows(texts)
    cut = [text for text, weight in zip(texts, whole, strict=True) if weight is None]
    if cut:
        return Counter(cut)
    return Counter([min(texts, key=lambda text: (-embedder.token_lengths([text])[0], texts.index(text)))])


def test_each_text_is_embedded_once_and_the_store_reads_only_the_windowed_ones_again(
    embed_model: FairEmbedding, embedder: FairEmbedder, embedded_texts: list[str], caplog: Any
) -> None:
    with caplog.at_level(logging.WARNING, logger="llama_index.vector_stores.fair.node_store"):
        _, store = _build(embed_model)
    stored = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in store.get_nodes()]
    again = _read_again(embedder, stored)
    assert 0 < sum(again.values()) < len(stored)  # some nodes are one window: their vectors are taken
    assert Counter(embedded_texts) == Counter(stored) + again  # each text LlamaIndex embedded, then the windowed
    assert "have embeddings other than" not in caplog.text


def test_an_ingestion_pipeline_embeds_each_text_once_and_the_store_its_windowed_ones(
    embed_model: FairEmbedding, embedder: FairEmbedder, embedded_texts: list[str]
) -> None:
    store = FairFaissVectorStore.create(
        dim=embed_model.embedder.dimension, gpu=False, multivector=True, windows=StoreWindows(), embed_model=embed_model
    )
    pipeline = IngestionPipeline(transformations=[SPLITTER, embed_model], vector_store=store)
    nodes = pipeline.run(documents=_documents(4))
    assert len(store.node_ids) == len(nodes) > 4
    stored = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in store.get_nodes()]
    assert Counter(embedded_texts) == Counter(stored) + _read_again(embedder, stored)


def test_vectors_made_elsewhere_are_taken_alike_and_foreign_ones_counted(
    embedder: FairEmbedder, embed_model: FairEmbedding, embedded_texts: list[str], caplog: Any
) -> None:
    nodes = SPLITTER.get_nodes_from_documents(_documents(3))
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    for node, vector in zip(nodes, FairEmbedding(embedder=embedder).get_text_embedding_batch(texts), strict=True):
        node.embedding = vector  # another FairEmbedding of the same model: this one never saw these texts
    embedded_texts.clear()
    store = FairFaissVectorStore.create(
        dim=embedder.dimension,
        gpu=False,
        multivector=True,
        windows=StoreWindows(),
        embed_model=embed_model,
        default_query_mode="dense",
    )
    with caplog.at_level(logging.DEBUG, logger="llama_index.vector_stores.fair.node_store"):
        store.add(nodes)
    again = _read_again(embedder, texts)
    assert Counter(embedded_texts) == again  # the windowed ones once more, each; the others' vectors taken
    read = sum(again.values())
    assert f"{len(nodes) - read} taken from the nodes' own vectors" in caplog.text
    assert f"{read} nodes read again by the embed model in 1 call(s); {read} given vector(s) compared" in caplog.text
    assert "have embeddings other than" not in caplog.text
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
    _assert_same(
        _hits(index, QUERIES[1], 3), _brute_force(store, embedder, embed_model.get_query_embedding(QUERIES[1]), 3)
    )

    foreign = [
        TextNode(
            id_=f"x{i}", text=text, embedding=np.random.default_rng(i).standard_normal(embedder.dimension).tolist()
        )
        for i, text in enumerate(texts[:2])
    ]
    with caplog.at_level(logging.WARNING, logger="llama_index.vector_stores.fair.node_store"):
        store.add(foreign)
    assert "2 nodes have embeddings other than the embed model gives" in caplog.text


# ---------------------------------------------------------------------------------------------------- queries


def test_filters_apply_per_node_and_still_return_k(embed_model: FairEmbedding, embedder: FairEmbedder) -> None:
    index, store = _build(embed_model)
    filters = MetadataFilters(filters=[MetadataFilter(key="group", value=1, operator=FilterOperator.EQ)])
    matching = [node for node in store.get_nodes() if node.metadata["group"] == 1]
    assert len(matching) > 4
    for query in QUERIES:
        found = _hits(index, query, 4, filters=filters)
        assert len(found) == 4
        assert all(store.get_nodes(node_ids=[node_id])[0].metadata["group"] == 1 for node_id, _, _ in found)
        expected = _brute_force(
            store, embedder, embed_model.get_query_embedding(query), 4, keep=lambda node: node.metadata["group"] == 1
        )
        _assert_same(found, expected)
    everything = index.as_retriever(similarity_top_k=len(matching) + 5, filters=filters).retrieve(QUERIES[0])
    assert len(everything) == len(matching)  # k beyond the matching nodes: each matching node once


def test_the_best_window_is_in_a_copy_and_kept_out_of_the_llm_text(embed_model: FairEmbedding) -> None:
    index, store = _build(embed_model)
    response = index.as_query_engine(llm=MockLLM(), similarity_top_k=3).query(QUERIES[2])
    sources = response.source_nodes
    assert len({source.node.node_id for source in sources}) == 3
    for source in sources:
        best = source.node.metadata[BEST_WINDOW_KEY]
        assert set(best) == {"start", "end", "window"} and 0 <= best["start"] < best["end"]
        assert BEST_WINDOW_KEY not in source.node.get_content(metadata_mode=MetadataMode.LLM)
        assert BEST_WINDOW_KEY not in source.node.get_content(metadata_mode=MetadataMode.EMBED)
        assert BEST_WINDOW_KEY not in store.get_nodes(node_ids=[source.node.node_id])[0].metadata
    vector = embed_model.get_query_embedding(QUERIES[2])
    result = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3))
    assert result.ids == [source.node.node_id for source in sources]
    assert all(BEST_WINDOW_KEY in node.metadata for node in result.nodes or [])


def test_planted_answer_is_found_and_its_window_covers_it(minilm_path: str) -> None:
    from fair_retrieval.evaluation.data.needle import haystack_sentences

    embed_model = FairEmbedding(embedder=FairEmbedder(minilm_path, max_length=64, device="cpu"))
    sentences = haystack_sentences()[:60]
    planted = "The lighthouse keeper on Skerry Island feeds seventeen stray cats every morning."
    text = " ".join([*sentences[:25], planted, *sentences[25:40]])
    documents = [Document(text=text, id_="planted")] + [
        Document(text=" ".join(sentences[start : start + 10]), id_=f"other-{start}") for start in (40, 50)
    ]
    store = FairFaissVectorStore.create(
        dim=embed_model.embedder.dimension, gpu=False, multivector=True, windows=StoreWindows(), embed_model=embed_model
    )
    index = VectorStoreIndex.from_documents(
        documents, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
    )
    assert len(store.node_ids) == 3  # one node each: the planted one spans many 64-token windows
    best = index.as_retriever(similarity_top_k=3).retrieve("How many cats does the lighthouse keeper feed?")
    assert len(best) == 3 and best[0].node.ref_doc_id == "planted"
    span = best[0].node.metadata[BEST_WINDOW_KEY]
    start = text.index(planted)
    assert span["window"] > 0 and span["start"] < start + len(planted) and span["end"] > start
    assert "seventeen stray cats" in best[0].node.get_content()[span["start"] : span["end"]]


# ---------------------------------------------------------------------------------------------------- changing


def test_delete_ref_doc_removes_every_window_of_every_node(embed_model: FairEmbedding, embedder: FairEmbedder) -> None:
    index, store = _build(embed_model)
    assert isinstance(store.client, MultiVectorIndex)
    removed = [node.node_id for node in store.get_nodes() if node.ref_doc_id == "d2"]
    assert len(removed) > 1
    index.delete_ref_doc("d2")
    assert not set(removed) & set(store.node_ids)
    remaining = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in store.get_nodes()]
    assert store.client.window_count == embedder.embed_document_windows(remaining).vectors.shape[0]
    vector = embed_model.get_query_embedding(QUERIES[0])
    _assert_same(_hits(index, QUERIES[0], 5), _brute_force(store, embedder, vector, 5))

    store.delete_nodes(node_ids=store.node_ids[:2])
    assert len(store.client) == len(remaining) - 2
    _assert_same(_hits(index, QUERIES[0], 5), _brute_force(store, embedder, vector, 5))
    store.clear()
    assert store.node_ids == [] and store.client.window_count == 0


def test_ingestion_pipeline_upserts_replace_a_changed_documents_windows(
    embed_model: FairEmbedding, embedder: FairEmbedder, embedded_texts: list[str]
) -> None:
    store = FairFaissVectorStore.create(
        dim=embed_model.embedder.dimension,
        gpu=False,
        multivector=True,
        windows=StoreWindows(),
        embed_model=embed_model,
        default_query_mode="dense",
    )
    pipeline = IngestionPipeline(
        transformations=[SPLITTER, embed_model],
        vector_store=store,
        docstore=SimpleDocumentStore(),
        docstore_strategy=DocstoreStrategy.UPSERTS,
    )
    documents = _documents(4)
    pipeline.run(documents=documents)
    before = {node.node_id for node in store.get_nodes() if node.ref_doc_id == "d1"}
    embedded_texts.clear()
    changed = Document(text=_text(99, sentences=4), id_="d1", metadata={"group": 1})
    pipeline.run(documents=[documents[0], changed, *documents[2:]])
    after = [node for node in store.get_nodes() if node.ref_doc_id == "d1"]
    assert after and not before & {node.node_id for node in after}
    assert all(_text(99, sentences=4).startswith(node.get_content()[:20]) for node in after)
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in after]
    assert Counter(embedded_texts) == Counter(texts) + _read_again(embedder, texts)  # only the changed document
    assert isinstance(store.client, MultiVectorIndex)
    every = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in store.get_nodes()]
    assert store.client.window_count == embedder.embed_document_windows(every).vectors.shape[0]
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
    vector = embed_model.get_query_embedding(QUERIES[3])
    _assert_same(_hits(index, QUERIES[3], 4), _brute_force(store, embedder, vector, 4))


# ---------------------------------------------------------------------------------------------------- persistence


def test_persist_and_load_index_from_storage_round_trip(
    embed_model: FairEmbedding, embedder: FairEmbedder, tmp_path: Path
) -> None:
    index, store = _build(embed_model, aggregate="top2")
    before = {query: _hits(index, query, 4) for query in QUERIES}
    folder = tmp_path / "storage"
    index.storage_context.persist(str(folder))
    state = json.loads((folder / "default__vector_store.json").read_text())
    assert (state["multivector"], state["aggregate"]) == (True, "top2")
    assert (folder / "default__vector_store.index" / "windows.json").is_file()

    loaded = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False, embed_model=embed_model)
    assert loaded.multivector and loaded.aggregate == "top2"
    assert loaded.store_identity == store.store_identity
    identity = loaded.store_identity
    assert identity is not None and (identity["multivector"], identity["aggregate"]) == (True, "top2")
    assert state["embedder"] == identity and identity["model"] == embedder.model_name  # the embedder's, with the mode
    context = StorageContext.from_defaults(persist_dir=str(folder), vector_store=loaded)
    reloaded = load_index_from_storage(context, embed_model=embed_model)
    for query in QUERIES:
        _assert_same(_hits(reloaded, query, 4), before[query])
    reloaded.insert(Document(text=_text(50), id_="d50", metadata={"group": 0}))
    assert any(node.ref_doc_id == "d50" for node in loaded.get_nodes())
    vector = embed_model.get_query_embedding(QUERIES[0])
    _assert_same(_hits(reloaded, QUERIES[0], 4), _brute_force(loaded, embedder, vector, 4, "top2"))

    query_only = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False)  # queries need no embed model
    assert query_only.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=2)).ids
    with pytest.raises(ValueError, match="no embed model to take the nodes' window vectors from"):
        query_only.add([TextNode(text="one more", embedding=vector)])


def test_a_stored_mode_is_never_read_as_the_other(embed_model: FairEmbedding, tmp_path: Path) -> None:
    pooled = FairFaissVectorStore.create(
        dim=embed_model.embedder.dimension, gpu=False, embed_model=embed_model, multivector=False
    )
    VectorStoreIndex.from_documents(
        _documents(3), storage_context=StorageContext.from_defaults(vector_store=pooled), embed_model=embed_model
    ).storage_context.persist(str(tmp_path / "pooled"))
    _, multi = _build(embed_model, _documents(3), aggregate="top2")
    multi.persist(str(tmp_path / "multi" / "default__vector_store.json"))

    with pytest.raises(ValueError, match="holds a store of pooled documents, but multivector=True was asked for"):
        FairFaissVectorStore.from_persist_dir(str(tmp_path / "pooled"), gpu=False, multivector=True)
    with pytest.raises(ValueError, match="holds a store of pooled documents, which has no aggregate"):
        FairFaissVectorStore.from_persist_dir(str(tmp_path / "pooled"), gpu=False, aggregate="max")
    with pytest.raises(ValueError, match=r"multi-vector documents \(aggregate='top2'\), but multivector=False"):
        FairFaissVectorStore.from_persist_dir(str(tmp_path / "multi"), gpu=False, multivector=False)
    with pytest.raises(ValueError, match="built with aggregate='top2', not 'max'"):
        FairFaissVectorStore.from_persist_dir(str(tmp_path / "multi"), gpu=False, aggregate="max")
    assert FairFaissVectorStore.from_persist_dir(str(tmp_path / "multi"), gpu=False, multivector=True).multivector
    loaded = FairFaissVectorStore.from_persist_dir(str(tmp_path / "pooled"), gpu=False, multivector=False)
    assert not loaded.multivector and isinstance(loaded.client, FaissIndex) and loaded.aggregate is None

    # a pooled store's file is as earlier releases wrote it, and loads as it did
    path = tmp_path / "pooled" / "default__vector_store.json"
    state = json.loads(path.read_text())
    assert "multivector" not in state and "aggregate" not in state  # as earlier releases wrote it
    old = FairFaissVectorStore.from_persist_dir(str(tmp_path / "pooled"), gpu=False)
    assert not old.multivector and old.node_ids == pooled.node_ids
    vector = embed_model.get_query_embedding(QUERIES[0])
    query = VectorStoreQuery(query_embedding=vector, similarity_top_k=3)
    assert old.query(query).ids == pooled.query(query).ids

    # a store file whose mode was edited does not make one index folder read as the other: the edit is refused as
    # damage (its commit records the file's checksum), before the mode is even compared
    state["multivector"], state["aggregate"] = True, "max"
    path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"is damaged|pooled FaissIndex"):
        FairFaissVectorStore.from_persist_dir(str(tmp_path / "pooled"), gpu=False)
    multi_path = tmp_path / "multi" / "default__vector_store.json"
    state = json.loads(multi_path.read_text())
    state["multivector"] = False
    multi_path.write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"is damaged|multi-vector"):
        FairFaissVectorStore.from_persist_dir(str(tmp_path / "multi"), gpu=False)


# ---------------------------------------------------------------------------------------------------- arguments


def test_multivector_needs_a_window_capable_embed_model(embed_model: FairEmbedding, tmp_path: Path) -> None:
    dim = embed_model.embedder.dimension
    with pytest.raises(ValueError, match="pass embed_model="):
        FairFaissVectorStore.create(dim=dim, gpu=False, multivector=True)
    with pytest.raises(TypeError, match="only fair-retrieval's embedders give"):
        FairFaissVectorStore.create(dim=dim, gpu=False, multivector=True, embed_model=MockEmbedding(embed_dim=dim))
    with pytest.raises(ValueError, match="pass multivector=True with it"):
        FairFaissVectorStore.create(dim=dim, gpu=False, aggregate="top2")
    with pytest.raises(ValueError, match="aggregate must be one of"):
        FairFaissVectorStore.create(dim=dim, gpu=False, multivector=True, embed_model=embed_model, aggregate="mean")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="multivector must be True or False"):
        FairFaissVectorStore.create(dim=dim, gpu=False, multivector="yes", embed_model=embed_model)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="pass a MultiVectorIndex with multivector=True"):
        FairFaissVectorStore(FaissIndex(dim, gpu=False), multivector=True, embed_model=embed_model)
    with pytest.raises(ValueError, match="pass embed_model="):  # a MultiVectorIndex given: a multi-vector store
        FairFaissVectorStore(MultiVectorIndex(dim, gpu=False))
    given = FairFaissVectorStore(
        MultiVectorIndex(dim, gpu=False, aggregate="top2"), multivector=True, embed_model=embed_model
    )
    assert given.aggregate == "top2" and not FairFaissVectorStore.create(dim=dim, gpu=False).multivector

    store = FairFaissVectorStore.create(
        dim=dim, gpu=False, multivector=True, windows=StoreWindows(), embed_model=embed_model
    )
    with pytest.raises(TypeError, match="only fair-retrieval's embedders give"):
        store.record_embed_model(MockEmbedding(embed_dim=dim))
    node = TextNode(text=_text(1), embedding=embed_model.embedder.embed_documents([_text(1)])[0].tolist())
    store.add([node])  # embedded by the FairEmbedder itself: no cache entry, embedded once more
    store.persist(str(tmp_path / "default__vector_store.json"))
    with pytest.raises(TypeError, match="only fair-retrieval's embedders give"):
        FairFaissVectorStore.from_persist_dir(str(tmp_path), gpu=False, embed_model=MockEmbedding(embed_dim=dim))


def test_a_store_created_with_a_fair_embedding_is_multi_vector_by_default(
    embed_model: FairEmbedding, embedder: FairEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    store = FairFaissVectorStore.create(dim=embedder.dimension, embed_model=embed_model, gpu=False)
    assert store.multivector and store.aggregate == "max"
    index = VectorStoreIndex.from_documents(
        _documents(4),
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
        transformations=[SPLITTER],
    )
    hit = index.as_retriever(similarity_top_k=2).retrieve(QUERIES[0])[0]
    assert BEST_WINDOW_KEY in hit.node.metadata
    assert not FairFaissVectorStore.create(dim=embedder.dimension, gpu=False).multivector  # no embed model
    with caplog.at_level(logging.INFO, logger="fair_retrieval.stores"):
        other = FairFaissVectorStore.create(dim=8, embed_model=MockEmbedding(embed_dim=8), gpu=False)
    assert not other.multivector and "gives no window vectors" in caplog.text


@pytest.fixture()
def settings_model() -> Iterator[Callable[[Any], None]]:
    """Set `Settings.embed_model` for one test (restored after it)."""
    from llama_index.core import Settings

    saved = Settings._embed_model

    def put(model: Any) -> None:
        Settings._embed_model = model

    yield put
    Settings._embed_model = saved


def test_a_store_without_embed_model_takes_the_fair_embedding_set_in_settings(
    embed_model: FairEmbedding, embedder: FairEmbedder, settings_model: Callable[[Any], None], caplog: Any
) -> None:
    settings_model(embed_model)
    for store in (FairFaissVectorStore.create(embedder.dimension, gpu=False), FairFaissVectorStore(gpu=False)):
        assert store.multivector and store._store.embedder is embed_model  # as if embed_model= were passed
        assert (
            store._store.windows
            == FairFaissVectorStore.create(embedder.dimension, gpu=False, embed_model=embed_model)._store.windows
        )
    assert FairFaissVectorStore(gpu=False, multivector=True).multivector  # needs no embed_model= then
    pooled = FairFaissVectorStore(gpu=False, multivector=False)
    assert not pooled.multivector and pooled._store.embedder is None  # pooled when asked: Settings' is not taken
    settings_model(MockEmbedding(embed_dim=8))
    with caplog.at_level(logging.INFO, logger="llama_index.vector_stores.fair.faiss_vector_store"):
        assert not FairFaissVectorStore(gpu=False).multivector
    assert "MockEmbedding, set in Settings.embed_model, gives no window vectors" in caplog.text
    settings_model(None)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="llama_index.vector_stores.fair.faiss_vector_store"):
        store = FairFaissVectorStore.create(embedder.dimension, gpu=False)
    assert not store.multivector
    said = [record.getMessage() for record in caplog.records if "pooled vector per node" in record.getMessage()]
    assert len(said) == 1 and "no embed_model was given and none is set in Settings.embed_model" in said[0]
    from llama_index.core import Settings

    assert Settings._embed_model is None  # LlamaIndex's default (OpenAI's) was never resolved


def test_the_log_counts_nodes_once_and_the_window_passes_apart(
    embed_model: FairEmbedding, embedder: FairEmbedder, caplog: Any
) -> None:
    store = FairFaissVectorStore.create(embedder.dimension, gpu=False, embed_model=embed_model)  # two sizes
    nodes = SPLITTER.get_nodes_from_documents(_documents(3))
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.embedder"):
        VectorStoreIndex(
            nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
        )
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "Embedded" in r.getMessage()]
    assert said[0].startswith(f"Embedded {len(nodes)} documents")  # the embed model's pass: one per node
    assert "window pass" not in said[0]
    assert len(said) == 2 and "window pass" in said[1]  # the store's own passes, in one line
    counted = int(said[1].split()[1])
    assert 0 < counted <= len(nodes) and said[1].startswith(f"Embedded {counted} document")


def test_the_default_store_keeps_its_windows_compressed_and_finds_what_the_flat_one_finds(
    minilm_path: str, tmp_path: Path
) -> None:
    embed_model = FairEmbedding(embedder=FairEmbedder(minilm_path, max_length=64, device="cpu"))  # 384-d: PQ48 fits
    built = {}
    for name, kind in (("default", None), ("flat", "flat")):
        store = FairFaissVectorStore(gpu=False, embed_model=embed_model, kind=kind)
        assert store.kind == kind  # None: the mode's default, made on the first add
        index = VectorStoreIndex.from_documents(
            _documents(),
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=embed_model,
            transformations=[SPLITTER],
        )
        built[name] = (index, store)
    default, flat = built["default"][1], built["flat"][1]
    assert isinstance(default.client, MultiVectorIndex) and isinstance(default.client.windows, RerankedIndex)
    assert default.kind == "compressed"
    assert isinstance(flat.client, MultiVectorIndex) and isinstance(flat.client.windows, FaissIndex)
    assert flat.kind == "flat"

    def found(index: VectorStoreIndex) -> list[list[tuple[tuple[str | None, str], float]]]:
        retriever = index.as_retriever(similarity_top_k=5)  # node ids differ between the builds: their texts do not
        return [
            [((hit.node.ref_doc_id, hit.node.get_content()), hit.score or 0.0) for hit in retriever.retrieve(q)]
            for q in QUERIES
        ]

    def same(got: list[list[Any]], expected: list[list[Any]]) -> None:
        for mine, theirs in zip(got, expected, strict=True):
            assert_same_ranking(mine, theirs)

    same(found(built["default"][0]), found(built["flat"][0]))  # exact below 16,384 windows
    for index, store in built.values():
        index.delete_ref_doc("d2")
        upserted = store.get_nodes()[0]
        upserted.embedding = embed_model.get_text_embedding(upserted.get_content(metadata_mode=MetadataMode.EMBED))
        store.add([upserted])  # an upsert: its windows replaced
        index.storage_context.persist(str(tmp_path / ("default" if store is default else "flat")))
    same(found(built["default"][0]), found(built["flat"][0]))
    assert list((tmp_path / "default" / "default__vector_store.index").glob("rows-*.seg"))
    assert not list((tmp_path / "flat" / "default__vector_store.index").glob("rows-*.seg"))
    loaded = FairFaissVectorStore.from_persist_dir(str(tmp_path / "default"), gpu=False, embed_model=embed_model)
    assert loaded.kind == "compressed" and isinstance(loaded.client, MultiVectorIndex)
    assert isinstance(loaded.client.windows, RerankedIndex)
    old = FairFaissVectorStore.from_persist_dir(str(tmp_path / "flat"), gpu=False, embed_model=embed_model)
    assert old.kind == "flat" and isinstance(old.client, MultiVectorIndex)  # as every store was saved before
    assert isinstance(old.client.windows, FaissIndex)
    assert [node.get_content() for node in loaded.get_nodes()] == [node.get_content() for node in old.get_nodes()]


def test_a_store_loaded_without_embed_model_takes_the_fair_embedding_set_in_settings(
    embed_model: FairEmbedding, settings_model: Callable[[Any], None], tmp_path: Path
) -> None:
    settings_model(embed_model)
    store = FairFaissVectorStore.create(gpu=False)  # dim and windows from Settings.embed_model
    index = VectorStoreIndex.from_documents(
        _documents(3), storage_context=StorageContext.from_defaults(vector_store=store)
    )
    index.storage_context.persist(str(tmp_path / "storage"))
    loaded = FairFaissVectorStore.from_persist_dir(str(tmp_path / "storage"), gpu=False)
    assert loaded.multivector and loaded._store.embedder is embed_model  # as create() takes it
    context = StorageContext.from_defaults(persist_dir=str(tmp_path / "storage"), vector_store=loaded)
    load_index_from_storage(context).insert(Document(text=_text(60), id_="d60"))  # no "no embed model" now
    assert any(node.ref_doc_id == "d60" for node in loaded.get_nodes())


def test_create_takes_the_vector_size_the_embed_model_tells(
    embed_model: FairEmbedding, embedder: FairEmbedder, settings_model: Callable[[Any], None]
) -> None:
    store = FairFaissVectorStore.create(embed_model=embed_model, gpu=False)
    store.add([TextNode(text=_text(1), embedding=embed_model.get_text_embedding(_text(1)))])
    assert store.client is not None and store.client.dim == embedder.dimension
    settings_model(None)
    with pytest.raises(TypeError, match=r"create\(\) needs dim= here: no embed model is given"):
        FairFaissVectorStore.create(gpu=False)
    with pytest.raises(TypeError, match="the embed model MockEmbedding cannot tell its vector size"):
        FairFaissVectorStore.create(embed_model=MockEmbedding(embed_dim=8), gpu=False)
