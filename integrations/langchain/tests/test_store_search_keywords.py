"""FaissVectorStore's search keywords: `score_threshold` read as langchain-community's FAISS reads it (a raw score:
a similarity at least it, a squared distance at most it) in the score, plain and by-vector searches; a keyword no
anchor honours refused by name (a TypeError listing the accepted ones), from a call and from a retriever's
`search_kwargs`; `load_local(retrieval_mode=...)` as the constructor's."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_fair import FaissVectorStore

QUERY = [1.0, 0.0, 0.0]
TEXTS = {  # cosines with QUERY: 0.9, 0.6, 0.2
    "near": [0.9, float(np.sqrt(1 - 0.81)), 0.0],
    "middle": [0.6, 0.8, 0.0],
    "far": [0.2, 0.0, float(np.sqrt(1 - 0.04))],
}


class FixedEmbeddings(Embeddings):
    """Each text's vector from `TEXTS` (by its first word), the query along the first axis."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [TEXTS[text.split()[0]] for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return QUERY


def _store(**options: object) -> FaissVectorStore:
    texts = [f"{name} harbour ferry" for name in TEXTS]
    return FaissVectorStore.from_texts(texts, FixedEmbeddings(), ids=list(TEXTS), gpu=False, **options)


def _ids(found: list) -> list[str]:  # type: ignore[type-arg]
    return [(item[0] if isinstance(item, tuple) else item).id for item in found]


def test_a_score_threshold_keeps_the_cosines_at_least_it_in_every_similarity_search() -> None:
    store = _store(multivector=False, retrieval_mode="dense")
    assert _ids(store.similarity_search_with_score("q", k=3)) == ["near", "middle", "far"]
    assert _ids(store.similarity_search_with_score("q", k=3, score_threshold=0.5)) == ["near", "middle"]
    assert _ids(store.similarity_search("q", k=3, score_threshold=0.7)) == ["near"]
    assert _ids(store.similarity_search_by_vector(QUERY, k=3, score_threshold=0.5)) == ["near", "middle"]
    assert _ids(store.similarity_search_with_score_by_vector(QUERY, k=3, score_threshold=0.95)) == []
    assert _ids(store.as_retriever(search_kwargs={"k": 3, "score_threshold": 0.5}).invoke("q")) == ["near", "middle"]


def test_an_l2_store_keeps_the_squared_distances_at_most_the_threshold() -> None:
    store = _store(multivector=False, metric="l2", retrieval_mode="dense")  # squared distances 2 - 2cos: 0.2, 0.8, 1.6
    found = store.similarity_search_with_score("q", k=3, score_threshold=1.0)
    assert _ids(found) == ["near", "middle"] and all(score <= 1.0 for _, score in found)


def test_a_threshold_on_a_hybrid_or_sparse_search_keeps_the_scores_at_least_it() -> None:
    pytest.importorskip("bm25s")
    store = _store(multivector=False)
    for mode in ("hybrid", "sparse"):
        everything = store.similarity_search_with_score("near harbour", k=3, retrieval_mode=mode)
        threshold = everything[0][1]
        kept = store.similarity_search_with_score("near harbour", k=3, retrieval_mode=mode, score_threshold=threshold)
        assert kept and all(score >= threshold for _, score in kept), mode
        assert len(kept) < len(everything), mode


def test_a_malformed_threshold_is_refused_before_anything_is_searched() -> None:
    with pytest.raises(TypeError, match="score_threshold must be a number"):
        _store(multivector=False).similarity_search("q", score_threshold="0.5")


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.similarity_search("q", foo=1),
        lambda s: s.similarity_search_with_score("q", foo=1),
        lambda s: s.similarity_search_by_vector(QUERY, foo=1),
        lambda s: s.similarity_search_with_score_by_vector(QUERY, foo=1),
        lambda s: s.max_marginal_relevance_search("q", foo=1),
        lambda s: s.max_marginal_relevance_search_by_vector(QUERY, foo=1),
        lambda s: s.similarity_search_with_relevance_scores("q", foo=1),
    ],
)
def test_an_unknown_keyword_is_refused_by_name_with_the_accepted_ones(call) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) 'foo'; it accepts k, "):
        call(_store(multivector=False))


def test_mmr_takes_no_score_threshold_as_langchain_community() -> None:
    with pytest.raises(TypeError, match="'score_threshold'"):
        _store(multivector=False).max_marginal_relevance_search("q", k=2, score_threshold=0.5)


def test_a_retrievers_unknown_search_kwargs_are_refused_when_it_is_made() -> None:
    store = _store(multivector=False)
    with pytest.raises(TypeError, match=r"'kk'.*accepts k, filter, fetch_k, score_threshold"):
        store.as_retriever(search_kwargs={"kk": 1})
    with pytest.raises(TypeError, match=r"'score_threshold'.*lambda_mult"):
        store.as_retriever(search_type="mmr", search_kwargs={"score_threshold": 0.5})
    store.as_retriever(search_type="mmr", search_kwargs={"k": 2, "fetch_k": 3, "lambda_mult": 0.3})


def test_load_local_takes_the_search_mode_of_the_loaded_store(tmp_path: Path) -> None:
    pytest.importorskip("bm25s")
    _store(multivector=False, retrieval_mode="dense").save_local(tmp_path / "saved")  # dense chosen: recorded
    hybrid = FaissVectorStore.load_local(tmp_path / "saved", FixedEmbeddings(), gpu=False, retrieval_mode="hybrid")
    assert hybrid._store.search_settings.mode == "hybrid"
    found = hybrid.similarity_search_with_score("far harbour", k=3)
    assert all(0.0 <= score <= 1.0 for _, score in found)  # fused scores
    saved = FaissVectorStore.load_local(tmp_path / "saved", FixedEmbeddings(), gpu=False)
    assert saved._store.search_settings.mode == "dense"  # a load's mode is not written to the folder
    _store(multivector=False).save_local(tmp_path / "default")  # no mode chosen: nothing recorded, the default
    assert FaissVectorStore.load_local(tmp_path / "default", FixedEmbeddings(), gpu=False).retrieval_mode == "hybrid"
    with pytest.raises(ValueError, match="retrieval_mode"):
        FaissVectorStore.load_local(tmp_path / "saved", FixedEmbeddings(), retrieval_mode="fuzzy")
