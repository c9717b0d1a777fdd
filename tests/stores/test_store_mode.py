"""DocumentMode (pooled or multi-vector, as a saved store records it), checked_windows and stored_windows."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fair_retrieval import DocumentWindows, FaissIndex, MultiVectorIndex
from fair_retrieval.jsonio import DamagedFileError
from fair_retrieval.stores.store_mode import DocumentMode, checked_windows, stored_windows
from tests.index.test_multivector import random_windows

SOURCE = Path("folder/store.json")


def test_the_mode_is_checked_and_pooled_by_default() -> None:
    assert DocumentMode() == DocumentMode(False, "max") and str(DocumentMode()) == "pooled documents"
    assert str(DocumentMode(True, "top2")) == "multi-vector documents (aggregate='top2')"
    with pytest.raises(TypeError, match="multivector must be True or False"):
        DocumentMode(1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="aggregate must be one of"):
        DocumentMode(True, "mean")  # type: ignore[arg-type]


def test_a_pooled_store_records_nothing_new_and_a_multi_vector_one_its_mode_and_aggregate() -> None:
    embedder = {"model": "m", "pooling": "mean"}
    assert DocumentMode().settings() == {} and DocumentMode().identity(embedder) == embedder
    multi = DocumentMode(True, "max-mean")
    assert multi.settings() == {"multivector": True, "aggregate": "max-mean"}
    assert multi.identity(embedder) == {**embedder, "multivector": True, "aggregate": "max-mean"}
    assert embedder == {"model": "m", "pooling": "mean"}  # not changed in place


def test_the_saved_mode_is_read_back_and_files_without_it_are_pooled() -> None:
    assert DocumentMode.saved({"metric": "cosine"}, SOURCE, "Rebuild.") == DocumentMode()
    assert DocumentMode.saved(DocumentMode(True, "top2").settings(), SOURCE, "Rebuild.") == DocumentMode(True, "top2")
    with pytest.raises(DamagedFileError, match="document mode is malformed"):
        DocumentMode.saved({"multivector": "yes"}, SOURCE, "Rebuild.")
    with pytest.raises(DamagedFileError, match="document mode is malformed"):
        DocumentMode.saved({"multivector": True, "aggregate": "best"}, SOURCE, "Rebuild.")


def test_a_mode_asked_for_on_load_must_be_the_saved_one() -> None:
    multi = DocumentMode(True)
    multi.check_requested(None, SOURCE.parent)
    multi.check_requested(True, SOURCE.parent)
    with pytest.raises(ValueError, match=r"holds a store of multi-vector documents.*multivector=True"):
        multi.check_requested(False, SOURCE.parent)
    with pytest.raises(ValueError, match="holds a store of pooled documents"):
        DocumentMode().check_requested(True, SOURCE.parent)
    with pytest.raises(TypeError, match="True, False or None"):
        DocumentMode().check_requested("no", SOURCE.parent)  # type: ignore[arg-type]


def test_each_mode_makes_and_loads_its_own_index(tmp_path: Path) -> None:
    pooled = DocumentMode().new_index(16, "ip", "flat", False, {})
    multi = DocumentMode(True, "top2").new_index(16, "l2", "hnsw", False, {"M": 8, "fetch_factor": 3})
    assert type(pooled) is FaissIndex and isinstance(multi, MultiVectorIndex)
    assert multi.aggregate == "top2" and multi.metric == "l2" and multi.kind == "hnsw"
    multi.add(random_windows(5))
    multi.save(tmp_path / "multi")
    assert isinstance(DocumentMode(True, "top2").load_index(tmp_path / "multi", False), MultiVectorIndex)
    with pytest.raises(ValueError, match="aggregate='top2' but its store file records aggregate='max'"):
        DocumentMode(True, "max").load_index(tmp_path / "multi", False)
    with pytest.raises(ValueError, match="multi-vector index"):
        DocumentMode().load_index(tmp_path / "multi", False)


def test_checked_windows_refuses_what_is_not_the_windows_of_the_texts() -> None:
    windows = random_windows(3)
    assert checked_windows(windows, 3, "embed", unit=False) is windows
    with pytest.raises(TypeError, match=r"expected fair_retrieval\.DocumentWindows"):
        checked_windows(windows.pooled, 3, "embed", unit=False)
    with pytest.raises(ValueError, match="returned 3 documents for 4 texts"):
        checked_windows(windows, 4, "embed", unit=False)
    scaled = DocumentWindows(windows.pooled * 3, windows.vectors * 2, windows.owners, windows.spans, windows.weights)
    unit = checked_windows(scaled, 3, "embed", unit=True)
    np.testing.assert_allclose(unit.vectors, windows.vectors, atol=1e-6)
    np.testing.assert_allclose(unit.pooled, windows.pooled, atol=1e-6)


def test_stored_windows_gives_back_what_was_added() -> None:
    windows = random_windows(6, seed=4)
    index = MultiVectorIndex(windows.dim)
    index.add(windows, ids=[10, 11, 12, 13, 14, 15])
    copied = stored_windows(index, [13, 10])
    expected = windows.select([3, 0])
    np.testing.assert_allclose(copied.vectors, expected.vectors, atol=1e-6)
    np.testing.assert_allclose(copied.pooled, expected.pooled, atol=1e-6)
    assert copied.owners.tolist() == expected.owners.tolist() and copied.spans.tolist() == expected.spans.tolist()
    assert copied.weights.tolist() == expected.weights.tolist()
    assert len(stored_windows(index, [])) == 0
    with pytest.raises(ValueError, match="not stored"):
        stored_windows(index, [99])
