"""FaissVectorStore as code written for LangChain's own stores expects it: LangChain's relevance convention, MMR with
scores, bytes without pickle, and `CacheBackedEmbeddings` in both document modes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_classic.embeddings import CacheBackedEmbeddings
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.stores import InMemoryByteStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from langchain_fair import FairEmbeddings, FaissVectorStore

from fair_retrieval import FairEmbedder
from fair_retrieval.stores import StoreWindows
from tests.sealing import sealed_store_copy

SENTENCES = [
    "The ferry to the island leaves the harbour at nine every morning.",
    "The bakery on the corner opens at six and sells rye bread.",
    "Board games are played at the library on Thursday evenings.",
    "Trains to the city run every hour from the north platform.",
    "The museum shows old maps of the coast in its east wing.",
    "A farmers market fills the square with cheese and apples on Saturdays.",
    "The swimming pool closes for cleaning during the first week of August.",
    "Volunteers repair bicycles for free behind the town hall.",
    "The choir rehearses hymns in the chapel after the evening bell.",
    "Fishermen mend their nets on the pier when the tide is low.",
]
FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def minilm_embeddings(minilm: FairEmbedder) -> FairEmbeddings:
    return FairEmbeddings(embedder=minilm)


@pytest.fixture(scope="module")
def tiny_embeddings(tiny_model: str) -> FairEmbeddings:
    return FairEmbeddings(embedder=FairEmbedder(tiny_model, max_length=32, device="cpu"))


@pytest.mark.parametrize("multivector", [False, True])
def test_relevance_is_the_cosine_so_a_threshold_drops_unrelated_text(
    minilm_embeddings: FairEmbeddings, multivector: bool
) -> None:
    store = FaissVectorStore.from_texts(SENTENCES, minilm_embeddings, gpu=False, multivector=multivector)
    for question in ("When does the ferry leave?", "Where are bicycles repaired?"):
        scored = store.similarity_search_with_score(question, k=10)
        relevance = store.similarity_search_with_relevance_scores(question, k=10)
        assert [score for _, score in relevance] == pytest.approx([max(0.0, s) for _, s in scored], abs=1e-6)
        assert relevance[0][1] > 0.6 and relevance[1][1] < 0.35  # the answer, then the rest far below
    retriever = store.as_retriever(search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.5})
    assert retriever.invoke("How do I reset my router password?") == []  # (1 + cos) / 2 kept all ten
    assert [d.page_content for d in retriever.invoke("When does the ferry leave?")] == [SENTENCES[0]]


def test_l2_relevance_is_langchains_euclidean_one(minilm_embeddings: FairEmbeddings) -> None:
    store = FaissVectorStore.from_texts(
        SENTENCES, minilm_embeddings, gpu=False, multivector=False, metric="l2", retrieval_mode="dense"
    )
    scored = store.similarity_search_with_score("When does the ferry leave?", k=3)
    relevance = store.similarity_search_with_relevance_scores("When does the ferry leave?", k=3)
    expected = [max(0.0, 1 - np.sqrt(squared) / np.sqrt(2)) for _, squared in scored]
    assert [score for _, score in relevance] == pytest.approx(expected, abs=1e-6)


def test_a_folder_saved_before_reports_the_new_relevance_from_its_unchanged_scores(tmp_path: Path) -> None:
    folder = sealed_store_copy(FIXTURES / "store_v1_cosine_flat", tmp_path / "saved")
    store = FaissVectorStore.load_local(folder, DeterministicFakeEmbedding(size=8), gpu=False, retrieval_mode="dense")
    scored = store.similarity_search_with_score("The ferry leaves at nine.", k=3)
    relevance = store.similarity_search_with_relevance_scores("The ferry leaves at nine.", k=3)
    assert scored[0][1] == pytest.approx(1.0, abs=1e-5)  # the raw cosine, as the folder always gave
    assert [score for _, score in relevance] == pytest.approx([min(1.0, max(0.0, s)) for _, s in scored], abs=1e-6)
    old = FaissVectorStore.load_local(
        folder,
        DeterministicFakeEmbedding(size=8),
        gpu=False,
        relevance_score_fn=lambda s: (1 + s) / 2,
        retrieval_mode="dense",
    )  # the earlier scale, for code tuned to it
    kept = old.similarity_search_with_relevance_scores("The ferry leaves at nine.", k=3)
    assert [score for _, score in kept] == pytest.approx([(1 + s) / 2 for _, s in scored], abs=1e-6)


@pytest.mark.parametrize("multivector", [False, True])
def test_mmr_with_scores_is_langchain_cores_selection(tiny_embeddings: FairEmbeddings, multivector: bool) -> None:
    store = FaissVectorStore.from_texts(
        SENTENCES * 2, tiny_embeddings, ids=[f"d{i}" for i in range(20)], gpu=False, multivector=multivector
    )
    query = tiny_embeddings.embed_query("bread and cheese at the market")
    nearest = store.similarity_search_with_score_by_vector(query, k=8)
    pooled = store._store.vectors([store._store.records.int_ids[d.id] for d, _ in nearest])
    chosen = maximal_marginal_relevance(np.asarray(query), pooled.tolist(), lambda_mult=0.4, k=4)
    found = store.max_marginal_relevance_search_with_score_by_vector(query, k=4, fetch_k=8, lambda_mult=0.4)
    assert [d.id for d, _ in found] == [nearest[i][0].id for i in chosen]
    assert [s for _, s in found] == pytest.approx([nearest[i][1] for i in chosen], abs=1e-6)
    by_vector = store.max_marginal_relevance_search_by_vector(query, k=4, fetch_k=8, lambda_mult=0.4)
    assert [d.id for d in by_vector] == [d.id for d, _ in found]
    with pytest.raises(ValueError, match="lambda_mult"):
        store.max_marginal_relevance_search_with_score_by_vector(query, lambda_mult=2.0)


@pytest.mark.parametrize("multivector", [False, True])
def test_bytes_round_trip_without_pickle(tiny_embeddings: FairEmbeddings, multivector: bool) -> None:
    metadatas = [{"n": i, "tags": ["x", str(i)]} for i in range(len(SENTENCES))]
    store = FaissVectorStore.from_texts(
        SENTENCES, tiny_embeddings, metadatas=metadatas, gpu=False, multivector=multivector
    )
    data = store.serialize_to_bytes()
    assert isinstance(data, bytes) and b"pickle" not in data[:64]
    again = FaissVectorStore.deserialize_from_bytes(
        data, tiny_embeddings, allow_dangerous_deserialization=False, gpu=False
    )
    assert again.ids == store.ids and again.multivector == multivector
    question = "Where are bicycles repaired?"
    assert again.similarity_search_with_score(question, k=4) == store.similarity_search_with_score(question, k=4)
    again.add_texts(["One more."], ids=["new"])
    assert "new" not in store.ids


def test_damaged_or_foreign_bytes_are_refused(tiny_embeddings: FairEmbeddings, tmp_path: Path) -> None:
    store = FaissVectorStore.from_texts(SENTENCES, tiny_embeddings, gpu=False, multivector=False)
    data = store.serialize_to_bytes()
    changed = bytearray(data)
    changed[len(data) // 2] ^= 1
    for bad in (data[: len(data) - 100], bytes(changed)):
        with pytest.raises(ValueError, match="damaged: its SHA-256 does not match"):
            FaissVectorStore.deserialize_from_bytes(bad, tiny_embeddings)
    with pytest.raises(ValueError, match=r"not written by FaissVectorStore\.serialize_to_bytes"):
        FaissVectorStore.deserialize_from_bytes(b"\x80\x04\x95 a pickle", tiny_embeddings)
    with pytest.raises(TypeError, match="takes bytes"):
        FaissVectorStore.deserialize_from_bytes("text", tiny_embeddings)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="embedder"):  # the ordinary load's identity check
        FaissVectorStore.deserialize_from_bytes(data, DeterministicFakeEmbedding(size=8))


class CountingEmbeddings(FairEmbeddings):
    """FairEmbeddings counting the texts it embeds window by window."""

    def embed_document_windows(self, texts: list[str], **arguments: Any) -> Any:
        self.__dict__.setdefault("_counted", []).extend(texts)
        return super().embed_document_windows(texts, **arguments)


def test_cache_backed_embeddings_fill_a_multivector_store_from_the_cache(tiny_model: str) -> None:
    inner = CountingEmbeddings(embedder=FairEmbedder(tiny_model, max_length=32, device="cpu"))
    bytes_store = InMemoryByteStore()
    cached = CacheBackedEmbeddings.from_bytes_store(inner, bytes_store, namespace="tiny")
    long_texts = [" ".join(SENTENCES[i:] + SENTENCES[:i]) for i in range(4)]  # several windows each
    first = FaissVectorStore.from_texts(long_texts, cached, ids=list("abcd"), gpu=False, multivector=True)
    embedded = list(inner.__dict__["_counted"])
    assert first.multivector and sorted(set(embedded)) == sorted(long_texts)  # one pass per window size
    second = FaissVectorStore.from_texts(long_texts, cached, ids=list("abcd"), gpu=False, multivector=True)
    assert inner.__dict__["_counted"] == embedded  # every window came from the cache
    direct = FaissVectorStore.from_texts(long_texts, inner, ids=list("abcd"), gpu=False, multivector=True)
    assert first._store.windows == direct._store.windows != StoreWindows()  # the wrapped embeddings' default shape
    question = "Where are bicycles repaired?"
    expected = direct.similarity_search_with_score(question, k=4)
    for store in (first, second):
        assert store.similarity_search_with_score(question, k=4) == expected
    assert any(key.startswith("tiny") for key in bytes_store.yield_keys())


def test_cache_backed_embeddings_keep_a_pooled_store_as_it_was(tiny_embeddings: FairEmbeddings) -> None:
    cached = CacheBackedEmbeddings.from_bytes_store(tiny_embeddings, InMemoryByteStore(), namespace="tiny")
    store = FaissVectorStore.from_texts(SENTENCES, cached, gpu=False)
    assert not store.multivector  # the default over a cache stays pooled, as before
    direct = FaissVectorStore.from_texts(SENTENCES, tiny_embeddings, gpu=False, multivector=False)
    question = "When does the ferry leave?"
    found, expected = (
        store.similarity_search_with_score(question, k=3),
        direct.similarity_search_with_score(question, k=3),
    )
    assert [d.id for d, _ in found] and [s for _, s in found] == pytest.approx([s for _, s in expected], abs=1e-6)
