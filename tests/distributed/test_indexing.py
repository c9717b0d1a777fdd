"""`fair-retrieval index --engine ray` builds a store folder: the same store as the local engine (same windows of
the store's shape, embedded by the Ray workers), which both vector stores open."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.cli import main
from fair_retrieval.stores import StoreWindows
from fair_retrieval.stores.store_folder import load_store_folder
from tests.distributed.test_embed import make_texts
from tests.ranking import assert_same_ranking

TEXTS = make_texts(9)


def test_a_ray_store_folder_is_the_local_one(ray_local: Any, tiny_bert: str, tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    rows = [{"id": f"d{i}", "text": text, "metadata": {"n": i}} for i, text in enumerate(TEXTS)]
    source.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    common = ["--model", tiny_bert, "--input", str(source), "--basket-size", "8", "--gpu", "off", "--max-length", "32"]
    ray_flags = ["--engine", "ray", "--workers", "1", "--shard-size", "4"]
    assert main(["index", *common, "--output", str(tmp_path / "ray"), *ray_flags]) == 0
    assert main(["index", *common, "--output", str(tmp_path / "local")]) == 0
    on_ray, local = (load_store_folder(tmp_path / name, gpu=False) for name in ("ray", "local"))
    assert on_ray.multivector and on_ray.windows == local.windows and on_ray.windows is not None
    assert len(on_ray.windows.tokens) == 2 and on_ray.windows.boundaries == "text"
    assert on_ray.recorded_identity == local.recorded_identity
    assert on_ray.records.keys == local.records.keys == [row["id"] for row in rows]
    ray_index, local_index = on_ray.index, local.index
    assert ray_index is not None and local_index is not None
    assert ray_index.window_count == local_index.window_count > len(rows)  # several windows of both sizes
    for int_id, _ in local.get(local.records.keys):
        assert ray_index.window_spans(int_id) == local_index.window_spans(int_id)
        np.testing.assert_allclose(
            ray_index.get_window_vectors(int_id), local_index.get_window_vectors(int_id), atol=1e-5
        )
    assert (tmp_path / "ray" / "shards").is_dir()  # kept, so an interrupted run resumes


def test_a_pooled_ray_store_folder_opens_in_langchain_as_the_local_one(
    ray_local: Any, tiny_bert: str, tmp_path: Path
) -> None:
    pytest.importorskip("langchain_fair")
    from langchain_fair import FairEmbeddings, FaissVectorStore

    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps({"id": f"d{i}", "text": text}) for i, text in enumerate(TEXTS)) + "\n")
    common = ["--model", tiny_bert, "--input", str(source), "--basket-size", "8", "--gpu", "off", "--pooled"]
    ray_flags = ["--engine", "ray", "--workers", "1", "--shard-size", "4"]
    assert main(["index", *common, "--output", str(tmp_path / "ray"), *ray_flags]) == 0
    assert main(["index", *common, "--output", str(tmp_path / "local")]) == 0
    embeddings = FairEmbeddings(embedder=FairEmbedder(tiny_bert, device="cpu", calibration=Calibration(basket_size=8)))
    on_ray, local = (FaissVectorStore.load_local(tmp_path / name, embeddings, gpu=False) for name in ("ray", "local"))
    assert not on_ray.multivector and on_ray.ids == local.ids == [f"d{i}" for i in range(len(TEXTS))]
    for query in ("a question", "another question about the text"):
        found = on_ray.similarity_search_with_score(query, k=4)
        expected = local.similarity_search_with_score(query, k=4)
        assert [doc.id for doc, _ in found] == [doc.id for doc, _ in expected]
        np.testing.assert_allclose([s for _, s in found], [s for _, s in expected], atol=1e-5)


def test_window_flags_give_the_embedders_own_windows_on_ray_too(ray_local: Any, tiny_bert: str, tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps({"id": f"d{i}", "text": text}) for i, text in enumerate(TEXTS)) + "\n")
    common = ["--model", tiny_bert, "--input", str(source), "--gpu", "off", "--max-length", "32"]
    flags = ["--window-boundaries", "tokens", "--window-tokens", "12"]
    ray_flags = ["--engine", "ray", "--workers", "1", "--shard-size", "4"]
    assert main(["index", *common, *flags, "--output", str(tmp_path / "ray"), *ray_flags]) == 0
    assert main(["index", *common, *flags, "--output", str(tmp_path / "local")]) == 0
    on_ray, local = (load_store_folder(tmp_path / name, gpu=False) for name in ("ray", "local"))
    assert on_ray.windows == local.windows == StoreWindows()  # the embedder's own: 12-token windows
    assert on_ray.recorded_identity == local.recorded_identity
    ray_index, local_index = on_ray.index, local.index
    assert ray_index is not None and local_index is not None
    assert ray_index.window_count == local_index.window_count > 2 * len(TEXTS)
    for int_id, _ in local.get(local.records.keys):
        assert ray_index.window_spans(int_id) == local_index.window_spans(int_id)


def test_ray_workers_fill_a_qdrant_collection_as_the_local_engine(
    ray_local: Any, tiny_bert: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`index --engine ray --qdrant`: the workers embed into --shards, the collection gets their windows, and it
    answers as the collection the local engine writes; a second run continues from the shards."""
    pytest.importorskip("qdrant_client")
    source = tmp_path / "docs.jsonl"
    rows = [{"id": f"d{i}", "text": text, "metadata": {"n": i}} for i, text in enumerate(TEXTS)]
    source.write_text("\n".join(json.dumps(row) for row in rows) + "\n")
    common = ["--model", tiny_bert, "--input", str(source), "--basket-size", "8", "--max-length", "32"]
    ray_flags = ["--engine", "ray", "--workers", "1", "--shard-size", "4", "--shards", str(tmp_path / "shards")]
    on_ray = ["--qdrant", str(tmp_path / "ray"), "--collection", "docs"]
    local = ["--qdrant", str(tmp_path / "local"), "--collection", "docs"]
    assert main(["index", *common, *on_ray, *ray_flags]) == 0
    assert "9 documents there now" in capsys.readouterr().out
    shards = sorted((tmp_path / "shards").glob("shard-*.parquet"))
    assert shards  # kept, so a second run continues from them
    assert main(["index", *common, *local]) == 0
    for query in ("w3 t4 w10", TEXTS[5][-40:]):
        for mode in ("dense", "sparse", "hybrid"):
            found = []
            for where in (on_ray, local):
                capsys.readouterr()
                assert main(["search", *where, "--query", query, "-k", "5", "--mode", mode, "--json"]) == 0
                hits = json.loads(capsys.readouterr().out)["results"]
                found.append([(h["id"], h["score"], h.get("best_window")) for h in hits])
            assert_same_ranking(found[0], found[1])
            assert found[0]
            if mode != "sparse":  # sparse: only the documents holding a query word
                assert len(found[0]) == 5
    stamps = [path.stat().st_mtime_ns for path in shards]
    assert main(["index", *common, *on_ray, *ray_flags]) == 0  # continues: the shards are kept, not embedded again
    assert [path.stat().st_mtime_ns for path in shards] == stamps
    assert "9 documents there now" in capsys.readouterr().out
    assert main(["index", *common, *on_ray, *ray_flags[:-2]]) == 2  # no --shards
    assert "keeps its embedding shards in --shards FOLDER" in capsys.readouterr().err
    assert main(["index", *common, *local, *ray_flags[-2:]]) == 2  # --shards without --engine ray
    assert "add --engine ray, or drop it" in capsys.readouterr().err
