"""A window table of format version 1 (`windows.json` listing every window, as releases before format version 2
saved it: the folder in tests/fixtures/multivector_v1) whose recorded numbers were crafted: a counter far beyond the
windows listed, numbers that overflow int64, floats, negatives, counts that do not add up. Each is refused with a
`DamagedFileError` naming the file and the field before anything is sized by it; a table as saved is read back
exactly."""

from __future__ import annotations

import json
import shutil
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval import MultiVectorIndex
from fair_retrieval.index.window_table import END, MAX_REMOVED_PER_WINDOW, REMOVED_SLACK, START, WEIGHT, WindowTable
from fair_retrieval.jsonio import DamagedFileError
from tests.test_crafted_folders import entry, reseal

pytest.importorskip("faiss")

PATH = Path("folder/windows.json")
PEAK_BYTES = 16 << 20
"""What reading a crafted table may allocate at most (a few windows are listed)."""


LEGACY = Path(__file__).resolve().parents[1] / "fixtures" / "multivector_v1" / "index"
"""A folder saved by the release before format version 2 (some documents removed, one added again)."""


def saved_table() -> tuple[dict[str, Any], np.ndarray]:
    """A saved table's content (some windows removed) and the window ids its windows index holds."""
    table = json.loads((LEGACY / "windows.json").read_text())
    return table, np.asarray(table["window_ids"], dtype=np.int64)


def listed(table: WindowTable, like: dict[str, Any]) -> dict[str, Any]:
    """What a format-version-1 file would list for `table` (with the settings of `like`)."""
    documents = table.order()
    window_ids = table.window_ids(documents)
    return {
        **{key: like[key] for key in ("format", "version", "aggregate", "fetch_factor")},
        "next_window": table.size,
        "documents": documents.tolist(),
        "windows": table.ranges(documents)[1].tolist(),
        "window_ids": window_ids.tolist(),
        "starts": table.column(START, window_ids).tolist(),
        "ends": table.column(END, window_ids).tolist(),
        "weights": table.column(WEIGHT, window_ids).tolist(),
    }


def read(table: dict[str, Any], stored: np.ndarray, *, bounded: bool = True) -> WindowTable:
    """`WindowTable.from_json` on `table`, its allocations bounded (unless not `bounded`)."""
    if not bounded:
        return WindowTable.from_json(json.dumps(table).encode(), PATH, stored)[0]
    tracemalloc.start()
    try:
        read_table, _ = WindowTable.from_json(json.dumps(table).encode(), PATH, stored)
        return read_table
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        assert peak < PEAK_BYTES, peak


def test_a_table_as_saved_is_read_back_exactly() -> None:
    table, stored = saved_table()
    again = read(table, stored)
    assert listed(again, table) == table
    assert (again.owner == -1).sum() == table["next_window"] - len(table["window_ids"])  # the removed slots


@pytest.mark.parametrize("value", [2**25, 10**30, 2**63, -1, 1e308, 2.0, "7", None, True])
def test_a_crafted_counter_is_refused_before_anything_is_allocated(value: Any) -> None:
    table, stored = saved_table()
    table["next_window"] = value
    with pytest.raises(DamagedFileError, match=r"windows\.json is damaged.*'next_window'"):
        read(table, stored)


def test_the_counter_may_keep_removed_slots_up_to_its_documented_bound() -> None:
    table, stored = saved_table()
    most = MAX_REMOVED_PER_WINDOW * len(stored) + REMOVED_SLACK
    table["next_window"] = most
    assert len(read(table, stored, bounded=False).owner) == most
    table["next_window"] = most + 1
    with pytest.raises(DamagedFileError, match=f"'next_window' {most + 1} is not an integer"):
        read(table, stored)
    table["next_window"] = max(stored.tolist())  # an id at or past the counter
    with pytest.raises(DamagedFileError, match="one past its highest window id"):
        read(table, stored)


@pytest.mark.parametrize("field", ["window_ids", "starts", "ends", "weights", "documents", "windows"])
@pytest.mark.parametrize("value", [10**30, 2**63, 1e308, -1, float("inf")])
def test_overflowing_or_non_integer_numbers_are_refused_naming_the_field(field: str, value: Any) -> None:
    table, stored = saved_table()
    table[field][0] = value
    with pytest.raises(DamagedFileError, match=rf"windows\.json is damaged.*'{field}'"):
        read(table, stored)


@pytest.mark.parametrize("value", [0, 2**63, 1e308, -1])
def test_a_crafted_fetch_factor_is_refused_naming_it(value: Any) -> None:
    table, stored = saved_table()
    table["fetch_factor"] = value
    with pytest.raises(DamagedFileError, match="'fetch_factor'"):
        read(table, stored)


def test_counts_that_do_not_add_up_are_refused() -> None:
    table, stored = saved_table()
    table["windows"][0] += 1
    with pytest.raises(DamagedFileError, match=r"'windows'.*do not match"):
        read(table, stored)


def test_a_saved_folder_with_a_crafted_counter_is_refused_on_load(tmp_path: Path) -> None:
    shutil.copytree(LEGACY, tmp_path / "index")
    path = tmp_path / "index" / "windows.json"
    table = json.loads(path.read_text())
    assert listed(MultiVectorIndex.load(tmp_path / "index", gpu=False)._table, table) == table
    table["next_window"] = 2**25
    path.write_text(json.dumps(table))
    reseal(
        tmp_path / "index" / "index.json",
        lambda record: record["publication"]["files"].update({"windows.json": entry(path)}),
    )
    with pytest.raises(DamagedFileError, match=r"windows\.json is damaged.*'next_window' 33554432"):
        MultiVectorIndex.load(tmp_path / "index", gpu=False)
