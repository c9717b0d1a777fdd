"""Label-free `tune` and `diagnose` through the CLI, on a folder of the user's own text files and on JSONL."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fair_retrieval.cli import main
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.evaluation.data.load import is_document_corpus
from fair_retrieval.evaluation.data.needle import haystack_sentences
from fair_retrieval.evaluation.evaluation_report import REPORT_SCHEMA

TINY_SPACE = [
    "--strategy", "grid", "--strengths", "0.5,1.0", "--basket-sizes", "32", "--layer-shares", "0.5",
    "--isolated-modes", "preserve", "--partial-basket-modes", "equal", "--special-tokens-modes", "content",
    "--min-full-baskets-values", "1",
]  # fmt: skip
SMALL = ["--max-probes", "30", "--max-tokens", "256"]


def write_corpus(folder: Path, count: int = 12, sentences: int = 6) -> Path:
    pool = haystack_sentences()
    rng = random.Random(1)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"note{i:02d}.txt").write_text(" ".join(rng.sample(pool, sentences)), encoding="utf-8")
    return folder


def test_document_corpora_are_told_apart_from_benchmarks(tmp_path: Path) -> None:
    folder = write_corpus(tmp_path / "docs", count=2)
    assert is_document_corpus(folder)
    (folder / "qrels.json").write_text("{}", encoding="utf-8")
    assert not is_document_corpus(folder)  # a benchmark file beside the texts: not a plain corpus
    documents = tmp_path / "docs.jsonl"
    documents.write_text(json.dumps({"id": "a", "text": "Some text."}) + "\n", encoding="utf-8")
    assert is_document_corpus(documents)
    assert not is_document_corpus(documents, text_field="body")
    queries = tmp_path / "posq.jsonl"
    queries.write_text(json.dumps({"text": "doc", "question": "q?", "answers": ["x"]}) + "\n", encoding="utf-8")
    assert not is_document_corpus(queries)
    assert not is_document_corpus(tmp_path / "missing")
    hidden_home = write_corpus(tmp_path / ".cache" / "notes", count=2)  # the folder's own path may be hidden
    assert is_document_corpus(hidden_home)
    (hidden_home / ".git").mkdir()
    (hidden_home / ".git" / "qrels.json").write_text("{}", encoding="utf-8")  # hidden below it: not looked at
    assert is_document_corpus(hidden_home)


def test_label_free_tune_on_a_folder_saves_a_loadable_choice(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "my-notes")
    output, reports = tmp_path / "calibration.json", tmp_path / "reports"
    argv = ["tune", "--model", minilm, "--data", str(corpus), *SMALL, *TINY_SPACE, "--output", str(output)]
    argv += ["--report-dir", str(reports), "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "probes:my-notes: 30 queries, 12 documents; 3 configurations evaluated" in out
    trials = json.loads((reports / "tune-probes-my-notes.json").read_text(encoding="utf-8"))
    assert trials["task"]["info"]["source"] == "label-free probes"
    assert len(trials["trials"]) == 3 and set(trials["plain"]["groups"]) == {"begin", "middle", "end"}
    if trials["improved"]:
        assert Calibration.load(output).to_dict() == trials["best"]["calibration"]
    else:
        assert not output.exists() and "nothing saved" in out


def test_label_free_tune_stays_in_the_trust_region_unless_told_and_then_warns(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from fair_retrieval.tuning.calibration_search import TRUST_REGION

    corpus = write_corpus(tmp_path / "notes")
    reports = tmp_path / "reports"
    argv = ["tune", "--model", minilm, "--data", str(corpus), *SMALL, "--output", str(tmp_path / "c.json")]
    argv += ["--report-dir", str(reports), "--cache-dir", str(tmp_path / "cache")]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert f"{len(TRUST_REGION) + 1} configurations evaluated (trusted search)" in out
    trials = json.loads((reports / "tune-probes-notes.json").read_text(encoding="utf-8"))
    assert trials["strategy"] == "trusted"
    tried = [t["calibration"] for t in trials["trials"][1:]]
    assert tried == [c.to_dict() for c in TRUST_REGION]
    assert not any("outside the trust region" in r.getMessage() for r in caplog.records)
    assert main([*argv, *TINY_SPACE]) == 0  # a wide search on probes is allowed, with a warning
    assert any("outside the trust region" in r.getMessage() for r in caplog.records)


def test_label_free_tune_on_jsonl_with_another_text_field(minilm: str, tmp_path: Path) -> None:
    pool = haystack_sentences()
    rng = random.Random(2)
    path = tmp_path / "docs.jsonl"
    with path.open("w", encoding="utf-8") as handle:
        for i in range(12):
            handle.write(json.dumps({"id": f"d{i}", "body": " ".join(rng.sample(pool, 6))}) + "\n")
    argv = ["tune", "--model", minilm, "--data", str(path), "--text-field", "body", *SMALL, *TINY_SPACE]
    argv += ["--output", str(tmp_path / "c.json"), "--report-dir", str(tmp_path), "--cache-dir", str(tmp_path / "c")]
    assert main(argv) == 0
    assert json.loads((tmp_path / "tune-probes-docs.jsonl.json").read_text(encoding="utf-8"))["trials"]


def test_diagnose_prints_json_and_writes_report_and_plot(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    corpus = write_corpus(tmp_path / "docs")
    out_dir = tmp_path / "out"
    argv = ["diagnose", "--model", minilm, "--input", str(corpus), *SMALL, "--output-dir", str(out_dir)]
    assert main([*argv, "--json", "--strength", "0.75"]) == 0
    printed = json.loads(capsys.readouterr().out)
    jsonschema.validate(printed, REPORT_SCHEMA)
    assert [run["label"] for run in printed["runs"]] == ["plain", "calibrated"]
    assert printed["runs"][1]["calibration"]["strength"] == 0.75
    assert set(printed["grouping"]["groups"]) == {"begin", "middle", "end"}
    assert json.loads((out_dir / "probes-docs.json").read_text(encoding="utf-8")) == printed
    assert (out_dir / "probes-docs.png").stat().st_size > 10_000
    assert main([*argv, "--no-calibration"]) == 0  # the table form, plain only
    assert "PSI (lower = fairer)" in capsys.readouterr().out


def test_diagnose_explains_a_corpus_too_small_or_missing(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_corpus(tmp_path / "few", count=4)
    assert main(["diagnose", "--model", minilm, "--input", str(corpus), *SMALL]) == 2
    assert "probing needs at least 10" in capsys.readouterr().err
    assert main(["diagnose", "--model", minilm, "--input", str(tmp_path / "nope")]) == 2
    assert "does not exist" in capsys.readouterr().err
