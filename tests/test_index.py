"""FaissIndex on CPU: exactness, ids through add/remove, save/load without pickle, bad inputs, GPU selection."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from fair_retrieval import FaissIndex  # noqa: E402
from fair_retrieval.index import Kind, Metric, faiss_gpu_count  # noqa: E402

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
    assert meta["dim"] == DIM and meta["kind"] == kind and meta["count"] == len(index) and meta["version"] == 1

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
    meta_path.write_text(json.dumps({**meta, "kind": "ivf", "params": {"nlist": 4, "nprobe": 1}}))
    with pytest.raises(ValueError, match="does not hold a 'ivf' index"):
        FaissIndex.load(tmp_path, gpu=False)
    meta_path.write_text(json.dumps({**meta, "dim": DIM + 1}))
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
        monkeypatch.setattr(faiss, "GpuClonerOptions", lambda: object(), raising=False)
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
