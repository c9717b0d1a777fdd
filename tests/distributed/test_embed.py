"""embed_to_shards on a local Ray (2 CPUs): equality with the single-process embedder, ids, resume, input errors."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.distributed import DistributedJobError, EmbedderSpec, ShardFolder, embed_to_shards
from fair_retrieval.distributed.source import as_dataset, scan

CALIBRATION = Calibration(basket_size=8)  # tiny texts still span several baskets, so calibration changes vectors
COUNT = 90
SHARD_ROWS = 30


def make_texts(count: int) -> list[str]:
    """Texts of 1 to 40 words, so batches mix lengths (padding) and most span several 8-token baskets."""
    return [" ".join(f"w{(i * 7 + j) % 53} t{i}" for j in range(i % 40 + 1)) for i in range(count)]


@pytest.fixture(scope="module")
def corpus(ray_local: Any) -> dict[str, Any]:
    """A Ray Dataset (3 blocks) of COUNT documents with string ids and an extra column the job must ignore.

    In memory rather than read from files: Ray's file readers cost seconds per job on a 2-CPU runner, and reading
    paths is tested on its own below.
    """
    texts = make_texts(COUNT)
    ids = [f"doc-{i:03d}" for i in range(COUNT)]
    table = pa.table({"doc_id": ids, "body": texts, "lang": ["en"] * COUNT})
    dataset = ray_local.data.from_arrow([table.slice(start, 30) for start in range(0, COUNT, 30)])
    return {"dataset": dataset, "texts": texts, "ids": ids}


@pytest.fixture(scope="module")
def resumed_job(ray_local: Any, tiny_bert: str, corpus: dict[str, Any], tmp_path_factory: pytest.TempPathFactory):
    """Run 1 stops after one shard (a stand-in for an interruption); run 2 resumes; both on 2 workers."""
    output = tmp_path_factory.mktemp("job") / "shards"
    spec = EmbedderSpec(tiny_bert, calibration=CALIBRATION, batch_size=8)
    common = dict(
        text_column="body",
        id_column="doc_id",
        workers=2,
        cpus_per_worker=0.5,
        batch_rows=16,
        shard_rows=SHARD_ROWS,
        show_progress_bar=False,
    )
    first = embed_to_shards(corpus["dataset"], output, spec, max_shards=1, **common)
    first_files = ShardFolder(output).files()
    snapshot = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in first_files}
    second = embed_to_shards(corpus["dataset"], output, spec, **common)
    return {"first": first, "second": second, "snapshot": snapshot, "folder": ShardFolder(output), "spec": spec}


def stored(folder: ShardFolder) -> tuple[list[Any], np.ndarray]:
    ids: list[Any] = []
    vectors = []
    for shard_ids, shard_vectors in folder:
        ids.extend(shard_ids.to_pylist())
        vectors.append(shard_vectors)
    return ids, np.concatenate(vectors)


def test_distributed_embeddings_equal_single_process(resumed_job: dict, tiny_bert: str, corpus: dict) -> None:
    ids, vectors = stored(resumed_job["folder"])
    order = [corpus["ids"].index(i) for i in ids]
    embedder = FairEmbedder(tiny_bert, calibration=CALIBRATION, device="cpu")
    expected = embedder.embed_documents([corpus["texts"][i] for i in order])
    assert vectors.dtype == np.float32 and vectors.shape == (COUNT, embedder.dimension)
    assert np.abs(vectors - expected).max() <= 1e-5
    # the workers really calibrated: plain vectors are far from what they stored
    plain = embedder.embed_documents([corpus["texts"][i] for i in order], calibration=None)
    assert np.abs(vectors - plain).max() > 1e-3  # the default λ 0.05 moves this tiny model by ~8e-3


def test_ids_are_preserved_and_unique(resumed_job: dict, corpus: dict) -> None:
    ids, _ = stored(resumed_job["folder"])
    assert len(ids) == len(set(ids)) == COUNT
    assert sorted(ids) == corpus["ids"]
    assert pq.read_schema(resumed_job["folder"].files()[0]).field("id").type == pa.string()


def test_resume_skips_finished_shards(resumed_job: dict) -> None:
    first, second = resumed_job["first"], resumed_job["second"]
    assert (first.embedded, first.shards_written, first.complete) == (SHARD_ROWS, 1, False)
    # the second run embedded only the rows the first shard lacked, and left that shard untouched
    assert (second.total, second.skipped, second.embedded, second.complete) == (
        COUNT,
        SHARD_ROWS,
        COUNT - SHARD_ROWS,
        True,
    )
    files = resumed_job["folder"].files()
    assert len(files) == 1 + second.shards_written == 3
    name, (mtime, content) = next(iter(resumed_job["snapshot"].items()))
    assert files[0].name == name and files[0].stat().st_mtime_ns == mtime and files[0].read_bytes() == content
    assert resumed_job["folder"].row_counts() == [SHARD_ROWS] * 3


def test_finished_job_embeds_nothing(resumed_job: dict, corpus: dict) -> None:
    folder = resumed_job["folder"]
    before = [p.stat().st_mtime_ns for p in folder.files()]
    again = embed_to_shards(
        corpus["dataset"],
        folder.path,
        resumed_job["spec"],
        text_column="body",
        id_column="doc_id",
        show_progress_bar=False,
    )
    assert (again.embedded, again.skipped, again.shards_written, again.complete) == (0, COUNT, 0, True)
    assert [p.stat().st_mtime_ns for p in folder.files()] == before


def test_resume_with_other_settings_is_refused(resumed_job: dict, corpus: dict, tiny_bert: str) -> None:
    other = EmbedderSpec(tiny_bert, calibration=Calibration(basket_size=16))
    with pytest.raises(ValueError, match=r"other settings.*calibration"):
        embed_to_shards(corpus["dataset"], resumed_job["folder"].path, other, text_column="body", id_column="doc_id")


def test_resume_with_a_changed_input_is_refused(resumed_job: dict, ray_local: Any) -> None:
    fewer = ray_local.data.from_arrow(pa.table({"doc_id": [f"doc-{i:03d}" for i in range(10)], "body": make_texts(10)}))
    with pytest.raises(ValueError, match="ids the input does not have"):
        embed_to_shards(fewer, resumed_job["folder"].path, resumed_job["spec"], text_column="body", id_column="doc_id")


def test_file_paths_are_read_and_scanned(ray_local: Any, tmp_path: Path) -> None:
    rows = [{"id": 10 + i, "text": text, "extra": {"a": i}} for i, text in enumerate(make_texts(5))]
    (tmp_path / "jsonl").mkdir()
    (tmp_path / "jsonl" / "docs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    found = scan(as_dataset(tmp_path / "jsonl"), "text", "id")  # a folder of JSONL files
    assert found.count == 5 and found.ids.type == pa.int64()
    assert sorted(found.ids.to_pylist()) == [10, 11, 12, 13, 14]
    pq.write_table(pa.table({"id": ["x", "y"], "text": ["a", "b"]}), tmp_path / "docs.parquet")
    assert as_dataset([tmp_path / "docs.parquet"]).schema().names == ["id", "text"]
    with pytest.raises(ValueError, match="mixes Parquet and JSONL"):
        as_dataset([tmp_path / "docs.parquet", tmp_path / "jsonl" / "docs.jsonl"])


# ------------------------------------------------------------------------------------------------ clear errors


def spec_for(model: str) -> EmbedderSpec:
    return EmbedderSpec(model, calibration=None)


def test_missing_columns_name_the_available_ones(ray_local: Any, tiny_bert: str, tmp_path: Path) -> None:
    dataset = ray_local.data.from_arrow(pa.table({"id": [1, 2], "body": ["a", "b"]}))
    with pytest.raises(ValueError, match=r"no column 'text'.*\['id', 'body'\].*text_column"):
        embed_to_shards(dataset, tmp_path / "s", spec_for(tiny_bert))
    assert not (tmp_path / "s").exists()


def test_empty_dataset(ray_local: Any, tiny_bert: str, tmp_path: Path) -> None:
    empty = ray_local.data.from_arrow(pa.table({"id": pa.array([], pa.int64()), "text": pa.array([], pa.string())}))
    with pytest.raises(ValueError, match="no rows"):
        embed_to_shards(empty, tmp_path / "s", spec_for(tiny_bert))


@pytest.mark.parametrize(
    ("texts", "pattern"),
    [
        (pa.array([1, 2, 3]), r"'text' must hold strings.*int64"),
        (pa.array(["a", None, "c"]), r"1 row\(s\) have a 'text' that is missing or not a string, e.g. ids \[2\]"),
    ],
)
def test_non_string_texts(ray_local: Any, tiny_bert: str, tmp_path: Path, texts: Any, pattern: str) -> None:
    dataset = ray_local.data.from_arrow(pa.table({"id": [1, 2, 3], "text": texts}))
    with pytest.raises(TypeError, match=pattern):
        embed_to_shards(dataset, tmp_path / "s", spec_for(tiny_bert))


def test_duplicate_ids(ray_local: Any, tiny_bert: str, tmp_path: Path) -> None:
    dataset = ray_local.data.from_arrow(pa.table({"id": ["a", "b", "a", "c", "b"], "text": ["x"] * 5}))
    with pytest.raises(ValueError, match=r"ids repeat: \['a', 'b'\]"):
        embed_to_shards(dataset, tmp_path / "s", spec_for(tiny_bert))


def test_bad_arguments_and_inputs(ray_local: Any, tiny_bert: str, tmp_path: Path) -> None:
    spec = spec_for(tiny_bert)
    with pytest.raises(ValueError, match="workers must be"):
        embed_to_shards([], tmp_path, spec, workers=0)
    with pytest.raises(ValueError, match="leave no CPU for Ray Data's read tasks"):
        embed_to_shards(tmp_path, tmp_path / "s", spec, workers=2, cpus_per_worker=1)
    with pytest.raises(ValueError, match="need more GPUs than this Ray has"):
        embed_to_shards(tmp_path, tmp_path / "s", spec, gpus_per_worker=1)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        embed_to_shards(tmp_path / "missing.parquet", tmp_path / "s", spec)
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match="unknown suffix"):
        embed_to_shards(tmp_path / "notes.txt", tmp_path / "s", spec)
    with pytest.raises(TypeError, match=r"ray\.data\.Dataset, a path"):
        embed_to_shards({"text": ["a"]}, tmp_path / "s", spec)
    with pytest.raises(TypeError, match="cannot be shipped to workers"):
        EmbedderSpec(FairEmbedder)  # type: ignore[arg-type]


def test_worker_failure_names_the_original_error(ray_local: Any, tmp_path: Path) -> None:
    not_a_model = tmp_path / "not-a-model"
    not_a_model.mkdir()
    (not_a_model / "config.json").write_text("{}")
    dataset = ray_local.data.from_arrow(pa.table({"id": [1, 2], "text": ["a", "b"]}))
    with pytest.raises(DistributedJobError, match=r"Embedding failed in a Ray worker: \w+(Error|Exception): "):
        embed_to_shards(dataset, tmp_path / "s", spec_for(str(not_a_model)), show_progress_bar=False)
    assert ShardFolder(tmp_path / "s").files() == []
