"""DocumentMode (pooled or multi-vector, as a saved store records it), checked_windows and stored_windows."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

import fair_retrieval.index.multivector as multivector_module
from fair_retrieval import DocumentWindows, FaissIndex, MultiVectorIndex
from fair_retrieval.index.exact_rerank import MIN_TRAIN_AT, RerankedIndex
from fair_retrieval.jsonio import DamagedFileError
from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.store_mode import COMPRESSED_KIND, DocumentMode, checked_windows, stored_windows
from tests.index.test_multivector import random_windows
from tests.ranking import assert_same_ranking

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


# ---------------------------------------------------------------------------------------------------- the default index

FITS = 48  # a vector size the compressed index's PQ48 codes fit


class _Doc(NamedTuple):
    key: str


def _docs(count: int, prefix: str = "d") -> list[_Doc]:
    return [_Doc(f"{prefix}{i}") for i in range(count)]


def _top(store: DocumentStore[_Doc], queries: np.ndarray, k: int) -> list[list[tuple[str, float]]]:
    return [[(hit.record.key, hit.score) for hit in store.search(query, k)] for query in queries]


def _same_tops(got: list[list[tuple[str, float]]], expected: list[list[tuple[str, float]]]) -> None:
    """Each query's ranking the same, up to ties and last-bit rounding (`assert_same_ranking`)."""
    assert len(got) == len(expected)
    for mine, theirs in zip(got, expected, strict=True):
        assert_same_ranking(mine, theirs)


def test_a_multi_vector_store_without_a_kind_keeps_its_windows_compressed_and_a_pooled_one_flat() -> None:
    store: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True, dim=FITS)
    assert isinstance(store.index, MultiVectorIndex) and isinstance(store.index.windows, RerankedIndex)
    assert store.kind == COMPRESSED_KIND
    later: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True)
    assert later.kind is None  # the mode's default, decided on the first add
    later.add_windows(_docs(3), random_windows(3, FITS))
    assert isinstance(later.index, MultiVectorIndex) and isinstance(later.index.windows, RerankedIndex)
    assert later.kind == COMPRESSED_KIND
    pooled: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=False, dim=FITS)
    assert isinstance(pooled.index, FaissIndex) and pooled.index.kind == "flat" and pooled.kind == "flat"


def test_kind_flat_and_the_other_kinds_keep_the_index_they_name() -> None:
    flat: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True, dim=FITS, kind="flat")
    assert isinstance(flat.index, MultiVectorIndex) and isinstance(flat.index.windows, FaissIndex)
    assert flat.kind == "flat" and flat.index.kind == "flat"
    hnsw: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True, dim=FITS, kind="hnsw")
    assert isinstance(hnsw.index, MultiVectorIndex) and hnsw.index.kind == "hnsw" and hnsw.kind == "hnsw"
    named: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True, dim=FITS, kind=COMPRESSED_KIND)
    assert isinstance(named.index, MultiVectorIndex) and isinstance(named.index.windows, RerankedIndex)


def test_a_vector_size_the_codes_do_not_fit_keeps_the_default_store_flat_unless_compressed_is_named(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, logger="fair_retrieval.stores.store_mode"):
        store: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True, dim=8)
    assert isinstance(store.index, MultiVectorIndex) and isinstance(store.index.windows, FaissIndex)
    assert store.kind == "flat" and "do not fit 8-d vectors" in caplog.text
    with pytest.raises(ValueError):
        DocumentStore(gpu=False, multivector=True, dim=8, kind=COMPRESSED_KIND)


def test_index_parameters_without_a_kind_are_refused_as_before_and_fetch_factor_reaches_the_index() -> None:
    with pytest.raises(TypeError, match=r"kind='flat' takes no parameter\(s\) \['nlist'\]"):
        DocumentStore(gpu=False, multivector=True, index_params={"nlist": 4})
    with pytest.raises(TypeError, match=r"kind='compressed' takes no parameter\(s\) \['nlist'\]"):
        DocumentStore(gpu=False, multivector=True, kind=COMPRESSED_KIND, index_params={"nlist": 4})
    with pytest.raises(ValueError, match="a pooled store takes"):
        DocumentStore(gpu=False, multivector=False, kind=COMPRESSED_KIND)
    with pytest.raises(ValueError, match=r"kind must be one of .* pass index=MultiVectorIndex\(dim, factory"):
        DocumentStore(gpu=False, multivector=True, kind="pq")
    with pytest.raises(ValueError, match=r"kind must be one of .* pass index=FaissIndex\(dim, factory"):
        DocumentStore(gpu=False, multivector=False, kind="pq")
    store: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True, dim=FITS, index_params={"fetch_factor": 3})
    assert isinstance(store.index, MultiVectorIndex) and store.index.fetch_factor == 3
    assert isinstance(store.index.windows, RerankedIndex)


def test_the_default_store_returns_the_flat_stores_hits_below_and_above_training(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class EarlyTraining(RerankedIndex):  # trains at the fewest vectors it allows, not at 16,384
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("train_at", MIN_TRAIN_AT)
            super().__init__(*args, **kwargs)

    monkeypatch.setattr(multivector_module, "RerankedIndex", EarlyTraining)
    small, large = random_windows(40, FITS, seed=1), random_windows(800, FITS, seed=2, most=5)
    default: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True)
    flat: DocumentStore[_Doc] = DocumentStore(gpu=False, multivector=True, kind="flat")
    rng = np.random.default_rng(3)
    for windows, prefix in ((small, "s"), (large, "l")):
        for store in (default, flat):
            store.add_windows(_docs(len(windows), prefix), windows)
        queries = windows.vectors[rng.choice(len(windows.vectors), 20)] + rng.normal(0, 0.1, (20, FITS))
        _same_tops(_top(default, queries.astype(np.float32), 5), _top(flat, queries.astype(np.float32), 5))
    assert isinstance(default.index, MultiVectorIndex) and isinstance(default.index.windows, RerankedIndex)
    assert default.index.windows.trainings == 1 and default.index.windows.factory == "PQ48"
    for store in (default, flat):
        store.delete([f"l{i}" for i in range(0, 800, 3)])
        store.add_windows(_docs(5, "s"), random_windows(5, FITS, seed=4))  # upserts: their windows replaced
    queries = rng.normal(size=(20, FITS)).astype(np.float32)
    _same_tops(_top(default, queries, 5), _top(flat, queries, 5))
    assert default.kind == COMPRESSED_KIND and len(default) == len(flat)
