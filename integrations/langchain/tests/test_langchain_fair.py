"""End-to-end tests of langchain-fair: FairEmbeddings and FaissVectorStore on the real MiniLM."""

from __future__ import annotations

import asyncio
import datetime
import json
import logging
import pickle
import re
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_fair import FairEmbeddings, FaissVectorStore
from pydantic import ValidationError

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding.loading import DEFAULT_MODEL
from tests.sealing import seal


@pytest.fixture(scope="module")
def stores(minilm: FairEmbedder, late_case) -> dict[str, FaissVectorStore]:
    """The late-answer corpus in two pooled stores (one vector per document, what these tests read back):
    calibrated (FairEmbeddings) and plain (calibration=None)."""
    ids = [f"doc-{position}" for position in range(len(late_case.documents))]
    metadatas = [{"position": position, "answers": position in late_case.answer_of} for position in range(len(ids))]
    return {
        name: FaissVectorStore.from_texts(
            late_case.documents,
            FairEmbeddings(embedder=minilm, **options),
            metadatas=metadatas,
            ids=ids,
            gpu=False,
            multivector=False,
        )
        for name, options in (("fair", {}), ("plain", {"calibration": None}))
    }


def _mrr(ranks: list[int]) -> float:
    return sum(1.0 / rank for rank in ranks) / len(ranks)


# ---------------------------------------------------------------------------------------------------- vectors


def test_stored_vectors_are_calibrated_documents_and_queries_are_plain(
    minilm: FairEmbedder, late_case, stores: dict[str, FaissVectorStore]
) -> None:
    sample = [0, 7, 13, 29]
    texts = [late_case.documents[position] for position in sample]
    fair, plain = stores["fair"], stores["plain"]
    assert fair.index is not None and plain.index is not None
    stored = fair.index.get_vectors([fair._store.records.int_ids[f"doc-{position}"] for position in sample])
    stored_plain = plain.index.get_vectors([plain._store.records.int_ids[f"doc-{position}"] for position in sample])
    np.testing.assert_allclose(stored, minilm.embed_documents(texts), atol=1e-6)
    np.testing.assert_allclose(stored_plain, minilm.embed_documents(texts, calibration=None), atol=1e-6)
    assert np.abs(stored - stored_plain).max() > 1e-3

    query = late_case.queries[0]
    query_vector = minilm.embed_queries([query])[0]
    np.testing.assert_allclose(fair.embeddings.embed_query(query), query_vector, atol=1e-6)
    found = fair.similarity_search_with_score(query, k=30, retrieval_mode="dense")
    hits = {document.id: score for document, score in found}
    for position, vector in zip(sample, stored, strict=True):
        assert hits[f"doc-{position}"] == pytest.approx(float(vector @ query_vector), abs=1e-5)


def test_late_answers_rank_higher_than_with_the_plain_model(late_case, stores: dict[str, FaissVectorStore]) -> None:
    ranks: dict[str, list[int]] = {}
    for name, store in stores.items():
        ranks[name] = []
        for query, answer in zip(late_case.queries, late_case.answer_of, strict=True):
            found = store.similarity_search(query, k=len(late_case.documents), retrieval_mode="dense")
            hits = [document.id for document in found]
            ranks[name].append(hits.index(f"doc-{answer}") + 1)
    improved = sum(f < p for f, p in zip(ranks["fair"], ranks["plain"], strict=True))
    worsened = sum(f > p for f, p in zip(ranks["fair"], ranks["plain"], strict=True))
    assert _mrr(ranks["fair"]) > _mrr(ranks["plain"]), ranks
    assert improved > worsened, ranks


# ---------------------------------------------------------------------------------------------------- store API


def test_search_variants_filters_and_retriever(stores: dict[str, FaissVectorStore], late_case) -> None:
    store = stores["fair"]
    query = late_case.queries[2]
    with_scores = store.similarity_search_with_score(query, k=5)
    scores = [score for _, score in with_scores]
    assert scores == sorted(scores, reverse=True)
    assert [d.id for d in store.similarity_search(query, k=5)] == [d.id for d, _ in with_scores]
    vector = store.embeddings.embed_query(query)
    assert [d.id for d in store.similarity_search_by_vector(vector, k=5)] == [d.id for d, _ in with_scores]

    relevance = store.similarity_search_with_relevance_scores(query, k=5)
    for (_, score), (_, relevant) in zip(with_scores, relevance, strict=True):
        assert relevant == pytest.approx(min(1.0, max(0.0, score))) and 0.0 <= relevant <= 1.0  # the cosine

    answering = store.similarity_search(query, k=3, filter={"answers": True}, fetch_k=30)
    assert len(answering) == 3 and all(document.metadata["answers"] for document in answering)
    odd = store.similarity_search(query, k=3, filter=lambda metadata: metadata["position"] % 2 == 1, fetch_k=30)
    assert len(odd) == 3 and all(document.metadata["position"] % 2 for document in odd)
    some = store.similarity_search(query, k=2, filter={"position": [1, 2, 3]}, fetch_k=30)
    assert {document.metadata["position"] for document in some} <= {1, 2, 3}

    retrieved = store.as_retriever(search_kwargs={"k": 2}).invoke(query)
    assert [d.id for d in retrieved] == [d.id for d, _ in with_scores[:2]]
    assert store.get_by_ids(["doc-3", "missing", "doc-1"]) == [
        Document(
            id="doc-3",
            page_content=late_case.documents[3],
            metadata={"position": 3, "answers": 3 in late_case.answer_of},
        ),
        Document(
            id="doc-1",
            page_content=late_case.documents[1],
            metadata={"position": 1, "answers": 1 in late_case.answer_of},
        ),
    ]


def test_max_marginal_relevance_skips_duplicates(minilm: FairEmbedder) -> None:
    texts = [
        "A cat was sitting on a kitchen mat.",
        "A cat was sitting on a kitchen mat.",
        "The cat sat on the mat in the kitchen.",
        "Share prices fell sharply on the stock exchange.",
    ]
    store = FaissVectorStore.from_texts(texts, FairEmbeddings(embedder=minilm), ids=["a", "b", "c", "d"], gpu=False)
    plain = [document.id for document in store.similarity_search("a cat on a mat", k=2)]
    assert sorted(plain) == ["a", "b"]  # the two identical texts
    diverse = [document.id for document in store.max_marginal_relevance_search("a cat on a mat", k=2, fetch_k=4)]
    assert len(diverse) == 2 and not {"a", "b"} <= set(diverse)
    relevant_only = store.max_marginal_relevance_search("a cat on a mat", k=2, fetch_k=4, lambda_mult=1.0)
    assert sorted(document.id for document in relevant_only) == ["a", "b"]


def test_upsert_replaces_and_delete_removes(minilm: FairEmbedder) -> None:
    store = FaissVectorStore(FairEmbeddings(embedder=minilm), gpu=False)
    assert store.similarity_search("anything") == []
    assert store.add_texts(["The ferry runs daily.", "The bakery opens at six."], ids=["x", "y"]) == ["x", "y"]
    store.add_documents([Document(id="x", page_content="The library lends board games.", metadata={"v": 2})])
    assert len(store) == 2 and store.index is not None and len(store.index) == 2
    assert store.get_by_ids(["x"])[0].page_content == "The library lends board games."
    assert store.similarity_search("Where can I borrow board games?", k=1)[0].id == "x"
    assert store.delete(["x"]) is True
    assert store.ids == ["y"] and len(store.index) == 1
    assert store.similarity_search("Where can I borrow board games?", k=5)[0].id == "y"


def test_async_api(minilm: FairEmbedder) -> None:
    embeddings = FairEmbeddings(embedder=minilm, calibration=Calibration(basket_size=4))
    texts = ["A first document about trains and timetables.", "A second one about bread."]

    async def run():  # type: ignore[no-untyped-def]
        store = await FaissVectorStore.afrom_texts(texts, embeddings, ids=["t", "b"], gpu=False)
        hits = await store.asimilarity_search("bread", k=1)
        vectors = await embeddings.aembed_documents(texts)
        query = await embeddings.aembed_query("bread")
        await store.adelete(["t"])
        return store, hits, vectors, query

    store, hits, vectors, query = asyncio.run(run())
    assert hits[0].id == "b" and store.ids == ["b"]
    np.testing.assert_allclose(vectors, embeddings.embed_documents(texts), atol=1e-6)
    np.testing.assert_allclose(query, embeddings.embed_query("bread"), atol=1e-6)


# ---------------------------------------------------------------------------------------------------- persistence


def test_save_and_load_round_trip_without_pickle(minilm: FairEmbedder, late_case, tmp_path: Path) -> None:
    embeddings = FairEmbeddings(embedder=minilm)
    metadatas = [{"n": 1, "tags": ["a", "b"], "nested": {"ok": None, "x": 1.5}}, {"n": 2}, {}]
    store = FaissVectorStore.from_texts(
        late_case.documents[:3], embeddings, metadatas=metadatas, ids=["p", "q", "r"], gpu=False
    )
    query = late_case.queries[0]
    before = store.similarity_search_with_score(query, k=3)
    folder = store.save_local(tmp_path / "store")

    files = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    segment = next(name for name in files if re.fullmatch(r"index/rows-[0-9a-f]{32}\.seg", name))
    assert files == [  # the default: multi-vector (the window table's arrays), its windows compressed
        "index/document_windows.npy",
        "index/index.faiss",
        "index/index.json",
        "index/reranked.json",
        segment,  # the float rows' one segment
        "index/windows.json",
        "index/windows.npy",
        "store.json",
    ]
    for path in folder.rglob("*"):
        assert not path.is_file() or not path.read_bytes().startswith(b"\x80")  # no pickle stream anywhere
    saved = json.loads((folder / "store.json").read_text())
    assert saved["documents"][0]["metadata"] == metadatas[0]
    whole = minilm.window_content_tokens
    assert saved["multivector"] and saved["store_windows"]["tokens"] == [whole, -(-whole // 2)]  # window, half
    assert saved["store_windows"]["boundaries"] == "text"

    loaded = FaissVectorStore.load_local(folder, embeddings, gpu=False)
    after = loaded.similarity_search_with_score(query, k=3)
    assert [d for d, _ in after] == [d for d, _ in before]
    np.testing.assert_allclose([s for _, s in after], [s for _, s in before], atol=1e-6)
    assert loaded.ids == ["p", "q", "r"]
    # The loaded store keeps working: new ids do not collide with stored ones, deletes reach the index.
    loaded.add_texts(["A new note about the harbour."], ids=["s"])
    loaded.delete(["p"])
    assert loaded.ids == ["q", "r", "s"] and loaded.index is not None and len(loaded.index) == 3
    assert loaded.similarity_search("harbour", k=1)[0].id == "s"


def test_empty_store_round_trip(tmp_path: Path, minilm: FairEmbedder) -> None:
    embeddings = FairEmbeddings(embedder=minilm)
    FaissVectorStore(embeddings, gpu=False).save_local(tmp_path)
    loaded = FaissVectorStore.load_local(tmp_path, embeddings, gpu=False)
    assert len(loaded) == 0 and loaded.index is None
    assert loaded.similarity_search("anything") == []


def test_load_refuses_foreign_or_inconsistent_folders(minilm: FairEmbedder, tmp_path: Path) -> None:
    embeddings = FairEmbeddings(embedder=minilm)
    with pytest.raises(FileNotFoundError, match="save_local"):
        FaissVectorStore.load_local(tmp_path / "nothing", embeddings)
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "store.json").write_text('{"some": "json"}')
    with pytest.raises(ValueError, match="not written by FaissVectorStore"):
        FaissVectorStore.load_local(tmp_path / "foreign", embeddings)
    store = FaissVectorStore.from_texts(["one", "two"], embeddings, ids=["1", "2"], gpu=False, multivector=False)
    folder = store.save_local(tmp_path / "store")
    state = json.loads((folder / "store.json").read_text())
    state["documents"].pop()
    (folder / "store.json").write_text(json.dumps(state))
    with pytest.raises(ValueError, match=r"store\.json is damaged"):  # index.json records its size and CRC-32
        FaissVectorStore.load_local(folder, embeddings, gpu=False)
    record = json.loads((folder / "index" / "index.json").read_text())
    (folder / "index" / "index.json").write_text(json.dumps({k: v for k, v in record.items() if k != "publication"}))
    with pytest.raises(ValueError, match=r"index\.json is damaged: it has no 'publication' entry"):  # never unchecked
        FaissVectorStore.load_local(folder, embeddings, gpu=False)
    seal(folder / "index" / "index.json", ["index.faiss", "../store.json"], record)  # crafted with valid checksums
    with pytest.raises(ValueError, match="modified or written partially"):  # the content is still checked
        FaissVectorStore.load_local(folder, embeddings, gpu=False)


# ---------------------------------------------------------------------------------------------------- bad inputs


def test_bad_inputs_give_clear_errors(minilm: FairEmbedder, caplog: pytest.LogCaptureFixture) -> None:
    embeddings = FairEmbeddings(embedder=minilm)
    store = FaissVectorStore.from_texts(["one", "two"], embeddings, ids=["1", "2"], gpu=False)

    with pytest.raises(ValueError, match="from_texts got no texts"):
        FaissVectorStore.from_texts([], embeddings)
    with pytest.raises(TypeError, match=r"texts\[1\] is NoneType"):
        store.add_texts(["fine", None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"texts\[1\] is NoneType"):
        embeddings.embed_documents(["fine", None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="text must be a str"):
        embeddings.embed_query(None)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="2 texts but 1 metadatas"):
        store.add_texts(["a", "b"], metadatas=[{}])
    with pytest.raises(ValueError, match="2 texts but 3 ids"):
        store.add_texts(["a", "b"], ids=["x", "y", "z"])
    with pytest.raises(ValueError, match="repeat"):
        store.add_texts(["a", "b"], ids=["x", "x"])
    with pytest.raises(TypeError, match=r"metadatas\[0\]\['when'\] is a date.*isoformat"):
        store.add_texts(["a"], metadatas=[{"when": datetime.date(2026, 5, 1)}])
    with pytest.raises(TypeError, match="JSON keys must be strings"):
        store.add_texts(["a"], metadatas=[{1: "x"}])
    with pytest.raises(TypeError, match="NaN"):
        store.add_texts(["a"], metadatas=[{"score": float("nan")}])
    assert store.ids == ["1", "2"]  # nothing was added by the failed calls

    with pytest.raises(ValueError, match="not in the store: 'nope'; nothing was deleted"):
        store.delete(["1", "nope"], strict=True)
    assert store.ids == ["1", "2"]
    with caplog.at_level(logging.WARNING, logger="langchain_fair.vectorstores"):
        assert store.delete(["nope"]) is False  # LangChain's contract: unknown ids do not raise by default
    assert "'nope'" in caplog.text
    with pytest.raises(ValueError, match=r"pass store\.ids"):
        store.delete(None)
    with pytest.raises(TypeError, match="wrap it in a list"):
        store.delete("1")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="k must be a positive int"):
        store.similarity_search("one", k=0)
    with pytest.raises(ValueError, match="3-d vectors, but this store holds 384-d"):
        store.similarity_search_by_vector([0.1, 0.2, 0.3])
    with pytest.raises(ValueError, match="metric"):
        FaissVectorStore(embeddings, metric="dot")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Embeddings"):
        FaissVectorStore(minilm)  # type: ignore[arg-type]


def test_fair_embeddings_construction(minilm: FairEmbedder, tiny_model: str) -> None:
    assert FairEmbeddings(embedder=minilm).calibration == minilm.calibration
    assert FairEmbeddings(embedder=minilm, calibration=None).calibration is None
    from_dict = FairEmbeddings(embedder=minilm, calibration={"strength": 0.3, "layers": [4, 5]})
    assert from_dict.calibration == Calibration(strength=0.3, layers=(4, 5))
    loaded = FairEmbeddings(model=tiny_model, batch_size=4)
    assert loaded.fair_embedder.batch_size == 4 and loaded.calibration == Calibration()
    as_path = FairEmbeddings(model=Path(tiny_model), batch_size=4)  # a folder as a Path, as FairEmbedding takes it
    assert as_path.model == tiny_model and as_path.embed_query("ferry") == loaded.embed_query("ferry")

    with pytest.raises(ValidationError, match="not both"):
        FairEmbeddings(model=tiny_model, embedder=minilm)
    with pytest.raises(ValidationError, match="max_length configure"):
        FairEmbeddings(embedder=minilm, max_length=128)
    with pytest.raises(ValidationError, match="unknown option 'normalize'"):
        FairEmbeddings(model=tiny_model, normalize=True)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="calibration must be"):
        FairEmbeddings(embedder=minilm, calibration="strong")  # type: ignore[arg-type]


def test_the_default_store_keeps_windows_and_other_embeddings_get_a_pooled_one(
    minilm: FairEmbedder, caplog: pytest.LogCaptureFixture
) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding

    texts = [" ".join(["The harbour board met about the spring timetable."] * 40), "A short note."]
    for store in (
        FaissVectorStore.from_texts(texts, FairEmbeddings(embedder=minilm), gpu=False),
        FaissVectorStore.from_documents(
            [Document(page_content=t) for t in texts], FairEmbeddings(embedder=minilm), gpu=False
        ),
    ):
        assert store.multivector and store.aggregate == "max"
        assert store.index is not None and store.index.window_count > len(texts)  # the windows of both sizes
    constructed = FaissVectorStore(FairEmbeddings(embedder=minilm), gpu=False)
    assert constructed.multivector
    with caplog.at_level(logging.INFO, logger="fair_retrieval.stores"):
        other = FaissVectorStore.from_texts(texts, DeterministicFakeEmbedding(size=8), gpu=False)
    assert not other.multivector and "gives no window vectors" in caplog.text
    assert not FaissVectorStore.from_texts(texts, FairEmbeddings(embedder=minilm), multivector=False).multivector


def test_no_model_loads_the_default_model_as_huggingface_embeddings_does() -> None:
    embeddings = FairEmbeddings()
    assert embeddings.model == DEFAULT_MODEL and "model" not in embeddings.model_fields_set
    assert len(embeddings.embed_query("ferry")) == 384 and embeddings.calibration == Calibration()
    assert pickle.loads(pickle.dumps(embeddings)).model == DEFAULT_MODEL
