"""FaissIndex on CPU: exactness, ids through add/remove, save/load without pickle, bad inputs, GPU selection."""

from __future__ import annotations

import json
import pickle
import shutil
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from fair_retrieval import FaissIndex  # noqa: E402
from fair_retrieval.index import Kind, Metric, faiss_gpu_count  # noqa: E402
from fair_retrieval.jsonio.snapshot import record_crc32  # noqa: E402

DIM = 32
KINDS: dict[str, dict[str, Any]] = {
    "flat": {},
    "hnsw": {"M": 16, "ef_construction": 80, "ef_search": 128},
    "ivf": {"nlist": 4, "nprobe": 4},  # nprobe = nlist: every list is scanned, so results are exact
    "ivfpq": {"nlist": 4, "nprobe": 4, "m": 8, "nbits": 4},
}
HAS_GPU = faiss_gpu_count() > 0


def unit_vectors(n: int, dim: int = DIM, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, dim)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def brute_force(base: np.ndarray, ids: np.ndarray, queries: np.ndarray, k: int, metric: str) -> tuple[Any, Any]:
    if metric == "ip":
        scores = queries.astype(np.float64) @ base.astype(np.float64).T
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    else:
        scores = ((queries[:, None, :].astype(np.float64) - base[None, :, :]) ** 2).sum(-1)
        order = np.argsort(scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1), ids[order]


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread() -> Any:
    """Tiny indices: OpenMP threads only add contention (seconds per k-means on a busy 2-core runner)."""
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


@pytest.fixture(scope="module")
def data() -> np.ndarray:
    return unit_vectors(300)


# ------------------------------------------------------------------------------------------------ search quality


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_flat_matches_numpy_brute_force(data: np.ndarray, metric: Metric) -> None:
    index = FaissIndex(DIM, metric=metric, kind="flat", gpu=False)
    ids = np.arange(1000, 1000 + len(data), dtype=np.int64) * 3  # non-contiguous ids
    index.add(data, ids)
    queries = unit_vectors(20, seed=1)
    scores, found = index.search(queries, 10)
    expected_scores, expected_ids = brute_force(data, ids, queries, 10, metric)
    assert scores.dtype == np.float32 and found.dtype == np.int64 and found.shape == (20, 10)
    np.testing.assert_array_equal(found, expected_ids)
    np.testing.assert_allclose(scores, expected_scores, atol=1e-5)


@pytest.mark.parametrize("kind", ["hnsw", "ivf"])
def test_exhaustive_settings_match_brute_force(data: np.ndarray, kind: Kind) -> None:
    index = FaissIndex(DIM, kind=kind, gpu=False, **KINDS[kind])
    index.add(data)
    queries = unit_vectors(20, seed=2)
    _, found = index.search(queries, 5)
    _, expected = brute_force(data, np.arange(len(data)), queries, 5, "ip")
    np.testing.assert_array_equal(found[:, 0], expected[:, 0])
    assert (found == expected).mean() > 0.95


def test_ivfpq_is_approximate_but_finds_itself(data: np.ndarray) -> None:
    index = FaissIndex(DIM, kind="ivfpq", gpu=False, **KINDS["ivfpq"])
    index.add(data)
    _, found = index.search(data[:50], 5)
    assert (found == np.arange(50)[:, None]).any(axis=1).mean() >= 0.9


@pytest.mark.parametrize(("metric", "missing"), [("ip", -np.inf), ("l2", np.inf)])
def test_fewer_hits_than_k_are_padded(data: np.ndarray, metric: Metric, missing: float) -> None:
    index = FaissIndex(DIM, metric=metric, gpu=False)
    index.add(data[:3], [7, 8, 9])
    scores, found = index.search(data[:2], 5)
    assert sorted(found[0, :3].tolist()) == [7, 8, 9]
    assert (found[:, 3:] == -1).all() and (scores[:, 3:] == missing).all()
    assert np.isfinite(scores[:, :3]).all()


def test_empty_index_search_returns_no_hits() -> None:
    index = FaissIndex(DIM, kind="ivf", gpu=False, nlist=4, nprobe=2)  # untrained too
    scores, found = index.search(unit_vectors(2), 3)
    assert found.shape == (2, 3) and (found == -1).all() and (scores == -np.inf).all()


# ------------------------------------------------------------------------------------------------ ids


@pytest.mark.parametrize("kind", list(KINDS))
def test_ids_survive_remove(data: np.ndarray, kind: Kind) -> None:
    index = FaissIndex(DIM, kind=kind, gpu=False, **KINDS[kind])
    first = index.add(data[:200])
    np.testing.assert_array_equal(first, np.arange(200))
    removed = [0, 5, 199, 42]
    assert index.remove(np.array(removed)) == 4
    assert len(index) == 196
    assert 5 not in index and 6 in index
    np.testing.assert_array_equal(index.ids, np.setdiff1d(np.arange(200), removed))
    _, found = index.search(data[:200], 3)
    assert not np.isin(found, removed).any()
    kept = np.setdiff1d(np.arange(200), removed)
    assert (found[kept, 0] == kept).mean() >= (1.0 if kind != "ivfpq" else 0.85)
    # auto ids continue after the largest stored id (198, since 199 was removed)
    np.testing.assert_array_equal(index.add(data[200:203]), [199, 200, 201])
    np.testing.assert_array_equal(index.search(data[200:203], 1)[1][:, 0], [199, 200, 201])


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_an_ivf_index_shrunk_by_removals_still_returns_k_results(metric: Metric) -> None:
    # nprobe=1 of 32 lists: once most vectors are removed the probed list holds fewer than k
    base = unit_vectors(2000, seed=4)
    index = FaissIndex(DIM, metric, factory="IVF32,Flat", search="nprobe=1", gpu=False)
    index.add(base)
    index.remove(np.arange(1975))
    queries = unit_vectors(30, seed=5)
    live = np.arange(1975, 2000)
    for k in (10, 25, 40):
        _, found = index.search(queries, k)
        assert ((found >= 0).sum(axis=1) == min(k, live.size)).all(), k
        _, expected = brute_force(base[live], live, queries, min(k, live.size), metric)
        np.testing.assert_array_equal(found[:, : live.size], expected)  # every list probed: the exact top
    assert (
        index.search_params == "nprobe=1" and index.params["nprobe"] == 1
    )  # the index's own setting is left as it was


def test_remove_unknown_ids_lists_them_and_removes_nothing(data: np.ndarray) -> None:
    index = FaissIndex(DIM, gpu=False)
    index.add(data[:10])
    with pytest.raises(ValueError, match=r"not in the index: 11, 12"):
        index.remove([3, 11, 12])
    assert len(index) == 10 and 3 in index
    assert index.remove([]) == 0
    with pytest.raises(ValueError, match="not in the index"):
        index.get_vectors([3, 99])


def test_duplicate_ids_are_refused(data: np.ndarray) -> None:
    index = FaissIndex(DIM, gpu=False)
    index.add(data[:3], [10, 20, 30])
    with pytest.raises(ValueError, match=r"already in the index: 20"):
        index.add(data[3:5], [40, 20])
    with pytest.raises(ValueError, match=r"repeat within this call: 50"):
        index.add(data[3:5], [50, 50])
    assert len(index) == 3
    index.remove([20])
    index.add(data[3:4], [20])  # a removed id can be reused
    np.testing.assert_array_equal(index.get_vectors([20]), data[3:4])


@pytest.mark.parametrize("kind", list(KINDS))
def test_get_vectors(data: np.ndarray, kind: Kind) -> None:
    index = FaissIndex(DIM, kind=kind, gpu=False, **KINDS[kind])
    ids = np.arange(len(data), dtype=np.int64)[::-1] + 5
    index.add(data, ids)
    wanted = np.array([ids[7], ids[0], ids[7]])
    vectors = index.get_vectors(wanted)
    assert vectors.shape == (3, DIM) and vectors.dtype == np.float32
    if kind == "ivfpq":  # PQ reconstruction: approximate but much closer to the vector than to others
        cosines = vectors @ data.T
        assert (cosines.argmax(axis=1) == [7, 0, 7]).all()
    else:
        np.testing.assert_array_equal(vectors, data[[7, 0, 7]])
    assert index.get_vectors([]).shape == (0, DIM)


# ------------------------------------------------------------------------------------------------ training


@pytest.mark.parametrize("kind", ["ivf", "ivfpq"])
def test_training_needs_enough_vectors(data: np.ndarray, kind: Kind) -> None:
    index = FaissIndex(DIM, kind=kind, gpu=False, **KINDS[kind])
    needed = index.min_training_size()
    assert needed == (4 if kind == "ivf" else 16)
    with pytest.raises(ValueError, match=rf"at least {needed}"):
        index.add(data[: needed - 1])
    assert not index.is_trained and len(index) == 0
    index.train(data)
    assert index.is_trained
    index.add(data[:2])  # now a small add is fine
    assert len(index) == 2
    with pytest.raises(ValueError, match="already trained"):
        index.train(data)


def test_training_error_is_raised_by_train_too(data: np.ndarray) -> None:
    index = FaissIndex(DIM, kind="ivf", gpu=False, nlist=50, nprobe=5)
    with pytest.raises(ValueError, match=r"at least 50 training vectors"):
        index.train(data[:49])


def test_flat_train_is_a_no_op(data: np.ndarray) -> None:
    index = FaissIndex(DIM, gpu=False)
    index.train(data)
    assert index.is_trained and len(index) == 0


# ------------------------------------------------------------------------------------------------ save / load


@pytest.mark.parametrize("kind", list(KINDS))
def test_save_load_round_trip_without_pickle(
    data: np.ndarray, kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def forbidden(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("pickle must not be used")

    for name in ("load", "loads", "dump", "dumps", "Unpickler", "Pickler"):
        monkeypatch.setattr(pickle, name, forbidden)

    index = FaissIndex(DIM, metric="l2" if kind == "hnsw" else "ip", kind=kind, gpu=False, **KINDS[kind])
    index.add(data, np.arange(len(data)) * 2 + 1)
    index.remove([1, 3] if kind != "hnsw" else [5])
    index.save(tmp_path / "idx")
    assert sorted(p.name for p in (tmp_path / "idx").iterdir()) == ["index.faiss", "index.json"]
    raw = (tmp_path / "idx" / "index.faiss").read_bytes()
    assert raw[:1] != b"\x80" and raw[:4] in {b"IxM2", b"IwFl", b"IwPQ"}  # faiss' own format, not a pickle
    meta = json.loads((tmp_path / "idx" / "index.json").read_text())
    # dim, metric, structure and search values live in the faiss file; the manifest keeps what faiss does not
    assert meta["version"] == 2 and meta["count"] == len(index) and "dim" not in meta and "metric" not in meta
    assert meta["ids"] == ("native" if kind in ("ivf", "ivfpq") else "IDMap2")

    loaded = FaissIndex.load(tmp_path / "idx", gpu=False)
    assert (loaded.dim, loaded.metric, loaded.kind, loaded.params) == (index.dim, index.metric, kind, index.params)
    np.testing.assert_array_equal(loaded.ids, index.ids)
    queries = unit_vectors(10, seed=3)
    for a, b in zip(loaded.search(queries, 7), index.search(queries, 7), strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(loaded.get_vectors(index.ids[:5]), index.get_vectors(index.ids[:5]))
    # the loaded index keeps working: remove and add
    loaded.remove(index.ids[:2])
    assert len(loaded) == len(index) - 2
    assert loaded.add(data[:1])[0] == index.ids[-1] + 1


def test_load_rejects_inconsistent_folders(data: np.ndarray, tmp_path: Path) -> None:
    index = FaissIndex(DIM, gpu=False)
    index.add(data[:5])
    index.save(tmp_path)
    meta_path = tmp_path / "index.json"
    meta = json.loads(meta_path.read_text())
    meta_path.write_text(json.dumps({**meta, "count": 4}))  # the record checks its own content
    with pytest.raises(ValueError, match=r"index\.json is damaged: its content differs from the CRC-32 it records"):
        FaissIndex.load(tmp_path, gpu=False)
    # a crafted record with a valid CRC-32: its values are still checked against index.faiss
    meta_path.write_text(json.dumps(sealed({**meta, "kind": "ivf", "params": {"nlist": 4, "nprobe": 1}})))
    with pytest.raises(ValueError, match="does not hold a 'ivf' index"):
        FaissIndex.load(tmp_path, gpu=False)
    meta_path.write_text(json.dumps(sealed({**meta, "dim": DIM + 1})))
    with pytest.raises(ValueError, match="dim"):
        FaissIndex.load(tmp_path, gpu=False)
    meta_path.write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError, match="not written by FaissIndex"):
        FaissIndex.load(tmp_path, gpu=False)
    with pytest.raises(FileNotFoundError, match=r"index\.json"):
        FaissIndex.load(tmp_path / "nowhere", gpu=False)


# ------------------------------------------------------------------------------------------------ bad input


def test_vectors_are_converted_to_contiguous_float32(data: np.ndarray) -> None:
    index = FaissIndex(DIM, gpu=False)
    wide = np.asfortranarray(data[:4].astype(np.float64))
    index.add(wide)
    index.add([list(map(float, row)) for row in data[4:6]])  # nested lists work too
    np.testing.assert_array_equal(index.get_vectors([0, 5]), data[[0, 5]])
    assert index.add(np.zeros((0, DIM))).shape == (0,)
    assert index.add([]).shape == (0,)


@pytest.mark.parametrize(
    ("vectors", "error", "message"),
    [
        (np.zeros((2, DIM + 1), np.float32), ValueError, "dimension 33"),
        (np.zeros(DIM, np.float32), ValueError, r"2-D.*\[None, :\]"),
        (np.array([["a"] * DIM]), TypeError, "real numbers"),
        (np.ones((2, DIM), dtype=bool), TypeError, "real numbers"),
        (np.full((2, DIM), np.nan, np.float32), ValueError, r"NaN.*rows \[0, 1\]"),
        (np.full((1, DIM), 1e300), ValueError, "infinite"),  # overflows float32
    ],
)
def test_bad_vectors(vectors: Any, error: type[Exception], message: str) -> None:
    index = FaissIndex(DIM, gpu=False)
    with pytest.raises(error, match=message):
        index.add(vectors)
    with pytest.raises(error, match=message.replace("vectors", "queries")):
        index.search(vectors, 1)
    assert len(index) == 0


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        ([1], ValueError, "2 vectors but 1 ids"),
        ([1.0, 2.0], TypeError, "integers"),
        ([-1, 2], ValueError, r"≥ 0"),
        (5, TypeError, "wrap a single id"),
        (np.array([[1, 2]]), ValueError, "1-D"),
    ],
)
def test_bad_ids(data: np.ndarray, ids: Any, error: type[Exception], message: str) -> None:
    index = FaissIndex(DIM, gpu=False)
    with pytest.raises(error, match=message):
        index.add(data[:2], ids)


def test_bad_constructor_arguments() -> None:
    with pytest.raises(ValueError, match="dim"):
        FaissIndex(0)
    with pytest.raises(ValueError, match="metric"):
        FaissIndex(DIM, metric="cosine")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind"):
        FaissIndex(DIM, kind="lsh")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"takes no parameter.*nlist"):
        FaissIndex(DIM, kind="flat", nlist=4)
    with pytest.raises(ValueError, match="must divide dim"):
        FaissIndex(DIM, kind="ivfpq", m=5)
    with pytest.raises(ValueError, match="nprobe=9 exceeds nlist=4"):
        FaissIndex(DIM, kind="ivf", nlist=4, nprobe=9)
    with pytest.raises(ValueError, match="positive int"):
        FaissIndex(DIM, kind="hnsw", M=0)
    with pytest.raises(ValueError, match="gpu must be"):
        FaissIndex(DIM, gpu="yes")  # type: ignore[arg-type]
    index = FaissIndex(DIM, gpu=False)
    for k in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="k must be a positive int"):
            index.search(unit_vectors(1), k)  # type: ignore[arg-type]


@pytest.mark.skipif(HAS_GPU, reason="faiss sees a GPU here")
def test_gpu_true_without_gpu_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"gpu=True but faiss sees no GPU.*fair-retrieval\[gpu\]"):
        FaissIndex(DIM, gpu=True)
    assert not FaissIndex(DIM, gpu="auto").on_gpu


# ------------------------------------------------------------------------------------------------ GPU orchestration


class FakeGpu:
    """Stands in for faiss' GPU functions: 'GPU' indices are CPU clones, and every transfer is counted."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, count: int) -> None:
        self.to_gpu: list[str] = []
        self.to_cpu = 0
        self.shard: list[bool] = []
        self.gpu_objects: set[int] = set()
        monkeypatch.setattr(faiss, "StandardGpuResources", lambda: object(), raising=False)
        monkeypatch.setattr(faiss, "get_num_gpus", lambda: count, raising=False)
        monkeypatch.setattr(faiss, "GpuClonerOptions", lambda: type("Options", (), {})(), raising=False)
        monkeypatch.setattr(faiss, "GpuMultipleClonerOptions", lambda: type("Options", (), {})(), raising=False)
        monkeypatch.setattr(faiss, "index_cpu_to_gpu", self._cpu_to_gpu, raising=False)
        monkeypatch.setattr(faiss, "index_cpu_to_all_gpus", self._cpu_to_all, raising=False)
        monkeypatch.setattr(faiss, "index_gpu_to_cpu", self._gpu_to_cpu, raising=False)

    def _clone(self, index: Any) -> Any:
        copy = faiss.clone_index(index)
        self.gpu_objects.add(id(copy))
        return copy

    def _cpu_to_gpu(self, resources: Any, device: int, index: Any, options: Any = None) -> Any:
        self.to_gpu.append(type(index).__name__)
        return self._clone(index)

    def _cpu_to_all(self, index: Any, co: Any = None, ngpu: int = -1) -> Any:
        self.to_gpu.append(type(index).__name__)
        self.shard.append(bool(co.shard))
        return self._clone(index)

    def _gpu_to_cpu(self, index: Any) -> Any:
        assert id(index) in self.gpu_objects, "index_gpu_to_cpu called on a CPU index"
        self.to_cpu += 1
        return faiss.clone_index(index)


@pytest.mark.parametrize("kind", ["flat", "ivf"])
def test_gpu_path_converts_for_remove_and_save(
    data: np.ndarray, kind: Kind, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeGpu(monkeypatch, count=1)
    index = FaissIndex(DIM, kind=kind, **KINDS[kind])
    assert index.on_gpu == (kind == "flat")  # an untrained ivf index stays on CPU until trained
    index.add(data)
    assert index.on_gpu and id(index._index) in fake.gpu_objects
    uploads = len([name for name in fake.to_gpu if name != "IndexFlat"])  # IndexFlat: k-means helper
    assert uploads == 1
    index.remove([3, 4])  # on a CPU copy, then re-uploaded
    assert index.on_gpu and fake.to_cpu == 1 and len(index) == len(data) - 2
    assert len([name for name in fake.to_gpu if name != "IndexFlat"]) == 2
    np.testing.assert_array_equal(index.get_vectors([5, 6]), data[5:7])
    np.testing.assert_array_equal(index.get_vectors([7]), data[7:8])
    assert fake.to_cpu == 2  # get_vectors converted once and reuses the CPU copy
    index.save(tmp_path)
    assert fake.to_cpu == 2  # save reuses it too: nothing changed since
    index.add(data[:1], [10_000])
    index.save(tmp_path)
    assert fake.to_cpu == 3  # the add invalidated the copy; save converts (without keeping the copy)
    np.testing.assert_array_equal(index.get_vectors([10_000]), data[:1])
    assert fake.to_cpu == 4
    loaded = FaissIndex.load(tmp_path)
    assert loaded.on_gpu
    np.testing.assert_array_equal(loaded.search(data[:5], 3)[1], index.search(data[:5], 3)[1])
    with pytest.raises(ValueError, match="at most k=2048"):
        index.search(data[:1], 4096)


def test_gpu_path_multi_gpu_and_hnsw(monkeypatch: pytest.MonkeyPatch, data: np.ndarray) -> None:
    fake = FakeGpu(monkeypatch, count=2)
    FaissIndex(DIM, gpu_shards=True)
    FaissIndex(DIM, gpu_shards=False)
    assert fake.shard == [True, False]
    hnsw = FaissIndex(DIM, kind="hnsw")  # auto: no faiss GPU HNSW, so CPU
    assert not hnsw.on_gpu
    with pytest.raises(ValueError, match="no GPU implementation of HNSW"):
        FaissIndex(DIM, kind="hnsw", gpu=True)
    assert not FaissIndex(DIM, gpu=False).on_gpu


# ------------------------------------------------------------------------------------------------ sized default


def clustered(count: int, seed: int = 0) -> np.ndarray:
    from fair_retrieval.index._synthetic import clustered_vectors

    return clustered_vectors(count, DIM, clusters=20, seed=seed)


def test_sized_ivfpq_default_is_planned_from_the_training_count() -> None:
    from fair_retrieval.index.index_plan import default_nlist

    vectors = clustered(4_000)
    index = FaissIndex(DIM, kind="ivfpq", gpu=False)
    assert not index.is_trained and index.factory is None and index.min_training_size() == 256
    index.add(vectors)
    nlist = default_nlist(4_000)
    assert nlist == 64  # 4·√4000 ≈ 253 → 256, capped at 4000/39 → 64
    assert index.factory == f"IVF{nlist},PQ4x8,Refine(SQ8)"  # 32-d: m = 32/8
    assert index.params == {"nlist": nlist, "nprobe": 16, "m": 4, "nbits": 8, "k_factor": 16}
    assert index.search_params == "nprobe=16,k_factor_rf=16"
    queries = clustered(50, seed=1)
    exact = FaissIndex(DIM, gpu=False)
    exact.add(vectors)
    truth = exact.search(queries, 10)[1]
    found = index.search(queries, 10)[1]
    overlap = np.mean([np.intersect1d(a, b).size / 10 for a, b in zip(found, truth, strict=True)])
    assert overlap >= 0.95


def test_sized_plan_choices_for_realistic_sizes() -> None:
    from fair_retrieval.index.index_plan import sized_ivfpq

    plan = sized_ivfpq(60_000, 384)
    assert plan.factory == "IVF1024,PQ48x8,Refine(SQ8)" and plan.search == {"nprobe": 128, "k_factor_rf": 16}
    assert sized_ivfpq(1_000_000, 384).factory == "IVF4096,PQ48x8,Refine(SQ8)"
    assert sized_ivfpq(10_000_000, 768).factory.startswith("IVF16384,PQ96x8")
    assert sized_ivfpq(60_000, 384, nprobe=32, k_factor=4).search == {"nprobe": 32, "k_factor_rf": 4}
    with pytest.raises(ValueError, match="at least 256 training vectors"):
        sized_ivfpq(100, 384)


def test_explicit_ivfpq_parameters_win_over_the_sized_default(data: np.ndarray) -> None:
    index = FaissIndex(DIM, kind="ivfpq", gpu=False, nlist=4, m=8, nbits=4)
    assert index.factory == "IVF4,PQ8x4" and index.params == {"nlist": 4, "nprobe": 4, "m": 8, "nbits": 4}
    sized = FaissIndex(DIM, kind="ivfpq", gpu=False, nprobe=8, k_factor=2)  # search overrides keep the sizing
    sized.add(clustered(2_000))
    assert sized.factory is not None and sized.factory.endswith("Refine(SQ8)")
    assert sized.params["nprobe"] == 8 and sized.params["k_factor"] == 2
    with pytest.raises(TypeError, match="k_factor applies to the sized default"):
        FaissIndex(DIM, kind="ivfpq", nlist=4, k_factor=2)


def test_sized_index_saved_before_and_after_training_loads(tmp_path: Path) -> None:
    untrained = FaissIndex(DIM, kind="ivfpq", gpu=False, nprobe=8)
    untrained.save(tmp_path / "before")
    reloaded = FaissIndex.load(tmp_path / "before", gpu=False)
    assert reloaded.factory is None and reloaded.params == {"nprobe": 8}
    vectors = clustered(2_000)
    reloaded.add(vectors)
    reloaded.remove([3, 4])  # faiss cannot remove from a refinement stage: rebuilt without them
    reloaded.save(tmp_path / "after")
    loaded = FaissIndex.load(tmp_path / "after", gpu=False)
    assert (loaded.kind, loaded.factory, loaded.params) == ("ivfpq", reloaded.factory, reloaded.params)
    np.testing.assert_array_equal(loaded.ids, np.setdiff1d(np.arange(2_000), [3, 4]))
    np.testing.assert_array_equal(loaded.search(vectors[:20], 5)[1], reloaded.search(vectors[:20], 5)[1])


# ------------------------------------------------------------------------------------------------ factory strings


@pytest.mark.parametrize(
    ("factory", "search", "kind"),
    [
        ("OPQ8,IVF4,PQ8x4", "nprobe=4", "ivfpq"),
        ("IVF4,PQ8x4,Refine(Flat)", "nprobe=4,k_factor_rf=8", "ivfpq"),
        ("HNSW8,Flat", "efSearch=64", "hnsw"),
        ("IDMap2,PQ8x4", "", "custom"),
    ],
)
def test_any_factory_string_adds_searches_removes_and_round_trips(
    data: np.ndarray, tmp_path: Path, factory: str, search: str, kind: str
) -> None:
    index = FaissIndex(DIM, factory=factory, search=search or None, gpu=False)
    assert index.kind == kind and index.factory == factory.removeprefix("IDMap2,")
    index.add(data, np.arange(len(data)) + 100)
    assert index.remove([100, 101]) == 2 and len(index) == len(data) - 2
    _, found = index.search(data[2:40], 1)
    assert not np.isin(found, [100, 101]).any()
    assert (found[:, 0] == np.arange(102, 140)).mean() >= 0.8  # finds itself (approximately for codes)
    index.save(tmp_path)
    loaded = FaissIndex.load(tmp_path, gpu=False)
    assert (loaded.dim, loaded.metric, loaded.kind, loaded.search_params) == (DIM, "ip", kind, index.search_params)
    np.testing.assert_array_equal(loaded.ids, index.ids)
    np.testing.assert_array_equal(loaded.search(data[:10], 4)[1], index.search(data[:10], 4)[1])


def test_factory_errors_are_clear(data: np.ndarray) -> None:
    with pytest.raises(ValueError, match="faiss cannot build 'IVF4,Nonsense'"):
        FaissIndex(DIM, factory="IVF4,Nonsense")
    with pytest.raises(ValueError, match=r"either kind .* or factory"):
        FaissIndex(DIM, kind="ivf", factory="IVF4,Flat")
    index = FaissIndex(DIM, factory="IVF4,Flat", search="nprobe=2", gpu=False)
    assert index.params["nprobe"] == 2
    index.set_search("nprobe=4")
    assert index.params["nprobe"] == 4 and index.search_params == "nprobe=4"
    with pytest.raises(ValueError, match="no search parameter 'efSearch'"):
        index.set_search({"efSearch": 16})
    with pytest.raises(ValueError, match="not a number"):
        index.set_search("nprobe=many")


# ------------------------------------------------------------------------------------------------ older folders

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "index_v1"


@pytest.mark.parametrize("kind", list(KINDS))
def test_folders_without_a_commit_record_are_refused(kind: str) -> None:
    """The first format version recorded no sizes nor CRC-32s: such a record is refused, never read unchecked."""
    with pytest.raises(ValueError, match=r"index\.json is damaged: it has no 'publication' entry.*Rebuild the index"):
        FaissIndex.load(FIXTURES / kind, gpu=False)


@pytest.mark.parametrize("kind", list(KINDS))
def test_records_of_format_version_1_load_once_verified(kind: str, tmp_path: Path) -> None:
    vectors = np.load(FIXTURES / "vectors.npy")
    expected = json.loads((FIXTURES / "expected_top5.json").read_text())[kind]
    shutil.copytree(FIXTURES / kind, tmp_path / kind)
    meta = json.loads((tmp_path / kind / "index.json").read_text())
    raw = (tmp_path / kind / "index.faiss").read_bytes()
    meta["publication"] = {"token": "0" * 32, "files": {"index.faiss": {"bytes": len(raw), "crc32": zlib.crc32(raw)}}}
    (tmp_path / kind / "index.json").write_text(json.dumps(sealed(meta)))
    loaded = FaissIndex.load(tmp_path / kind, gpu=False)
    assert (loaded.dim, loaded.kind, len(loaded)) == (16, kind, 298)
    assert loaded.metric == ("l2" if kind == "ivf" else "ip")
    np.testing.assert_array_equal(loaded.search(vectors[:10], 5)[1], expected)
    assert 5 in loaded and 8 not in loaded  # ids 3·i + 5; 8 and 11 were removed before saving
    assert (
        loaded.params
        == {
            "flat": {},
            "hnsw": {"M": 8, "ef_construction": 40, "ef_search": 64},
            "ivf": {"nlist": 4, "nprobe": 2},
            "ivfpq": {"nlist": 4, "nprobe": 4, "m": 4, "nbits": 4},
        }[kind]
    )
    loaded.add(vectors[:1])
    assert loaded.ids[-1] == 3 * 299 + 5 + 1


def sealed(meta: dict) -> dict:
    """`meta` with its record CRC-32 computed again, as a crafted record would be."""
    meta["publication"]["record_crc32"] = record_crc32(meta)
    return meta


# ------------------------------------------------------------------------------------------------ id-check cost


def test_id_checks_cost_the_batch_not_the_stored_count(data: np.ndarray) -> None:
    index = FaissIndex(DIM, gpu=False)
    batch = 10
    for step in range(25):
        before = index._ids.lookups
        index.add(data[:batch], np.arange(batch) + step * batch)
        assert index._ids.lookups - before == batch  # one lookup per new id, whatever the index holds
    before = index._ids.lookups
    index.remove(np.arange(5))
    assert index._ids.lookups - before == 5
    assert len(index) == 25 * batch - 5 and index.ids[0] == 5
