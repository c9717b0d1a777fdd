"""SIGKILL anywhere in FairFaissVectorStore.persist leaves the old store or the new one, whole.

Same method as tests/test_faults.py and the LangChain store's test_store_faults.py: a child forked from a
forkserver persists over an existing store and stops at the k-th file operation (every os.replace / os.rename /
os.fsync / os.unlink, and faiss' write of index.faiss, left half-written), for every k of a full persist; it is
SIGKILLed there and the folder must load as the old store or the new one. Random vectors: no model is needed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.embeddings.fair import FairFaissVectorStore

faiss = pytest.importorskip("faiss")

PRELOAD = ["numpy", "faiss", "fair_retrieval.index", "llama_index.core.schema", "llama_index.embeddings.fair"]
CHILD_TIMEOUT_S = 120.0
DIM = 8
STORE_FILE = "default__vector_store.json"


class Interruption:
    """Counts the file operations of a persist and, at the `pause_at`-th, writes `marker` and waits to be killed."""

    def __init__(self, pause_at: int | None = None, marker: Path | None = None) -> None:
        self.pause_at, self.marker, self.events = pause_at, marker, 0

    def _event(self) -> bool:
        self.events += 1
        return self.events == self.pause_at

    def _pause(self) -> None:
        assert self.marker is not None
        self.marker.write_text(str(self.events))
        time.sleep(CHILD_TIMEOUT_S)  # the parent kills us here
        os._exit(3)  # pragma: no cover - never killed: the parent failed already

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interruption]:
        originals = {name: getattr(os, name) for name in ("replace", "rename", "fsync", "unlink")}
        write_index = faiss.write_index

        def wrap(name: str) -> Callable[..., Any]:
            def operation(*args: Any, **kwargs: Any) -> Any:
                if self._event():
                    self._pause()
                return originals[name](*args, **kwargs)

            return operation

        def partial_write(index: Any, path: Any) -> None:
            write_index(index, path)
            if self._event():
                with open(path, "r+b") as handle:
                    handle.truncate(os.path.getsize(path) // 2)
                self._pause()

        for name in originals:
            setattr(os, name, wrap(name))
        faiss.write_index = partial_write
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(os, name, original)
            faiss.write_index = write_index


@pytest.fixture(scope="module")
def forkserver() -> multiprocessing.context.BaseContext:
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def run_child(context: Any, target: Callable[..., None], *args: Any, marker: Path) -> str:
    """Run `target(*args)` in a child; SIGKILL it once it wrote `marker`. Returns "killed" or "finished"."""
    process = context.Process(target=target, args=args)
    process.start()
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not marker.exists() and process.is_alive():
        if time.monotonic() > deadline:
            os.kill(process.pid, signal.SIGKILL)
            pytest.fail(f"the child did not reach its interruption point in {CHILD_TIMEOUT_S} s")
        time.sleep(0.005)
    if marker.exists():
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        assert process.exitcode == -signal.SIGKILL
        return "killed"
    process.join()
    assert process.exitcode == 0, f"the child failed (exit code {process.exitcode})"
    return "finished"


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
        store.persist(os.path.join(folder, STORE_FILE))


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
    build_store(3).persist(str(folder / STORE_FILE))
    assert store_version(folder) == 3
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == sorted(
        [STORE_FILE, "default__vector_store.index/index.faiss", "default__vector_store.index/index.json"]
    )
