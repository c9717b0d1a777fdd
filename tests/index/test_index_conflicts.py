"""A fresh index never silently replaces a saved one: `FaissIndex.save` / `MultiVectorIndex.save` of an index built
in memory into a folder that holds an index is a `StoreConflictError` unless `overwrite=True`; an index loaded from
the folder, or saved there before, is checked by generation instead."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from fair_retrieval import FaissIndex, MultiVectorIndex
from fair_retrieval.jsonio import StoreConflictError
from tests.index.test_multivector import random_windows

pytest.importorskip("faiss")


def fresh(count: int, seed: int = 0) -> FaissIndex:
    index = FaissIndex(8, gpu=False)
    index.add(np.random.default_rng(seed).standard_normal((count, 8)).astype(np.float32))
    return index


def test_a_fresh_index_over_a_saved_one_is_refused_unless_asked(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    first = fresh(3)
    first.save(folder)
    with pytest.raises(StoreConflictError, match=r"already holds a saved FaissIndex.*overwrite=True"):
        fresh(5, seed=1).save(folder)
    assert len(FaissIndex.load(folder, gpu=False)) == 3  # nothing was written
    os.symlink(folder, tmp_path / "alias")
    with pytest.raises(StoreConflictError):
        fresh(5, seed=1).save(tmp_path / "alias")  # the same folder under another name
    first.add(np.ones((1, 8), dtype=np.float32))
    first.save(folder)  # saved there before: its own next save goes on
    assert len(FaissIndex.load(folder, gpu=False)) == 4
    fresh(5, seed=1).save(folder, overwrite=True)
    assert len(FaissIndex.load(folder, gpu=False)) == 5
    with pytest.raises(StoreConflictError, match="another writer"):
        first.save(folder)  # the folder moved on since `first` saved it


def test_two_writers_that_start_from_nothing_lose_no_save(tmp_path: Path) -> None:
    folder = tmp_path / "index"
    a, b = FaissIndex(8, gpu=False), FaissIndex(8, gpu=False)  # both found no index there
    a.add(np.full((1, 8), 1.0, dtype=np.float32))
    b.add(np.full((1, 8), 2.0, dtype=np.float32))
    a.save(folder)
    with pytest.raises(StoreConflictError):
        b.save(folder)  # would erase a's acknowledged save
    b = FaissIndex.load(folder, gpu=False)  # the documented retry: load, redo the change, save
    b.add(np.full((1, 8), 2.0, dtype=np.float32))
    b.save(folder)
    assert len(FaissIndex.load(folder, gpu=False)) == 2


def test_a_multi_vector_index_is_checked_the_same(tmp_path: Path) -> None:
    folder = tmp_path / "mv"
    windows = random_windows(4, dim=8)
    index = MultiVectorIndex(8)
    index.add(windows)
    index.save(folder)
    other = MultiVectorIndex(8)
    other.add(random_windows(2, dim=8, seed=3))
    with pytest.raises(StoreConflictError, match="already holds a saved FaissIndex"):
        other.save(folder)
    assert len(MultiVectorIndex.load(folder, gpu=False)) == 4
    other.save(folder, overwrite=True)
    assert len(MultiVectorIndex.load(folder, gpu=False)) == 2
