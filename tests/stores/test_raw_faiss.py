"""Bare faiss files, as earlier stores wrote them: recognised by their first bytes and read back by position."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fair_retrieval.stores.raw_faiss import is_raw_faiss, looks_like_raw_faiss, read_raw_faiss

faiss = pytest.importorskip("faiss")


@pytest.mark.parametrize(("head", "expected"), [(b"IxF2....", True), (b"IHNf", True), (b'{"fo', False), (b"Ix", False)])
def test_the_type_code_is_recognised(head: bytes, expected: bool) -> None:
    assert looks_like_raw_faiss(head) is expected


@pytest.mark.parametrize(("metric", "factory_metric"), [("ip", "METRIC_INNER_PRODUCT"), ("l2", "METRIC_L2")])
def test_vectors_come_back_by_position_with_the_metric(tmp_path: Path, metric: str, factory_metric: str) -> None:
    vectors = np.random.default_rng(0).standard_normal((5, 4)).astype(np.float32)
    raw = faiss.index_factory(4, "Flat", getattr(faiss, factory_metric))
    raw.add(vectors)
    path = tmp_path / "default__vector_store.json"
    faiss.write_index(raw, str(path))
    assert is_raw_faiss(path)
    read, read_metric = read_raw_faiss(path)
    np.testing.assert_array_equal(read, vectors)
    assert read_metric == metric
    (tmp_path / "store.json").write_text('{"format": "x"}')
    assert not is_raw_faiss(tmp_path / "store.json")


def test_an_empty_file_keeps_its_dimension(tmp_path: Path) -> None:
    path = tmp_path / "empty.faiss"
    faiss.write_index(faiss.IndexFlatIP(6), str(path))
    read, _ = read_raw_faiss(path)
    assert read.shape == (0, 6)


def test_another_metric_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "l1.faiss"
    faiss.write_index(faiss.IndexFlat(4, faiss.METRIC_L1), str(path))
    with pytest.raises(ValueError, match="only inner product and L2 are converted"):
        read_raw_faiss(path)
