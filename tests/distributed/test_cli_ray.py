"""`fair-retrieval index --engine ray` then `search`, in process, on the session's local Ray with a tiny model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval import Calibration, FairEmbedder, FaissIndex, MultiVectorIndex
from fair_retrieval.cli import main
from fair_retrieval.index import DEFAULT_AGGREGATE
from tests.distributed.test_embed import make_texts

INDEX = ("index", "--output-format", "index")  # the command writing the earlier index folder

TEXTS = make_texts(12)
OWN_FILES = ("index.faiss", "index.json", "documents.jsonl", "manifest.json")


@pytest.fixture(scope="module")
def ray_index(ray_local: Any, tiny_bert: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("cli-ray")
    source = folder / "docs.jsonl"
    source.write_text("\n".join(json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(TEXTS)) + "\n")
    command = [
        *INDEX, "--engine", "ray", "--model", tiny_bert, "--input", str(source), "--output", str(folder / "index"),
        "--basket-size", "8", "--workers", "1", "--shard-size", "5",
    ]  # fmt: skip
    assert main(command) == 0
    return {"output": folder / "index", "command": command}


def test_ray_index_holds_the_calibrated_vectors(ray_index: dict, tiny_bert: str) -> None:
    output = ray_index["output"]
    manifest = json.loads((output / "manifest.json").read_text())
    assert (manifest["engine"], manifest["kind"], manifest["count"], manifest["dim"]) == ("ray", "flat", 12, 64)
    assert manifest["calibration"] == Calibration(basket_size=8).to_dict()
    rows = [json.loads(line) for line in (output / "documents.jsonl").read_text().splitlines()]
    assert [row["id"] for row in rows] == [f"d{i}" for i in range(12)]
    assert sorted(p.name for p in (output / "shards").glob("shard-*.parquet")) == [
        "shard-000000.parquet",
        "shard-000001.parquet",
        "shard-000002.parquet",
    ]
    index = FaissIndex.load(output, gpu=False)
    np.testing.assert_array_equal(index.ids, np.arange(12))  # vector id i = row i of documents.jsonl
    expected = FairEmbedder(tiny_bert, calibration=Calibration(basket_size=8)).embed_documents(TEXTS)
    assert np.abs(index.get_vectors(np.arange(12)) - expected).max() <= 1e-5


def test_search_reads_the_ray_index(ray_index: dict, tiny_bert: str, capsys: pytest.CaptureFixture[str]) -> None:
    query = "w3 t4 w10"
    capsys.readouterr()
    search = ["search", "--index", str(ray_index["output"]), "--query", query, "-k", "4", "--json"]
    assert main([*search, "--mode", "dense"]) == 0  # held against the vectors' own ranking
    results = json.loads(capsys.readouterr().out)["results"]
    assert main(search) == 0  # a search that names no mode is the hybrid one
    default = json.loads(capsys.readouterr().out)
    assert main([*search, "--mode", "hybrid"]) == 0
    assert default == json.loads(capsys.readouterr().out)
    embedder = FairEmbedder(tiny_bert, calibration=Calibration(basket_size=8))
    scores = embedder.embed_documents(TEXTS) @ embedder.embed_queries([query])[0]
    best = np.argsort(-scores)[:4]
    assert [r["id"] for r in results] == [f"d{i}" for i in best]
    np.testing.assert_allclose([r["score"] for r in results], scores[best], atol=1e-5)


def test_interrupted_ray_index_resumes_from_its_shards(ray_index: dict) -> None:
    output = ray_index["output"]
    shards = sorted((output / "shards").glob("shard-*.parquet"))
    before = {p.name: p.stat().st_mtime_ns for p in shards}
    vectors = FaissIndex.load(output, gpu=False).get_vectors(np.arange(12))
    for name in OWN_FILES:  # as if the run had stopped after embedding, before writing the index
        (output / name).unlink()
    assert main(ray_index["command"]) == 0
    assert {p.name: p.stat().st_mtime_ns for p in (output / "shards").glob("shard-*.parquet")} == before
    np.testing.assert_array_equal(FaissIndex.load(output, gpu=False).get_vectors(np.arange(12)), vectors)


def test_ray_engine_options_are_checked(ray_index: dict, capsys: pytest.CaptureFixture[str]) -> None:
    command = [*ray_index["command"], "--kind", "hnsw", "--overwrite"]
    assert main(command) == 2
    assert "--engine ray builds flat/ivfpq indices, not 'hnsw'" in capsys.readouterr().err
    assert main([*ray_index["command"], "--factory", "IVF4,Flat", "--opq", "--overwrite"]) == 2
    assert "--factory names the whole index: drop --opq" in capsys.readouterr().err
    other = [*ray_index["command"][:-6], "--basket-size", "16", "--workers", "1", "--shard-size", "5"]
    for name in OWN_FILES:
        (ray_index["output"] / name).unlink(missing_ok=True)
    assert main(other) == 2  # the shards were made with basket_size=8: resuming with 16 is refused
    assert "holds shards made with other settings (embedder differ" in capsys.readouterr().err


def test_ray_multivector_index_equals_the_local_one_and_keeps_documents_whole_in_shards(
    ray_local: Any, tiny_bert: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps({"id": f"d{i}", "text": t}) for i, t in enumerate(TEXTS)) + "\n")
    common = ["--model", tiny_bert, "--input", str(source), "--max-length", "16", "--no-calibration", "--multivector"]
    ray_out, local_out = tmp_path / "ray", tmp_path / "local"
    ray_flags = ["--engine", "ray", "--workers", "1", "--shard-size", "7"]
    assert main([*INDEX, *common, "--output", str(ray_out), *ray_flags]) == 0
    assert main([*INDEX, *common, "--output", str(local_out)]) == 0
    on_ray, local = MultiVectorIndex.load(ray_out, gpu=False), MultiVectorIndex.load(local_out, gpu=False)
    assert local.window_count > len(local) == len(on_ray) == 12 and on_ray.window_count == local.window_count
    for i in range(12):
        assert on_ray.window_spans(i) == local.window_spans(i)
        np.testing.assert_allclose(on_ray.get_window_vectors(i), local.get_window_vectors(i), atol=1e-5)
    owners = [pq.read_table(path).column("id").to_pylist() for path in sorted((ray_out / "shards").glob("shard-*"))]
    assert len(owners) > 1 and sum(len(set(ids)) for ids in owners) == 12  # no document split between shards
    manifest = json.loads((ray_out / "manifest.json").read_text())
    assert (manifest["engine"], manifest["multivector"]) == ("ray", {"aggregate": DEFAULT_AGGREGATE})
    capsys.readouterr()
    assert main(["search", "--index", str(ray_out), "--query", "w3 t4 w10", "-k", "3", "--json"]) == 0
    ray_results = json.loads(capsys.readouterr().out)["results"]
    assert main(["search", "--index", str(local_out), "--query", "w3 t4 w10", "-k", "3", "--json"]) == 0
    local_results = json.loads(capsys.readouterr().out)["results"]
    assert [(r["id"], r["best_window"]) for r in ray_results] == [(r["id"], r["best_window"]) for r in local_results]
