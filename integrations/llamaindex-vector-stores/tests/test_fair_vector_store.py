"""FairFaissVectorStore: the BasePydanticVectorStore contract on fair_retrieval.FaissIndex.

llama-index-core 0.14 ships no reusable vector-store test suite, so the contract is checked here: add / delete /
delete_nodes / clear / get_nodes / query and their async variants (async_add, adelete, adelete_nodes, aclear,
aget_nodes, aquery), upserts through IngestionPipeline's docstore strategies, MetadataFilters (every operator and
condition, nested; list and text operators as SimpleVectorStore applies them), restricted queries that return top_k
hits whenever that many nodes match (flat, hnsw and ivf), persistence without pickle, the conversion of folders written
by the earlier FairFaissVectorStore (llama-index's FaissVectorStore format), and the README example.

Most tests use random vectors (fast; exact brute force is easy); the README example uses the real MiniLM.
"""

from __future__ import annotations

import asyncio
import datetime
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.ingestion import DocstoreStrategy, IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import BaseNode, NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.storage.docstore import SimpleDocumentStore
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.embeddings.fair import FairEmbedding
from llama_index.vector_stores.fair import FairFaissVectorStore

from fair_retrieval import FairEmbedder, FaissIndex
from fair_retrieval.stores import DocumentStore

DIM = 16
COUNT = 60
LANGS = ["en", "fr", "de", None]  # None: the node has no "lang" field
STORE_KINDS: dict[str, dict[str, Any]] = {
    "flat": {},
    "hnsw": {"kind": "hnsw", "M": 8, "ef_search": 16},
    "ivf": {"kind": "ivf", "nlist": 8, "nprobe": 1},
}


def _vectors(count: int = COUNT, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)  # type: ignore[no-any-return]


def _metadata(position: int) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "year": 2018 + position % 8,
        "bucket": position % 10,
        "tags": ["a", "b"][: position % 3],
    }
    lang = LANGS[position % 4]
    if lang is not None:
        metadata["lang"] = lang
    metadata["title"] = ["", None, f"title {position}"][position % 3]
    return metadata


def _nodes(vectors: np.ndarray, per_document: int = 3) -> list[TextNode]:
    return [
        TextNode(
            id_=f"n{position}",
            text=f"text {position}",
            metadata=_metadata(position),
            embedding=vector.tolist(),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc-{position // per_document}")},
        )
        for position, vector in enumerate(vectors)
    ]


def _top(vectors: np.ndarray, query: np.ndarray, k: int, positions: list[int] | None = None) -> list[str]:
    """Exact top-k node ids by inner product among `positions` (all when None)."""
    candidates = np.arange(len(vectors)) if positions is None else np.asarray(positions, dtype=np.int64)
    scores = vectors[candidates] @ query
    order = np.argsort(-scores, kind="stable")[:k]
    return [f"n{int(candidates[i])}" for i in order]


def _query(vector: np.ndarray, k: int = 5, **fields: Any) -> VectorStoreQuery:
    return VectorStoreQuery(query_embedding=vector.tolist(), similarity_top_k=k, **fields)


def _filters(*items: Any, condition: FilterCondition = FilterCondition.AND) -> MetadataFilters:
    return MetadataFilters(filters=list(items), condition=condition)


def _leaf(key: str, operator: FilterOperator, value: Any = None) -> MetadataFilter:
    return MetadataFilter(key=key, value=value, operator=operator)


@pytest.fixture()
def vectors() -> np.ndarray:
    return _vectors()


@pytest.fixture()
def store(vectors: np.ndarray) -> FairFaissVectorStore:
    store = FairFaissVectorStore(gpu=False)
    store.add(_nodes(vectors))
    return store


# ---------------------------------------------------------------------------------------------------- the contract


def test_it_is_a_text_storing_pydantic_vector_store() -> None:
    import llama_index.vector_stores.fair as package

    assert package.FairFaissVectorStore is FairFaissVectorStore
    assert issubclass(FairFaissVectorStore, BasePydanticVectorStore)
    store = FairFaissVectorStore.create(dim=DIM, gpu=False)
    assert store.stores_text is True and store.is_embedding_query is True
    assert isinstance(store.client, FaissIndex) and store.client.dim == DIM and store.client.kind == "flat"
    assert store.to_dict()["class_name"] == "FairFaissVectorStore"
    assert FairFaissVectorStore(gpu=False).client is None  # created on the first add, when the size is known


def test_add_returns_node_ids_and_query_ranks_exactly(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    assert store.node_ids == [f"n{position}" for position in range(COUNT)]
    assert store.client is not None and store.client.ids.tolist() == list(range(COUNT))
    query = vectors[7] + 0.3 * vectors[8]
    result = store.query(_query(query, k=6))
    assert result.ids == _top(vectors, query, 6)
    assert [node.node_id for node in result.nodes] == result.ids
    np.testing.assert_allclose(result.similarities, np.sort(vectors @ query)[::-1][:6], atol=1e-5)
    best = result.nodes[0]
    assert best.get_content() == "text 7" and best.metadata == _metadata(7) and best.ref_doc_id == "doc-2"
    assert best.embedding is None  # query results carry no vectors; get_nodes does
    assert len(store.query(_query(query, k=500)).ids) == COUNT  # top_k beyond the store: everything


def test_results_are_copies(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    node = store.query(_query(vectors[3], k=1)).nodes[0]
    node.metadata["year"] = 1900
    node.text = "changed"
    again = store.get_nodes(node_ids=["n3"])[0]
    assert again.metadata["year"] == _metadata(3)["year"] and again.get_content() == "text 3"


def test_delete_removes_every_node_of_the_document(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    store.delete("doc-2")  # n6, n7, n8
    assert not {"n6", "n7", "n8"} & set(store.node_ids)
    assert len(store.node_ids) == COUNT - 3 and store.client is not None and len(store.client) == COUNT - 3
    assert store.query(_query(vectors[7], k=3)).ids == _top(
        vectors, vectors[7], 3, [p for p in range(COUNT) if p // 3 != 2]
    )
    store.delete("doc-2")  # already gone: nothing to do, no error
    store.delete("no-such-document")
    assert len(store.node_ids) == COUNT - 3


def test_a_node_without_source_is_its_own_document() -> None:
    store = FairFaissVectorStore(gpu=False)
    store.add(
        [
            Document(text="a whole document", id_="doc-x", embedding=[1.0, 0.0]),
            TextNode(id_="y", text="y", embedding=[0.0, 1.0]),
        ]
    )
    store.delete("doc-x")
    assert store.node_ids == ["y"]


def test_delete_nodes_by_ids_filters_or_both(store: FairFaissVectorStore) -> None:
    store.delete_nodes(node_ids=["n0", "n1", "missing"])
    assert "n0" not in store.node_ids and "n1" not in store.node_ids and len(store.node_ids) == COUNT - 2
    store.delete_nodes(filters=_filters(_leaf("year", FilterOperator.EQ, 2019)))  # positions 1, 9, 17, …
    assert all(node.metadata["year"] != 2019 for node in store.get_nodes())
    store.delete_nodes(node_ids=["n2", "n3"], filters=_filters(_leaf("year", FilterOperator.EQ, 2020)))  # n2 only
    assert "n2" not in store.node_ids and "n3" in store.node_ids
    store.delete_nodes(node_ids=[])  # nothing listed, nothing removed
    assert "n3" in store.node_ids
    with pytest.raises(ValueError, match=r"clear\(\)"):
        store.delete_nodes()


def test_clear_keeps_the_index_usable(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    index = store.client
    store.clear()
    assert store.node_ids == [] and store.get_nodes() == []
    assert store.query(_query(vectors[0])).ids == []
    assert store.client is index and index is not None and len(index) == 0
    store.add(_nodes(vectors[:4]))
    assert store.query(_query(vectors[2], k=1)).ids == ["n2"]


def test_get_nodes_by_ids_filters_or_all(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    everything = store.get_nodes()
    assert [node.node_id for node in everything] == store.node_ids
    np.testing.assert_allclose([node.embedding for node in everything], vectors, atol=1e-6)
    picked = store.get_nodes(node_ids=["n5", "n2", "missing", "n5"])
    assert [node.node_id for node in picked] == ["n5", "n2"]  # the caller's order, unknown ids skipped
    english = store.get_nodes(filters=_filters(_leaf("lang", FilterOperator.EQ, "en")))
    assert [node.node_id for node in english] == [f"n{p}" for p in range(COUNT) if p % 4 == 0]
    both = store.get_nodes(node_ids=["n4", "n5"], filters=_filters(_leaf("lang", FilterOperator.EQ, "en")))
    assert [node.node_id for node in both] == ["n4"]
    assert store.get_nodes(node_ids=[]) == []


def test_add_upserts_an_existing_node_id(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    ids_before = store.client.ids.tolist() if store.client is not None else []
    replacement = TextNode(id_="n3", text="new text", metadata={"year": 1999}, embedding=(-vectors[3]).tolist())
    assert store.add([replacement]) == ["n3"]
    assert store.client is not None and store.client.ids.tolist() == ids_before  # the node kept its int id
    assert store.node_ids.index("n3") == 3  # and its place
    node = store.get_nodes(node_ids=["n3"])[0]
    assert node.get_content() == "new text" and node.metadata == {"year": 1999} and node.ref_doc_id is None
    np.testing.assert_allclose(node.embedding, -vectors[3], atol=1e-6)
    assert "n3" not in store.query(_query(vectors[3], k=10)).ids
    store.delete("doc-1")  # n3 left doc-1 when it was replaced: n4, n5 go
    assert "n3" in store.node_ids and "n4" not in store.node_ids
    store.delete("n3")
    assert "n3" not in store.node_ids


def test_async_variants_match_sync(vectors: np.ndarray) -> None:
    sync_store, async_store = FairFaissVectorStore(gpu=False), FairFaissVectorStore(gpu=False)
    nodes = _nodes(vectors)
    english = _filters(_leaf("lang", FilterOperator.EQ, "en"))

    async def run() -> dict[str, Any]:
        added = await async_store.async_add(nodes)
        await async_store.adelete("doc-1")
        await async_store.adelete_nodes(node_ids=["n9"])
        got = await async_store.aget_nodes(filters=english)
        result = await async_store.aquery(_query(vectors[10], k=4, filters=english))
        return {"added": added, "got": [node.node_id for node in got], "result": result}

    outcome = asyncio.run(run())
    assert sync_store.add(nodes) == outcome["added"]
    sync_store.delete("doc-1")
    sync_store.delete_nodes(node_ids=["n9"])
    assert [node.node_id for node in sync_store.get_nodes(filters=english)] == outcome["got"]
    expected = sync_store.query(_query(vectors[10], k=4, filters=english))
    assert outcome["result"].ids == expected.ids
    np.testing.assert_allclose(outcome["result"].similarities, expected.similarities)
    asyncio.run(async_store.aclear())
    assert async_store.node_ids == []


# ---------------------------------------------------------------------------------------------------- restrictions


def test_node_ids_and_doc_ids_restrict_the_query(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    query = vectors[0]
    assert store.query(_query(query, k=2, node_ids=["n30", "n40", "n50"])).ids == _top(vectors, query, 2, [30, 40, 50])
    assert store.query(_query(query, k=9, doc_ids=["doc-4", "doc-9"])).ids == _top(
        vectors, query, 9, [12, 13, 14, 27, 28, 29]
    )
    both = store.query(_query(query, k=9, node_ids=["n12", "n13", "n40"], doc_ids=["doc-4"]))
    assert both.ids == _top(vectors, query, 9, [12, 13])
    # VectorStoreIndex.as_retriever passes node_ids=[] for stores that keep text: no restriction.
    assert store.query(_query(query, k=3, node_ids=[], doc_ids=[])).ids == _top(vectors, query, 3)
    assert store.query(_query(query, k=3, node_ids=["missing"])).ids == []


def _matches(position: int, predicate: Any) -> bool:
    return bool(predicate(_metadata(position)))


# A llama-index filter and the same condition in Python (on the metadata of _metadata(position)).
FILTER_CASES: dict[str, tuple[MetadataFilters, Any]] = {
    "eq": (_filters(_leaf("lang", FilterOperator.EQ, "fr")), lambda m: m.get("lang") == "fr"),
    "ne": (_filters(_leaf("lang", FilterOperator.NE, "fr")), lambda m: m.get("lang") != "fr"),  # missing: kept
    "gt": (_filters(_leaf("year", FilterOperator.GT, 2022)), lambda m: m["year"] > 2022),
    "gte": (_filters(_leaf("year", FilterOperator.GTE, 2022)), lambda m: m["year"] >= 2022),
    "lt": (_filters(_leaf("year", FilterOperator.LT, 2020)), lambda m: m["year"] < 2020),
    "lte": (_filters(_leaf("year", FilterOperator.LTE, 2020)), lambda m: m["year"] <= 2020),
    "in": (_filters(_leaf("lang", FilterOperator.IN, ["en", "de"])), lambda m: m.get("lang") in ("en", "de")),
    "nin": (_filters(_leaf("lang", FilterOperator.NIN, ["en", "de"])), lambda m: m.get("lang") not in ("en", "de")),
    "is_empty": (_filters(_leaf("title", FilterOperator.IS_EMPTY)), lambda m: m.get("title") in ("", None)),
    "is_empty_missing": (_filters(_leaf("lang", FilterOperator.IS_EMPTY)), lambda m: "lang" not in m),
    "is_empty_list": (_filters(_leaf("tags", FilterOperator.IS_EMPTY)), lambda m: m["tags"] == []),
    "and": (
        _filters(_leaf("year", FilterOperator.GTE, 2020), _leaf("lang", FilterOperator.EQ, "en")),
        lambda m: m["year"] >= 2020 and m.get("lang") == "en",
    ),
    "or": (
        _filters(
            _leaf("bucket", FilterOperator.EQ, 1), _leaf("lang", FilterOperator.EQ, "de"), condition=FilterCondition.OR
        ),
        lambda m: m["bucket"] == 1 or m.get("lang") == "de",
    ),
    "not": (
        _filters(
            _leaf("year", FilterOperator.LT, 2024),
            _leaf("lang", FilterOperator.EQ, "en"),
            condition=FilterCondition.NOT,
        ),
        lambda m: not (m["year"] < 2024 or m.get("lang") == "en"),
    ),
    "nested": (
        _filters(
            _leaf("year", FilterOperator.GTE, 2019),
            _filters(
                _leaf("lang", FilterOperator.EQ, "en"),
                _leaf("bucket", FilterOperator.IN, [3, 5]),
                condition=FilterCondition.OR,
            ),
            _filters(_leaf("bucket", FilterOperator.EQ, 9), condition=FilterCondition.NOT),
        ),
        lambda m: m["year"] >= 2019 and (m.get("lang") == "en" or m["bucket"] in (3, 5)) and m["bucket"] != 9,
    ),
    "empty": (_filters(), lambda m: True),
    "type_family": (_filters(_leaf("year", FilterOperator.EQ, "2019")), lambda m: False),  # "2019" is not 2019
}


@pytest.mark.parametrize("case", list(FILTER_CASES))
def test_filters_select_exactly_the_matching_nodes(store: FairFaissVectorStore, vectors: np.ndarray, case: str) -> None:
    filters, predicate = FILTER_CASES[case]
    expected = [position for position in range(COUNT) if _matches(position, predicate)]
    assert [node.node_id for node in store.get_nodes(filters=filters)] == [f"n{p}" for p in expected]
    query = vectors[11]
    assert store.query(_query(query, k=7, filters=filters)).ids == _top(vectors, query, 7, expected)


def _far_store(kind: str) -> tuple[FairFaissVectorStore, np.ndarray, list[int]]:
    """400 nodes; the 5 with rare="yes" are the ones farthest from the query vector returned."""
    vectors = _vectors(400, seed=3)
    query = vectors[0]
    far = [int(p) for p in np.argsort(vectors @ query)[:5]]
    nodes = [
        TextNode(
            id_=f"n{p}",
            text=f"n{p}",
            embedding=vector.tolist(),
            metadata={"rare": "yes" if p in far else "no", "bucket": p % 10},
        )
        for p, vector in enumerate(vectors)
    ]
    store = FairFaissVectorStore(gpu=False, **STORE_KINDS[kind])
    store.add(nodes)
    return store, vectors, far


@pytest.mark.parametrize("kind", list(STORE_KINDS))
def test_a_filtered_query_returns_top_k_whenever_that_many_match(kind: str) -> None:
    store, vectors, far = _far_store(kind)
    query = vectors[0]
    rare = _filters(_leaf("rare", FilterOperator.EQ, "yes"))
    result = store.query(_query(query, k=5, filters=rare))
    assert sorted(result.ids) == sorted(f"n{p}" for p in far)  # all five, though they are the worst matches
    assert store.query(_query(query, k=10, filters=rare)).ids == result.ids  # only five match
    tenth = _filters(_leaf("bucket", FilterOperator.EQ, 4))
    hits = store.query(_query(query, k=30, filters=tenth))
    assert len(hits.ids) == 30 and all(node.metadata["bucket"] == 4 for node in hits.nodes)
    if kind == "flat":
        assert hits.ids == _top(vectors, query, 30, [p for p in range(400) if p % 10 == 4])


@pytest.mark.parametrize(
    ("operator", "key", "value"),
    [
        (FilterOperator.CONTAINS, "tags", "b"),
        (FilterOperator.ANY, "tags", ["b", "z"]),
        (FilterOperator.ALL, "tags", ["a", "b"]),
        (FilterOperator.TEXT_MATCH, "title", "title 1"),
        (FilterOperator.TEXT_MATCH_INSENSITIVE, "title", "TITLE 2"),
    ],
)
def test_list_and_text_operators_select_what_simple_vector_store_selects(
    store: FairFaissVectorStore, vectors: np.ndarray, operator: FilterOperator, key: str, value: Any
) -> None:
    simple = SimpleVectorStore()
    simple.add(_nodes(vectors))
    for filters in (
        _filters(_leaf(key, operator, value)),
        _filters(_leaf("year", FilterOperator.GT, 2019), _leaf(key, operator, value)),
    ):
        expected = simple.query(_query(vectors[0], k=COUNT, filters=filters)).ids
        assert expected and sorted(store.query(_query(vectors[0], k=COUNT, filters=filters)).ids) == sorted(expected)
        assert sorted(node.node_id for node in store.get_nodes(filters=filters)) == sorted(expected)


def test_malformed_filters_give_clear_errors(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    with pytest.raises(ValueError, match=r"IN on 'lang' needs a list value, e\.g\. value=\['en'\]"):
        store.query(_query(vectors[0], filters=_filters(_leaf("lang", FilterOperator.IN, "en"))))
    with pytest.raises(ValueError, match="GT on 'year' compares with a number or a string"):
        store.query(_query(vectors[0], filters=_filters(_leaf("year", FilterOperator.GT, None))))
    with pytest.raises(ValueError, match="starting with '\\$'"):
        store.query(_query(vectors[0], filters=_filters(_leaf("$and", FilterOperator.EQ, 1))))
    with pytest.raises(TypeError, match="MetadataFilters"):
        store.query(_query(vectors[0], filters={"lang": "en"}))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="wrap one id"):
        store.get_nodes(node_ids="n1")  # type: ignore[arg-type]


def test_query_errors(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    with pytest.raises(ValueError, match=r"answers VectorStoreQueryMode\.DEFAULT .* HYBRID .* MMR .* got 'svm'"):
        store.query(_query(vectors[0], mode=VectorStoreQueryMode.SVM))
    with pytest.raises(ValueError, match=r"mmr_threshold must be a number in \[0, 1\]"):
        store.query(_query(vectors[0], mode=VectorStoreQueryMode.MMR), mmr_threshold=1.5)
    with pytest.raises(ValueError, match="no query_embedding"):
        store.query(VectorStoreQuery(query_str="text only"))
    with pytest.raises(ValueError, match="query_embedding gave 3-d vectors, but this store holds 16-d"):
        store.query(VectorStoreQuery(query_embedding=[1.0, 0.0, 0.0]))
    for top_k in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="similarity_top_k must be a positive int"):
            store.query(_query(vectors[0], k=top_k))  # type: ignore[arg-type]
    empty = FairFaissVectorStore(gpu=False)
    result = empty.query(VectorStoreQuery(query_embedding=[0.5] * 4, similarity_top_k=3))
    assert result.ids == [] and result.nodes == [] and result.similarities == []


def test_add_errors_leave_the_store_unchanged(store: FairFaissVectorStore, vectors: np.ndarray) -> None:
    before = list(store.node_ids)
    fine = TextNode(id_="new", text="new", embedding=vectors[0].tolist())
    with pytest.raises(ValueError, match=r"nodes\[1\] \('bare'\) has no embedding"):
        store.add([fine, TextNode(id_="bare", text="no vector")])
    with pytest.raises(ValueError, match="embeddings are 3-d vectors, but this store holds 16-d"):
        store.add([TextNode(id_="short", text="short", embedding=[1.0, 2.0, 3.0])])
    with pytest.raises(ValueError, match="sizes"):
        store.add([fine, TextNode(id_="short", text="short", embedding=[1.0, 2.0, 3.0])])
    with pytest.raises(ValueError, match="repeat within this add: 'new'"):
        store.add([fine, fine])
    with pytest.raises(TypeError, match=r"as JSON.*isoformat"):
        store.add(
            [
                TextNode(
                    id_="dated",
                    text="dated",
                    embedding=vectors[0].tolist(),
                    metadata={"when": datetime.date(2024, 1, 1)},
                )
            ]
        )
    with pytest.raises(ValueError, match="NaN"):
        store.add([TextNode(id_="nan", text="nan", embedding=[float("nan")] * DIM)])
    with pytest.raises(TypeError, match="expected a llama-index node"):
        store.add(["just text"])  # type: ignore[list-item]
    with pytest.raises(
        ValueError, match=r"\[1\] \(id 'empty'\): the text is empty.*\[2\] \(id 'nul'\): the text holds a NUL"
    ):
        store.add(  # every bad node of the call is named at once
            [
                fine,
                TextNode(id_="empty", text=" ", embedding=[0.5] * DIM),
                TextNode(id_="nul", text="a\x00", embedding=[0.5] * DIM),
            ]
        )
    assert store.node_ids == before and store.client is not None and len(store.client) == COUNT
    assert store.add([]) == []


def test_constructor_arguments() -> None:
    with pytest.raises(ValueError, match=r"metric must be one of \('cosine', 'ip', 'l2'\)"):
        FairFaissVectorStore.create(dim=4, metric="dot")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="dim must be a positive int"):
        FairFaissVectorStore.create(dim=0)
    with pytest.raises(ValueError, match="kind must be one of"):
        FairFaissVectorStore(kind="annoy")
    with pytest.raises(TypeError, match="no longer wraps a raw faiss index"):
        FairFaissVectorStore(faiss_index=object())  # type: ignore[call-arg]
    with pytest.raises(TypeError, match=r"must be a fair_retrieval\.FaissIndex"):
        FairFaissVectorStore(object())  # type: ignore[arg-type]
    full = FaissIndex(DIM, gpu=False)
    full.add(_vectors(2))
    with pytest.raises(ValueError, match="already holds 2 vectors"):
        FairFaissVectorStore(full)
    with pytest.raises(ValueError, match="not both"):
        FairFaissVectorStore(FaissIndex(DIM, gpu=False), dim=DIM)
    custom = FairFaissVectorStore(FaissIndex(DIM, metric="l2", gpu=False, kind="hnsw", M=8))
    assert custom.metric == "l2" and custom.client is not None and custom.client.kind == "hnsw"
    l2 = FairFaissVectorStore.create(dim=2, metric="l2", gpu=False)
    l2.add([TextNode(id_="a", text="a", embedding=[0.0, 0.0]), TextNode(id_="b", text="b", embedding=[3.0, 4.0])])
    result = l2.query(VectorStoreQuery(query_embedding=[3.0, 3.0], similarity_top_k=2))
    assert result.ids == ["b", "a"] and result.similarities == pytest.approx([1.0, 18.0])  # squared distances


# ---------------------------------------------------------------------------------------------------- upserts


def _pipeline(
    store: FairFaissVectorStore, docstore: SimpleDocumentStore, strategy: DocstoreStrategy
) -> IngestionPipeline:
    return IngestionPipeline(
        transformations=[SentenceSplitter(chunk_size=64, chunk_overlap=0), MockEmbedding(embed_dim=8)],
        docstore=docstore,
        vector_store=store,
        docstore_strategy=strategy,
    )


def _texts_by_document(store: FairFaissVectorStore) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for node in store.get_nodes():
        grouped.setdefault(str(node.ref_doc_id), []).append(node.get_content())
    return grouped


def test_ingestion_pipeline_upserts_replace_a_changed_document() -> None:
    store, docstore = FairFaissVectorStore(gpu=False), SimpleDocumentStore()
    documents = [
        Document(text="The ferry stops in strong wind.", id_="ferry"),
        Document(text="Bread at six.", id_="bakery"),
    ]
    _pipeline(store, docstore, DocstoreStrategy.UPSERTS).run(documents=documents)
    assert _texts_by_document(store) == {"ferry": ["The ferry stops in strong wind."], "bakery": ["Bread at six."]}
    bakery_ids = [
        node_id for node_id in store.node_ids if store.get_nodes(node_ids=[node_id])[0].ref_doc_id == "bakery"
    ]

    changed = [
        Document(text="The ferry now runs in any weather.", id_="ferry"),
        Document(text="Bread at six.", id_="bakery"),
    ]
    _pipeline(store, docstore, DocstoreStrategy.UPSERTS).run(documents=changed)
    assert _texts_by_document(store) == {"bakery": ["Bread at six."], "ferry": ["The ferry now runs in any weather."]}
    assert bakery_ids[0] in store.node_ids  # the unchanged document was not re-added

    _pipeline(store, docstore, DocstoreStrategy.UPSERTS_AND_DELETE).run(documents=changed[:1])
    assert _texts_by_document(store) == {"ferry": ["The ferry now runs in any weather."]}  # the vanished one is gone


def test_ingestion_pipeline_async_upserts() -> None:
    store, docstore = FairFaissVectorStore(gpu=False), SimpleDocumentStore()
    pipeline = _pipeline(store, docstore, DocstoreStrategy.UPSERTS_AND_DELETE)
    asyncio.run(pipeline.arun(documents=[Document(text="one", id_="a"), Document(text="two", id_="b")]))
    asyncio.run(pipeline.arun(documents=[Document(text="three", id_="a")]))
    assert _texts_by_document(store) == {"a": ["three"]}


def test_vector_store_index_delete_ref_doc_and_insert(vectors: np.ndarray) -> None:
    store = FairFaissVectorStore(gpu=False)
    index = VectorStoreIndex(
        _nodes(vectors[:9]),
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=MockEmbedding(embed_dim=DIM),
    )
    assert index.docstore.docs == {}  # the store keeps the text
    index.delete_ref_doc("doc-0")
    index.insert_nodes([TextNode(id_="extra", text="extra", embedding=vectors[0].tolist())])
    retriever = index.as_retriever(similarity_top_k=2)
    hits = retriever.retrieve(_bundle(vectors[0]))
    assert [hit.node.node_id for hit in hits] == ["extra", *_top(vectors, vectors[0], 1, list(range(3, 9)))]
    assert hits[0].node.get_content() == "extra"


def _bundle(vector: np.ndarray) -> Any:
    from llama_index.core.schema import QueryBundle

    return QueryBundle(query_str="a question", embedding=vector.tolist())


# ---------------------------------------------------------------------------------------------------- persistence


def test_persist_and_load_round_trip(tmp_path: Path, vectors: np.ndarray) -> None:
    store = FairFaissVectorStore(gpu=False)
    store.add(_nodes(vectors))
    store.add([Document(text="a document", id_="whole", metadata={"kind": "doc"}, embedding=vectors[0].tolist())])
    store.delete("doc-3")
    path = tmp_path / "default__vector_store.json"
    store.persist(str(path))
    assert sorted(item.name for item in tmp_path.iterdir()) == [
        "default__vector_store.index",
        "default__vector_store.json",
    ]
    assert sorted(item.name for item in (tmp_path / "default__vector_store.index").iterdir()) == [
        "index.faiss",
        "index.json",
    ]
    state = json.loads(path.read_text(encoding="utf-8"))  # plain JSON: nothing pickled
    assert state["format"] == "llama-index-fair-faiss-store" and len(state["nodes"]) == COUNT - 2

    for loaded in (
        FairFaissVectorStore.from_persist_path(str(path), gpu=False),
        FairFaissVectorStore.from_persist_dir(str(tmp_path)),
    ):
        assert loaded.node_ids == store.node_ids
        assert loaded._store.records.int_ids == store._store.records.int_ids  # the same node id → int id map
        for mine, theirs in zip(store.get_nodes(), loaded.get_nodes(), strict=True):
            assert type(theirs) is type(mine) and theirs.to_dict() == mine.to_dict()  # text, metadata, relationships
        query = vectors[20]
        filters = _filters(_leaf("year", FilterOperator.GTE, 2021))
        before, after = (
            store.query(_query(query, k=5, filters=filters)),
            loaded.query(_query(query, k=5, filters=filters)),
        )
        assert after.ids == before.ids
        np.testing.assert_allclose(after.similarities, before.similarities, atol=1e-6)
    loaded.delete("doc-4")
    loaded.add([TextNode(id_="later", text="later", embedding=vectors[1].tolist())])
    assert (
        loaded._store.records.int_ids["later"] == store._store.records.next_int_id
    )  # new ids continue after the persisted counter


def test_loading_builds_one_store_and_not_the_constructors(
    tmp_path: Path, vectors: np.ndarray, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = FairFaissVectorStore(gpu=False)
    store.add(_nodes(vectors[:4]))
    store.persist(str(tmp_path / "default__vector_store.json"))
    built: list[object] = []
    original = DocumentStore.__init__

    def counted(self: DocumentStore[Any], **options: Any) -> None:
        built.append(self)
        original(self, **options)

    def refused(self: FairFaissVectorStore, *args: Any, **kwargs: Any) -> None:
        raise AssertionError("the constructor builds a new store, not a loaded one")

    monkeypatch.setattr(DocumentStore, "__init__", counted)
    monkeypatch.setattr(FairFaissVectorStore, "__init__", refused)
    loaded = FairFaissVectorStore.from_persist_dir(str(tmp_path))
    assert len(built) == 1 and loaded._store is built[0]  # the loaded one, held as it is
    assert loaded.node_ids == store.node_ids and loaded.stores_text and loaded.is_embedding_query


def test_an_empty_store_round_trips(tmp_path: Path) -> None:
    FairFaissVectorStore(gpu=False, kind="hnsw", M=8).persist(str(tmp_path / "store.json"))
    record = json.loads((tmp_path / "store.index" / "index.json").read_text())  # its commit record, no index
    assert list(record["publication"]["files"]) == ["../store.json"]
    loaded = FairFaissVectorStore.from_persist_path(str(tmp_path / "store.json"), gpu=False)
    assert loaded.client is None and loaded.node_ids == []
    loaded.add([TextNode(id_="a", text="a", embedding=[1.0, 0.0])])
    assert loaded.client is not None and loaded.client.kind == "hnsw" and loaded.client.params["M"] == 8


def test_a_store_over_a_custom_faiss_index_round_trips(tmp_path: Path, vectors: np.ndarray) -> None:
    store = FairFaissVectorStore(FaissIndex(DIM, metric="l2", factory="LSH", gpu=False))  # kind "custom"
    store.add(_nodes(vectors))
    english = _filters(_leaf("lang", FilterOperator.EQ, "en"))
    before = store.query(_query(vectors[8], k=4, filters=english))
    assert len(before.ids) == 4 and all(node.metadata["lang"] == "en" for node in before.nodes)
    store.persist(str(tmp_path / "store.json"))
    loaded = FairFaissVectorStore.from_persist_path(str(tmp_path / "store.json"), gpu=False)
    assert loaded.client is not None and loaded.client.factory == "LSH" and loaded.metric == "l2"
    assert loaded.query(_query(vectors[8], k=4, filters=english)).ids == before.ids


def test_persistence_errors(tmp_path: Path, vectors: np.ndarray) -> None:
    with pytest.raises(FileNotFoundError, match="No FairFaissVectorStore at"):
        FairFaissVectorStore.from_persist_dir(str(tmp_path / "nowhere"))
    store = FairFaissVectorStore(gpu=False)
    store.add(_nodes(vectors[:5]))
    with pytest.raises(NotImplementedError, match="local folders only"):
        store.persist(str(tmp_path / "x.json"), fs=object())
    store.persist(str(tmp_path / "a.json"))
    other = FairFaissVectorStore(gpu=False)
    other.add(_nodes(vectors[:3]))
    other.persist(str(tmp_path / "b.json"))
    (tmp_path / "a.index" / "index.faiss").replace(tmp_path / "b.index" / "index.faiss")
    (tmp_path / "a.index" / "index.json").replace(tmp_path / "b.index" / "index.json")
    with pytest.raises(ValueError, match=r"index\.json is damaged: it commits \.\./a\.json, not \.\./b\.json"):
        FairFaissVectorStore.from_persist_path(str(tmp_path / "b.json"))
    shutil.rmtree(tmp_path / "a.index")
    with pytest.raises(FileNotFoundError, match="which is missing: copy the whole persist folder"):
        FairFaissVectorStore.from_persist_path(str(tmp_path / "a.json"))
    (tmp_path / "c.json").write_text('{"format": "something-else"}', encoding="utf-8")
    with pytest.raises(ValueError, match=r"not written by FairFaissVectorStore\.persist"):
        FairFaissVectorStore.from_persist_path(str(tmp_path / "c.json"))


def _legacy_folder(tmp_path: Path, vectors: np.ndarray) -> tuple[Path, Any]:
    """A folder written the old way: llama-index's FaissVectorStore, which the old FairFaissVectorStore subclassed
    (its persist wrote the same raw faiss file)."""
    import faiss
    from llama_index.vector_stores.faiss import FaissVectorStore

    old_store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(DIM))
    index = VectorStoreIndex(
        _nodes(vectors[:12]),
        storage_context=StorageContext.from_defaults(vector_store=old_store),
        embed_model=MockEmbedding(embed_dim=DIM),
    )
    index.storage_context.persist(persist_dir=str(tmp_path))
    assert (tmp_path / "default__vector_store.json").read_bytes()[:4] == b"IxFI"  # faiss' binary, not JSON
    return tmp_path, index


def test_a_legacy_folder_is_recognised_and_converted(tmp_path: Path, vectors: np.ndarray) -> None:
    folder, old_index = _legacy_folder(tmp_path, vectors)
    with pytest.raises(ValueError, match=r"raw faiss index.*from_legacy_persist_dir\(.*from_vector_store"):
        FairFaissVectorStore.from_persist_dir(str(folder))

    store = FairFaissVectorStore.from_legacy_persist_dir(str(folder), gpu=False)
    assert store.node_ids == [f"n{p}" for p in range(12)] and store.metric == "ip"
    for node, position in zip(store.get_nodes(), range(12), strict=True):
        assert node.get_content() == f"text {position}" and node.metadata == _metadata(position)
        assert node.ref_doc_id == f"doc-{position // 3}"
        np.testing.assert_allclose(node.embedding, vectors[position], atol=1e-6)
    query = vectors[4] + vectors[5]
    old_hits = [hit.node.node_id for hit in old_index.as_retriever(similarity_top_k=4).retrieve(_bundle(query))]
    assert store.query(_query(query, k=4)).ids == old_hits

    index = VectorStoreIndex.from_vector_store(store, embed_model=MockEmbedding(embed_dim=DIM))  # as the message says
    index.storage_context.persist(persist_dir=str(folder))
    reloaded = load_index_from_storage(
        StorageContext.from_defaults(
            vector_store=FairFaissVectorStore.from_persist_dir(str(folder)), persist_dir=str(folder)
        ),
        embed_model=MockEmbedding(embed_dim=DIM),
    )
    assert [hit.node.node_id for hit in reloaded.as_retriever(similarity_top_k=4).retrieve(_bundle(query))] == old_hits
    reloaded.insert_nodes([TextNode(id_="new", text="new", embedding=query.tolist())])
    assert reloaded.as_retriever(similarity_top_k=1).retrieve(_bundle(query))[0].node.node_id == "new"


def test_legacy_conversion_errors(tmp_path: Path, vectors: np.ndarray) -> None:
    folder, _ = _legacy_folder(tmp_path, vectors)
    (folder / "docstore.json").unlink()
    with pytest.raises(FileNotFoundError, match=r"lacks docstore\.json"):
        FairFaissVectorStore.from_legacy_persist_dir(str(folder))
    new = tmp_path / "new"
    FairFaissVectorStore(gpu=False).persist(str(new / "default__vector_store.json"))
    with pytest.raises(ValueError, match=r"loads with FairFaissVectorStore\.from_persist_dir"):
        FairFaissVectorStore.from_legacy_persist_dir(str(new))


# ---------------------------------------------------------------------------------------------------- README


def test_the_readme_example_works_as_written(
    minilm: FairEmbedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """integrations/README_SNIPPETS.md's FAISS example (with the shared MiniLM instead of loading it by name)."""
    monkeypatch.chdir(tmp_path)
    embed_model = FairEmbedding(embedder=minilm)
    store = FairFaissVectorStore.create(dim=embed_model.embedder.dimension)  # GPU if faiss sees one
    index = VectorStoreIndex.from_documents(
        [
            Document(text="The chess club meets on Thursday evenings in the railway museum."),
            Document(text="The bakery on the square opens at six."),
        ],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
    )
    index.storage_context.persist("storage")

    store = FairFaissVectorStore.from_persist_dir("storage")
    index = load_index_from_storage(
        StorageContext.from_defaults(vector_store=store, persist_dir="storage"), embed_model=embed_model
    )
    hit = index.as_retriever(similarity_top_k=1).retrieve("Where does the chess club meet?")[0]
    assert hit.node.text == "The chess club meets on Thursday evenings in the railway museum."
    assert isinstance(hit.node, BaseNode) and 0.3 < hit.score <= 1.0  # a cosine: FairEmbedding's unit vectors
