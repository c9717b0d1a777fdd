"""FaissVectorStore filters: the `fair_retrieval.stores.filters` grammar, searched among the matching documents
only.

Most tests use random vectors looked up by text (fast, and exact brute force is easy); one uses the real MiniLM.
Filters keep 1 %, 10 % and 90 % of 300 documents in flat, hnsw and ivf stores, and every search entry point
(similarity, scores, relevance, MMR, the three retriever search types, async) must return min(k, matches) hits
that all match, equal to brute force over the matching documents (exactly for flat).
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_fair import FairEmbeddings, FaissVectorStore

from fair_retrieval import FairEmbedder
from fair_retrieval.stores.filters import compile_filter

DIM = 16
COUNT = 300
STORE_KINDS: dict[str, dict[str, Any]] = {
    "flat": {},
    "hnsw": {"kind": "hnsw", "M": 8, "ef_search": 16},
    "ivf": {"kind": "ivf", "nlist": 6, "nprobe": 2},
}
FILTERS: dict[str, Any] = {  # share of the 300 documents kept → filter
    "1%": {"bucket": 7},
    "10%": {"bucket": {"$lt": 10}},
    "90%": {"$not": {"bucket": {"$lt": 10}}},
}


class TableEmbeddings(Embeddings):
    """A fixed random vector per text (documents and queries alike), counting the calls."""

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.document_calls = 0
        self.query_calls = 0

    def vector(self, text: str) -> list[float]:
        rng = np.random.default_rng(zlib.crc32(text.encode("utf-8")))
        return rng.standard_normal(self.dim).tolist()  # type: ignore[no-any-return]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls += 1
        return [self.vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self.vector(text)


def corpus() -> tuple[list[str], list[dict[str, Any]]]:
    texts = [f"document {position}" for position in range(COUNT)]
    metadatas = [
        {"bucket": position % 100, "parity": "even" if position % 2 == 0 else "odd", "year": 2000 + position % 30}
        for position in range(COUNT)
    ]
    for position in range(0, COUNT, 25):
        del metadatas[position]["year"]  # some documents lack a field
    return texts, metadatas


@pytest.fixture(scope="module")
def stores() -> dict[str, FaissVectorStore]:
    texts, metadatas = corpus()
    ids = [f"d{position}" for position in range(COUNT)]
    return {  # dense: the tests hold the vector search against brute force
        name: FaissVectorStore.from_texts(
            texts, TableEmbeddings(), metadatas=metadatas, ids=ids, gpu=False, retrieval_mode="dense", **options
        )
        for name, options in STORE_KINDS.items()
    }


def unit(vector: list[float]) -> np.ndarray:
    array = np.asarray(vector, dtype=np.float64)
    return array / np.linalg.norm(array)  # type: ignore[no-any-return]


def brute_force(query: str, spec: Any, k: int) -> list[tuple[str, float]]:
    """(id, cosine) of the k documents nearest to `query` among those `spec` keeps."""
    texts, metadatas = corpus()
    embeddings, keep = TableEmbeddings(), compile_filter(spec)
    target = unit(embeddings.vector(query))
    scored = [
        (f"d{position}", float(unit(embeddings.vector(text)) @ target))
        for position, (text, metadata) in enumerate(zip(texts, metadatas, strict=True))
        if keep(metadata)
    ]
    return sorted(scored, key=lambda pair: -pair[1])[:k]


def matches(spec: Any) -> int:
    keep = compile_filter(spec)
    return sum(keep(metadata) for metadata in corpus()[1])


def test_the_filters_keep_the_intended_shares() -> None:
    assert [matches(spec) for spec in FILTERS.values()] == [3, 30, 270]


# ------------------------------------------------------------------------------------------------ k hits, exactly


@pytest.mark.parametrize("k", [4, 10])
@pytest.mark.parametrize("share", list(FILTERS))
@pytest.mark.parametrize("kind", list(STORE_KINDS))
def test_filtered_search_returns_the_k_nearest_matching_documents(
    stores: dict[str, FaissVectorStore], kind: str, share: str, k: int
) -> None:
    store, spec = stores[kind], FILTERS[share]
    keep = compile_filter(spec)
    for query in ("first question", "second question", "document 7"):
        hits = store.similarity_search_with_score(query, k=k, filter=spec)
        expected = brute_force(query, spec, k)
        assert len(hits) == min(k, matches(spec)) == len(expected)
        assert all(keep(document.metadata) for document, _ in hits)
        if kind == "flat":
            assert [document.id for document, _ in hits] == [id_ for id_, _ in expected]
            np.testing.assert_allclose([score for _, score in hits], [score for _, score in expected], atol=1e-5)
        else:
            found = {document.id for document, _ in hits}
            assert len(found & {id_ for id_, _ in expected}) >= 0.9 * len(expected)


def test_few_matches_among_many_documents_still_fill_k() -> None:
    """6 of 42 documents match; the old store searched the top fetch_k=20 and then filtered, finding none."""
    years = [2020 + position % 7 for position in range(42)]  # 2026 for 6 of them
    store = FaissVectorStore.from_texts(
        [f"note {position}" for position in range(42)], TableEmbeddings(), [{"year": year} for year in years], gpu=False
    )
    for spec in ({"year": {"$gte": 2026}}, {"year": 2026}, {"year": {"$in": [2026]}}):
        hits = store.similarity_search("a question", k=4, filter=spec, fetch_k=20)
        assert len(hits) == 4 and all(document.metadata["year"] == 2026 for document in hits)
    assert len(store.similarity_search("a question", k=10, filter={"year": 2026})) == 6


@pytest.mark.parametrize(
    ("spec", "wanted"),
    [
        ({"parity": "odd", "bucket": {"$in": [1, 3, 5]}}, lambda m: m["parity"] == "odd" and m["bucket"] in (1, 3, 5)),
        ({"bucket": {"$ne": 0}, "year": {"$lt": 2003}}, lambda m: m["bucket"] != 0 and m.get("year", 9999) < 2003),
        ({"year": {"$nin": list(range(2000, 2029))}}, lambda m: m.get("year") not in range(2000, 2029)),
        ({"year": {"$exists": False}}, lambda m: "year" not in m),
        ({"$or": [{"bucket": 3}, {"year": 2029}]}, lambda m: m["bucket"] == 3 or m.get("year") == 2029),
        ({"$and": [{"bucket": {"$gte": 40}}, {"bucket": {"$lte": 41}}]}, lambda m: m["bucket"] in (40, 41)),
        ({"year": {"$not": {"$gte": 2001}}}, lambda m: not m.get("year", 0) >= 2001),
        ({"bucket": [5, 6]}, lambda m: m["bucket"] in (5, 6)),
        (lambda m: m["bucket"] % 33 == 0, lambda m: m["bucket"] % 33 == 0),
    ],
)
def test_operators_through_the_store(stores: dict[str, FaissVectorStore], spec: Any, wanted: Any) -> None:
    expected = sum(wanted(metadata) for metadata in corpus()[1])
    assert 0 < expected < COUNT
    hits = stores["flat"].similarity_search("some query", k=COUNT, filter=spec)
    assert len(hits) == expected and all(wanted(document.metadata) for document in hits)


def test_a_filter_keeping_everything_or_nothing(stores: dict[str, FaissVectorStore]) -> None:
    store = stores["flat"]
    unfiltered = store.similarity_search_with_score("query", k=7)
    assert store.similarity_search_with_score("query", k=7, filter={"bucket": {"$gte": 0}}) == unfiltered
    assert store.similarity_search_with_score("query", k=7, filter={}) == unfiltered
    assert store.similarity_search("query", k=7, filter={"bucket": 1000}) == []
    assert store.max_marginal_relevance_search("query", k=7, filter={"bucket": 1000}) == []


def test_filters_see_upserts_and_deletes() -> None:
    store = FaissVectorStore.from_texts(
        ["a", "b", "c"], TableEmbeddings(), [{"tag": "x"}, {"tag": "x"}, {"tag": "y"}], ids=["a", "b", "c"], gpu=False
    )
    store.add_texts(["b again"], [{"tag": "y"}], ids=["b"])
    store.delete(["c"])
    assert [d.id for d in store.similarity_search("q", k=3, filter={"tag": "y"})] == ["b"]
    assert [d.id for d in store.similarity_search("q", k=3, filter={"tag": "x"})] == ["a"]


# ------------------------------------------------------------------------------------------------ MMR and retrievers


@pytest.mark.parametrize("kind", list(STORE_KINDS))
def test_mmr_chooses_among_the_nearest_matching_documents(stores: dict[str, FaissVectorStore], kind: str) -> None:
    store = stores[kind]
    for spec in FILTERS.values():
        keep = compile_filter(spec)
        nearest = [id_ for id_, _ in brute_force("mmr query", spec, 12)]
        chosen = store.max_marginal_relevance_search("mmr query", k=5, fetch_k=12, filter=spec)
        assert len(chosen) == min(5, matches(spec))
        assert all(keep(document.metadata) for document in chosen)
        assert {document.id for document in chosen} <= set(nearest)
        relevance_only = store.max_marginal_relevance_search("mmr query", k=5, fetch_k=12, lambda_mult=1.0, filter=spec)
        assert [document.id for document in relevance_only] == nearest[:5]
        by_vector = store.max_marginal_relevance_search_by_vector(
            store.embeddings.embed_query("mmr query"), k=5, fetch_k=12, filter=spec
        )
        assert [document.id for document in by_vector] == [document.id for document in chosen]


def test_every_retriever_search_type_honours_the_filter(stores: dict[str, FaissVectorStore]) -> None:
    store, spec = stores["hnsw"], FILTERS["10%"]
    expected = [id_ for id_, _ in brute_force("retrieval", spec, 6)]
    kinds: dict[str, dict[str, Any]] = {
        "similarity": {"k": 6},
        "mmr": {"k": 6, "fetch_k": 15},
        "similarity_score_threshold": {"k": 6, "score_threshold": 0.0},
    }
    for search_type, options in kinds.items():
        retriever = store.as_retriever(search_type=search_type, search_kwargs={**options, "filter": spec})
        documents = retriever.invoke("retrieval")
        assert len(documents) == 6 and all(document.metadata["bucket"] < 10 for document in documents), search_type
        if search_type != "mmr":
            assert [document.id for document in documents] == expected, search_type
    rare = store.as_retriever(search_kwargs={"k": 6, "filter": FILTERS["1%"]}).invoke("retrieval")
    assert sorted(str(document.id) for document in rare) == ["d107", "d207", "d7"]


async def test_async_searches_honour_the_filter(stores: dict[str, FaissVectorStore]) -> None:
    store, spec = stores["flat"], FILTERS["1%"]
    hits = await store.asimilarity_search("async query", k=5, filter=spec)
    assert sorted(str(document.id) for document in hits) == ["d107", "d207", "d7"]
    mmr = await store.amax_marginal_relevance_search("async query", k=2, fetch_k=5, filter=spec)
    assert len(mmr) == 2 and all(document.metadata["bucket"] == 7 for document in mmr)
    retrieved = await store.as_retriever(search_kwargs={"k": 5, "filter": spec}).ainvoke("async query")
    assert [document.id for document in retrieved] == [document.id for document in hits]


# ------------------------------------------------------------------------------------------------ malformed filters


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"year": {"$regex": "20"}}, r"Unknown filter operator '\$regex'.*\$gte"),
        ({"year": {"$in": 2024}}, r"\$in'\] needs a list of values"),
        ({"$or": []}, r"\$or'\] needs a non-empty list"),
        ({"$and": {"year": 2024}}, r"\$and'\] needs a non-empty list"),
    ],
)
def test_malformed_filters_fail_before_any_search(spec: Any, message: str) -> None:
    embeddings = TableEmbeddings()
    store = FaissVectorStore.from_texts(["one", "two"], embeddings, [{"year": 2024}, {}], gpu=False)
    empty = FaissVectorStore(embeddings, gpu=False)
    calls = [
        lambda s: s.similarity_search("q", filter=spec),
        lambda s: s.similarity_search_with_score("q", filter=spec),
        lambda s: s.similarity_search_by_vector([0.1] * DIM, filter=spec),
        lambda s: s.similarity_search_with_relevance_scores("q", filter=spec),
        lambda s: s.max_marginal_relevance_search("q", filter=spec),
        lambda s: s.max_marginal_relevance_search_by_vector([0.1] * DIM, filter=spec),
        lambda s: s.as_retriever(search_kwargs={"filter": spec}),  # refused when the retriever is made
        lambda s: s.as_retriever(search_type="mmr", search_kwargs={"filter": spec}),
    ]
    for target in (store, empty):
        for call in calls:
            with pytest.raises(ValueError, match=message):
                call(target)
    assert embeddings.query_calls == 0  # refused before the query was embedded


# ------------------------------------------------------------------------------------------------ the real model


def test_filtered_search_with_minilm_matches_brute_force(minilm: FairEmbedder) -> None:
    topics = ["harbour", "bakery", "library", "railway"]
    texts = [
        f"Notice {position}: the {topics[position % 4]} changes its hours from week {position}."
        for position in range(32)
    ]
    metadatas = [{"topic": topics[position % 4], "week": position} for position in range(32)]
    store = FaissVectorStore.from_texts(
        texts, FairEmbeddings(embedder=minilm), metadatas, gpu=False, retrieval_mode="dense"
    )
    assert store.index is not None
    stored = store.index.get_vectors([store._store.records.int_ids[id_] for id_ in store.ids])
    query = "When does the bakery open?"
    query_vector = np.asarray(store.embeddings.embed_query(query), dtype=np.float64)
    query_vector /= np.linalg.norm(query_vector)
    for spec in ({"topic": {"$in": ["bakery", "railway"]}, "week": {"$gte": 8}}, {"week": 13}, {"topic": "bakery"}):
        keep = compile_filter(spec)
        scored = sorted(
            (
                (float(vector @ query_vector), id_)
                for id_, vector, metadata in zip(store.ids, stored, metadatas, strict=True)
                if keep(metadata)
            ),
            reverse=True,
        )[:5]
        hits = store.similarity_search_with_score(query, k=5, filter=spec)
        assert [document.id for document, _ in hits] == [id_ for _, id_ in scored]
        np.testing.assert_allclose([score for _, score in hits], [score for score, _ in scored], atol=1e-5)
        assert all(keep(document.metadata) for document, _ in hits)
    bakery = store.similarity_search(query, k=3, filter={"topic": "bakery"})
    assert all("bakery" in document.page_content for document in bakery)


def test_a_qdrant_store_reads_langchain_qdrants_metadata_paths_in_a_filter_dict() -> None:
    """langchain-qdrant keeps the metadata under "metadata" and its users write "metadata.topic": a filter dict of
    the Qdrant store reads that key as the field "topic", in every search and through $and / $or / $not; the FAISS
    store, which has no payload, keeps reading keys as field names."""
    pytest.importorskip("qdrant_client")
    from langchain_fair import FairQdrantVectorStore

    texts, metadatas = corpus()
    qdrant = FairQdrantVectorStore.from_texts(
        texts, TableEmbeddings(), metadatas=metadatas, location=":memory:", collection_name="paths"
    )
    faiss = FaissVectorStore.from_texts(texts, TableEmbeddings(), metadatas=metadatas)
    field = next(key for key in metadatas[0] if isinstance(metadatas[0][key], str))
    value = metadatas[0][field]
    for plain, spelled in (
        ({field: value}, {f"metadata.{field}": value}),
        ({"$or": [{field: value}]}, {"$or": [{f"metadata.{field}": value}]}),
        ({"$not": {field: value}}, {"$not": {f"metadata.{field}": value}}),
    ):
        expected = {doc.page_content for doc in faiss.similarity_search(texts[0], k=len(texts), filter=plain)}
        assert expected and len(expected) < len(texts)
        assert {
            doc.page_content for doc in qdrant.similarity_search(texts[0], k=len(texts), filter=spelled)
        } == expected
        found = qdrant.max_marginal_relevance_search(texts[0], k=3, fetch_k=len(texts), filter=spelled)
        assert len(found) == 3 and {doc.page_content for doc in found} <= expected
        vector = TableEmbeddings().embed_query(texts[0])
        by_vector = qdrant.similarity_search_by_vector(vector, k=len(texts), filter=spelled)
        assert {doc.page_content for doc in by_vector} == expected
    assert faiss.similarity_search(texts[0], k=8, filter={f"metadata.{field}": value}) == []  # a field name there
    with pytest.raises(ValueError, match=r"names the field .* twice"):
        qdrant.similarity_search(texts[0], filter={field: value, f"metadata.{field}": value})
