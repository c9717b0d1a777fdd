"""RerankedIndex: compact codes for candidates, exact re-rank from the float rows; growth, shrinking, segments."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval import DocumentWindows, FaissIndex, MultiVectorIndex
from fair_retrieval.index import import_faiss
from fair_retrieval.index.exact_rerank import (
    DEFAULT_CANDIDATE_FACTOR,
    DEFAULT_CODES,
    GROWTH,
    MIN_TRAIN_AT,
    RerankedIndex,
)
from fair_retrieval.index.persistence import FLOAT_FILE, RERANK_FILE
from fair_retrieval.jsonio import DamagedFileError
from tests.sealing import seal

DIM = 32


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread() -> Iterator[None]:
    """Small indices on a busy 2-core runner: OpenMP threads only add contention."""
    faiss = import_faiss()
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


def clustered(count: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    """Unit vectors around 20 centres (as embeddings cluster by topic), float32."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(20, dim))
    vectors = centres[rng.integers(20, size=count)] + 0.6 * rng.normal(size=(count, dim))
    return (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)


def documents(count: int, per_document: int = 8, seed: int = 0) -> DocumentWindows:
    """`count` documents of `per_document` clustered windows each."""
    vectors = clustered(count * per_document, seed)
    owners = np.repeat(np.arange(count), per_document).astype(np.int64)
    spans = np.stack([np.arange(owners.size) % per_document * 50, np.arange(owners.size) % per_document * 50 + 80], 1)
    weights = np.full(owners.size, 60, dtype=np.int64)
    pooled = np.zeros((count, DIM), dtype=np.float32)
    return DocumentWindows(pooled, vectors, owners, spans.astype(np.int64), weights)


def reranked(index: MultiVectorIndex) -> RerankedIndex:
    """The windows index of a compressed multi-vector index."""
    assert isinstance(index.windows, RerankedIndex)
    return index.windows


def small(codes: str = "IVF,PQ8", **options: Any) -> RerankedIndex:
    return RerankedIndex(DIM, codes=codes, train_at=MIN_TRAIN_AT, **options)


def test_reranked_search_returns_the_flat_order_and_exact_scores_where_codes_alone_do_not() -> None:
    vectors = clustered(4000)
    index = small("PQ8np", candidate_factor=64)  # PQ codes scanned in full: 640 candidates hold the true top 10
    index.add(vectors, ids=np.arange(4000))
    flat = FaissIndex(DIM, kind="flat")
    flat.add(vectors, ids=np.arange(4000))
    queries = clustered(30, seed=1)
    exact_scores, exact_ids = flat.search(queries, 10)
    scores, ids = index.search(queries, 10)
    np.testing.assert_array_equal(ids, exact_ids)
    np.testing.assert_allclose(scores, exact_scores, rtol=1e-5, atol=1e-6)
    _, coded = index.compact.search(queries, 10)  # the PQ codes alone: approximate
    assert not np.array_equal(coded, exact_ids)


def test_windows_kept_twice_come_back_in_the_flat_order() -> None:
    base = clustered(1500)
    rng = np.random.default_rng(3)
    twice = base + rng.normal(scale=1e-7, size=base.shape).astype(np.float32)  # one text embedded twice
    vectors = np.concatenate([base, twice])
    index = small("PQ8np", candidate_factor=300)  # 3,000 candidates: every vector, so only the order is tested
    index.add(vectors, ids=np.arange(3000))
    flat = FaissIndex(DIM, kind="flat")
    flat.add(vectors, ids=np.arange(3000))
    for query in clustered(50, seed=4):
        exact_scores, exact_ids = flat.search(query[None, :], 10)
        scores, ids = index.search(query[None, :], 10)
        np.testing.assert_array_equal(ids, exact_ids)
        np.testing.assert_array_equal(scores, exact_scores)  # bit for bit: the same kernel


def test_a_compressed_multivector_index_ranks_documents_as_the_flat_one_when_candidates_cover_the_top() -> None:
    windows = documents(400)
    flat = MultiVectorIndex(DIM, kind="flat")
    flat.add(windows)
    compressed = MultiVectorIndex.over(small())
    compressed.add(windows)
    rerank = reranked(compressed)
    assert rerank.trained_for == 3200 and str(rerank.factory).startswith("IVF")
    checked = 0
    for query in clustered(40, seed=2):
        fetch = 2 * 10 * 8  # fetch_factor × k × windows a document: what the multi-vector search asks for
        _, candidates = rerank.compact.search(query[None, :], fetch * rerank.candidate_factor)
        expected = flat.search_documents(query, 10)
        best = [int(windows_of[h.window]) for h in expected for windows_of in [np.arange(h.id * 8, h.id * 8 + 8)]]
        if not np.isin(best, candidates[0]).all():
            continue  # the candidates miss the best window of a true top-10 document: no order is promised there
        checked += 1
        got = compressed.search_documents(query, 10)
        assert [h.id for h in got] == [h.id for h in expected]
        assert [h.window for h in got] == [h.window for h in expected]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in expected], rtol=1e-5)
    assert checked >= 20


def test_a_small_store_stays_exact_then_trains_and_trains_again_after_growing() -> None:
    index = small()
    index.add(clustered(600), ids=np.arange(600))
    assert (index.factory, index.trained_for, index.trainings) == ("Flat", 0, 0)
    index.add(clustered(600, seed=3), ids=np.arange(600, 1200))
    assert index.trained_for == 1200 and index.trainings == 1
    first = index.compact
    lists = first.params["nlist"]
    index.add(clustered(GROWTH * 1200 - 1200 - 1, seed=4), ids=np.arange(1200, GROWTH * 1200 - 1))
    assert index.compact is first and index.trainings == 1  # not yet 4×
    index.add(clustered(1, seed=5), ids=[GROWTH * 1200 - 1])
    assert index.trainings == 2 and index.trained_for == GROWTH * 1200
    assert index.compact is not first and index.compact.params["nlist"] > lists
    assert len(index) == GROWTH * 1200 and len(index.compact) == GROWTH * 1200


def test_removes_and_upserts_keep_the_trained_index_and_drop_the_vectors() -> None:
    windows = documents(300)
    index = MultiVectorIndex.over(small())
    index.add(windows)
    rerank = reranked(index)
    compact, faiss_object, trainings = rerank.compact, rerank.compact._index, rerank.trainings
    query = windows.vectors[0]
    assert index.search_documents(query, 1)[0].id == 0
    assert index.remove([0, 1, 2]) == 3
    index.add(documents(3, seed=9), ids=[0, 1, 500])  # an upsert of 0 and 1, and a new document
    assert rerank.compact is compact and rerank.compact._index is faiss_object and rerank.trainings == trainings
    assert len(index) == 300 and index.window_count == 300 * 8
    assert rerank.rows.dead == 3 * 8  # the old rows stay on disk until the rows are compacted
    old_window = 0  # window ids only grow: document 0's old windows are gone
    with pytest.raises(ValueError, match="no stored vector"):
        rerank.get_vectors([old_window])
    assert all(hit.id != 2 for hit in index.search_documents(windows.vectors[16], 10))


def test_dead_rows_are_compacted_once_they_outnumber_the_live_ones() -> None:
    index = small()
    index.add(clustered(3000), ids=np.arange(3000))
    compact = index.compact
    index.remove(np.arange(1400))
    assert index.rows.rows == 3000
    index.remove(np.arange(1400, 2000))
    assert index.rows.rows == 1000 and index.rows.dead == 0 and index.compact is compact
    np.testing.assert_array_equal(index.get_vectors([2500]), clustered(3000)[2500:2501])


def segment_files(folder: Path) -> dict[str, tuple[int, int]]:
    """The segments in `folder`: name → (inode, size)."""
    return {path.name: (path.stat().st_ino, path.stat().st_size) for path in folder.glob("rows-*.seg")}


def test_save_and_load_memory_map_the_segments_and_keep_the_results(tmp_path: Path) -> None:
    windows = documents(300)
    index = MultiVectorIndex.over(small())
    index.add(windows)
    index.remove([5])
    query = clustered(1, seed=7)[0]
    before = index.search_documents(query, 10)
    index.save(tmp_path)
    assert [size for _, size in segment_files(tmp_path).values()] == [299 * 8 * (DIM * 4 + 8)]  # dead rows dropped
    assert not (tmp_path / FLOAT_FILE).exists()
    loaded = MultiVectorIndex.load(tmp_path)
    rows, saved = reranked(loaded).rows, reranked(index)
    (_, mapped), *others = rows._segments
    assert not others and isinstance(mapped, np.memmap) and mapped.mode == "r" and rows._tail is None
    assert (reranked(loaded).trained_for, reranked(loaded).factory) == (saved.trained_for, saved.factory)
    assert loaded.search_documents(query, 10) == before
    np.testing.assert_array_equal(loaded.get_window_vectors(7), windows.vectors[windows.of(7)])
    loaded.add(documents(2, seed=8), ids=[900, 901])  # new rows go to a working file; the saved one is not written
    assert loaded.search_documents(documents(2, seed=8).vectors[0], 1)[0].id == 900
    loaded.save(tmp_path)
    again = MultiVectorIndex.load(tmp_path)
    assert len(again) == 301 and again.search_documents(query, 10) == before


def test_binary_codes_rank_candidates_by_hamming_distance_for_an_inner_product_index(tmp_path: Path) -> None:
    vectors = clustered(3000)
    index = small("LSH", candidate_factor=500)  # 32 bits rank coarsely: 2,500 of the 3,000 are candidates
    index.add(vectors, ids=np.arange(3000))
    assert index.metric == "ip" and index.compact.metric == "l2" and index.factory == "LSH"
    flat = FaissIndex(DIM, kind="flat")
    flat.add(vectors, ids=np.arange(3000))
    queries = clustered(20, seed=1)
    np.testing.assert_array_equal(index.search(queries, 5)[1], flat.search(queries, 5)[1])
    index.save(tmp_path)
    assert RerankedIndex.load(tmp_path).metric == "ip"


def test_a_bare_reranked_index_saves_and_loads_and_faiss_index_load_refuses_it(tmp_path: Path) -> None:
    index = small()
    index.add(clustered(500), ids=np.arange(500))
    index.save(tmp_path)
    loaded = RerankedIndex.load(tmp_path)
    assert loaded.factory == "Flat" and len(loaded) == 500
    np.testing.assert_array_equal(loaded.get_vectors([3, 1]), clustered(500)[[3, 1]])
    with pytest.raises(ValueError, match=r"RerankedIndex\.load"):
        FaissIndex.load(tmp_path)


def test_a_save_into_its_folder_writes_only_the_rows_added_since(tmp_path: Path) -> None:
    index = MultiVectorIndex.over(small())
    index.add(documents(300))
    index.save(tmp_path)
    (first, (inode, size)), *_ = segment_files(tmp_path).items()
    loaded = MultiVectorIndex.load(tmp_path)
    loaded.add(documents(1, seed=4), ids=[300])
    loaded.save(tmp_path)
    files = segment_files(tmp_path)
    assert files.pop(first) == (inode, size)  # the saved rows are neither rewritten nor copied
    assert [size for _, size in files.values()] == [8 * (DIM * 4 + 8)]  # only the new document's windows
    query = documents(1, seed=4).vectors[3]
    again = MultiVectorIndex.load(tmp_path)
    assert again.search_documents(query, 5) == loaded.search_documents(query, 5)
    assert again.search_documents(query, 1)[0].id == 300 and len(again) == 301


def test_a_remove_writes_no_rows_and_a_save_rewrites_once_dead_rows_outnumber_live_ones(tmp_path: Path) -> None:
    index = MultiVectorIndex.over(small())
    index.add(documents(300))
    index.save(tmp_path)
    before = segment_files(tmp_path)
    index.remove([7, 8])
    index.save(tmp_path)
    assert segment_files(tmp_path) == before  # the compact index's ids say which rows live
    loaded = MultiVectorIndex.load(tmp_path)
    assert len(loaded) == 298 and 7 not in loaded and reranked(loaded).rows.dead == 16
    query = documents(300).vectors[8 * 7 + 2]
    assert all(hit.id not in (7, 8) for hit in loaded.search_documents(query, 10))
    loaded.remove(list(range(9, 200)))  # dead rows now outnumber live ones
    loaded.save(tmp_path)
    files = segment_files(tmp_path)
    assert len(files) == 1 and [size for _, size in files.values()] == [107 * 8 * (DIM * 4 + 8)]
    assert len(MultiVectorIndex.load(tmp_path)) == 107


def test_many_small_saves_keep_a_few_segments_and_the_results_of_one_save(tmp_path: Path) -> None:
    index = MultiVectorIndex.over(small())
    index.add(documents(200))
    index.save(tmp_path / "many")
    for number in range(40):
        index.add(documents(1, seed=100 + number), ids=[200 + number])
        if number % 7 == 3:
            index.remove([number])
        index.save(tmp_path / "many")
        assert len(segment_files(tmp_path / "many")) <= 1 + (number + 1).bit_length()  # a binary counter's
    listed = json.loads((tmp_path / "many" / RERANK_FILE).read_text())["segments"]
    assert sorted(entry["name"] for entry in listed) == sorted(segment_files(tmp_path / "many"))  # no leftovers
    index.save(tmp_path / "once")  # another folder: every live row as one segment
    assert len(segment_files(tmp_path / "once")) == 1
    many, once = MultiVectorIndex.load(tmp_path / "many"), MultiVectorIndex.load(tmp_path / "once")
    for query in clustered(5, seed=9):
        assert many.search_documents(query, 10) == once.search_documents(query, 10)
    np.testing.assert_array_equal(many.get_window_vectors(239), documents(1, seed=139).vectors)


def test_a_folder_of_an_earlier_release_loads_and_its_next_save_writes_segments(tmp_path: Path) -> None:
    fixture = Path(__file__).parents[1] / "fixtures" / "reranked_v1"
    expected = json.loads((fixture / "expected.json").read_text())
    shutil.copytree(fixture / "index", tmp_path / "index")
    query = np.load(fixture / "vectors.npy")[expected["query_window"]]
    loaded = MultiVectorIndex.load(tmp_path / "index")
    hits = [[hit.id, hit.score] for hit in loaded.search_documents(query, 5)]
    assert [hit[0] for hit in hits] == [hit[0] for hit in expected["top5"]]
    np.testing.assert_allclose([hit[1] for hit in hits], [hit[1] for hit in expected["top5"]], atol=1e-5)
    stored = np.load(fixture / "vectors.npy")  # the fixture's 8-d windows: one more document of three of them
    spans = np.array([[0, 15], [10, 25], [20, 35]], dtype=np.int64)
    extra = DocumentWindows(stored[:1], stored[-3:][::-1].copy(), np.zeros(3, np.int64), spans, np.full(3, 10))
    loaded.add(extra, ids=[50])
    loaded.save(tmp_path / "index")
    assert not (tmp_path / "index" / FLOAT_FILE).exists() and len(segment_files(tmp_path / "index")) == 1
    again = MultiVectorIndex.load(tmp_path / "index")
    assert [hit.id for hit in again.search_documents(query, 5)] == [hit[0] for hit in expected["top5"]]
    assert again.search_documents(stored[-1], 1)[0].id == 50


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_truncated_or_corrupted_segment_is_refused_by_name(tmp_path: Path, damage: str) -> None:
    index = MultiVectorIndex.over(small())
    index.add(documents(200))
    index.save(tmp_path)
    (name, _), *_ = segment_files(tmp_path).items()
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(bytes(data[:-100]))
    else:
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    with pytest.raises(DamagedFileError, match=name):
        MultiVectorIndex.load(tmp_path)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda listed, names: listed.append({"name": "rows-" + "0" * 32 + ".seg", "rows": 1}), "not a segment its"),
        (lambda listed, names: listed.reverse(), "do not ascend"),
        (lambda listed, names: listed.pop(), "rows for"),
        (lambda listed, names: listed[0].update(rows=listed[0]["rows"] + 1), "bytes, not"),
        (lambda listed, names: listed[0].update(name="../store.json"), "not a segment its"),
    ],
)
def test_a_crafted_segment_list_is_refused_by_name(tmp_path: Path, edit: Any, message: str) -> None:
    index = MultiVectorIndex.over(small())
    index.add(documents(50))
    index.save(tmp_path)
    index.add(documents(1, seed=5), ids=[60])
    index.save(tmp_path)
    settings = json.loads((tmp_path / RERANK_FILE).read_text())
    edit(settings["segments"], sorted(segment_files(tmp_path)))
    (tmp_path / RERANK_FILE).write_text(json.dumps(settings))
    record = json.loads((tmp_path / "index.json").read_text())
    seal(tmp_path / "index.json", list(record["publication"]["files"]))  # as if a writer had committed it
    with pytest.raises(DamagedFileError, match=message):
        MultiVectorIndex.load(tmp_path)


def test_malformed_settings_are_refused_by_name(tmp_path: Path) -> None:
    index = small()
    index.add(clustered(100), ids=np.arange(100))
    index.save(tmp_path)
    (tmp_path / RERANK_FILE).write_text((tmp_path / RERANK_FILE).read_text().replace('"train_at"', '"train_ot"'))
    with pytest.raises(DamagedFileError, match=RERANK_FILE):
        RerankedIndex.load(tmp_path)


@pytest.mark.parametrize(
    ("options", "error", "fix"),
    [
        ({"codes": 48}, TypeError, "factory string"),
        ({"codes": "IVF256,PQ8"}, ValueError, "write 'IVF' alone"),
        ({"codes": "IVF,PQ8,Refine(SQ8)"}, ValueError, "cannot remove"),
        ({"codes": "HNSW32"}, ValueError, "cannot remove"),
        ({"codes": "IVF,Nonsense"}, ValueError, "cannot build"),
        ({"codes": " "}, ValueError, "empty"),
        ({"candidate_factor": 0}, ValueError, "candidate_factor must be a positive int"),
        ({"train_at": 10}, ValueError, f"at least {MIN_TRAIN_AT}"),
        ({"nprobe": 0}, ValueError, "nprobe must be a positive int"),
        ({"metric": "cosine"}, ValueError, "'ip'"),
    ],
)
def test_bad_arguments_say_what_to_pass(options: dict, error: type[Exception], fix: str) -> None:
    with pytest.raises(error, match=fix):
        RerankedIndex(DIM, **options)


def test_compressed_is_one_argument_of_multivector_index_and_refuses_other_index_choices() -> None:
    index = MultiVectorIndex(384, compressed=True)
    assert (reranked(index).codes, reranked(index).candidate_factor) == (DEFAULT_CODES, DEFAULT_CANDIDATE_FACTOR)
    assert reranked(MultiVectorIndex(DIM, compressed="PQ8")).codes == "PQ8"
    assert isinstance(MultiVectorIndex(DIM, compressed=False).windows, FaissIndex)
    with pytest.raises(ValueError, match="without kind"):
        MultiVectorIndex(DIM, kind="flat", compressed=True)
    with pytest.raises(TypeError, match="compressed must be"):
        MultiVectorIndex(DIM, compressed=5)  # type: ignore[arg-type]


def test_ids_must_ascend_past_the_stored_ones_and_nothing_is_stored_otherwise() -> None:
    index = small()
    index.add(clustered(10), ids=np.arange(10, 20))
    with pytest.raises(ValueError, match="ascend past the largest id stored"):
        index.add(clustered(2), ids=[3, 30])
    assert len(index) == 10 and index.rows.rows == 10


@pytest.mark.parametrize("stage", ["flat", "trained", "loaded"])
def test_add_without_ids_follows_the_largest_stored_id_as_faiss_index_does(stage: str, tmp_path: Path) -> None:
    count = 1200 if stage != "flat" else 20  # at MIN_TRAIN_AT the compact index trains
    vectors = clustered(count + 3, seed=2)
    plain = FaissIndex(DIM, gpu=False)
    index = small()
    for each in (plain, index):
        each.add(vectors[:count])
        each.remove([count - 2, count - 1])  # the two largest ids
    if stage == "trained":
        assert index.trainings == 1
    if stage == "loaded":  # the removed rows are gone from the saved float file, the rest is its read-only map
        index.save(tmp_path)
        index = RerankedIndex.load(tmp_path)
    expected = np.arange(count - 2, count + 1)
    np.testing.assert_array_equal(plain.add(vectors[count:]), expected)
    np.testing.assert_array_equal(index.add(vectors[count:]), expected)  # the same ids, the same rule
    assert len(index) == len(plain) == count + 1
    np.testing.assert_array_equal(index.get_vectors(expected), vectors[count:])
    assert index.search(vectors[count:], 1)[1][:, 0].tolist() == expected.tolist()


def test_opt_in_ivf_pq48_windows_return_k_documents_after_the_store_shrinks() -> None:
    # "IVF,PQ48" trains at MIN_TRAIN_AT windows (64 lists, 16 probed); most documents then go, and the probed lists
    # of a query hold fewer windows than k documents need
    dim, per_document = 48, 8
    vectors = clustered(400 * per_document, seed=6, dim=dim)
    owners = np.repeat(np.arange(400), per_document).astype(np.int64)
    spans = np.stack([np.arange(owners.size) % per_document * 50, np.arange(owners.size) % per_document * 50 + 80], 1)
    windows = DocumentWindows(
        np.zeros((400, dim), np.float32), vectors, owners, spans.astype(np.int64), np.full(owners.size, 60)
    )
    index = MultiVectorIndex.over(RerankedIndex(dim, codes="IVF,PQ48", train_at=MIN_TRAIN_AT, gpu=False))
    flat = MultiVectorIndex(dim, gpu=False)
    for each in (index, flat):
        each.add(windows)
        each.remove(np.arange(388))
    assert reranked(index).trainings == 1 and reranked(index).compact.params["nprobe"] < 64
    for query in clustered(40, seed=7, dim=dim):
        hits = index.search_documents(query, 10)
        assert len(hits) == min(10, len(index)) == 10
        assert [hit.id for hit in hits] == [hit.id for hit in flat.search_documents(query, 10)]
    assert len(index.search_documents(clustered(1, seed=8, dim=dim)[0], 50)) == len(index) == 12
