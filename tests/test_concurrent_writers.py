"""Concurrent writers of one FaissIndex folder and of one CLI index folder: 3 processes × 10 load → add → save
cycles, retrying on StoreConflictError, lose no save, also with one writer SIGKILLed in the middle of a save; a save
over a newer generation is refused; a store save takes the folder lock before it stages its files."""

from __future__ import annotations

import os
import zlib
from pathlib import Path

import numpy as np
import pytest

from fair_retrieval import FaissIndex
from fair_retrieval.cli.index_folder import publish
from fair_retrieval.jsonio import lock_folder, record_generation
from fair_retrieval.stores import StoreConflictError
from fair_retrieval.stores import files as store_files
from tests.concurrency import expected_keys, run_writers
from tests.fault_injection import forkserver_context

pytest.importorskip("faiss")

DIM = 4


def key_id(key: str) -> int:
    return zlib.crc32(key.encode())


def vector(key: str) -> np.ndarray:
    return np.random.default_rng(key_id(key)).standard_normal((1, DIM)).astype(np.float32)


def add_one(folder: str, key: str) -> None:
    """One writer's cycle on a bare FaissIndex folder: load, add the vector of `key` under its id, save."""
    index = FaissIndex.load(folder, gpu=False)
    index.add(vector(key), ids=[key_id(key)])
    index.save(folder)


def start(folder: Path) -> None:
    index = FaissIndex(DIM, gpu=False)
    index.add(vector("first"), ids=[key_id("first")])
    index.save(folder)


def held_ids(folder: Path) -> set[int]:
    return set(FaissIndex.load(folder, gpu=False).ids.tolist())


def test_concurrent_index_writers_lose_no_save(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    start(folder)
    saved, _ = run_writers(forkserver_context(), add_one, folder)
    assert saved == expected_keys()
    assert held_ids(folder) == {key_id(key) for key in expected_keys() | {"first"}}
    loaded = FaissIndex.load(folder, gpu=False)
    for key in sorted(saved)[:5]:
        np.testing.assert_allclose(loaded.get_vectors([key_id(key)]), vector(key), atol=1e-6)


def test_an_index_writer_killed_mid_save_loses_no_other_save(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    start(folder)
    saved, in_flight = run_writers(forkserver_context(), add_one, folder, kill=(2, 2))
    held = held_ids(folder)
    assert {key_id(key) for key in saved} <= held <= {key_id(key) for key in saved | in_flight | {"first"}}
    assert len(saved) == 25


def test_an_index_save_over_a_newer_generation_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    start(folder)
    first, second = FaissIndex.load(folder, gpu=False), FaissIndex.load(folder, gpu=False)
    first.add(vector("one"), ids=[1])
    first.save(folder)
    first.add(vector("two"), ids=[2])
    first.save(folder)  # its own save is no conflict
    second.add(vector("lost"), ids=[3])
    with pytest.raises(StoreConflictError, match=r"after this FaissIndex was loaded.*Reload it"):
        second.save(folder)
    assert held_ids(folder) == {key_id("first"), 1, 2}
    second.save(tmp_path / "elsewhere")  # another folder: no conflict
    assert held_ids(tmp_path / "elsewhere") == {key_id("first"), 3}


def test_a_publication_over_a_newer_index_folder_is_refused(tmp_path: Path) -> None:
    """`fair-retrieval index` remembers the generation of --output when it starts; a run that published meanwhile
    makes its publication fail instead of replacing that run's index unseen."""
    output, staging = tmp_path / "out", tmp_path / "staging"
    start(output)
    base = record_generation(output / "index.json")
    start(tmp_path / "other")
    FaissIndex.load(tmp_path / "other", gpu=False).save(output, overwrite=True)  # another run published meanwhile
    start(staging)
    with pytest.raises(StoreConflictError, match=r"another `fair-retrieval index` run.*Run the command again"):
        publish(staging, output, base=(base,))
    publish(staging, output, base=(record_generation(output / "index.json"),))


def test_a_store_save_locks_its_folder_before_it_stages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store file is staged only once the folder lock is held: a writer that holds the lock sees no staged file
    of another writer (which its leftover clean-up would delete)."""
    store_file, index_folder = tmp_path / "store.json", tmp_path / "index"
    order: list[str] = []
    original_lock, original_stage = store_files.lock_folder, store_files.write_temporary

    def lock(folder: Path, **kwargs: object) -> int | None:
        order.append("lock")
        return original_lock(folder)

    def stage(path: Path, data: bytes) -> Path:
        order.append("stage")
        return original_stage(path, data)

    monkeypatch.setattr(store_files, "lock_folder", lock)
    monkeypatch.setattr(store_files, "write_temporary", stage)
    index = FaissIndex(DIM, gpu=False)
    index.add(vector("a"), ids=[1])
    store_files.save_store_file(store_file, b'{"n": 1}', index, index_folder)
    assert order == ["lock", "stage"]
    descriptor = lock_folder(tmp_path, wait=False)  # released again once the save returned
    assert descriptor is not None
    os.close(descriptor)
