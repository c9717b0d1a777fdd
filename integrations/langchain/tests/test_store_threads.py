"""One FaissVectorStore shared by threads: writers, a deleter and readers of every search mode (dense, sparse,
hybrid, MMR) at once raise nothing, keep every add that returned, and the store then saves a folder that loads.
The embeddings are langchain-core's deterministic fakes (no model)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_fair import FaissVectorStore

from tests.concurrency import run_threads

pytest.importorskip("faiss")
pytest.importorskip("bm25s")

ROUNDS = 150
WORDS = ("harbour", "ferry", "stone", "oven", "train", "night", "bread", "bay")


def text_of(key: str) -> str:
    number = sum(key.encode())
    return f"{key} {WORDS[number % len(WORDS)]} {WORDS[(number // 3) % len(WORDS)]} text"


def test_threads_writing_deleting_and_searching_one_store(tmp_path: Path) -> None:
    store = FaissVectorStore(DeterministicFakeEmbedding(size=8), gpu=False)
    expected = exercised(store, ROUNDS)
    assert store.index is not None and len(store.index) == len(expected)
    store.save_local(tmp_path / "store")
    loaded = FaissVectorStore.load_local(tmp_path / "store", DeterministicFakeEmbedding(size=8), gpu=False)
    assert set(loaded.ids) == expected
    assert loaded.similarity_search("harbour", k=2, retrieval_mode="sparse")


@pytest.mark.parametrize("where", ["memory", "path"])
def test_threads_share_a_qdrant_store_as_safely(tmp_path: Path, where: str) -> None:
    """The same threads on one FairQdrantVectorStore (local mode, which is not thread-safe by itself): nothing
    raises, no add that returned is lost, no document is left in part."""
    pytest.importorskip("qdrant_client")
    from langchain_fair import FairQdrantVectorStore

    place = {"location": ":memory:"} if where == "memory" else {"path": str(tmp_path / "q")}
    store = FairQdrantVectorStore.from_texts(
        [text_of("first")], DeterministicFakeEmbedding(size=8), ids=["first"], collection_name="docs", **place
    )
    expected = exercised(store, 40) | {"first"}
    found = store.get_by_ids(sorted(expected))
    assert {document.id for document in found} == expected and len(found) == len(expected)
    assert all(document.page_content == text_of(str(document.id)) for document in found)
    for mode in ("dense", "sparse", "hybrid"):
        assert len(store.similarity_search("harbour ferry", k=len(expected), retrieval_mode=mode)) >= 1
    assert len(store.similarity_search("harbour ferry", k=len(expected), retrieval_mode="dense")) == len(expected)
    store.client.close()


def exercised(store: Any, rounds: int) -> set[str]:
    """Two writers (adds and upserts), a deleter and a reader of each search mode on `store` at once; asserts no
    thread raised and the store holds exactly what the writers added; returns those ids (with "seed")."""
    store.add_texts([text_of("seed")], ids=["seed"])
    added: dict[str, list[str]] = {"a": [], "b": []}
    stop = threading.Event()

    def writer(name: str) -> Callable[[], None]:
        def work() -> None:
            for number in range(rounds):
                keys = [f"{name}{number}-{part}" for part in range(2)]
                store.add_texts([text_of(key) for key in keys], ids=keys)
                added[name].extend(keys)
                store.add_texts([text_of(keys[0])], ids=[keys[0]])  # an upsert of a stored id

        return work

    def deleter() -> None:
        for number in range(rounds):
            key = f"gone{number}"
            store.add_texts([text_of(key)], ids=[key])
            store.delete([key])

    def reader(mode: str) -> Callable[[], None]:
        def work() -> None:
            while not stop.is_set():
                if mode == "mmr":
                    store.max_marginal_relevance_search("harbour ferry", k=3, fetch_k=8)
                else:
                    store.similarity_search("harbour ferry", k=3, retrieval_mode=mode)
                with store._store.lock:  # both counts read at one moment
                    assert len(store.ids) == len(store)

        return work

    readers = [reader(mode) for mode in ("dense", "sparse", "hybrid", "mmr")]

    def writers_then_stop(work: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            try:
                work()
            finally:
                stop.set()

        return run

    errors = run_threads([writer("a"), writer("b"), writers_then_stop(deleter), *readers])
    assert not errors, errors[:3]
    expected = {"seed", *added["a"], *added["b"]}
    assert set(store.ids) - {"first"} == expected
    return expected
