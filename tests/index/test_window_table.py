"""The window table in numpy arrays and its files (`windows.json` header, `windows.npy`, `document_windows.npy`):
a save/load round trip gives back every span, weight, id and search result; a folder of format version 1 (saved by
the release before: tests/fixtures/multivector_v1) loads as it was saved and is written in the current format on the
next save; the arrays are memory-mapped copy-on-write; damaged or crafted files (wrong lengths, huge claimed sizes,
owners out of range, runs that overlap) are refused naming the file before anything is sized by them."""

from __future__ import annotations

import io
import json
import shutil
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval import MultiVectorIndex
from fair_retrieval.index.window_table import FORMAT, OWNER, VERSION, WindowTable
from fair_retrieval.jsonio import DamagedFileError
from tests.index.test_multivector import random_windows
from tests.test_crafted_folders import bounded, entry, reseal

pytest.importorskip("faiss")

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "multivector_v1"
"""A folder saved by the release before format version 2 (ids 100..111, 103 and 106 removed, then 103, 200 and 5
added: 13 documents, 40 of 50 window slots live), the queries and what that release served for them."""
PEAK_BYTES = 16 << 20
"""What loading a crafted table may allocate at most (the table holds a few hundred windows)."""


def served(index: MultiVectorIndex, queries: np.ndarray) -> dict[str, Any]:
    """Everything a multi-vector index gives back about its documents, as plain values."""
    return {
        "ids": index.ids.tolist(),
        "window_count": index.window_count,
        "spans": {str(i): [list(span) for span in index.window_spans(int(i))] for i in index.ids},
        "weights": {str(i): index.window_weights(int(i)) for i in index.ids},
        "hits": [
            [[hit.id, hit.score, hit.window, list(hit.span)] for hit in index.search_documents(query, 5)]
            for query in queries
        ],
    }


def built(aggregate: str = "max") -> MultiVectorIndex:
    """An index after many small adds (several sorted runs), removals and an id added again."""
    index = MultiVectorIndex(16, aggregate=aggregate, gpu=False)  # type: ignore[arg-type]
    for step in range(12):
        index.add(random_windows(7, seed=step), ids=np.arange(7) * 12 + step)
    index.remove([0, 13, 50, 83])
    index.add(random_windows(2, seed=40), ids=[13, 1000])
    return index


def queries(count: int = 6, seed: int = 3) -> np.ndarray:
    rng = np.random.default_rng(seed)
    found = rng.normal(size=(count, 16)).astype(np.float32)
    return found / np.linalg.norm(found, axis=1, keepdims=True)


# ------------------------------------------------------------------------------------------------ round trips


@pytest.mark.parametrize("aggregate", ["max", "top2", "max-mean"])
def test_a_save_and_load_give_back_every_span_weight_id_and_hit(tmp_path: Path, aggregate: str) -> None:
    index = built(aggregate)
    before = served(index, queries())
    index.save(tmp_path / "mv")
    loaded = MultiVectorIndex.load(tmp_path / "mv", gpu=False)
    assert served(loaded, queries()) == before
    assert 13 in loaded and 0 not in loaded and -1 not in loaded and 2**70 not in loaded and "13" not in loaded
    allowed = [1000, 13, 25, 61]
    assert loaded.search_documents(queries()[0], 3, ids=allowed) == index.search_documents(queries()[0], 3, ids=allowed)
    np.testing.assert_array_equal(loaded.get_vectors([13, 25]), index.get_vectors([13, 25]))
    # changed after loading, then saved and loaded again: as the same changes in memory
    for each in (index, loaded):
        each.remove([25, 1000])
        each.add(random_windows(3, seed=77))
    assert served(loaded, queries()) == served(index, queries())
    loaded.save(tmp_path / "mv")
    assert served(MultiVectorIndex.load(tmp_path / "mv", gpu=False), queries()) == served(index, queries())


def test_the_files_are_a_small_header_and_two_int64_arrays(tmp_path: Path) -> None:
    index = built()
    index.save(tmp_path / "mv")
    header = json.loads((tmp_path / "mv" / "windows.json").read_text())
    table = index._table
    assert header == {
        "format": FORMAT,
        "version": VERSION,
        "aggregate": "max",
        "fetch_factor": 2,
        "next_window": table.size,
        "windows": index.window_count,
        "documents": len(index),
    }
    rows = np.load(tmp_path / "mv" / "windows.npy")
    assert rows.dtype == np.int64 and rows.shape == (4, table.size)
    np.testing.assert_array_equal(rows[OWNER], table.owner)
    documents = np.load(tmp_path / "mv" / "document_windows.npy")
    assert documents.shape == (3, len(index)) and documents[0].tolist() == sorted(index.ids.tolist())
    listed = json.loads((tmp_path / "mv" / "index.json").read_text())["publication"]["files"]
    assert {"windows.json", "windows.npy", "document_windows.npy", "index.faiss"} <= set(listed)


def test_a_loaded_table_is_memory_mapped_and_a_removal_leaves_the_saved_files_alone(tmp_path: Path) -> None:
    index = built()
    index.save(tmp_path / "mv")
    saved = (tmp_path / "mv" / "windows.npy").read_bytes()
    loaded = MultiVectorIndex.load(tmp_path / "mv", gpu=False)
    assert isinstance(loaded._table._columns, np.memmap)
    assert loaded.remove([13, 25]) == 2 and 13 not in loaded
    assert (tmp_path / "mv" / "windows.npy").read_bytes() == saved  # copy-on-write: private pages
    assert 13 in MultiVectorIndex.load(tmp_path / "mv", gpu=False)


def test_an_empty_index_round_trips(tmp_path: Path) -> None:
    MultiVectorIndex(16, gpu=False).save(tmp_path / "mv")
    loaded = MultiVectorIndex.load(tmp_path / "mv", gpu=False)
    assert len(loaded) == 0 and loaded.window_count == 0 and loaded.ids.tolist() == []
    assert loaded.add(random_windows(2)).tolist() == [0, 1] and loaded.window_spans(1)


# ------------------------------------------------------------------------------------------------ format version 1


def test_a_folder_of_format_version_1_loads_and_is_saved_again_in_the_current_format(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE / "index", tmp_path / "mv")
    expected = json.loads((FIXTURE / "expected.json").read_text())
    asked = np.load(FIXTURE / "queries.npy")
    loaded = MultiVectorIndex.load(tmp_path / "mv", gpu=False)
    assert loaded.aggregate == "top2" and loaded.fetch_factor == 3
    assert served(loaded, asked) == expected  # exactly what the release before served
    loaded.save(tmp_path / "mv")
    assert json.loads((tmp_path / "mv" / "windows.json").read_text())["version"] == VERSION
    assert (tmp_path / "mv" / "windows.npy").is_file()
    again = MultiVectorIndex.load(tmp_path / "mv", gpu=False)
    assert served(again, asked) == expected
    assert again.add(random_windows(1, seed=5)).tolist() == [201]  # after the largest id
    assert again._table.size == 50 + len(again.window_spans(201))  # window ids continue after every slot


def test_a_version_1_table_whose_documents_windows_are_not_consecutive_is_refused() -> None:
    table = json.loads((FIXTURE / "index" / "windows.json").read_text())
    ids = table["window_ids"]
    ids[0], ids[1] = ids[1], ids[0]
    with pytest.raises(DamagedFileError, match=r"windows\.json is damaged.*not consecutive"):
        WindowTable.from_json(json.dumps(table).encode(), Path("mv/windows.json"), np.sort(np.asarray(ids)))


# ------------------------------------------------------------------------------------------------ crafted files


def crafted(folder: Path, name: str, change: Callable[[Any], Any]) -> None:
    """Change one file of a saved table (`change` takes and returns the header dict or the array) and make the
    record's checksums agree again, as an attacker who knows the format would."""
    path = folder / name
    if name.endswith(".json"):
        path.write_text(json.dumps(change(json.loads(path.read_text()))))
    else:
        changed = change(np.load(path))
        if isinstance(changed, bytes):
            path.write_bytes(changed)
        else:
            np.save(path, changed)
    reseal(folder / "index.json", lambda record: record["publication"]["files"].update({name: entry(path)}))


def npy_claiming(shape: tuple[int, ...]) -> Callable[[np.ndarray], bytes]:
    """A change that keeps an array's bytes under a header claiming another shape."""

    def change(array: np.ndarray) -> bytes:
        header = np.lib.format.header_data_from_array_1_0(array)
        header["shape"] = shape
        buffer = io.BytesIO()
        np.lib.format.write_array_header_1_0(buffer, header)
        return buffer.getvalue() + array.tobytes()

    return change


def edited(array: np.ndarray, at: tuple[Any, ...], value: Any) -> np.ndarray:
    array = array.copy()
    array[at] = value
    return array


CRAFTED: dict[str, tuple[str, Callable[[Any], Any], str]] = {
    "huge counter": ("windows.json", lambda h: {**h, "next_window": 2**40}, r"windows\.json is damaged.*'next_window'"),
    "huge window count": (
        "windows.json",
        lambda h: {**h, "windows": 2**62, "next_window": 2**62, "documents": 2**61},
        r"windows\.npy is damaged: it holds a int64 array of shape \(4, \d+\), not the int64 \(4, 46116860\d+\)",
    ),
    "more documents than windows": ("windows.json", lambda h: {**h, "documents": h["windows"] + 1}, "'documents'"),
    "negative counter": ("windows.json", lambda h: {**h, "next_window": -1}, "'next_window'"),
    "float counter": ("windows.json", lambda h: {**h, "next_window": 1e308}, "'next_window'"),
    "one document more": ("windows.json", lambda h: {**h, "documents": h["documents"] + 1}, r"document_windows\.npy"),
    "one slot more": ("windows.json", lambda h: {**h, "next_window": h["next_window"] + 1}, r"windows\.npy is damaged"),
    "shorter rows": ("windows.npy", lambda a: a[:, :-1], r"windows\.npy is damaged: it holds a int64 array of shape"),
    "three rows": ("windows.npy", lambda a: a[:3], r"windows\.npy is damaged"),
    "float rows": ("windows.npy", lambda a: a.astype(np.float64), r"windows\.npy is damaged: it holds a float64"),
    "fortran rows": ("windows.npy", np.asfortranarray, r"windows\.npy is damaged: it holds a int64 Fortran"),
    "not an array file": ("windows.npy", lambda a: b"\x00" * 300, r"windows\.npy is damaged: it is not a NumPy"),
    "owner out of range": ("windows.npy", lambda a: edited(a, (OWNER, 1), 10**9), "names document 1000000000"),
    "owner below -1": ("windows.npy", lambda a: edited(a, (OWNER, 1), -5), r"windows\.npy is damaged.*owner -5"),
    "span backwards": ("windows.npy", lambda a: edited(a, (2, 1), -1), r"windows\.npy is damaged.*span"),
    "negative weight": ("windows.npy", lambda a: edited(a, (3, 1), -1), r"windows\.npy is damaged.*weight -1"),
    "window of another document": (
        "windows.npy",
        lambda a: edited(a, (OWNER, 1), a[OWNER, -1]),
        r"windows\.npy is damaged: its window 1 names document",
    ),
    "ids not ascending": (
        "document_windows.npy",
        lambda a: a[:, ::-1].copy(),
        r"document_windows\.npy is damaged: its document 1 .* document ids must ascend",
    ),
    "negative id": ("document_windows.npy", lambda a: edited(a, (0, 0), -3), r"document_windows\.npy is damaged"),
    "count past the counter": (
        "document_windows.npy",
        lambda a: edited(a, (2, 0), 2**62),
        r"document_windows\.npy is damaged: its document 0",
    ),
    "runs that overlap": (
        "document_windows.npy",
        lambda a: edited(a, (1, 1), a[1, 0]),
        r"(document_)?windows\.npy is damaged",
    ),
    "no window": ("document_windows.npy", lambda a: edited(a, (2, 0), 0), r"document_windows\.npy is damaged"),
}


@pytest.mark.parametrize("case", list(CRAFTED))
def test_a_crafted_table_is_refused_naming_the_file_before_anything_is_sized_by_it(tmp_path: Path, case: str) -> None:
    name, change, message = CRAFTED[case]
    built().save(tmp_path / "mv")
    crafted(tmp_path / "mv", name, change)
    tracemalloc.start()
    try:
        with pytest.raises(DamagedFileError, match=message) as caught:
            bounded(lambda: MultiVectorIndex.load(tmp_path / "mv", gpu=False))
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < PEAK_BYTES, peak
    assert "\n" not in str(caught.value) and "Rebuild the index" in str(caught.value)


def test_an_array_header_claiming_2_40_windows_is_refused_by_the_file_size_before_mapping(tmp_path: Path) -> None:
    built().save(tmp_path / "mv")
    crafted(tmp_path / "mv", "windows.json", lambda h: {**h, "next_window": 2**40, "windows": 2**34})
    crafted(tmp_path / "mv", "windows.npy", npy_claiming((4, 2**40)))
    tracemalloc.start()
    try:
        with pytest.raises(DamagedFileError, match=r"windows\.npy is damaged: it holds \d+ bytes, not the \(4, 1099"):
            bounded(lambda: MultiVectorIndex.load(tmp_path / "mv", gpu=False))
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert peak < PEAK_BYTES, peak


def test_a_table_listing_other_windows_than_the_index_is_refused(tmp_path: Path) -> None:
    """Consistent in itself (a one-window document moved to a removed slot), but not what the index holds."""
    index = built()
    index.save(tmp_path / "mv")
    table = index._table
    single = next(int(i) for i in index.ids if table.ranges(np.asarray([i]))[1][0] == 1)
    old = int(table.ranges(np.asarray([single]))[0][0])
    free = int(np.flatnonzero(table.owner == -1)[0])
    crafted(tmp_path / "mv", "windows.npy", lambda a: edited(edited(a, (OWNER, old), -1), (OWNER, free), single))
    crafted(tmp_path / "mv", "document_windows.npy", lambda a: edited(a, (1, np.searchsorted(a[0], single)), free))
    with pytest.raises(ValueError, match=r"windows\.npy lists other windows than the index holds"):
        MultiVectorIndex.load(tmp_path / "mv", gpu=False)
    crafted(tmp_path / "mv", "windows.json", lambda h: {**h, "windows": h["windows"] - 1})
    with pytest.raises(ValueError, match=r"windows\.json lists \d+ windows but the index holds"):
        MultiVectorIndex.load(tmp_path / "mv", gpu=False)


@pytest.mark.parametrize("name", ["windows.npy", "document_windows.npy"])
@pytest.mark.parametrize("how", ["flip", "truncate", "delete"])
def test_a_damaged_array_is_refused_naming_it(tmp_path: Path, name: str, how: str) -> None:
    built().save(tmp_path / "mv")
    path = tmp_path / "mv" / name
    raw = path.read_bytes()
    if how == "delete":
        path.unlink()
    else:
        path.write_bytes(raw[:-8] + bytes([raw[-8] ^ 1]) + raw[-7:] if how == "flip" else raw[: len(raw) // 2])
    with pytest.raises((DamagedFileError, FileNotFoundError), match=rf"{name} (is damaged|is missing)"):
        MultiVectorIndex.load(tmp_path / "mv", gpu=False)
