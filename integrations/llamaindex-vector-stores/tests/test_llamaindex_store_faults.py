"""SIGKILL anywhere in FairFaissVectorStore.persist leaves the old store or the new one, whole.

Same method as tests/test_faults.py and the LangChain store's test_store_faults.py: a child forked from a
forkserver persists over an existing store and stops at the k-th file operation (every os.replace / os.rename /
os.fsync / os.unlink, and faiss' write of index.faiss, left half-written), for every k of a full persist; it is
SIGKILLed there and the folder must load as the old store or the new one. Random vectors: no model is needed.
"""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.vector_stores.fair import FairFaissVectorStore

from tests.fault_injection import Interruption, forkserver_context, run_child

faiss = pytest.importorskip("faiss")

DIM = 8
STORE_FILE = "default__vector_store.json"


def build_store(version: int) -> FairFaissVectorStore:
    """Version v: 10 + 5·v nodes stamped with v, with random unit vectors drawn from seed v."""
    count = 10 + 5 * version
    vectors = np.random.default_rng(version).standard_normal((count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    store = FairFaissVectorStore.create(dim=DIM, gpu=False)
    nodes = [
        TextNode(id_=f"v{version}-{i}", text=f"node {i} of version {version}", metadata={"v": version}, embedding=v)
        for i, v in enumerate(vectors.tolist())
    ]
    store.add(nodes)
    return store


def store_version(folder: Path) -> int:
    """The version the persisted store holds, after checking that it is that version whole."""
    loaded = FairFaissVectorStore.from_persist_dir(str(folder), gpu=False)
    version = (len(loaded.node_ids) - 10) // 5
    expected = build_store(version)
    assert loaded.node_ids == expected.node_ids
    assert loaded.index is not None and len(loaded.index) == len(expected.node_ids)
    assert {node.metadata["v"] for node in loaded.get_nodes()} == {version}
    for seed in (10, 11):
        query = VectorStoreQuery(
            query_embedding=np.random.default_rng(seed).standard_normal(DIM).tolist(), similarity_top_k=4
        )
        got, want = loaded.query(query), expected.query(query)
        assert got.ids == want.ids
        np.testing.assert_allclose(got.similarities or [], want.similarities or [], atol=1e-6)
    return version


def persist_child(folder: str, version: int, pause_at: int | None, marker: str) -> None:
    store = build_store(version)
    with Interruption(pause_at, Path(marker)).installed():
        store.persist(os.path.join(folder, STORE_FILE), overwrite=True)


@pytest.fixture(scope="module")
def forkserver() -> multiprocessing.context.BaseContext:
    return forkserver_context()


def test_sigkill_anywhere_in_persist_leaves_the_old_or_the_new_store(forkserver: Any, tmp_path: Path) -> None:
    dry = tmp_path / "dry"
    build_store(1).persist(str(dry / STORE_FILE))
    with Interruption().installed() as counter:
        persist_child(str(dry), 2, None, "")
    assert counter.events >= 3, "persist no longer goes through the hooked file operations"
    seen: dict[int, set[str]] = {}
    for pause_at in range(1, counter.events + 2):  # the last one is past the end: the persist finishes
        folder = tmp_path / f"at-{pause_at}"
        build_store(1).persist(str(folder / STORE_FILE))
        marker = tmp_path / f"at-{pause_at}.marker"
        outcome = run_child(forkserver, persist_child, str(folder), 2, pause_at, str(marker), marker=marker)
        seen.setdefault(store_version(folder), set()).add(outcome)
    assert set(seen) == {1, 2}, seen
    assert "killed" in seen[2], seen  # killed after the commit, among the renames: the new store

    folder = tmp_path / "at-1"  # the next persist finishes or removes what the killed one left
    build_store(3).persist(str(folder / STORE_FILE), overwrite=True)
    assert store_version(folder) == 3
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == sorted(
        [STORE_FILE, "default__vector_store.index/index.faiss", "default__vector_store.index/index.json"]
    )


@pytest.mark.parametrize("edit", ["byte", "swap", "half"])
def test_a_damaged_store_file_is_refused_naming_it(tmp_path: Path, edit: str) -> None:
    """The JSON file is checked against the size and CRC-32 the index folder's record keeps for it: a changed byte
    in a node's text, two nodes' vectors swapped, or a truncation are refused, naming the file."""
    import json

    from llama_index.vector_stores.fair import DamagedFileError

    build_store(1).persist(str(tmp_path / STORE_FILE))
    path = tmp_path / STORE_FILE
    if edit == "byte":
        raw = bytearray(path.read_bytes())
        raw[raw.index(b"node 3 of") + 5] = ord("9")
        path.write_bytes(bytes(raw))
    elif edit == "swap":
        state = json.loads(path.read_text())
        first, second = state["nodes"][0], state["nodes"][1]
        first["int_id"], second["int_id"] = second["int_id"], first["int_id"]
        path.write_text(json.dumps(state))
    else:
        path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(DamagedFileError, match=rf"{STORE_FILE} is damaged.*Rebuild the store") as caught:
        FairFaissVectorStore.from_persist_dir(str(tmp_path), gpu=False)
    assert caught.value.path == path
