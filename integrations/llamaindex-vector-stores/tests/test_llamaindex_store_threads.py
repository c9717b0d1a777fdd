"""One FairFaissVectorStore shared by threads: writers, a deleter and readers of every query mode (default, sparse,
hybrid, MMR) and of get_nodes at once raise nothing, keep every add that returned, and the store then persists a
folder that loads. Vectors are drawn from the key: no model is needed."""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
from llama_index.vector_stores.fair import FairFaissVectorStore

from tests.concurrency import run_threads

pytest.importorskip("faiss")
pytest.importorskip("bm25s")

DIM = 8
ROUNDS = 150
WORDS = ("harbour", "ferry", "stone", "oven", "train", "night", "bread", "bay")


def vector(key: str) -> list[float]:
    return np.random.default_rng(zlib.crc32(key.encode())).standard_normal(DIM).tolist()  # type: ignore[no-any-return]


def node(key: str) -> TextNode:
    number = zlib.crc32(key.encode())
    text = f"{key} {WORDS[number % len(WORDS)]} {WORDS[(number // 8) % len(WORDS)]} text"
    return TextNode(id_=key, text=text, embedding=vector(key))


def test_threads_writing_deleting_and_querying_one_store(tmp_path: Path) -> None:
    store = FairFaissVectorStore.create(dim=DIM, gpu=False)
    store.add([node("seed")])
    added: dict[str, list[str]] = {"a": [], "b": []}
    stop = threading.Event()

    def writer(name: str) -> Callable[[], None]:
        def work() -> None:
            for number in range(ROUNDS):
                keys = [f"{name}{number}-{part}" for part in range(2)]
                store.add([node(key) for key in keys])
                added[name].extend(keys)
                store.add([node(keys[0])])  # an upsert of a stored id

        return work

    def deleter() -> None:
        try:
            for number in range(ROUNDS):
                key = f"gone{number}"
                store.add([node(key)])
                store.delete_nodes([key])
        finally:
            stop.set()

    def reader(mode: VectorStoreQueryMode) -> Callable[[], None]:
        query = VectorStoreQuery(
            query_embedding=vector("harbour"), query_str="harbour ferry", similarity_top_k=3, mode=mode
        )

        def work() -> None:
            while not stop.is_set():
                store.query(query)
                store.get_nodes(store.node_ids[-3:])

        return work

    modes = (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.SPARSE, VectorStoreQueryMode.HYBRID)
    readers = [reader(mode) for mode in (*modes, VectorStoreQueryMode.MMR)]
    errors = run_threads([writer("a"), writer("b"), deleter, *readers])
    assert not errors, errors[:3]
    expected = {"seed", *added["a"], *added["b"]}
    assert set(store.node_ids) == expected
    assert store.client is not None and len(store.client) == len(expected)
    store.persist(str(tmp_path / "default__vector_store.json"))
    loaded = FairFaissVectorStore.from_persist_dir(str(tmp_path), gpu=False)
    assert set(loaded.node_ids) == expected
