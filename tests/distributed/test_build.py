"""Shard folders, index plans and index building (no Ray needed): exactness, ids, IVF-PQ recall, OPQ."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from fair_retrieval import FaissIndex
from fair_retrieval.distributed import ShardFolder, build_index, plan_index
from fair_retrieval.distributed.build import DOC_IDS_FILE
from fair_retrieval.distributed.shards import embeddings_to_arrow
from fair_retrieval.index._synthetic import clustered_vectors
from fair_retrieval.index.index_plan import GPU_PQ_SUBQUANTIZERS, default_nlist, default_subquantizers, factory_plan
from fair_retrieval.index.recall import exact_neighbours, knn_recall_at_k, top1_in_k


def write_shards(folder: Path, ids: list | np.ndarray, vectors: np.ndarray, rows: int) -> ShardFolder:
    shards = ShardFolder(folder)
    shards.start({"test": True})
    for start in range(0, len(ids), rows):
        chunk = pa.array(list(ids[start : start + rows]))
        shards.write(pa.table({"id": chunk, "embedding": embeddings_to_arrow(vectors[start : start + rows])}))
    return shards


# ------------------------------------------------------------------------------------------------ shard folder


def test_shard_folder_round_trip_and_sample(tmp_path: Path) -> None:
    vectors = np.random.default_rng(0).standard_normal((25, 6)).astype(np.float32)
    shards = write_shards(tmp_path / "s", np.arange(100, 125), vectors, rows=10)
    assert [p.name for p in shards.files()] == [f"shard-00000{i}.parquet" for i in range(3)]
    assert shards.row_counts() == [10, 10, 5] and shards.count() == 25 and shards.dimension() == 6
    assert not list((tmp_path / "s").glob("*.tmp"))
    ids = np.concatenate([i.to_numpy() for i, _ in shards])
    np.testing.assert_array_equal(ids, np.arange(100, 125))
    np.testing.assert_array_equal(np.concatenate([v for _, v in shards]), vectors)
    sample = shards.sample(12, seed=3)
    rows = {tuple(row) for row in sample}
    assert sample.shape == (12, 6) and len(rows) == 12 and rows <= {tuple(row) for row in vectors}
    np.testing.assert_array_equal(sample, shards.sample(12, seed=3))
    assert shards.sample(1000).shape == (25, 6)


def test_shard_folder_refuses_another_job_and_cleans_partial_files(tmp_path: Path) -> None:
    shards = ShardFolder(tmp_path)
    shards.start({"model": "a", "calibration": {"strength": 0.5, "layers": (1, 2)}})
    (tmp_path / "shard-000000.parquet.tmp").write_bytes(b"half a file")
    shards.start({"model": "a", "calibration": {"strength": 0.5, "layers": [1, 2]}})  # same job, as JSON stores it
    assert not (tmp_path / "shard-000000.parquet.tmp").exists()
    with pytest.raises(ValueError, match=r"other settings \(model differ: \['a'\] there, \['b'\] now\)"):
        shards.start({"model": "b", "calibration": {"strength": 0.5, "layers": [1, 2]}})
    with pytest.raises(FileNotFoundError, match="embed_to_shards"):
        ShardFolder(tmp_path / "elsewhere").job()


# ------------------------------------------------------------------------------------------------ plans


def test_plan_is_flat_for_small_corpora_and_the_sized_compressed_index_above_the_limit() -> None:
    assert plan_index(5_000, 384).factory == "Flat"
    plan = plan_index(2_000_000, 384)
    assert plan.kind == "ivfpq" and plan.factory == "IVF4096,PQ48x8,Refine(SQ8)"  # 4·√2e6 ≈ 5657 → 4096
    assert plan.params == {"nlist": 4096, "nprobe": 512, "m": 48, "nbits": 8, "k_factor": 16}
    assert plan.search == {"nprobe": 512, "k_factor_rf": 16}
    assert plan.train_size == 39 * 4096
    assert plan_index(50_000, 384, flat_limit=10_000).kind == "ivfpq"
    assert plan_index(50_000, 384, flat_limit=10_000).train_size == 39 * 1024
    assert plan_index(12_000, 384, "ivfpq").train_size == 10_000  # at least 10k (PQ codebooks), though nlist=256
    explicit = plan_index(50_000, 384, "ivfpq", opq=True, nlist=64, nprobe=4)
    assert explicit.factory == "OPQ8,IVF64,PQ8x8" and explicit.search == {"nprobe": 4}  # explicit values win
    assert plan_index(50_000, 384, "ivfpq", opq=True).factory == "OPQ48,IVF1024,PQ48x8,Refine(SQ8)"


def test_plan_parameters_follow_the_rules() -> None:
    for count in (1, 100, 10_000, 123_457, 10_000_000):
        nlist = default_nlist(count)
        assert nlist & (nlist - 1) == 0 and (nlist * 39 <= count or nlist == 1)
    assert default_nlist(10_000) == 256 and default_nlist(100_000) == 1024
    for dim, m in ((384, 48), (768, 96), (1024, 64), (64, 8), (32, 4), (1536, 96), (96, 12)):
        assert default_subquantizers(dim) == m and dim % m == 0 and m in GPU_PQ_SUBQUANTIZERS
    assert default_subquantizers(4100) == 410  # no GPU-compatible size: the largest divisor ≤ dim/8


def test_plan_errors() -> None:
    with pytest.raises(ValueError, match="flat index takes no IVF-PQ parameters"):
        plan_index(100, 32, nlist=8)
    with pytest.raises(ValueError, match="at least 256 training vectors"):
        plan_index(100, 32, "ivfpq")
    with pytest.raises(ValueError, match="must divide dim=30"):
        plan_index(100_000, 30, "ivfpq", m=8)
    with pytest.raises(ValueError, match="Unknown index parameter"):
        plan_index(100, 32, "ivfpq", efSearch=3)
    with pytest.raises(ValueError, match="kind must be"):
        plan_index(100, 32, "hnsw")  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------------ building


def test_flat_index_is_exact_and_keeps_integer_ids(tmp_path: Path) -> None:
    vectors = clustered_vectors(300, 16, clusters=5, seed=1)
    ids = np.arange(300) * 10 + 7
    built = build_index(write_shards(tmp_path / "s", ids, vectors, rows=64), show_progress_bar=False)
    assert built.plan.kind == "flat" and built.doc_ids is None and len(built.index) == 300
    np.testing.assert_array_equal(built.index.ids, ids)
    queries = vectors[:20]
    scores, found = built.index.search(queries, 5)
    exact = vectors @ queries.T
    np.testing.assert_array_equal(found[:, 0], ids[:20])
    np.testing.assert_allclose(scores, -np.sort(-exact, axis=0)[:5].T, atol=1e-5)


def test_string_ids_are_mapped_to_vector_positions_and_saved(tmp_path: Path) -> None:
    vectors = clustered_vectors(50, 8, clusters=3, seed=2)
    names = [f"doc-{i}" for i in range(50)]
    built = build_index(write_shards(tmp_path / "s", names, vectors, rows=20), show_progress_bar=False)
    assert built.doc_ids.to_pylist() == names
    _, found = built.index.search(vectors[[7, 31]], 1)
    assert [names[i] for i in found[:, 0]] == ["doc-7", "doc-31"]
    folder = built.save(tmp_path / "index")
    assert pa.parquet.read_table(folder / DOC_IDS_FILE).column("doc_id").to_pylist() == names
    assert len(FaissIndex.load(folder, gpu=False)) == 50


def test_ivfpq_recall_at_10_on_clustered_vectors(tmp_path: Path) -> None:
    data = clustered_vectors(10_200, 32, clusters=50, seed=0)
    vectors, queries = data[:10_000], data[10_000:]
    shards = write_shards(tmp_path / "s", np.arange(10_000), vectors, rows=2_500)
    built = build_index(shards, "ivfpq", show_progress_bar=False)
    assert built.plan.factory == "IVF256,PQ4x8,Refine(SQ8)" and built.index.factory == built.plan.factory
    assert built.index.params == {"nlist": 256, "nprobe": 32, "m": 4, "nbits": 8, "k_factor": 16}
    assert built.index.kind == "ivfpq" and len(built.index) == 10_000
    truth = exact_neighbours(vectors, queries, 10)
    _, found = built.index.search(queries, 10)
    assert knn_recall_at_k(found, truth, 10) >= 0.95
    assert top1_in_k(found, truth, 10) >= 0.95
    # compressed: 4 bytes of PQ code + 32 of SQ8 per vector instead of 128 bytes of float32 (plus ids in both)
    compressed = built.save(tmp_path / "ivfpq") / "index.faiss"
    exact = build_index(shards, "flat", show_progress_bar=False)
    # at 32-d the codebooks and centroids weigh more than at 384-d (≤ 35% there: benchmarks/index_recall.py)
    assert compressed.stat().st_size < 0.6 * (exact.save(tmp_path / "flat") / "index.faiss").stat().st_size


def test_opq_index_loads_back_as_a_faiss_index(tmp_path: Path) -> None:
    import faiss

    data = clustered_vectors(3_100, 16, clusters=20, seed=1)
    vectors, queries = data[:3_000], data[3_000:]
    shards = write_shards(tmp_path / "s", np.arange(3_000), vectors, rows=1_000)
    built = build_index(shards, "ivfpq", opq=True, nlist=16, nbits=4, show_progress_bar=False)
    assert built.plan.factory.startswith("OPQ") and isinstance(built.index._index, faiss.IndexPreTransform)
    truth = exact_neighbours(vectors, queries, 10)
    scores, found = built.index.search(queries, 10)
    assert knn_recall_at_k(found, truth) > 0.5  # 4-bit codes: coarse, but far above chance (10/3000)
    loaded = FaissIndex.load(built.save(tmp_path / "index"), gpu=False)
    loaded_scores, loaded_found = loaded.search(queries, 10)
    np.testing.assert_array_equal(loaded_found, found)
    np.testing.assert_allclose(loaded_scores, scores, atol=1e-5)


def test_a_factory_plan_is_trained_on_a_sample_and_takes_no_other_settings(tmp_path: Path) -> None:
    vectors = clustered_vectors(600, 8, clusters=4, seed=3)
    shards = write_shards(tmp_path / "s", np.arange(600), vectors, rows=200)
    built = build_index(shards, factory_plan("IVF4,Flat", "nprobe=4"), show_progress_bar=False)
    assert built.plan.train_size == 600  # FACTORY_TRAIN_SIZE, capped at the corpus
    assert built.index.factory == "IVF4,Flat" and len(built.index) == 600
    _, found = built.index.search(vectors[:5], 1)
    np.testing.assert_array_equal(found[:, 0], np.arange(5))  # nprobe = nlist: exact
    for settings in ({"opq": True}, {"nprobe": 2}, {"flat_limit": 10}, {"train_size": 100}):
        with pytest.raises(ValueError, match="carries its own settings"):
            build_index(shards, factory_plan("IVF4,Flat"), show_progress_bar=False, **settings)


def test_building_from_an_empty_folder_fails_clearly(tmp_path: Path) -> None:
    ShardFolder(tmp_path).start({"test": True})
    with pytest.raises(ValueError, match="holds no embedded rows; run embed_to_shards first"):
        build_index(tmp_path)


def test_knn_recall_at_k_counts_overlap() -> None:
    truth = np.array([[1, 2, 3], [4, 5, 6]])
    assert knn_recall_at_k(np.array([[3, 2, 1], [4, 9, -1]]), truth, 3) == pytest.approx((3 + 1) / 6)
    assert top1_in_k(np.array([[3, 2, 1], [9, 5, 6]]), truth, 3) == 0.5
    with pytest.raises(ValueError, match="at most the number of columns"):
        knn_recall_at_k(truth, truth, 4)
