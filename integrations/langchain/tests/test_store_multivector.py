"""FaissVectorStore(multivector=True): documents kept as their window vectors, k distinct documents per search.

Most tests use a tiny random model with a 32-token window, so most texts of the corpus are cut into several
windows, and compare the store with brute force over every window vector (numpy) on a flat index; the test of the
best window's span uses the real MiniLM, whose best window for a question must be the one holding its answer.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.vectorstores.utils import maximal_marginal_relevance
from langchain_fair import FairEmbeddings, FaissVectorStore

from fair_retrieval import DocumentWindows, FairEmbedder, FaissIndex, MultiVectorIndex
from fair_retrieval.index import DEFAULT_AGGREGATE
from fair_retrieval.index.exact_rerank import RerankedIndex
from fair_retrieval.stores import StoreWindows
from fair_retrieval.stores.best_window import BEST_WINDOW_KEY
from tests.ranking import assert_same_ranking
from tests.sealing import sealed_store_copy

FIXTURES = Path(__file__).parent / "fixtures"
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
QUERIES = ["When does the ferry leave?", "bread and cheese", "Where are bicycles repaired?", "tide and nets"]


def corpus() -> tuple[list[str], list[dict[str, Any]], list[str]]:
    """Texts of one to six sentences (one to about six windows of the tiny model), their metadata and ids.

    Every sentence is numbered, so no two windows are the same text (equal windows would tie)."""
    texts = []
    for position in range(14):
        count = 1 + position % 6
        texts.append(" ".join(f"{position}.{j}: {SENTENCES[(position + j) % len(SENTENCES)]}" for j in range(count)))
    metadatas = [{"group": position % 3, "position": position} for position in range(len(texts))]
    return texts, metadatas, [f"doc-{position}" for position in range(len(texts))]


@pytest.fixture(scope="module")
def tiny(tiny_model: str) -> FairEmbedder:
    return FairEmbedder(tiny_model, max_length=32, device="cpu")


@pytest.fixture(scope="module")
def embeddings(tiny: FairEmbedder) -> FairEmbeddings:
    return FairEmbeddings(embedder=tiny)


@pytest.fixture(scope="module")
def windows(embeddings: FairEmbeddings) -> DocumentWindows:
    """The corpus's windows, as the store's embeddings give them (the brute force's input)."""
    texts, _, _ = corpus()
    result = embeddings.embed_document_windows(texts)
    assert (np.bincount(result.owners) > 1).sum() >= 8  # most documents are cut into several windows
    return result


def build(embeddings: FairEmbeddings, **options: Any) -> FaissVectorStore:
    texts, metadatas, ids = corpus()
    options.setdefault("gpu", False)
    options.setdefault("retrieval_mode", "dense")  # these tests hold the dense side against brute force
    return FaissVectorStore.from_texts(
        texts, embeddings, metadatas=metadatas, ids=ids, multivector=True, windows=StoreWindows(), **options
    )


def brute_force(
    windows: DocumentWindows, query: np.ndarray, aggregate: str = DEFAULT_AGGREGATE, metric: str = "cosine"
) -> np.ndarray:
    """Every document's aggregate score over all its windows, larger is better (l2: the negated distance)."""
    if metric == "l2":
        scores = -((windows.vectors.astype(np.float64) - query) ** 2).sum(axis=1)
    else:
        scores = windows.vectors.astype(np.float64) @ query
    result = np.empty(len(windows))
    for document in range(len(windows)):
        own = np.sort(scores[windows.of(document)])
        result[document] = own[-1] if aggregate == "max" else own[-2:].mean()
    return result


def expected_hits(
    windows: DocumentWindows, query: np.ndarray, k: int, among: list[int] | None = None, **kwargs: Any
) -> tuple[list[str], list[float], list[int]]:
    """(ids, higher-is-better scores, best window positions) of the brute-force top k, among some documents."""
    scores = brute_force(windows, query, **kwargs)
    order = [int(i) for i in np.argsort(-scores, kind="stable") if among is None or int(i) in among][:k]
    metric = kwargs.get("metric", "cosine")
    window_scores = (
        -((windows.vectors - query) ** 2).sum(axis=1) if metric == "l2" else windows.vectors.astype(np.float64) @ query
    )
    best = [int(np.argmax(window_scores[windows.of(i)])) for i in order]
    return [f"doc-{i}" for i in order], [float(scores[i]) for i in order], best


# ---------------------------------------------------------------------------------------------------- exactness


@pytest.mark.parametrize("aggregate", ["max", "top2"])
@pytest.mark.parametrize("metric", ["cosine", "l2"])
def test_flat_search_equals_brute_force_over_every_window(
    embeddings: FairEmbeddings, windows: DocumentWindows, aggregate: str, metric: str
) -> None:
    store = build(embeddings, aggregate=aggregate, metric=metric)
    assert isinstance(store.index, MultiVectorIndex) and store.index.aggregate == aggregate
    assert store.index.window_count == windows.vectors.shape[0] and len(store.index) == len(windows)
    for question in QUERIES:
        query = np.asarray(embeddings.embed_query(question), dtype=np.float64)
        ids, scores, best = expected_hits(windows, query, 5, aggregate=aggregate, metric=metric)
        hits = store.similarity_search_with_score(question, k=5)
        assert [document.id for document, _ in hits] == ids
        raw = [-score for score in scores] if metric == "l2" else scores  # l2 scores are distances
        np.testing.assert_allclose([score for _, score in hits], raw, atol=1e-4)
        if aggregate == "max":
            assert [document.metadata[BEST_WINDOW_KEY]["window"] for document, _ in hits] == best


def test_every_entry_point_returns_k_distinct_documents_with_their_best_window(
    embeddings: FairEmbeddings, windows: DocumentWindows
) -> None:
    store = build(embeddings)
    question = QUERIES[0]
    query = np.asarray(embeddings.embed_query(question), dtype=np.float64)
    ids, scores, _ = expected_hits(windows, query, 6)
    results = {
        "similarity_search": store.similarity_search(question, k=6),
        "by_vector": store.similarity_search_by_vector(query.tolist(), k=6),
        "with_score_by_vector": [d for d, _ in store.similarity_search_with_score_by_vector(query.tolist(), k=6)],
        "relevance": [d for d, _ in store.similarity_search_with_relevance_scores(question, k=6)],
        "retriever": store.as_retriever(search_kwargs={"k": 6}).invoke(question),
    }
    for name, documents in results.items():
        assert [d.id for d in documents] == ids, name
        for document in documents:
            span = document.metadata[BEST_WINDOW_KEY]
            position = int(document.id.split("-")[1])
            assert (span["start"], span["end"]) == tuple(windows.spans[windows.of(position)][span["window"]]), name
    relevance = [score for _, score in store.similarity_search_with_relevance_scores(question, k=6)]
    np.testing.assert_allclose(relevance, np.clip(scores, 0.0, 1.0), atol=1e-4)  # the best window's cosine


def test_the_score_threshold_retriever_keeps_the_documents_above_it(
    embeddings: FairEmbeddings, windows: DocumentWindows
) -> None:
    store = build(embeddings)
    question = QUERIES[2]
    query = np.asarray(embeddings.embed_query(question), dtype=np.float64)
    ids, scores, _ = expected_hits(windows, query, len(windows))
    relevance = np.clip(scores, 0.0, 1.0)
    threshold = (relevance[2] + relevance[3]) / 2  # between the third and the fourth document
    retriever = store.as_retriever(
        search_type="similarity_score_threshold", search_kwargs={"k": 10, "score_threshold": threshold}
    )
    found = retriever.invoke(question)
    assert [d.id for d in found] == ids[:3] and all(BEST_WINDOW_KEY in d.metadata for d in found)


def test_mmr_chooses_among_fetch_k_distinct_documents_by_their_pooled_vectors(
    embeddings: FairEmbeddings, windows: DocumentWindows
) -> None:
    store = build(embeddings)
    question = QUERIES[1]
    query = np.asarray(embeddings.embed_query(question), dtype=np.float32)
    candidate_ids, _, best = expected_hits(windows, query.astype(np.float64), 8)
    positions = [int(id_.split("-")[1]) for id_ in candidate_ids]
    chosen = maximal_marginal_relevance(query, windows.pooled[positions].tolist(), lambda_mult=0.3, k=4)
    expected = [candidate_ids[i] for i in chosen]
    found = store.max_marginal_relevance_search(question, k=4, fetch_k=8, lambda_mult=0.3)
    assert [d.id for d in found] == expected
    assert [d.metadata[BEST_WINDOW_KEY]["window"] for d in found] == [best[i] for i in chosen]
    retriever = store.as_retriever(search_type="mmr", search_kwargs={"k": 4, "fetch_k": 8, "lambda_mult": 0.3})
    assert [d.id for d in retriever.invoke(question)] == expected


@pytest.mark.parametrize("spec", [{"group": 1}, lambda metadata: metadata["group"] == 1])
def test_filters_apply_per_document_and_still_return_k(
    embeddings: FairEmbeddings, windows: DocumentWindows, spec: Any
) -> None:
    store = build(embeddings)
    among = [position for position in range(len(windows)) if position % 3 == 1]  # 5 of 14 documents
    for question in QUERIES:
        query = np.asarray(embeddings.embed_query(question), dtype=np.float64)
        ids, _, _ = expected_hits(windows, query, 4, among=among)
        found = store.similarity_search(question, k=4, filter=spec)
        assert [d.id for d in found] == ids and all(d.metadata["group"] == 1 for d in found)
    assert len(store.similarity_search(QUERIES[0], k=10, filter=spec)) == len(among)
    mmr = store.max_marginal_relevance_search(QUERIES[0], k=4, fetch_k=5, filter=spec)
    assert len(mmr) == 4 and all(d.metadata["group"] == 1 for d in mmr)


# ---------------------------------------------------------------------------------------------------- adding, deleting


def test_texts_are_embedded_once_window_by_window(
    embeddings: FairEmbeddings, tiny: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[int] = []
    original = tiny.embed_document_windows

    def counting(texts: list[str], **kwargs: Any) -> DocumentWindows:
        calls.append(len(texts))
        return original(texts, **kwargs)

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("embed_documents must not be called by a multi-vector store")

    monkeypatch.setattr(tiny, "embed_document_windows", counting)
    monkeypatch.setattr(tiny, "embed_documents", refuse)
    store = build(embeddings)
    store.add_documents([Document(page_content=SENTENCES[0] + " " + SENTENCES[1], metadata={"group": 0})], ids=["x"])
    assert calls == [14, 1] and len(store) == 15


def test_delete_and_upsert_replace_every_window_of_a_document(
    embeddings: FairEmbeddings, windows: DocumentWindows
) -> None:
    store = build(embeddings)
    index = store.index
    assert isinstance(index, MultiVectorIndex)
    total = index.window_count
    five = windows.of(5)
    assert store.delete(["doc-5"]) and index.window_count == total - (five.stop - five.start)
    for question in QUERIES:
        assert "doc-5" not in [d.id for d in store.similarity_search(question, k=13)]
    assert store.get_by_ids(["doc-5", "doc-4"])[0].id == "doc-4"

    new_text = SENTENCES[3]  # one window instead of six
    four = windows.of(4)
    store.add_texts([new_text], metadatas=[{"group": 9}], ids=["doc-4"])
    int_id = store._store.records.int_ids["doc-4"]
    assert index.window_count == total - (five.stop - five.start) - (four.stop - four.start) + 1
    assert index.window_spans(int_id) == [(0, len(new_text))]
    (replaced,) = store.get_by_ids(["doc-4"])
    assert replaced.page_content == new_text and replaced.metadata == {"group": 9}
    assert store.ids[-1] == "doc-4"  # an upserted document moves to the end, as in a pooled store
    query = embeddings.embed_query(new_text)
    top = store.similarity_search_by_vector(query, k=1)[0]
    assert top.id == "doc-4" and top.metadata[BEST_WINDOW_KEY] == {"start": 0, "end": len(new_text), "window": 0}


def test_results_are_copies_and_stored_metadata_has_no_best_window(embeddings: FairEmbeddings) -> None:
    store = build(embeddings)
    hit = store.similarity_search(QUERIES[0], k=1)[0]
    hit.metadata["group"] = "edited"
    hit.metadata[BEST_WINDOW_KEY]["start"] = -1
    (stored,) = store.get_by_ids([hit.id])
    assert BEST_WINDOW_KEY not in stored.metadata and stored.metadata["group"] != "edited"
    again = store.similarity_search(QUERIES[0], k=1)[0]
    assert again.metadata[BEST_WINDOW_KEY]["start"] >= 0


def test_add_embeddings_keeps_each_text_as_one_window(embeddings: FairEmbeddings, windows: DocumentWindows) -> None:
    texts, metadatas, ids = corpus()
    store = FaissVectorStore.from_embeddings(
        zip(texts, windows.pooled.tolist(), strict=True),
        embeddings,
        metadatas=metadatas,
        ids=ids,
        multivector=True,
        windows=StoreWindows(),
        gpu=False,
    )
    index = store.index
    assert isinstance(index, MultiVectorIndex) and index.window_count == len(texts)
    query = windows.pooled[7]
    (top,) = store.similarity_search_by_vector(query.tolist(), k=1)
    assert top.id == "doc-7" and top.metadata[BEST_WINDOW_KEY] == {"start": 0, "end": len(texts[7]), "window": 0}
    pooled_scores = windows.pooled.astype(np.float64) @ query
    expected = [f"doc-{i}" for i in np.argsort(-pooled_scores, kind="stable")[:5]]
    assert [d.id for d in store.similarity_search_by_vector(query.tolist(), k=5)] == expected


def test_merge_from_copies_every_window_and_refuses_mixed_modes(
    embeddings: FairEmbeddings, windows: DocumentWindows
) -> None:
    texts, metadatas, ids = corpus()
    first = FaissVectorStore.from_texts(
        texts[:6], embeddings, metadatas[:6], ids=ids[:6], multivector=True, windows=StoreWindows(), gpu=False
    )
    second = FaissVectorStore.from_texts(
        texts[6:], embeddings, metadatas[6:], ids=ids[6:], multivector=True, windows=StoreWindows(), gpu=False
    )
    first.merge_from(second)
    whole = build(embeddings, retrieval_mode="hybrid")  # as the merged store: its lexical side merged too
    assert first.ids == whole.ids and len(second) == 8
    mine, reference = first.index, whole.index
    assert isinstance(mine, MultiVectorIndex) and isinstance(reference, MultiVectorIndex)
    assert mine.window_count == reference.window_count
    for id_ in ids:
        a, b = first._store.records.int_ids[id_], whole._store.records.int_ids[id_]
        assert mine.window_spans(a) == reference.window_spans(b)
        assert mine.window_weights(a) == reference.window_weights(b)
        np.testing.assert_allclose(mine.get_window_vectors(a), reference.get_window_vectors(b), atol=1e-6)
    for question in QUERIES:
        merged, built = (
            first.similarity_search_with_score(question, k=5),
            whole.similarity_search_with_score(question, k=5),
        )
        assert [(d.id, d.metadata) for d, _ in merged] == [(d.id, d.metadata) for d, _ in built]
        np.testing.assert_allclose([s for _, s in merged], [s for _, s in built], atol=1e-5)

    pooled = FaissVectorStore.from_texts(["Another text."], embeddings, ids=["other"], gpu=False, multivector=False)
    with pytest.raises(ValueError, match="multivector"):
        first.merge_from(pooled)
    with pytest.raises(ValueError, match="multivector"):
        pooled.merge_from(second)
    assert len(pooled) == 1 and len(first) == 14


def test_options_are_checked_when_the_store_is_made(embeddings: FairEmbeddings) -> None:
    with pytest.raises(TypeError, match="window"):
        FaissVectorStore(DeterministicFakeEmbedding(size=8), multivector=True)
    with pytest.raises(ValueError, match="aggregate"):
        FaissVectorStore(embeddings, multivector=True, aggregate="mean")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="multivector"):
        FaissVectorStore(embeddings, multivector="yes")  # type: ignore[arg-type]
    pooled = FaissVectorStore.from_texts(["One text."], embeddings, gpu=False, multivector=False)
    assert not pooled.multivector and not isinstance(pooled.index, MultiVectorIndex)
    hnsw = build(embeddings, kind="hnsw", M=8, fetch_factor=3)
    assert isinstance(hnsw.index, MultiVectorIndex) and hnsw.index.kind == "hnsw"
    assert len({d.id for d in hnsw.similarity_search(QUERIES[0], k=10)}) == 10


# ---------------------------------------------------------------------------------------------------- persistence


def test_save_and_load_keep_the_mode_the_aggregate_and_the_results(embeddings: FairEmbeddings, tmp_path: Path) -> None:
    store = build(embeddings, aggregate="top2")
    folder = store.save_local(tmp_path / "store")
    state = json.loads((folder / "store.json").read_text(encoding="utf-8"))
    assert state["version"] == 1 and state["multivector"] is True and state["aggregate"] == "top2"
    assert state["embedder"]["multivector"] is True and state["embedder"]["aggregate"] == "top2"
    assert state["embedder"]["max_length"] == 32  # the embedder's own identity, with the mode added

    for asked in (None, True):
        loaded = FaissVectorStore.load_local(folder, embeddings, gpu=False, multivector=asked)
        assert loaded.multivector and loaded.aggregate == "top2" and loaded.ids == store.ids
        for question in QUERIES:
            got, expected = (
                loaded.similarity_search_with_score(question, k=4),
                store.similarity_search_with_score(question, k=4),
            )
            assert [(d.id, d.metadata) for d, _ in got] == [(d.id, d.metadata) for d, _ in expected]
            np.testing.assert_allclose([s for _, s in got], [s for _, s in expected], atol=1e-5)
    loaded.add_texts([SENTENCES[4]], ids=["new"])
    assert loaded.similarity_search(SENTENCES[4], k=1)[0].metadata[BEST_WINDOW_KEY]["end"] == len(SENTENCES[4])

    with pytest.raises(ValueError, match="holds a store of multi-vector documents") as caught:
        FaissVectorStore.load_local(folder, embeddings, gpu=False, multivector=False)
    assert "multivector=True" in str(caught.value)


def test_a_pooled_store_is_never_read_as_a_multi_vector_one(embeddings: FairEmbeddings, tmp_path: Path) -> None:
    texts, metadatas, ids = corpus()
    pooled = FaissVectorStore.from_texts(texts, embeddings, metadatas, ids=ids, gpu=False, multivector=False)
    folder = pooled.save_local(tmp_path / "p")
    state = json.loads((folder / "store.json").read_text(encoding="utf-8"))
    assert "multivector" not in state and "multivector" not in state["embedder"]  # the file as before
    with pytest.raises(ValueError, match="holds a store of pooled documents"):
        FaissVectorStore.load_local(folder, embeddings, gpu=False, multivector=True)
    assert not FaissVectorStore.load_local(folder, embeddings, gpu=False, multivector=False).multivector

    # a store file edited to claim the other mode: refused as damage (its commit records the file's checksum)
    # before the mode is compared, and the index folders refuse each other too
    (folder / "store.json").write_text(json.dumps({**state, "multivector": True, "aggregate": "max"}))
    with pytest.raises(ValueError, match=r"is damaged|embedder configuration"):
        FaissVectorStore.load_local(folder, embeddings, gpu=False)
    with pytest.raises(ValueError, match=r"is damaged|pooled FaissIndex"):
        FaissVectorStore.load_local(folder, embeddings, gpu=False, allow_embedder_mismatch=True)
    multi = build(embeddings).save_local(tmp_path / "m")
    multi_state = json.loads((multi / "store.json").read_text(encoding="utf-8"))
    del multi_state["multivector"], multi_state["aggregate"]
    multi_state["embedder"] = {
        k: v for k, v in multi_state["embedder"].items() if k not in ("multivector", "aggregate")
    }
    (multi / "store.json").write_text(json.dumps(multi_state))
    with pytest.raises(ValueError, match=r"is damaged|multi-vector"):
        FaissVectorStore.load_local(multi, embeddings, gpu=False)
    (multi / "store.json").write_text(json.dumps({**multi_state, "multivector": "yes"}))
    with pytest.raises(ValueError, match=r"is damaged|document mode is malformed"):
        FaissVectorStore.load_local(multi, embeddings, gpu=False)


def test_an_empty_multi_vector_store_saves_and_loads_its_mode(embeddings: FairEmbeddings, tmp_path: Path) -> None:
    folder = FaissVectorStore(
        embeddings, multivector=True, windows=StoreWindows(), aggregate="max-mean", gpu=False
    ).save_local(tmp_path / "e")
    loaded = FaissVectorStore.load_local(folder, embeddings, gpu=False)
    assert loaded.multivector and loaded.aggregate == "max-mean" and loaded.index is None
    loaded.add_texts(corpus()[0][:3], ids=["a", "b", "c"])
    assert isinstance(loaded.index, MultiVectorIndex) and loaded.index.aggregate == "max-mean"


def test_a_store_of_the_first_release_loads_pooled(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    folder = sealed_store_copy(FIXTURES / "store_v1_cosine_flat", tmp_path / "old")  # its files committed
    embeddings = DeterministicFakeEmbedding(size=8)
    with caplog.at_level(logging.INFO):
        loaded = FaissVectorStore.load_local(folder, embeddings, gpu=False)
    assert not loaded.multivector and len(loaded) == 3
    assert not FaissVectorStore.load_local(folder, embeddings, gpu=False, multivector=False).multivector
    with pytest.raises(ValueError, match="pooled documents"):
        FaissVectorStore.load_local(folder, embeddings, gpu=False, multivector=True)


# ---------------------------------------------------------------------------------------------------- the best window


def test_the_best_window_is_the_one_that_holds_the_answer(minilm_path: str) -> None:
    embeddings = FairEmbeddings(model=minilm_path, max_length=64, device="cpu")
    planted = "The lighthouse keeper paints the lamp room green every spring."
    filler = [sentence for sentence in SENTENCES if "harbour" not in sentence]
    texts = []
    for position in range(4):
        body = [filler[(position + j) % len(filler)] for j in range(8)]
        if position == 2:
            body.insert(5, planted)
        texts.append(" ".join(body))
    store = FaissVectorStore.from_texts(
        texts, embeddings, ids=["a", "b", "c", "d"], multivector=True, windows=StoreWindows(), gpu=False
    )
    index = store.index
    assert isinstance(index, MultiVectorIndex) and len(index.window_spans(store._store.records.int_ids["c"])) >= 3
    (hit,) = store.similarity_search("What colour does the lighthouse keeper paint the lamp room?", k=1)
    span = hit.metadata[BEST_WINDOW_KEY]
    assert hit.id == "c" and planted in hit.page_content[span["start"] : span["end"]]
    spans = index.window_spans(store._store.records.int_ids["c"])
    assert (span["start"], span["end"]) == spans[span["window"]]
    assert sum(planted in texts[2][start:end] for start, end in spans) < len(spans)  # not in every window


def test_the_log_counts_each_document_once_with_its_window_passes(
    embeddings: FairEmbeddings, caplog: pytest.LogCaptureFixture
) -> None:
    texts = corpus()[0][:8]
    store = FaissVectorStore(embeddings, gpu=False)  # the default shape: two window sizes, two passes
    assert store._store.windows is not None and len(store._store.windows.tokens) == 2
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.embedder"):
        store.add_texts(texts)
    said = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "Embedded" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("Embedded 8 documents (2 window passes; in all ")


MINUTES = " ".join(f"Item {i}: the harbour board reviewed the spring timetable of pier {i}." for i in range(30))


def test_one_report_covers_every_window_pass_of_an_add(minilm_path: str, caplog: pytest.LogCaptureFixture) -> None:
    embeddings = FairEmbeddings(model=minilm_path, max_length=512, device="cpu")  # the README's example
    texts = [MINUTES + " The ferry stops running when the wind exceeds sixty kilometres per hour.", "The bakery."]
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.embedder"):
        FaissVectorStore.from_texts(texts, embeddings, gpu=False)  # whole windows (calibrated), then half windows
    report = embeddings.fair_embedder.last_report
    assert report is not None and (report.documents, report.calibrated) == (2, 1)  # not the last pass's "0"
    assert report.windows > report.documents  # both passes' windows
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and "None of these" in r.getMessage()]
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.embedder"):
        FaissVectorStore.from_texts(["The bakery.", "The ferry."], embeddings, gpu=False)  # no pass calibrates
        FaissVectorStore.from_texts(["The pier.", "The bus."], embeddings, gpu=False)
    said = [r.getMessage() for r in caplog.records if "None of these" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("None of these 2 documents")  # once, over the whole add
    assert embeddings.fair_embedder.last_report.calibrated == 0  # type: ignore[union-attr]


def test_the_default_store_keeps_its_windows_compressed_and_finds_what_the_flat_one_finds(
    minilm_path: str, tmp_path: Path
) -> None:
    embeddings = FairEmbeddings(model=minilm_path, max_length=64, device="cpu")  # 384-d: the PQ48 codes fit
    texts, metadatas, ids = corpus()
    default = FaissVectorStore.from_texts(texts, embeddings, metadatas=metadatas, ids=ids, gpu=False)
    flat = FaissVectorStore.from_texts(texts, embeddings, metadatas=metadatas, ids=ids, gpu=False, kind="flat")
    assert isinstance(default.index, MultiVectorIndex) and isinstance(default.index.windows, RerankedIndex)
    assert default.kind == "compressed"
    assert isinstance(flat.index, MultiVectorIndex) and isinstance(flat.index.windows, FaissIndex)
    assert flat.kind == "flat" and flat.index.kind == "flat"

    def found(store: FaissVectorStore) -> list[list[tuple[str | None, float]]]:
        return [[(d.id, s) for d, s in store.similarity_search_with_score(q, k=5)] for q in QUERIES]

    def same(got: list[list[tuple[str | None, float]]], expected: list[list[tuple[str | None, float]]]) -> None:
        for mine, theirs in zip(got, expected, strict=True):
            assert_same_ranking(mine, theirs)

    same(found(default), found(flat))  # below 16,384 windows the compressed store searches exactly
    for store in (default, flat):
        store.add_texts(["The ferry now leaves at ten."], ids=["doc-0"])  # an upsert
        store.delete(["doc-3", "doc-7"])
    same(found(default), found(flat))
    default.save_local(str(tmp_path / "default"))
    flat.save_local(str(tmp_path / "flat"))
    assert list((tmp_path / "default").rglob("rows-*.seg")) and not list((tmp_path / "flat").rglob("rows-*.seg"))
    reloaded = FaissVectorStore.load_local(str(tmp_path / "default"), embeddings)
    assert reloaded.kind == "compressed" and isinstance(reloaded.index, MultiVectorIndex)
    assert isinstance(reloaded.index.windows, RerankedIndex)
    old = FaissVectorStore.load_local(str(tmp_path / "flat"), embeddings)  # as every store was saved before
    assert old.kind == "flat" and isinstance(old.index, MultiVectorIndex)
    assert isinstance(old.index.windows, FaissIndex)
    assert found(reloaded) == found(old) == found(flat)
