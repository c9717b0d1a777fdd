"""Concurrent writers of one FaissVectorStore folder: 3 processes × 10 load_local → add_texts → save_local cycles,
retrying on StoreConflictError, lose no save; with one writer SIGKILLed in the middle of a save, the folder still
loads and holds every save that returned. The embeddings are langchain-core's deterministic fakes."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_fair import FaissVectorStore, StoreConflictError

from tests.concurrency import expected_keys, run_writers
from tests.fault_injection import forkserver_context

pytest.importorskip("faiss")


def embeddings() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=8)


def add_one(folder: str, key: str) -> None:
    """One writer's cycle: load the store, add the text `key` under the id `key`, save."""
    store = FaissVectorStore.load_local(folder, embeddings(), gpu=False)
    store.add_texts([f"text of {key}"], metadatas=[{"key": key}], ids=[key])
    store.save_local(folder)


def contents(folder: Path) -> dict[str, str]:
    store = FaissVectorStore.load_local(folder, embeddings(), gpu=False)
    assert store.index is not None and len(store.index) == len(store)
    return {document.id: document.page_content for document in store.get_by_ids(store.ids) if document.id}


def start(folder: Path) -> None:
    FaissVectorStore.from_texts(["the first text"], embeddings(), ids=["first"], gpu=False).save_local(folder)


def test_concurrent_writers_lose_no_save(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    start(folder)
    saved, _ = run_writers(forkserver_context(), add_one, folder)
    assert saved == expected_keys()
    held = contents(folder)
    assert set(held) == expected_keys() | {"first"}
    assert all(held[key] == f"text of {key}" for key in saved)
    assert sorted(path.name for path in folder.iterdir()) == ["index", "store.json"]  # no temporary left


@pytest.mark.parametrize("pause_at", [2, 4])
def test_a_writer_killed_mid_save_loses_no_other_save(tmp_path: Path, pause_at: int) -> None:
    folder = tmp_path / "store"
    start(folder)
    saved, in_flight = run_writers(forkserver_context(), add_one, folder, kill=(0, pause_at))
    held = set(contents(folder))
    assert saved <= held <= saved | in_flight | {"first"}
    assert len(saved) == 2 * 10 + 10 // 2  # the killed writer's earlier saves, and all of the others'
    add_one(str(folder), "after")  # the next save finishes or removes what the killed one left
    assert set(contents(folder)) == held | {"after"}


def test_a_save_over_a_newer_generation_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    start(folder)
    first = FaissVectorStore.load_local(folder, embeddings(), gpu=False)
    second = FaissVectorStore.load_local(folder, embeddings(), gpu=False)
    first.add_texts(["one"], ids=["one"])
    first.save_local(folder)
    first.add_texts(["two"], ids=["two"])
    first.save_local(folder)  # its own save is no conflict
    second.add_texts(["lost"], ids=["lost"])
    with pytest.raises(StoreConflictError, match="Reload it, apply your change again and save"):
        second.save_local(folder)
    assert set(contents(folder)) == {"first", "one", "two"}  # nothing was written
    assert isinstance(StoreConflictError(folder, "store"), ValueError)
    fresh = FaissVectorStore.from_texts(["fresh"], embeddings(), ids=["fresh"])
    with pytest.raises(StoreConflictError, match="already holds a saved store"):  # built in memory: not silently
        fresh.save_local(folder)
    fresh.save_local(folder, overwrite=True)  # unless asked to replace it
    assert set(contents(folder)) == {"fresh"}


# ---------------------------------------------------------------------------------------------------- bad entries


class CountingEmbeddings(DeterministicFakeEmbedding):
    calls: int = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        return super().embed_documents(texts)


@pytest.mark.parametrize(
    ("texts", "ids", "metadatas", "message"),
    [
        (["fine", "bad\udcff"], ["a", "b"], None, r"\[1\] \(id 'b'\): the text holds a lone surrogate"),
        (["fine", "   "], ["a", "b"], None, r"\[1\] \(id 'b'\): the text is empty or whitespace only"),
        (["fine", ""], ["a", "b"], None, r"\[1\] \(id 'b'\): the text is empty"),
        (["fine"], ["a\udcff"], None, r"\[0\] \(id 'a\\udcff'\): the id holds a lone surrogate"),
        (["fine"], [""], None, r"\[0\] \(id ''\): the id is empty"),
        (["fine"], ["a"], [{"k": "\udcff"}], r"\[0\] \(id 'a'\): metadata\['k'\] holds a lone surrogate"),
    ],
)
def test_bad_entries_are_refused_before_embedding(
    tmp_path: Path, texts: list[str], ids: list[str], metadatas: list[dict] | None, message: str
) -> None:
    embedding = CountingEmbeddings(size=8)
    store = FaissVectorStore(embedding, gpu=False)
    store.add_texts(["kept"], ids=["kept"])
    calls = embedding.calls
    with pytest.raises(ValueError, match=message):
        store.add_texts(texts, metadatas=metadatas, ids=ids)
    with pytest.raises(ValueError, match=message):
        store.add_embeddings([(text, [1.0] * 8) for text in texts], metadatas=metadatas, ids=ids)
    assert embedding.calls == calls and store.ids == ["kept"]  # nothing embedded, nothing stored
    store.save_local(tmp_path / "store")  # and the store still saves


@pytest.mark.filterwarnings("error::RuntimeWarning")
def test_zero_and_non_finite_vectors_are_refused_under_cosine() -> None:
    store = FaissVectorStore(embeddings(), gpu=False)  # metric="cosine"
    store.add_texts(["kept"], ids=["kept"])
    with pytest.raises(ValueError, match="all zeros"):
        store.add_embeddings([("zero", [0.0] * 8)], ids=["zero"])
    with pytest.raises(ValueError, match="NaN or infinite"):
        store.add_embeddings([("inf", [float("inf")] + [0.0] * 7)], ids=["inf"])
    with pytest.raises(ValueError, match="all zeros"):
        store.similarity_search_by_vector([0.0] * 8)
    assert store.ids == ["kept"]
