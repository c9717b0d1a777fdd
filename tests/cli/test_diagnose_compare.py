"""`fair-retrieval diagnose --compare-with huggingface`: what is run today (plain sentence-transformers, truncated)
measured next to FairEmbedder on the same probes, with the share of document tokens each never embeds."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from fair_retrieval.cli import main
from fair_retrieval.evaluation.data.needle import haystack_sentences
from fair_retrieval.evaluation.evaluation_report import REPORT_SCHEMA


def write_long_corpus(folder: Path, count: int = 12, sentences: int = 18) -> Path:
    """`count` text files of 387–576 MiniLM tokens: past the model's own 256-token window, within 512."""
    pool = haystack_sentences()
    rng = random.Random(3)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        (folder / f"doc{i:02d}.txt").write_text(" ".join(rng.sample(pool, sentences)), encoding="utf-8")
    return folder


def test_diagnose_compares_what_you_run_today_with_ours(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    corpus = write_long_corpus(tmp_path / "docs")
    out_dir, cache = tmp_path / "out", tmp_path / "cache"
    argv = ["diagnose", "--model", minilm, "--input", str(corpus), "--max-probes", "30", "--device", "cpu"]
    argv += ["--output-dir", str(out_dir), "--cache-dir", str(cache), "--compare-with", "huggingface"]
    assert main([*argv, "--json", "--min-full-baskets", "1"]) == 0
    report = json.loads(capsys.readouterr().out)
    jsonschema.validate(report, REPORT_SCHEMA)
    assert [run["label"] for run in report["runs"]] == ["huggingface", "plain", "calibrated"]
    today, plain, calibrated = (run["tokens_never_embedded"] for run in report["runs"])
    assert today["max_length"] == 256 and today["truncated_documents"] == 12 and today["share"] > 0.3
    assert plain == calibrated and plain["max_length"] == 512 and plain["share"] == 0.0
    assert today["tokens"] == plain["tokens"]  # the same documents, counted in the same tokens
    assert report["comparison"]["baseline"] == "huggingface" and report["comparison"]["candidate"] == "calibrated"
    assert report["runs"][2]["calibrated_documents"] == 12
    assert (out_dir / "probes-docs.png").stat().st_size > 10_000

    assert main([*argv, "--no-calibration"]) == 0  # the table; the embeddings come from the cache
    table = capsys.readouterr().out
    header = next(line for line in table.splitlines() if "huggingface" in line)
    assert header.split() == ["huggingface", "plain", "Δ"]
    row = next(line for line in table.splitlines() if line.startswith("tokens never embedded"))
    assert row.split()[-2:] == [f"{today['share']:.1%}", "0.0%"]
    assert "huggingface: 12 of 12 documents exceed the 256-token window" in table
    assert "plain vs huggingface: nDCG@10" in table


def test_diagnose_without_compare_with_reports_ours_only(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus = write_long_corpus(tmp_path / "docs")
    argv = ["diagnose", "--model", minilm, "--input", str(corpus), "--max-probes", "30", "--max-tokens", "256"]
    assert main([*argv, "--output-dir", str(tmp_path / "out"), "--no-calibration", "--json"]) == 0
    (run,) = json.loads(capsys.readouterr().out)["runs"]
    assert run["label"] == "plain" and run["tokens_never_embedded"]["share"] == 0.0  # windows: every token counts
    assert run["tokens_never_embedded"]["max_length"] == 256


def test_compare_with_accepts_only_what_it_knows(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["diagnose", "--model", minilm, "--input", str(tmp_path), "--compare-with", "openai"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'openai'" in capsys.readouterr().err
