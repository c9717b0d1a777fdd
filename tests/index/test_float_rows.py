"""FloatRows: float32 rows by id in an append-only memory-mapped file; discards, compaction, writing and rebasing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fair_retrieval.index.float_rows import FIRST_CAPACITY, FloatRows


def vectors(count: int, dim: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(count, dim)).astype(np.float32)


def test_rows_grow_past_the_first_capacity_and_read_back_exactly_in_the_order_asked(tmp_path: Path) -> None:
    rows = FloatRows(8, spill_dir=tmp_path)
    data = vectors(3 * FIRST_CAPACITY)
    rows.append(np.arange(0, 2 * FIRST_CAPACITY), data[: 2 * FIRST_CAPACITY])
    rows.append(np.arange(2 * FIRST_CAPACITY, 3 * FIRST_CAPACITY), data[2 * FIRST_CAPACITY :])
    assert len(rows) == 3 * FIRST_CAPACITY and len(list(tmp_path.iterdir())) == 1  # one working file, grown
    asked = np.array([2500, 3, 1100, 3])
    np.testing.assert_array_equal(rows.get(asked), data[asked])
    assert rows.memory_bytes < 16 * 3 * FIRST_CAPACITY  # ids and flags only: the vectors stay on disk


def test_discarded_rows_are_refused_then_dropped_by_compaction(tmp_path: Path) -> None:
    rows = FloatRows(8, spill_dir=tmp_path)
    data = vectors(100)
    rows.append(np.arange(0, 200, 2), data)  # ids need not be contiguous, only ascending
    rows.discard(np.array([0, 10]))
    assert (len(rows), rows.dead, rows.rows) == (98, 2, 100)
    with pytest.raises(ValueError, match="no stored vector"):
        rows.get([10])
    with pytest.raises(ValueError, match="no stored vector"):
        rows.get([3])  # never stored
    old_file = next(tmp_path.iterdir())
    rows.compact()
    assert (len(rows), rows.dead, rows.rows) == (98, 0, 98)
    assert not old_file.exists() and len(list(tmp_path.iterdir())) == 1
    np.testing.assert_array_equal(rows.get([198, 2]), data[[99, 1]])
    np.testing.assert_array_equal(rows.live_ids, np.setdiff1d(np.arange(0, 200, 2), [0, 10]))


def test_write_then_rebase_makes_the_written_file_the_rows_and_drops_the_working_file(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    rows = FloatRows(8, spill_dir=spill)
    data = vectors(50)
    rows.append(np.arange(50), data)
    rows.discard(np.array([7]))
    path = tmp_path / "rows.f32"
    with open(path, "wb") as handle:
        ids = rows.write(handle)
    assert path.stat().st_size == 49 * 8 * 4
    rows.rebase(np.memmap(path, dtype="<f4", mode="r", shape=(49, 8)), ids)
    assert list(spill.iterdir()) == []
    np.testing.assert_array_equal(rows.get([8, 0]), data[[8, 0]])
    rows.append(np.array([50]), vectors(1, seed=1))  # appends go to a new working file, the written one is not touched
    assert path.stat().st_size == 49 * 8 * 4
    np.testing.assert_array_equal(rows.get([50, 49]), np.vstack([vectors(1, seed=1), data[49:]]))
    with pytest.raises(ValueError, match="48 ids"):
        rows.rebase(np.memmap(path, dtype="<f4", mode="r", shape=(49, 8)), ids[:48])


def test_ids_must_ascend_and_nothing_is_written_otherwise(tmp_path: Path) -> None:
    rows = FloatRows(8, spill_dir=tmp_path)
    rows.append(np.array([5, 6]), vectors(2))
    for bad in (np.array([6, 7]), np.array([9, 8])):
        with pytest.raises(ValueError, match="ascend past the largest id stored"):
            rows.append(bad, vectors(2, seed=2))
    assert len(rows) == 2
    with pytest.raises(ValueError, match="dim must be a positive int"):
        FloatRows(0)


def test_the_ids_of_removed_last_rows_may_be_given_again(tmp_path: Path) -> None:
    rows = FloatRows(8, spill_dir=tmp_path)
    rows.append(np.arange(5), vectors(5))
    rows.discard(np.array([1, 3, 4]))
    with pytest.raises(ValueError, match=r"ascend past the largest id stored \(2\)"):
        rows.append(np.array([2, 5]), vectors(2, seed=1))  # 2 is live
    again = vectors(2, seed=2)
    rows.append(np.array([3, 4]), again)  # the dead rows of 3 and 4 are dropped, 1's stays until compaction
    assert (len(rows), rows.dead, rows.rows) == (4, 1, 5)
    np.testing.assert_array_equal(rows.get([4, 3, 0]), np.vstack([again[1], again[0], vectors(5)[0]]))
    np.testing.assert_array_equal(rows.live_ids, [0, 2, 3, 4])


def test_the_ids_of_removed_last_rows_of_a_saved_file_may_be_given_again(tmp_path: Path) -> None:
    rows = FloatRows(8, spill_dir=tmp_path / "spill")
    data = vectors(4)
    path = tmp_path / "rows.f32"
    rows.append(np.arange(4), data)
    with open(path, "wb") as handle:
        ids = rows.write(handle)
    rows.rebase(np.memmap(path, dtype="<f4", mode="r", shape=(4, 8)), ids)
    rows.discard(np.array([3]))
    rows.append(np.array([3]), vectors(1, seed=5))  # the saved file is not written: the live rows move first
    np.testing.assert_array_equal(rows.get([0, 1, 2, 3]), np.vstack([data[:3], vectors(1, seed=5)]))
    np.testing.assert_array_equal(np.memmap(path, dtype="<f4", mode="r", shape=(4, 8)), data)


def test_the_working_file_is_deleted_with_the_object(tmp_path: Path) -> None:
    rows = FloatRows(8, spill_dir=tmp_path)
    rows.append(np.arange(3), vectors(3))
    assert len(list(tmp_path.iterdir())) == 1
    del rows
    assert list(tmp_path.iterdir()) == []
