"""Search modes of a DocumentStore: SearchSettings, the one text-search door (dense, sparse, hybrid), a lexical
side kept equal to the records through every write, and the settings saved and restored with the store."""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

from fair_retrieval.lexical import LexicalIndex, LexicalSettings, fuse
from fair_retrieval.stores import SearchSettings
from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.marginal_relevance import mmr_hits
from fair_retrieval.stores.search_modes import check_search_mode
from fair_retrieval.stores.store_format import StoreFormat, load_store, save_store
from fair_retrieval.stores.vector_queries import vector_query_hits
from tests.sealing import seal

pytest.importorskip("faiss")
pytest.importorskip("bm25s")

DIM = 8
TEXTS = {
    "ferry": "The ferry leaves the harbour at dawn and crosses the bay.",
    "train": "The night train runs north through the mountains.",
    "bread": "Bake the bread slowly in a stone oven.",
    "harbour": "Fishing boats fill the old harbour every evening.",
    "oven": "A stone oven keeps its heat for hours.",
}


class Doc(NamedTuple):
    key: str
    text: str
    metadata: dict[str, int]


def _vector(text: str) -> np.ndarray:
    rng = np.random.default_rng(zlib.crc32(text.encode()))
    return rng.standard_normal(DIM).astype(np.float32)


class Counting:
    """Query vectors by text, counting the calls (a sparse search must not embed)."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, text: str) -> np.ndarray:
        self.calls += 1
        return _vector(text)


def _store(**options: Any) -> DocumentStore[Doc]:
    store: DocumentStore[Doc] = DocumentStore(gpu=False, text_of=lambda doc: doc.text, **options)
    docs = [Doc(key, text, {"n": n}) for n, (key, text) in enumerate(TEXTS.items())]
    store.add(docs, np.stack([_vector(doc.text) for doc in docs]))
    return store


def _keys(hits: list[Any]) -> list[str]:
    return [hit.record.key for hit in hits]


def test_search_settings_are_checked_and_saved_only_when_not_default() -> None:
    assert SearchSettings().settings() == {}
    custom = SearchSettings(mode="hybrid", fusion="relative_score", alpha=0.3, candidates=30)
    assert SearchSettings.saved(custom.settings(), "f") == custom
    assert SearchSettings.saved({}, "f") == SearchSettings()
    with pytest.raises(ValueError, match="retrieval_mode must be one of"):
        check_search_mode("semantic")
    with pytest.raises(ValueError, match="fusion must be one of"):
        SearchSettings(fusion="max")
    with pytest.raises(ValueError, match="alpha must be a number in"):
        SearchSettings(alpha=1.5)
    with pytest.raises(ValueError, match="malformed search settings"):
        SearchSettings.saved({"search": {"mode": "hybrid", "extra": 1}}, "f")
    with pytest.raises(ValueError, match="cannot use"):
        SearchSettings.saved({"search": {"mode": "fuzzy"}}, "f")


def test_a_text_query_that_names_no_mode_is_the_hybrid_and_a_store_without_texts_is_dense() -> None:
    assert SearchSettings().mode == "hybrid" and SearchSettings(mode="dense").settings()["search"]["mode"] == "dense"
    store = _store()
    hybrid = SearchSettings(mode="hybrid")
    for query in ("harbour ferry", "stone oven", "zebra"):
        default = [(hit.record.key, hit.score) for hit in store.text_search(query, 4, _vector)]
        assert default == [(hit.record.key, hit.score) for hit in store.text_search(query, 4, _vector, settings=hybrid)]
    no_text: DocumentStore[Doc] = DocumentStore(gpu=False)
    assert no_text.search_settings.mode == "dense"  # no words to search: its text queries are dense


def test_an_enum_mode_is_read_by_its_value() -> None:
    import enum

    class RetrievalMode(str, enum.Enum):
        HYBRID = "hybrid"

    assert check_search_mode(RetrievalMode.HYBRID) == "hybrid"


def test_sparse_finds_by_words_without_embedding_the_query() -> None:
    store = _store()
    embed = Counting()
    hits = store.text_search("stone oven", 3, embed, settings=SearchSettings(mode="sparse"))
    assert embed.calls == 0
    assert set(_keys(hits)) == {"bread", "oven"} and all(hit.score > 0 for hit in hits)
    assert store.text_search("zebra", 3, embed, settings=SearchSettings(mode="sparse")) == []  # no shared word
    assert store.text_search("the and of", 3, embed, settings=SearchSettings(mode="sparse")) == []  # stop words


def test_dense_is_the_vector_search_and_hybrid_the_fusion_of_both_sides() -> None:
    store = _store()
    query = "harbour ferry"
    dense = store.text_search(query, 5, _vector, settings=SearchSettings(mode="dense"))
    assert [(h.record.key, h.score) for h in dense] == [
        (h.record.key, h.score) for h in store.search(_vector(query), 5)
    ]
    settings = SearchSettings(mode="hybrid", fusion="relative_score", alpha=0.5)
    hybrid = store.text_search(query, 3, _vector, settings=settings)
    expected = fuse(
        [(h.int_id, h.score) for h in store.search(_vector(query), 20)],
        [(h.int_id, h.score) for h in store.lexical_search(query, 20)],
        3,
        fusion="relative_score",
        alpha=0.5,
    )
    assert [(h.int_id, pytest.approx(h.score)) for h in hybrid] == [(i, pytest.approx(s)) for i, s in expected]
    assert "ferry" in _keys(hybrid)  # both words: the best BM25 score, 0.5 of the fused score alone
    assert all(0.0 <= hit.score <= 1.0 for hit in hybrid)


def test_the_store_default_mode_and_alpha_apply_and_a_call_overrides_them() -> None:
    store = _store(search=SearchSettings(mode="sparse"))
    assert _keys(store.text_search("bread", 1, _vector)) == ["bread"]
    dense_only = store.text_search("bread", 5, _vector, settings=store.search_settings.with_overrides(mode="dense"))
    assert len(dense_only) == 5  # the vectors rank everything
    lexical_weighted = store.text_search(
        "stone oven", 2, _vector, settings=SearchSettings(mode="hybrid", alpha=0.0, fusion="rrf")
    )
    assert set(_keys(lexical_weighted)) == {"bread", "oven"}


@pytest.mark.parametrize("fusion", ["relative_score", "dist_based_score"])
def test_a_dense_score_beyond_float32_fuses_in_order(fusion: str) -> None:
    # finite vectors whose inner product overflows float32: the dense side scores "ferry" +inf
    store: DocumentStore[Doc] = DocumentStore(gpu=False, text_of=lambda doc: doc.text, metric="ip")
    docs = [Doc(key, text, {"n": n}) for n, (key, text) in enumerate(TEXTS.items())]
    vectors = np.stack([_vector(doc.text) for doc in docs])
    vectors[0] = np.abs(vectors[0]) * 1e37
    store.add(docs, vectors)
    query = np.full(DIM, 1e30, dtype=np.float32)
    assert store.search(query, 1)[0].score == np.inf
    hits = store.hybrid_search(query, "stone oven harbour", 5, settings=SearchSettings(fusion=fusion, alpha=0.5))
    scores = [hit.score for hit in hits]
    assert all(np.isfinite(scores)) and scores == sorted(scores, reverse=True), scores
    assert {hit.record.key: hit.score for hit in hits}["ferry"] >= 0.5  # +inf: the dense side's full share


def test_filters_restrict_every_side() -> None:
    store = _store()
    keep = lambda doc: doc.metadata["n"] >= 3  # noqa: E731
    for mode in ("dense", "sparse", "hybrid"):
        hits = store.text_search("stone oven harbour", 5, _vector, settings=SearchSettings(mode=mode), keep=keep)
        assert hits and all(hit.record.metadata["n"] >= 3 for hit in hits), mode
    assert store.text_search("bread", 5, _vector, settings=SearchSettings(mode="sparse"), keep=lambda d: False) == []


def test_the_lexical_side_follows_every_write() -> None:
    store = _store()
    sparse = SearchSettings(mode="sparse")
    assert _keys(store.text_search("bread", 5, _vector, settings=sparse)) == ["bread"]
    store.delete(["bread"])
    assert _keys(store.text_search("bread", 5, _vector, settings=sparse)) == []
    store.add([Doc("oven", "Fresh bread every morning.", {"n": 9})], _vector("x").reshape(1, -1))  # an upsert
    assert _keys(store.text_search("bread", 5, _vector, settings=sparse)) == ["oven"]
    assert _keys(store.text_search("heat hours", 5, _vector, settings=sparse)) == []  # the old text is gone
    other: DocumentStore[Doc] = DocumentStore(gpu=False, text_of=lambda doc: doc.text)
    other.add([Doc("cheese", "Aged cheese from the valley.", {"n": 1})], _vector("c").reshape(1, -1))
    store.merge_from(other)
    assert _keys(store.text_search("cheese", 5, _vector, settings=sparse)) == ["cheese"]
    store.clear()
    assert store.text_search("cheese", 5, _vector, settings=sparse) == []


def test_queries_are_checked_at_the_door_in_every_mode() -> None:
    store = _store()
    for mode in ("dense", "sparse", "hybrid"):
        with pytest.raises(ValueError, match="empty"):
            store.text_search("", 3, _vector, settings=SearchSettings(mode=mode))
        with pytest.raises(ValueError, match="surrogate"):
            store.text_search("ferry \ud800 stop", 3, _vector, settings=SearchSettings(mode=mode))
        with pytest.raises(TypeError):
            store.text_search(None, 3, _vector, settings=SearchSettings(mode=mode))  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="k must be"):
            store.text_search("ferry", 0, _vector, settings=SearchSettings(mode=mode))


@pytest.mark.parametrize("metric", ["ip", "l2", "cosine"])
def test_a_query_vector_with_inf_is_refused_at_the_door_in_every_metric(metric: str) -> None:
    store = _store(metric=metric)
    query = _vector("ferry")
    query[2] = np.inf
    refused = "query.embedding gave vectors with NaN or infinite values .*nothing was stored or searched"
    for mode in ("default", "hybrid", "mmr"):
        with pytest.raises(ValueError, match=refused):
            vector_query_hits(store, query, 3, mode=mode, query_str="stone oven")
    with pytest.raises(ValueError, match="the query embedding gave vectors with NaN") as error:
        store.text_search("stone oven", 3, lambda _: query, settings=SearchSettings(mode="hybrid"))
    assert "indexing" not in str(error.value)


def test_a_store_without_texts_has_no_lexical_side() -> None:
    store: DocumentStore[Doc] = DocumentStore(gpu=False)
    assert store.lexical is None
    with pytest.raises(ValueError, match="no lexical side"):
        store.text_search("ferry", 3, _vector, settings=SearchSettings(mode="hybrid"))
    with pytest.raises(ValueError, match="no lexical side"):
        DocumentStore(gpu=False, search=SearchSettings(mode="sparse"))
    with pytest.raises(TypeError, match="LexicalSettings"):
        DocumentStore(gpu=False, text_of=str, lexical={"language": "german"})  # type: ignore[arg-type]


def test_non_english_text_is_read_in_its_language() -> None:
    store: DocumentStore[Doc] = DocumentStore(
        gpu=False, text_of=lambda doc: doc.text, lexical=LexicalSettings(language="german")
    )
    docs = [Doc("a", "Die Häuser stehen am Fluss.", {}), Doc("b", "地铁站在城市中心。", {})]
    store.add(docs, np.stack([_vector(d.text) for d in docs]))
    sparse = SearchSettings(mode="sparse")
    assert _keys(store.text_search("Haus", 2, _vector, settings=sparse)) == ["a"]  # German stems: Häuser → haus
    assert _keys(store.text_search("地铁", 2, _vector, settings=sparse)) == ["b"]  # character pairs


def test_mmr_chooses_among_the_candidates_it_is_given() -> None:
    store = _store()
    query = _vector("oven")
    lexical = store.lexical_search("stone oven", 5)
    hits = mmr_hits(store, query, 2, 5, 0.5, candidates=lambda n: lexical[:n])
    assert set(_keys(hits)) <= {"bread", "oven"} and len(hits) == 2


def test_llamaindex_query_modes_are_answered_through_vector_query_hits() -> None:
    store = _store()
    vector = _vector("stone oven")
    sparse = vector_query_hits(store, None, 2, mode="sparse", query_str="stone oven")
    assert set(_keys(sparse)) == {"bread", "oven"}
    assert _keys(vector_query_hits(store, None, 2, mode="text_search", query_str="stone oven")) == _keys(sparse)
    hybrid = vector_query_hits(store, vector, 4, mode="hybrid", query_str="stone oven", alpha=0.2, hybrid_top_k=2)
    assert len(hybrid) == 2 and all(0 <= hit.score <= 1 for hit in hybrid)
    default = vector_query_hits(store, vector, 3, mode="default", query_str="stone oven")
    assert _keys(default) == _keys(store.search(vector, 3))  # the store's default mode: dense
    with pytest.raises(ValueError, match="needs query_str"):
        vector_query_hits(store, vector, 2, mode="hybrid")
    with pytest.raises(ValueError, match="sparse_top_k must be"):
        vector_query_hits(store, vector, 2, mode="hybrid", query_str="x", sparse_top_k=0)
    with pytest.raises(ValueError, match="alpha must be"):
        vector_query_hits(store, vector, 2, mode="hybrid", query_str="x", alpha=2)


class Saved(NamedTuple):
    key: str
    text: str


def _decode(entry: Mapping[str, Any]) -> tuple[int, Saved]:
    return int(entry["int_id"]), Saved(entry["id"], entry["text"])


FORMAT: StoreFormat[Saved] = StoreFormat(
    name="probe-store",
    version=1,
    store="ProbeStore",
    writer="ProbeStore.save()",
    upgrade="probe",
    records_key="documents",
    encode=lambda int_id, doc: {"int_id": int_id, "id": doc.key, "text": doc.text},
    decode=_decode,
    names_index_folder=True,
    replaced_move_to_end=True,
    text_of=lambda doc: doc.text,
)


def test_search_and_lexical_settings_are_saved_and_restored(tmp_path: Path) -> None:
    settings = SearchSettings(mode="hybrid", alpha=0.3)
    store: DocumentStore[Saved] = DocumentStore(
        gpu=False, text_of=lambda doc: doc.text, lexical=LexicalSettings(language="german", k1=1.2), search=settings
    )
    store.add([Saved("a", "Der Zug fährt nachts."), Saved("b", "Das Brot ist frisch.")], np.eye(2, 4, dtype="f4"))
    path = tmp_path / "store.json"
    save_store(store, FORMAT, path, tmp_path / "store.index")
    loaded = load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="-")
    assert loaded.search_settings == settings and loaded.lexical == LexicalSettings(language="german", k1=1.2)
    state = json.loads(path.read_text())
    assert "search" not in state  # the default is not recorded: a file without a choice answers with the default
    store.search_settings = SearchSettings(mode="dense")  # a choice of dense is recorded, and kept
    save_store(store, FORMAT, path, tmp_path / "store.index", overwrite=True)
    reloaded = load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="-")
    assert reloaded.search_settings.mode == "dense"
    found = loaded.text_search("Brot", 1, lambda _: np.eye(1, 4, dtype="f4")[0], settings=SearchSettings(mode="sparse"))
    assert _keys(found) == ["b"]
    state = json.loads(path.read_text())
    state["lexical"] = {"language": "klingon"}
    path.write_text(json.dumps(state))
    seal(tmp_path / "store.index" / "index.json", ["../store.json", "index.faiss"])  # as an attacker would
    with pytest.raises(ValueError, match="lexical settings this release cannot use"):
        load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="-")


# ---------------------------------------------------------------------------------------------------- windows

LONG = {
    "a": "The ferry leaves at dawn. Bread and stone ovens fill the bakery. The ferry crosses the bay at noon.",
    "b": "Stone walls stand for centuries. The night train runs north. A violin plays in the station hall.",
}


def _windowed(texts: Mapping[str, str]) -> tuple[list[Saved], Any]:
    """Records with one window per sentence (random vectors), as a multi-vector store keeps them."""
    from fair_retrieval.embedding.windows import DocumentWindows

    owners, spans = [], []
    for n, text in enumerate(texts.values()):
        start = 0
        for sentence in text.split(". "):
            end = min(len(text), text.index(sentence, start) + len(sentence) + 1)
            owners.append(n)
            spans.append((start, end))
            start = end + 1
    vectors = np.stack([_vector(f"{o}:{s}") for o, s in zip(owners, spans, strict=True)])
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pooled = np.stack([vectors[np.asarray(owners) == n].mean(0) for n in range(len(texts))])
    windows = DocumentWindows(
        pooled / np.linalg.norm(pooled, axis=1, keepdims=True),
        vectors.astype(np.float32),
        np.asarray(owners, dtype=np.int64),
        np.asarray(spans, dtype=np.int64),
        np.asarray([e - s for s, e in spans], dtype=np.int64),
    )
    return [Saved(key, text) for key, text in texts.items()], windows


def test_the_lexical_side_scores_a_multivector_store_by_its_best_window(tmp_path: Path) -> None:
    records, windows = _windowed(LONG)
    whole: DocumentStore[Saved] = DocumentStore(gpu=False, multivector=True, text_of=lambda doc: doc.text)
    windowed: DocumentStore[Saved] = DocumentStore(
        gpu=False, multivector=True, text_of=lambda doc: doc.text, lexical=LexicalSettings(windows=True)
    )
    for store in (whole, windowed):
        store.add_windows(records, windows)
    reference = LexicalIndex(LexicalSettings(), str)  # each window's text a document of its own: the oracle
    texts = {
        row: LONG["ab"[o]][s:e]
        for row, (o, (s, e)) in enumerate(zip(windows.owners, windows.spans.tolist(), strict=True))
    }
    for query in ("ferry bay", "stone", "violin station", "bread ovens"):
        best: dict[str, float] = {}
        for row, score in reference.search(texts, 0, query, 100):
            key = "ab"[int(windows.owners[row])]
            best[key] = max(best.get(key, 0.0), score)
        found = windowed.lexical_search(query, 2)
        assert [(h.record.key, pytest.approx(h.score, rel=1e-5)) for h in found] == sorted(
            best.items(), key=lambda p: -p[1]
        )
        assert [h.score for h in found] != [h.score for h in whole.lexical_search(query, 2)]
    # the setting is saved and restored with the store, and the restored store scores windows again
    path = tmp_path / "store.json"
    save_store(windowed, FORMAT, path, tmp_path / "store.index")
    loaded = load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="-")
    assert loaded.lexical == LexicalSettings(windows=True)
    assert [(h.record.key, h.score) for h in loaded.lexical_search("stone", 2)] == [
        (h.record.key, h.score) for h in windowed.lexical_search("stone", 2)
    ]
    # a replaced document is read with its new windows; a deleted one is gone
    replaced, new_windows = _windowed({"a": "A cello in the cellar. The violin waits upstairs. Nothing else here."})
    windowed.add_windows(replaced, new_windows)
    assert _keys(windowed.lexical_search("cello", 2)) == ["a"]
    assert _keys(windowed.lexical_search("ferry", 2)) == []
    windowed.delete(["a"])
    assert _keys(windowed.lexical_search("violin", 2)) == ["b"]


def test_a_pooled_store_reads_whole_texts_with_windows_on() -> None:
    store = _store(lexical=LexicalSettings(windows=True))
    plain = _store()
    for query in ("harbour", "stone oven", "night train"):
        assert [(h.record.key, h.score) for h in store.lexical_search(query, 5)] == [
            (h.record.key, h.score) for h in plain.lexical_search(query, 5)
        ]
    with pytest.raises(TypeError, match="windows must be True or False"):
        LexicalSettings(windows=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("alpha", [np.float32(0.5), np.float64(0.25), np.int64(1)])
def test_numpy_numbers_are_accepted_as_alpha(alpha: object) -> None:
    settings = SearchSettings(alpha=alpha)
    assert settings.alpha == float(alpha) and type(settings.alpha) is float  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"alpha must be a number in \[0, 1\]"):
        SearchSettings(alpha=np.bool_(True))
