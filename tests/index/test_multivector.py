"""MultiVectorIndex: documents as window vectors, k distinct documents, exact on flat, persistence and identity."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fair_retrieval import DocumentWindows, FaissIndex, MultiVectorIndex
from fair_retrieval.jsonio import DamagedFileError


def random_windows(documents: int, dim: int = 16, seed: int = 0, most: int = 5) -> DocumentWindows:
    """`documents` documents of 1..most unit window vectors each, with spans and weights."""
    rng = np.random.default_rng(seed)
    counts = rng.integers(1, most + 1, size=documents)
    owners = np.repeat(np.arange(documents), counts).astype(np.int64)
    vectors = rng.normal(size=(owners.size, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    weights = rng.integers(10, 200, size=owners.size).astype(np.int64)
    starts = np.concatenate([np.cumsum(np.r_[0, np.full(c - 1, 100)]) for c in counts]).astype(np.int64)
    spans = np.stack([starts, starts + 120], axis=1)
    pooled = np.zeros((documents, dim))
    np.add.at(pooled, owners, vectors * weights[:, None])
    pooled = (pooled / np.linalg.norm(pooled, axis=1, keepdims=True)).astype(np.float32)
    return DocumentWindows(pooled, vectors, owners, spans, weights)


def brute_force(windows: DocumentWindows, query: np.ndarray, aggregate: str, metric: str = "ip") -> np.ndarray:
    """Every document's aggregate score over all its windows (larger is better)."""
    if metric == "ip":
        window_scores = windows.vectors @ query
        pooled_scores = windows.pooled @ query
    else:
        window_scores = -((windows.vectors - query) ** 2).sum(axis=1)
        pooled_scores = -((windows.pooled - query) ** 2).sum(axis=1)
    result = np.empty(len(windows))
    for i in range(len(windows)):
        own = np.sort(window_scores[windows.of(i)])
        if aggregate == "max":
            result[i] = own[-1]
        elif aggregate == "top2":
            result[i] = own[-2:].mean()
        else:
            result[i] = (own[-1] + pooled_scores[i]) / 2
    return result


@pytest.mark.parametrize("aggregate", ["max", "top2"])
@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_a_flat_index_ranks_documents_exactly_as_brute_force_over_all_windows(aggregate: str, metric: str) -> None:
    windows = random_windows(200)
    index = MultiVectorIndex(windows.dim, metric=metric, aggregate=aggregate)  # type: ignore[arg-type]
    index.add(windows)
    rng = np.random.default_rng(1)
    for _ in range(20):
        query = rng.normal(size=windows.dim).astype(np.float32)
        query /= np.linalg.norm(query)
        expected = np.argsort(-brute_force(windows, query, aggregate, metric), kind="stable")[:10]
        hits = index.search_documents(query, 10)
        assert [hit.id for hit in hits] == expected.tolist()
        assert len({hit.id for hit in hits}) == 10


def test_max_mean_is_exact_when_every_window_is_fetched_and_scores_are_the_mean() -> None:
    windows = random_windows(30)
    index = MultiVectorIndex(windows.dim, aggregate="max-mean", fetch_factor=1000)
    index.add(windows)
    query = windows.vectors[7]
    expected = brute_force(windows, query, "max-mean")
    hits = index.search_documents(query, 5)
    assert [hit.id for hit in hits] == np.argsort(-expected, kind="stable")[:5].tolist()
    assert hits[0].score == pytest.approx(expected.max(), abs=1e-5)


def test_a_hit_names_the_best_window_and_its_span() -> None:
    windows = random_windows(50)
    index = MultiVectorIndex(windows.dim, aggregate="max")  # the best window's own score
    index.add(windows)
    target = 12
    rows = windows.of(target)
    best = rows.start + 1 if rows.stop - rows.start > 1 else rows.start
    hit = index.search_documents(windows.vectors[best], 1)[0]
    assert hit.id == target and hit.window == best - rows.start
    assert hit.span == tuple(windows.spans[best].tolist()) and hit.score == pytest.approx(1.0, abs=1e-5)


def test_k_distinct_documents_come_back_whenever_k_are_stored() -> None:
    windows = random_windows(40, most=8)
    index = MultiVectorIndex(windows.dim, fetch_factor=1)  # the smallest over-fetch: the search must ask again
    index.add(windows)
    hits = index.search_documents(windows.vectors[0], 40)
    assert sorted(hit.id for hit in hits) == list(range(40))
    scores, ids = index.search(windows.vectors[:3], 45)
    assert (ids[:, 40:] == -1).all() and np.isneginf(scores[:, 40:]).all()
    assert all(len(set(row[:40].tolist())) == 40 for row in ids)


def test_a_search_among_some_documents_returns_only_those_and_k_of_them() -> None:
    windows = random_windows(100)
    index = MultiVectorIndex(windows.dim)
    index.add(windows)
    allowed = [3, 17, 42, 43, 44, 90]
    hits = index.search_documents(windows.vectors[0], 4, ids=allowed)
    assert len(hits) == 4 and {hit.id for hit in hits} <= set(allowed)
    expected = [i for i in np.argsort(-brute_force(windows, windows.vectors[0], index.aggregate)) if i in allowed][:4]
    assert [hit.id for hit in hits] == expected
    with pytest.raises(ValueError, match="not stored"):
        index.search_documents(windows.vectors[0], 4, ids=[1000])


def test_removing_a_document_removes_every_window_and_ids_continue() -> None:
    windows = random_windows(10)
    index = MultiVectorIndex(windows.dim)
    index.add(windows, ids=np.arange(100, 110))
    before = index.window_count
    own = windows.of(3)
    assert index.remove([103, 999]) == 1
    assert index.window_count == before - (own.stop - own.start) and 103 not in index and len(index) == 9
    assert all(hit.id != 103 for hit in index.search_documents(windows.vectors[own.start], 9))
    assert index.add(random_windows(2, seed=5)).tolist() == [110, 111]
    with pytest.raises(ValueError, match="already stored"):
        index.add(random_windows(1, seed=6), ids=[104])


def test_pooled_vectors_are_recomputed_from_the_stored_windows() -> None:
    windows = random_windows(20)
    index = MultiVectorIndex(windows.dim)
    index.add(windows)
    np.testing.assert_allclose(index.get_vectors([4, 0]), windows.pooled[[4, 0]], atol=1e-6)
    with pytest.raises(ValueError, match="not stored"):
        index.get_vectors([77])


def test_a_document_s_windows_come_back_as_they_were_added() -> None:
    windows = random_windows(8, seed=3)
    index = MultiVectorIndex(windows.dim)
    index.add(windows, ids=np.arange(50, 58))
    for position, id_ in enumerate(range(50, 58)):
        rows = windows.of(position)
        np.testing.assert_allclose(index.get_window_vectors(id_), windows.vectors[rows], atol=1e-6)
        assert index.window_spans(id_) == [tuple(span) for span in windows.spans[rows].tolist()]
        assert index.window_weights(id_) == windows.weights[rows].tolist()
    with pytest.raises(ValueError, match="not stored"):
        index.window_weights(7)


def test_bad_input_is_refused_before_anything_is_stored() -> None:
    windows = random_windows(3)
    index = MultiVectorIndex(windows.dim)
    with pytest.raises(TypeError, match="DocumentWindows"):
        index.add(windows.pooled)
    with pytest.raises(ValueError, match="one id per document"):
        index.add(windows, ids=[1, 2])
    broken = windows.vectors.copy()
    broken[0, 0] = np.nan
    with pytest.raises(ValueError):
        index.add(DocumentWindows(windows.pooled, broken, windows.owners, windows.spans, windows.weights))
    assert len(index) == 0 and index.window_count == 0
    with pytest.raises(ValueError, match="aggregate"):
        MultiVectorIndex(4, aggregate="mean")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="owners"):
        DocumentWindows(windows.pooled, windows.vectors, windows.owners[::-1].copy(), windows.spans, windows.weights)


def test_save_and_load_keep_the_windows_the_spans_and_the_aggregate(tmp_path: Path) -> None:
    windows = random_windows(30)
    index = MultiVectorIndex(windows.dim, aggregate="top2")
    index.add(windows)
    index.remove([5])
    index.save(tmp_path / "mv")
    loaded = MultiVectorIndex.load(tmp_path / "mv")
    assert loaded.aggregate == "top2" and len(loaded) == 29 and loaded.window_count == index.window_count
    assert loaded.window_spans(7) == index.window_spans(7)
    query = windows.vectors[11]
    assert loaded.search_documents(query, 10) == index.search_documents(query, 10)
    assert loaded.add(random_windows(1, seed=9)).tolist() == [30]
    assert min(loaded.window_spans(30)) >= (0, 0) and loaded.window_count == index.window_count + len(
        loaded.window_spans(30)
    )


def test_a_pooled_folder_and_a_multi_vector_folder_are_never_read_as_each_other(tmp_path: Path) -> None:
    windows = random_windows(5)
    pooled = FaissIndex(windows.dim)
    pooled.add(windows.pooled)
    pooled.save(tmp_path / "pooled")
    with pytest.raises(ValueError, match="pooled FaissIndex"):
        MultiVectorIndex.load(tmp_path / "pooled")
    multi = MultiVectorIndex(windows.dim)
    multi.add(windows)
    multi.save(tmp_path / "multi")
    with pytest.raises(ValueError, match=r"MultiVectorIndex\.load"):
        FaissIndex.load(tmp_path / "multi")


def test_a_damaged_window_table_is_refused_naming_the_file(tmp_path: Path) -> None:
    windows = random_windows(5)
    multi = MultiVectorIndex(windows.dim)
    multi.add(windows)
    multi.save(tmp_path / "multi")
    table = tmp_path / "multi" / "windows.json"
    raw = bytearray(table.read_bytes())
    raw[len(raw) // 2] ^= 0x01
    table.write_bytes(bytes(raw))
    with pytest.raises(DamagedFileError, match=r"windows\.json"):
        MultiVectorIndex.load(tmp_path / "multi")


@pytest.mark.parametrize(("kind", "params"), [("hnsw", {}), ("ivf", {"nlist": 16, "nprobe": 8})])
def test_approximate_kinds_keep_most_of_the_exact_document_ranking(kind: str, params: dict[str, int]) -> None:
    """Random vectors are the hard case for IVF (no clusters): real data is measured by the benchmark."""
    windows = random_windows(400, dim=32, seed=3)
    exact = MultiVectorIndex(windows.dim)
    approximate = MultiVectorIndex(windows.dim, kind=kind, **params)  # type: ignore[arg-type]
    exact.add(windows)
    approximate.add(windows)
    rng = np.random.default_rng(4)
    overlap = []
    for _ in range(20):
        query = windows.vectors[rng.integers(windows.vectors.shape[0])] + 0.3 * rng.normal(size=32).astype(np.float32)
        query /= np.linalg.norm(query)
        truth = {hit.id for hit in exact.search_documents(query, 10)}
        found = approximate.search_documents(query, 10)
        assert len({hit.id for hit in found}) == 10
        overlap.append(len(truth & {hit.id for hit in found}) / 10)
    assert np.mean(overlap) >= 0.8  # random data at these settings; real data: the benchmark


def test_an_ivf_windows_index_visits_a_quarter_of_its_lists_unless_nprobe_is_given(tmp_path: Path) -> None:
    """A window the IVF stage misses can lose its document, so the multi-vector default probes nlist/4, not nlist/8."""
    windows = random_windows(600, dim=16, seed=5)
    widened = MultiVectorIndex(windows.dim, kind="ivf", nlist=64)
    chosen = MultiVectorIndex(windows.dim, kind="ivf", nlist=64, nprobe=8)
    pooled = FaissIndex(windows.dim, kind="ivf", nlist=64)
    widened.add(windows)
    chosen.add(windows)
    pooled.add(windows.pooled[:600])
    assert pooled.params["nprobe"] == 8  # the pooled default
    assert widened.params["nprobe"] == 16 and chosen.params["nprobe"] == 8
    widened.save(tmp_path / "multi")
    assert MultiVectorIndex.load(tmp_path / "multi").params["nprobe"] == 16


def test_window_nprobe_widens_only_ivf_plans_and_never_past_nlist() -> None:
    from fair_retrieval.index.index_plan import for_windows, kind_plan, sized_ivfpq, window_nprobe

    assert window_nprobe(256) == 64 and window_nprobe(32) == 16 and window_nprobe(8) == 8
    sized = sized_ivfpq(20_000, 384)
    assert sized.params["nprobe"] == sized.params["nlist"] // 8
    wide = for_windows(sized)
    assert wide.search["nprobe"] == wide.params["nprobe"] == sized.params["nlist"] // 4
    assert wide.search["k_factor_rf"] == sized.search["k_factor_rf"] and wide.factory == sized.factory
    assert for_windows(kind_plan("hnsw", 16)) == kind_plan("hnsw", 16)
    assert for_windows(kind_plan("ivf", 16, nlist=100, nprobe=50)).params["nprobe"] == 50  # already more
