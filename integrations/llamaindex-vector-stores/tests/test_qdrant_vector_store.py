"""FairQdrantVectorStore through LlamaIndex's own entry points, held against FairFaissVectorStore on the same nodes:
every query mode, filters, node_ids and doc_ids, inserts, deletes, upserts, gets, async queries, and reopening a
collection (local mode, no server)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.embeddings.fair import FairEmbedding
from llama_index.vector_stores.fair import BEST_WINDOW_KEY, FairFaissVectorStore, FairQdrantVectorStore

from fair_retrieval import FairEmbedder
from tests.ranking import assert_same_ranking

pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient

SENTENCES = [
    "The ferry leaves the harbour at dawn and crosses the bay.",
    "The night train runs north through the mountains.",
    "Bake the bread slowly in a stone oven.",
    "Fishing boats fill the old harbour every evening.",
    "A stone oven keeps its heat for hours.",
    "The library lends board games on Thursdays.",
]
QUESTIONS = ["stone oven bread", "harbour boats", "night train", "board games"]


def documents() -> list[Document]:
    return [
        Document(
            text=" ".join(f"{i}.{j}: {SENTENCES[(i + j) % len(SENTENCES)]}" for j in range(1 + i % 4)),  # no ties
            id_=f"doc-{i}",
            metadata={"n": i, "kind": "even" if i % 2 == 0 else "odd"},
        )
        for i in range(10)
    ]


@pytest.fixture(scope="module")
def embed_model(tiny_model: str) -> FairEmbedding:
    return FairEmbedding(embedder=FairEmbedder(tiny_model, max_length=32, device="cpu"))


def build(store: Any, embed_model: FairEmbedding) -> VectorStoreIndex:
    context = StorageContext.from_defaults(vector_store=store)
    return VectorStoreIndex.from_documents(documents(), storage_context=context, embed_model=embed_model)


def both(embed_model: FairEmbedding, **options: Any) -> tuple[VectorStoreIndex, VectorStoreIndex]:
    faiss = FairFaissVectorStore(embed_model=embed_model, metric="cosine", kind="flat", gpu=False, **options)
    qdrant = FairQdrantVectorStore(location=":memory:", collection_name="nodes", embed_model=embed_model, **options)
    return build(faiss, embed_model), build(qdrant, embed_model)


def results(index: VectorStoreIndex, question: str, **options: Any) -> list[tuple[tuple[str, str], float, Any]]:
    """The hits, best first, as ((document id, text), score, best window) rows for `assert_same_ranking`."""
    hits = index.as_retriever(**options).retrieve(question)
    return [
        ((hit.node.ref_doc_id or "", hit.node.get_content()), hit.score or 0.0, hit.node.metadata.get(BEST_WINDOW_KEY))
        for hit in hits
    ]


FILTERS = MetadataFilters(
    filters=[
        MetadataFilter(key="n", value=3, operator=FilterOperator.GTE),
        MetadataFilter(key="kind", value="odd", operator=FilterOperator.EQ),
    ]
)


@pytest.mark.parametrize("mode", ["default", "hybrid", "sparse", "text_search", "mmr"])
def test_every_query_mode_answers_as_the_faiss_store(embed_model: FairEmbedding, mode: str) -> None:
    faiss, qdrant = both(embed_model)
    for question in QUESTIONS:
        for options in ({}, {"filters": FILTERS}, {"doc_ids": ["doc-1", "doc-2", "doc-5"]}):
            asked = {"vector_store_query_mode": mode, "similarity_top_k": 3, **options}
            assert_same_ranking(results(qdrant, question, **asked), results(faiss, question, **asked))


def test_the_default_query_mode_is_recorded_in_the_collection(embed_model: FairEmbedding, tmp_path: Path) -> None:
    client = QdrantClient(path=str(tmp_path / "q"))
    store = FairQdrantVectorStore(client, "nodes", embed_model=embed_model, default_query_mode="hybrid", alpha=0.0)
    index = build(store, embed_model)
    expected = results(index, "stone oven", similarity_top_k=3)
    node_ids = store.node_ids
    client.close()
    reopened = FairQdrantVectorStore(QdrantClient(path=str(tmp_path / "q")), "nodes", embed_model=embed_model)
    again = VectorStoreIndex.from_vector_store(reopened, embed_model=embed_model)
    assert reopened._store.search_settings == store._store.search_settings
    assert_same_ranking(results(again, "stone oven", similarity_top_k=3), expected)
    assert reopened.node_ids == node_ids


def test_writes_deletes_and_gets(embed_model: FairEmbedding) -> None:
    # dense: a collection's BM25 keeps the average length of its first write, the FAISS store's follows every write
    faiss_index, qdrant_index = both(embed_model, default_query_mode="dense")
    for index in (faiss_index, qdrant_index):
        index.delete_ref_doc("doc-2")
        index.insert(Document(text="Rye bread from the mill by the stone oven.", id_="mill", metadata={"n": 99}))
        store = index.vector_store
        node = TextNode(id_=store.node_ids[0], text="Cheese from the valley.", metadata={"n": 100})
        node.embedding = embed_model.get_text_embedding(node.get_content(metadata_mode="embed"))
        store.add([node])  # replaces that node
        store.delete_nodes(filters=MetadataFilters(filters=[MetadataFilter(key="n", value=1)]))
    faiss, qdrant = faiss_index.vector_store, qdrant_index.vector_store

    def contents(nodes: list[Any]) -> list[str]:
        return [node.get_content() for node in nodes]

    assert contents(qdrant.get_nodes()) == contents(faiss.get_nodes())  # in insertion order, a replaced node in place
    for question in [*QUESTIONS, "rye bread mill", "cheese valley"]:
        asked = {"vector_store_query_mode": "default", "similarity_top_k": 4}
        assert_same_ranking(results(qdrant_index, question, **asked), results(faiss_index, question, **asked))
    # BM25's length normalisation keeps the collection's first average length (documented), so after these writes the
    # sparse scores differ slightly from a BM25 index rebuilt over the nodes; what each write changed is found
    sparse = {"vector_store_query_mode": "sparse", "similarity_top_k": 3}
    assert results(qdrant_index, "rye mill", **sparse)[0][0][0] == "mill"
    assert results(qdrant_index, "cheese valley", **sparse)[0][0][1] == "Cheese from the valley."
    wide = {**sparse, "similarity_top_k": 10}
    assert "doc-2" not in {hit[0][0] for hit in results(qdrant_index, "stone oven bread", **wide)}
    got = qdrant.get_nodes(node_ids=qdrant.node_ids[2:5][::-1])
    expected = faiss.get_nodes(node_ids=faiss.node_ids[2:5][::-1])
    assert contents(got) == contents(expected) and len(got) == 3
    assert got[0].embedding == pytest.approx(expected[0].embedding, abs=1e-5)
    assert contents(qdrant.get_nodes(filters=FILTERS)) == contents(faiss.get_nodes(filters=FILTERS))
    qdrant.clear()
    assert (
        qdrant.node_ids == []
        and qdrant.query(VectorStoreQuery(query_str="oven", mode=VectorStoreQueryMode.SPARSE)).ids == []
    )


def test_async_queries_and_adds(embed_model: FairEmbedding) -> None:
    _, qdrant = both(embed_model)
    store = qdrant.vector_store
    query = VectorStoreQuery(query_embedding=embed_model.get_query_embedding("night train"), similarity_top_k=2)
    assert asyncio.run(store.aquery(query)).ids == store.query(query).ids
    node = TextNode(id_="async", text="An evening train to the coast.")
    node.embedding = embed_model.get_text_embedding(node.get_content(metadata_mode="embed"))
    assert asyncio.run(store.async_add([node])) == ["async"]
    assert "async" in store.node_ids


def test_bad_arguments_are_refused(embed_model: FairEmbedding) -> None:
    with pytest.raises(ValueError, match="collection_name="):
        FairQdrantVectorStore(location=":memory:", embed_model=embed_model)
    with pytest.raises(ValueError, match="Say where the Qdrant collection lives"):
        FairQdrantVectorStore(collection_name="x", embed_model=embed_model)
    with pytest.raises(ValueError, match="default_query_mode must be one of"):
        FairQdrantVectorStore(location=":memory:", collection_name="x", embed_model=embed_model, default_query_mode="x")


def test_a_failed_open_releases_the_folder_and_another_size_is_refused_at_open(tmp_path: Path) -> None:
    from llama_index.core.embeddings import MockEmbedding

    where = str(tmp_path / "q")
    made = FairQdrantVectorStore(path=where, collection_name="nodes", embed_model=MockEmbedding(embed_dim=8))
    node = TextNode(id_="n1", text="The ferry leaves at nine.", embedding=[0.1] * 8)
    made.add([node])
    made.client.close()
    for _ in range(2):  # the second refusal is the same: the first released the folder
        with pytest.raises(ValueError, match="make 16-d vectors, but this store holds 8-d ones"):
            FairQdrantVectorStore(path=where, collection_name="nodes", embed_model=MockEmbedding(embed_dim=16))
    reopened = FairQdrantVectorStore(path=where, collection_name="nodes", embed_model=MockEmbedding(embed_dim=8))
    assert reopened.node_ids == ["n1"]
    reopened.client.close()


def test_a_collection_of_the_earlier_node_layout_opens_here_and_is_refused_elsewhere_by_name(
    embed_model: FairEmbedding,
) -> None:
    """An earlier release wrote a head as the node alone (the persisted file's entry): LlamaIndex still opens such a
    collection and keeps writing in it; LangChain's store names why it cannot and what to do."""
    from llama_index.vector_stores.fair.node_records import node_metadata, node_text
    from llama_index.vector_stores.fair.persist_files import STORE_FORMAT

    from fair_retrieval.stores import QdrantStore

    client = QdrantClient(":memory:")
    earlier = QdrantStore(
        client=client,
        collection_name="old",
        fmt=STORE_FORMAT,
        embedder=embed_model,
        metadata_of=node_metadata,
        text_of=node_text,
        group_of=lambda record: record.doc_id,
        replaced_move_to_end=False,
    )
    expected = results(build(FairQdrantVectorStore(client, "new", embed_model=embed_model), embed_model), QUESTIONS[0])
    build(FairQdrantVectorStore.around(earlier, stores_text=True), embed_model)  # the earlier release's heads
    opened = FairQdrantVectorStore(client, "old", embed_model=embed_model)
    assert opened._store.collection.recorded()["records"] == STORE_FORMAT.name
    index = VectorStoreIndex.from_vector_store(opened, embed_model=embed_model)
    assert_same_ranking(results(index, QUESTIONS[0]), expected)
    index.insert_nodes([TextNode(id_="late", text="A late note about the stone oven.")])
    assert "late" in [hit.node.node_id for hit in index.as_retriever(similarity_top_k=10).retrieve("stone oven")]
    langchain = pytest.importorskip("langchain_fair")
    embeddings = langchain.FairEmbeddings(embedder=embed_model.embedder)
    with pytest.raises(ValueError, match="Open it with LlamaIndex's FairQdrantVectorStore"):
        langchain.FairQdrantVectorStore(client, "old", embeddings)


def test_qdrant_filters_in_vector_store_kwargs_filter_in_the_engine_beside_metadata_filters(
    embed_model: FairEmbedding,
) -> None:
    """llama-index's Qdrant store reads `qdrant_filters` from a retriever's `vector_store_kwargs`; so does ours, a
    node matching it and the `MetadataFilters` both; anything but a `models.Filter` there is refused."""
    from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
    from qdrant_client import models

    _, index = both(embed_model)
    even = models.Filter(must=[models.FieldCondition(key="metadata.kind", match=models.MatchValue(value="even"))])
    late = MetadataFilters(filters=[MetadataFilter(key="n", value=4, operator=FilterOperator.GTE)])
    for mode in ("default", "hybrid", "sparse"):
        kept = index.as_retriever(
            similarity_top_k=10, vector_store_query_mode=mode, vector_store_kwargs={"qdrant_filters": even}
        ).retrieve(QUESTIONS[0])
        assert kept and {hit.node.metadata["kind"] for hit in kept} == {"even"}
        both_kept = index.as_retriever(
            similarity_top_k=10,
            vector_store_query_mode=mode,
            filters=late,
            vector_store_kwargs={"qdrant_filters": even},
        ).retrieve(QUESTIONS[0])
        assert both_kept and all(
            hit.node.metadata["kind"] == "even" and hit.node.metadata["n"] >= 4 for hit in both_kept
        )
    with pytest.raises(TypeError, match=r"qdrant_filters must be a qdrant_client models\.Filter"):
        index.as_retriever(vector_store_kwargs={"qdrant_filters": {"kind": "even"}}).retrieve(QUESTIONS[0])


EVERY_OPERATOR: list[tuple[FilterOperator, str, Any]] = [
    (FilterOperator.EQ, "tags", "b"),
    (FilterOperator.EQ, "n", 2),
    (FilterOperator.NE, "tags", "b"),
    (FilterOperator.GT, "n", 2),
    (FilterOperator.GTE, "n", 2.0),
    (FilterOperator.LT, "n", 3),
    (FilterOperator.LTE, "n", 3),
    (FilterOperator.IN, "tags", ["a", "b"]),
    (FilterOperator.NIN, "tags", ["b"]),
    (FilterOperator.ANY, "tags", ["a", "z"]),
    (FilterOperator.ALL, "tags", ["a", "b"]),
    (FilterOperator.CONTAINS, "tags", "a"),
    (FilterOperator.IS_EMPTY, "tags", None),
    (FilterOperator.IS_EMPTY, "n", None),
]
"""Every operator of llama-index's MetadataFilter on fields holding lists, nulls, empties and scalars."""


@pytest.mark.parametrize(("operator", "key", "value"), EVERY_OPERATOR, ids=lambda item: str(item))
def test_every_filter_operator_selects_as_in_the_faiss_store(
    embed_model: FairEmbedding, operator: FilterOperator, key: str, value: Any
) -> None:
    """Each operator is evaluated in the engine and keeps the FAISS store's nodes, on list fields ("b" is not
    ["a", "b"]), nulls, empty strings and lists, absent fields; the text matches are refused by name (Qdrant's text
    match is by words)."""
    metadata = [
        {"tags": ["a"], "n": 1},
        {"tags": [], "n": 2},
        {"tags": None, "n": None},
        {"tags": "", "n": 2.0},
        {},
        {"tags": "b", "n": [2, 3]},
        {"tags": ["a", "b"], "n": 4},
        {"tags": ["b"], "n": "2"},
    ]
    nodes = [
        TextNode(id_=f"n{i}", text=f"{SENTENCES[i % 6]} note {i}", metadata=meta) for i, meta in enumerate(metadata)
    ]
    filters = MetadataFilters(filters=[MetadataFilter(key=key, value=value, operator=operator)])
    found = []
    for store in (
        FairFaissVectorStore(embed_model=embed_model, kind="flat", gpu=False),
        FairQdrantVectorStore(location=":memory:", collection_name="operators", embed_model=embed_model),
    ):
        index = VectorStoreIndex(
            nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
        )
        for mode in ("default", "hybrid"):
            retriever = index.as_retriever(similarity_top_k=10, filters=filters, vector_store_query_mode=mode)
            found.append(sorted(hit.node.node_id for hit in retriever.retrieve("note")))
    assert found[0] == found[1] == found[2] == found[3], (operator, key, value)
    if operator == FilterOperator.IS_EMPTY and key == "tags":
        assert found[0] == ["n1", "n2", "n3", "n4"]


def test_text_match_is_refused_by_name_in_the_engine(embed_model: FairEmbedding) -> None:
    store = FairQdrantVectorStore(location=":memory:", collection_name="text", embed_model=embed_model)
    index = build(store, embed_model)
    for operator in (FilterOperator.TEXT_MATCH, FilterOperator.TEXT_MATCH_INSENSITIVE):
        filters = MetadataFilters(filters=[MetadataFilter(key="kind", value="ev", operator=operator)])
        with pytest.raises(ValueError, match="matches part of a string"):
            index.as_retriever(filters=filters).retrieve(QUESTIONS[0])


def test_llama_index_qdrant_keywords_are_taken_where_they_mean_something_and_refused_by_name_elsewhere(
    embed_model: FairEmbedding, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level("INFO"):
        store = FairQdrantVectorStore(
            location=":memory:", collection_name="k", embed_model=embed_model, enable_hybrid=True, batch_size=2,
            client_kwargs={"timeout": 5},
        )  # fmt: skip
    assert "BM25 is built in" in caplog.text
    index = build(store, embed_model)
    assert len(index.as_retriever(similarity_top_k=3, vector_store_query_mode="hybrid").retrieve(QUESTIONS[0])) == 3
    for options, error, message in (
        ({"fastembed_sparse_model": "Qdrant/bm25"}, ValueError, "scores BM25 itself"),
        ({"text_key": "body"}, ValueError, "its own record"),
        ({"bogus": 1}, TypeError, "unexpected keyword argument"),
    ):
        with pytest.raises(error, match=message):
            FairQdrantVectorStore(location=":memory:", collection_name="k", embed_model=embed_model, **options)
