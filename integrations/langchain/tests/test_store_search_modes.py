"""FaissVectorStore's retrieval modes through LangChain's own entry points: the store's `retrieval_mode` ("dense",
"sparse", "hybrid"), a call's `retrieval_mode=` in `similarity_search`, the score and relevance-score searches, MMR
and `as_retriever(search_kwargs=...)`; the `*_by_vector` searches dense only; the lexical side kept equal to the
documents through adds, upserts, deletes, merges and a save / load."""

from __future__ import annotations

import enum
import zlib
from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_fair import FaissVectorStore

from fair_retrieval.lexical import fuse
from fair_retrieval.stores import LexicalSettings

pytest.importorskip("bm25s")

DIM = 12
TEXTS = {
    "ferry": "The ferry leaves the harbour at dawn and crosses the bay.",
    "train": "The night train runs north through the mountains.",
    "bread": "Bake the bread slowly in a stone oven.",
    "harbour": "Fishing boats fill the old harbour every evening.",
    "oven": "A stone oven keeps its heat for hours.",
}


class TableEmbeddings(Embeddings):
    """A fixed random vector per text, counting the calls."""

    def __init__(self) -> None:
        self.document_calls = 0
        self.query_calls = 0

    @staticmethod
    def vector(text: str) -> list[float]:
        return np.random.default_rng(zlib.crc32(text.encode())).standard_normal(DIM).tolist()  # type: ignore[no-any-return]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.document_calls += 1
        return [self.vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        self.query_calls += 1
        return self.vector(text)


def _store(**options: object) -> FaissVectorStore:
    metadatas = [{"n": n} for n in range(len(TEXTS))]
    return FaissVectorStore.from_texts(list(TEXTS.values()), TableEmbeddings(), metadatas, ids=list(TEXTS), **options)


def _ids(documents: list) -> list[str]:  # type: ignore[type-arg]
    return [document.id for document in documents]


def test_a_call_chooses_its_mode_and_sparse_never_embeds_the_query() -> None:
    store = _store()
    embeddings = store.embeddings
    assert isinstance(embeddings, TableEmbeddings)
    found = store.similarity_search("stone oven", k=3, retrieval_mode="sparse")
    assert set(_ids(found)) == {"bread", "oven"} and embeddings.query_calls == 0
    assert len(store.similarity_search("stone oven", k=5, retrieval_mode="dense")) == 5  # dense ranks everything
    assert embeddings.query_calls == 1


def _qdrant_store(**options: object) -> object:
    pytest.importorskip("qdrant_client")
    from langchain_fair import FairQdrantVectorStore

    metadatas = [{"n": n} for n in range(len(TEXTS))]
    return FairQdrantVectorStore.from_texts(
        list(TEXTS.values()),
        TableEmbeddings(),
        metadatas,
        ids=list(TEXTS),
        location=":memory:",
        collection_name="docs",
        **options,
    )


def _scored(found: list) -> list[tuple[str, float]]:  # type: ignore[type-arg]
    return [(document.id, score) for document, score in found]


@pytest.mark.parametrize("build", [_store, _qdrant_store], ids=["faiss", "qdrant"])
def test_a_text_query_that_names_no_mode_is_answered_by_the_hybrid_and_dense_is_one_argument_away(build) -> None:  # type: ignore[no-untyped-def]
    store = build()
    assert store.retrieval_mode == "hybrid"
    for question in ("harbour ferry", "stone oven", "zebra"):
        hybrid = _scored(store.similarity_search_with_score(question, k=4, retrieval_mode="hybrid"))
        assert _scored(store.similarity_search_with_score(question, k=4)) == hybrid
        assert _ids(store.similarity_search(question, k=4)) == [key for key, _ in hybrid]
        assert _ids(store.as_retriever(search_kwargs={"k": 4}).invoke(question)) == [key for key, _ in hybrid]
        mmr = store.max_marginal_relevance_search(question, k=2, fetch_k=4)
        assert _ids(mmr) == _ids(store.max_marginal_relevance_search(question, k=2, fetch_k=4, retrieval_mode="hybrid"))
        dense = _scored(store.similarity_search_with_score_by_vector(TableEmbeddings.vector(question), k=4))
        assert _scored(store.similarity_search_with_score(question, k=4, retrieval_mode="dense")) == dense
    opted_out = build(retrieval_mode="dense")
    assert opted_out.retrieval_mode == "dense"
    vector = TableEmbeddings.vector("stone oven")
    assert _scored(opted_out.similarity_search_with_score("stone oven", k=4)) == _scored(
        opted_out.similarity_search_with_score_by_vector(vector, k=4)
    )


@pytest.mark.parametrize("build", [_store, _qdrant_store], ids=["faiss", "qdrant"])
def test_a_threshold_on_the_default_query_is_read_on_the_fused_score(build) -> None:  # type: ignore[no-untyped-def]
    """A fused score lies in [0, 1], relative to the query's candidates: a threshold a user set for cosines (0.5)
    keeps the hits both sides put high and drops the rest, never silently all or none; relevance scores are the
    fused scores as they are (no `relevance_score_fn`)."""
    store = build(relevance_score_fn=lambda score: 0.0)  # would zero every dense relevance
    question = "harbour ferry"
    fused = _scored(store.similarity_search_with_score(question, k=5))
    assert all(0.0 <= score <= 1.0 for _, score in fused) and fused[0][1] > 0.5 > fused[-1][1]
    kept = _scored(store.similarity_search_with_score(question, k=5, score_threshold=0.5))
    assert kept == [(key, score) for key, score in fused if score >= 0.5] and 0 < len(kept) < len(fused)
    assert _scored(store.similarity_search_with_relevance_scores(question, k=5)) == fused
    retriever = store.as_retriever(search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.5})
    assert _ids(retriever.invoke(question)) == [key for key, _ in kept][:4]


def test_hybrid_scores_are_the_fusion_of_both_sides() -> None:
    store = _store(retrieval_mode="hybrid", fusion="dist_based_score", alpha=0.6)
    question = "harbour ferry"
    found = store.similarity_search_with_score(question, k=3)
    dense = store.similarity_search_with_score(question, k=20, retrieval_mode="dense")
    sparse = store.similarity_search_with_score(question, k=20, retrieval_mode="sparse")
    expected = fuse(
        [(d.id, s) for d, s in dense], [(d.id, s) for d, s in sparse], 3, fusion="dist_based_score", alpha=0.6
    )
    assert [(d.id, pytest.approx(s)) for d, s in found] == [(i, pytest.approx(s)) for i, s in expected]


def test_relevance_scores_lie_in_zero_one_in_every_mode() -> None:
    store = _store()
    for mode in ("dense", "sparse", "hybrid"):
        found = store.similarity_search_with_relevance_scores("stone oven", k=3, retrieval_mode=mode)
        assert found and all(0.0 <= score <= 1.0 for _, score in found), mode
    best = store.similarity_search_with_relevance_scores("stone oven", k=3, retrieval_mode="sparse")
    assert best[0][1] == 1.0
    threshold = store.as_retriever(
        search_type="similarity_score_threshold",
        search_kwargs={"retrieval_mode": "sparse", "score_threshold": 0.99, "k": 5},
    )
    assert len(threshold.invoke("stone oven")) == 1


def test_retrievers_pass_the_mode_and_mmr_chooses_among_its_candidates() -> None:
    store = _store()
    sparse = store.as_retriever(search_kwargs={"retrieval_mode": "sparse", "k": 4})
    assert set(_ids(sparse.invoke("stone oven"))) == {"bread", "oven"}
    mmr = store.max_marginal_relevance_search("stone oven", k=2, fetch_k=5, retrieval_mode="sparse")
    assert set(_ids(mmr)) == {"bread", "oven"}
    retriever = store.as_retriever(search_type="mmr", search_kwargs={"retrieval_mode": "hybrid", "k": 2})
    assert len(retriever.invoke("stone oven")) == 2


def test_vector_searches_are_dense_and_say_so() -> None:
    store = _store(retrieval_mode="hybrid")
    vector = TableEmbeddings.vector("oven")
    assert len(store.similarity_search_by_vector(vector, k=5)) == 5
    with pytest.raises(ValueError, match="searches by vector"):
        store.similarity_search_by_vector(vector, k=2, retrieval_mode="sparse")
    with pytest.raises(ValueError, match="searches by vector"):
        store.max_marginal_relevance_search_by_vector(vector, k=2, retrieval_mode="hybrid")


def test_writes_keep_the_lexical_side_equal_to_the_documents(tmp_path: Path) -> None:
    store = _store()
    assert _ids(store.similarity_search("bread", k=5, retrieval_mode="sparse")) == ["bread"]
    store.delete(["bread"])
    assert store.similarity_search("bread", k=5, retrieval_mode="sparse") == []
    store.add_texts(["Rye bread from the mill."], ids=["oven"])  # an upsert
    assert _ids(store.similarity_search("bread", k=5, retrieval_mode="sparse")) == ["oven"]
    assert store.similarity_search("heat hours", k=5, retrieval_mode="sparse") == []
    other = FaissVectorStore.from_texts(["Aged cheese from the valley."], TableEmbeddings(), ids=["cheese"])
    store.merge_from(other)
    filtered = store.similarity_search("cheese bread", k=5, retrieval_mode="sparse", filter={"n": {"$exists": False}})
    assert set(_ids(filtered)) == {"cheese", "oven"}
    store.save_local(str(tmp_path))
    loaded = FaissVectorStore.load_local(str(tmp_path), TableEmbeddings())
    for mode in ("sparse", "hybrid"):
        assert _ids(loaded.similarity_search("cheese", k=3, retrieval_mode=mode)) == _ids(
            store.similarity_search("cheese", k=3, retrieval_mode=mode)
        )


def test_the_store_mode_is_saved_and_an_enum_of_the_stacks_is_read_by_value(tmp_path: Path) -> None:
    class RetrievalMode(str, enum.Enum):  # as langchain-qdrant's
        HYBRID = "hybrid"

    store = _store(retrieval_mode=RetrievalMode.HYBRID, lexical=LexicalSettings(language="english", b=0.5))
    store.save_local(str(tmp_path))
    loaded = FaissVectorStore.load_local(str(tmp_path), TableEmbeddings())
    assert loaded._store.search_settings.mode == "hybrid"
    assert loaded._store.lexical == LexicalSettings(b=0.5)


def test_bad_modes_are_refused_before_any_embedding() -> None:
    embeddings = TableEmbeddings()
    for options, message in (
        ({"retrieval_mode": "semantic"}, "retrieval_mode must be one of"),
        ({"fusion": "max"}, "fusion must be one of"),
        ({"alpha": 2}, "alpha must be"),
    ):
        with pytest.raises(ValueError, match=message):
            FaissVectorStore.from_texts(["a text"], embeddings, **options)
    assert embeddings.document_calls == 0
    store = _store()
    with pytest.raises(ValueError, match="retrieval_mode must be one of"):
        store.similarity_search("x", retrieval_mode="fuzzy")
    with pytest.raises(ValueError, match="empty"):
        store.similarity_search("", retrieval_mode="sparse")


def test_qdrants_own_filter_selects_as_the_filter_dict_in_every_mode_and_is_refused_by_the_faiss_store() -> None:
    """langchain-qdrant code passes `models.Filter` with keys under "metadata."; the Qdrant store evaluates it in the
    engine, combined with its own conditions; the FAISS store refuses it, naming the fix, before embedding."""
    store = _qdrant_store()
    from qdrant_client import models

    native = models.Filter(must=[models.FieldCondition(key="metadata.n", range=models.Range(gte=2))])
    wanted = {"n": {"$gte": 2}}
    for mode in ("hybrid", "dense", "sparse"):
        by_native = store.similarity_search_with_score("stone oven harbour", k=4, filter=native, retrieval_mode=mode)
        by_dict = store.similarity_search_with_score("stone oven harbour", k=4, filter=wanted, retrieval_mode=mode)
        assert _scored(by_native) == _scored(by_dict) and by_dict and all(d.metadata["n"] >= 2 for d, _ in by_dict)
    assert _ids(store.max_marginal_relevance_search("oven", k=2, filter=native)) == _ids(
        store.max_marginal_relevance_search("oven", k=2, filter=wanted)
    )
    retriever = store.as_retriever(search_kwargs={"k": 3, "filter": native})
    assert {document.metadata["n"] for document in retriever.invoke("the harbour")} <= {2, 3, 4}

    faiss = _store()
    calls = faiss.embeddings.query_calls
    for call in (
        lambda: faiss.similarity_search("oven", k=2, filter=native),
        lambda: faiss.as_retriever(search_kwargs={"filter": native}),
    ):
        with pytest.raises(ValueError, match="pass a filter dict of the stores' grammar"):
            call()
    assert faiss.embeddings.query_calls == calls


def test_langchain_qdrants_keywords_are_taken_where_they_mean_something_and_refused_by_name_elsewhere() -> None:
    pytest.importorskip("qdrant_client")
    from langchain_fair import FairQdrantVectorStore
    from qdrant_client import QdrantClient, models

    client = QdrantClient(":memory:")
    texts, ids = list(TEXTS.values()), list(TEXTS)
    store = FairQdrantVectorStore.from_texts(
        texts, TableEmbeddings(), ids=ids, client=client, collection_name="docs", distance=models.Distance.DOT,
        batch_size=2, metadata_payload_key="metadata", validate_embeddings=True,
        collection_create_options={"on_disk": False},
    )  # fmt: skip
    assert store.metric == "ip" and sorted(store.ids) == sorted(ids)
    refused = [
        ({"sparse_embedding": object()}, ValueError, "scores BM25 itself"),
        ({"vector_name": "dense"}, ValueError, "names its own dense vector"),
        ({"validate_collection_config": False}, ValueError, "always checked"),
        ({"distance": models.Distance.MANHATTAN}, ValueError, "cosine, dot-product or Euclidean"),
        ({"distance": "Cosine", "metric": "ip"}, ValueError, "give one of them"),
        ({"vector_params": {"size": 12}}, ValueError, "collection_options="),
        ({"bogus": 1}, TypeError, "unexpected keyword argument"),
    ]
    for options, error, message in refused:
        with pytest.raises(error, match=message):
            FairQdrantVectorStore.from_texts(
                texts, TableEmbeddings(), client=client, collection_name="docs", force_recreate=True, **options
            )
    assert sorted(FairQdrantVectorStore(client, "docs", TableEmbeddings()).ids) == sorted(ids)  # nothing deleted
    again = FairQdrantVectorStore.from_texts(
        texts[:2], TableEmbeddings(), ids=ids[:2], client=client, collection_name="docs", force_recreate=True
    )
    assert again.metric == "cosine" and sorted(again.ids) == sorted(ids[:2])  # a new collection, of the new metric
    with pytest.raises(ValueError, match="force_recreate=True is from_texts'"):
        FairQdrantVectorStore.from_existing_collection("docs", TableEmbeddings(), client=client, force_recreate=True)
    made = FairQdrantVectorStore.from_texts(
        texts, TableEmbeddings(), location=":memory:", collection_name="c", timeout=5, prefer_grpc=False
    )
    assert len(made.ids) == len(texts)


def test_int_ids_are_taken_as_langchain_qdrant_takes_them_and_found_as_either() -> None:
    store = _qdrant_store()
    texts = ["A note about the ferry timetable.", "A note about the bakery."]
    assert store.add_texts(texts, ids=[7, 8]) == ["7", "8"]
    assert [document.page_content for document in store.get_by_ids([8, "7"])] == [texts[1], texts[0]]
    assert store.delete([7]) and store.get_by_ids(["7"]) == []
    with pytest.raises(TypeError):
        store.add_texts(["x"], ids=[True])  # a bool is no id
