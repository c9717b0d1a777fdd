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


def segment(path: Path, rows: FloatRows, start: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Write the live rows from `start` on as the segment `path`: (its rows mapped, their ids)."""
    with open(path, "wb") as handle:
        ids = rows.write_rows(handle, start)
    return np.memmap(path, dtype="<f4", mode="r", shape=(ids.size, rows.dim)), ids


def test_write_then_rebase_makes_the_written_segment_the_rows_and_drops_the_working_file(tmp_path: Path) -> None:
    spill = tmp_path / "spill"
    rows = FloatRows(8, spill_dir=spill)
    data = vectors(50)
    rows.append(np.arange(50), data)
    rows.discard(np.array([7]))
    path = tmp_path / "rows.seg"
    mapped, ids = segment(path, rows)
    assert path.stat().st_size == 49 * (8 * 4 + 8)  # the rows, then their ids
    np.testing.assert_array_equal(np.fromfile(path, dtype="<i8", offset=49 * 8 * 4), np.setdiff1d(np.arange(50), [7]))
    rows.rebase([("rows.seg", mapped)], ids)
    assert list(spill.iterdir()) == [] and rows.segments == [("rows.seg", 49)]
    np.testing.assert_array_equal(rows.get([8, 0]), data[[8, 0]])
    rows.append(np.array([50]), vectors(1, seed=1))  # appends go to a new working file, the segment is not touched
    assert path.stat().st_size == 49 * (8 * 4 + 8)
    np.testing.assert_array_equal(rows.get([50, 49]), np.vstack([vectors(1, seed=1), data[49:]]))
    with pytest.raises(ValueError, match="48 ids"):
        rows.rebase([("rows.seg", mapped)], ids[:48])


def test_rows_read_across_several_segments_and_the_tail_and_replace_keeps_the_first(tmp_path: Path) -> None:
    rows = FloatRows(8, spill_dir=tmp_path / "spill")
    data = vectors(30)
    rows.append(np.arange(10), data[:10])
    first, first_ids = segment(tmp_path / "a.seg", rows)
    rows.rebase([("a.seg", first)], first_ids)
    rows.append(np.arange(10, 20), data[10:20])
    second, second_ids = segment(tmp_path / "b.seg", rows, start=rows.segment_starts[1])
    rows.replace_segments(1, [("b.seg", second)], second_ids)
    assert rows.segments == [("a.seg", 10), ("b.seg", 10)] and rows.segment_starts == [0, 10, 20]
    rows.discard(np.array([3, 15]))
    rows.append(np.arange(20, 30), data[20:])
    wanted = np.array([29, 0, 14, 9, 10, 21])
    np.testing.assert_array_equal(rows.get(wanted), data[wanted])
    assert rows.live_from(10) == 19 and rows.live_from(20) == 10
    merged, merged_ids = segment(tmp_path / "c.seg", rows, start=rows.segment_starts[1])  # b and the tail as one
    rows.replace_segments(1, [("c.seg", merged)], merged_ids)
    assert rows.segments == [("a.seg", 10), ("c.seg", 19)] and (len(rows), rows.dead) == (28, 1)
    np.testing.assert_array_equal(rows.live_ids, np.setdiff1d(np.arange(30), [3, 15]))
    np.testing.assert_array_equal(rows.get(rows.live_ids), data[rows.live_ids])


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
    path = tmp_path / "rows.seg"
    rows.append(np.arange(4), data)
    mapped, ids = segment(path, rows)
    rows.rebase([("rows.seg", mapped)], ids)
    rows.discard(np.array([3]))
    rows.append(np.array([3]), vectors(1, seed=5))  # the segment is not written: the live rows move first
    np.testing.assert_array_equal(rows.get([0, 1, 2, 3]), np.vstack([data[:3], vectors(1, seed=5)]))
    np.testing.assert_array_equal(np.memmap(path, dtype="<f4", mode="r", shape=(4, 8)), data)
    assert rows.segments == []


def test_the_working_file_is_deleted_with_the_object(tmp_path: Path) -> None:
    rows = FloatRows(8, spill_dir=tmp_path)
    rows.append(np.arange(3), vectors(3))
    assert len(list(tmp_path.iterdir())) == 1
    del rows
    assert list(tmp_path.iterdir()) == []
