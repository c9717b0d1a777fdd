"""Concurrent writers of one FairFaissVectorStore persist folder: 3 processes × 10 from_persist_dir → add → persist
cycles, retrying on StoreConflictError, lose no persist; with one writer SIGKILLed in the middle of a persist, the
folder still loads and holds every persist that returned. Vectors are drawn from the key: no model is needed."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
import pytest
from llama_index.core.schema import TextNode
from llama_index.vector_stores.fair import FairFaissVectorStore, StoreConflictError

from tests.concurrency import expected_keys, run_writers
from tests.fault_injection import forkserver_context

pytest.importorskip("faiss")

DIM = 8
STORE_FILE = "default__vector_store.json"


def node(key: str) -> TextNode:
    vector = np.random.default_rng(zlib.crc32(key.encode())).standard_normal(DIM)
    return TextNode(id_=key, text=f"text of {key}", metadata={"key": key}, embedding=vector.tolist())


def add_one(folder: str, key: str) -> None:
    """One writer's cycle: load the store, add the node `key`, persist."""
    store = FairFaissVectorStore.from_persist_dir(folder, gpu=False)
    store.add([node(key)])
    store.persist(str(Path(folder) / STORE_FILE))


def contents(folder: Path) -> dict[str, str]:
    store = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False)
    assert store.index is not None and len(store.index) == len(store.node_ids)
    return {stored.node_id: stored.get_content() for stored in store.get_nodes()}


def start(folder: Path) -> None:
    store = FairFaissVectorStore.create(dim=DIM, gpu=False)
    store.add([node("first")])
    store.persist(str(folder / STORE_FILE))


def test_concurrent_writers_lose_no_persist(tmp_path: Path) -> None:
    folder = tmp_path / "storage"
    start(folder)
    saved, _ = run_writers(forkserver_context(), add_one, folder)
    assert saved == expected_keys()
    held = contents(folder)
    assert set(held) == expected_keys() | {"first"}
    assert all(held[key] == f"text of {key}" for key in saved)


def test_a_writer_killed_mid_persist_loses_no_other_persist(tmp_path: Path) -> None:
    folder = tmp_path / "storage"
    start(folder)
    saved, in_flight = run_writers(forkserver_context(), add_one, folder, kill=(1, 3))
    held = set(contents(folder))
    assert saved <= held <= saved | in_flight | {"first"}
    assert len(saved) == 2 * 10 + 10 // 2
    add_one(str(folder), "after")
    assert set(contents(folder)) == held | {"after"}


def test_a_persist_over_a_newer_generation_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "storage"
    start(folder)
    first = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False)
    second = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False)
    first.add([node("one")])
    first.persist(str(folder / STORE_FILE))
    first.add([node("two")])
    first.persist(str(folder / STORE_FILE))
    second.add([node("lost")])
    with pytest.raises(StoreConflictError, match="Reload it"):
        second.persist(str(folder / STORE_FILE))
    assert set(contents(folder)) == {"first", "one", "two"}


# ---------------------------------------------------------------------------------------------------- bad entries


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"id_": "b", "text": "bad\udcff"}, r"\[1\] \(id 'b'\): the text holds a lone surrogate"),
        ({"id_": "b", "text": " \t "}, r"\[1\] \(id 'b'\): the text is empty or whitespace only"),
        ({"id_": "b\udcff", "text": "fine"}, r"\[1\] \(id 'b\\udcff'\): the id holds a lone surrogate"),
        ({"id_": "", "text": "fine"}, r"\[1\] \(id ''\): the id is empty"),
        ({"id_": "b", "text": "fine", "metadata": {"k": ["\udcff"]}}, r"metadata\['k'\]\[0\] holds a lone surrogate"),
    ],
)
def test_bad_nodes_are_refused_with_position_and_id(tmp_path: Path, fields: dict, message: str) -> None:
    store = FairFaissVectorStore.create(dim=DIM, gpu=False)
    bad = TextNode(**fields, embedding=[1.0] * DIM)
    with pytest.raises(ValueError, match=message):
        store.add([node("fine"), bad])
    assert store.node_ids == []
    store.persist(str(tmp_path / STORE_FILE))
