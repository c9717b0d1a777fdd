"""Long work announces itself: a call holding a text over `LONG_TEXT_CHARACTERS` warns before the model runs, with
its exact cost in windows and forward passes, and shows a progress bar even with `show_progress_bar=False`."""

from __future__ import annotations

import logging
import os
import subprocess
import sys

import pytest

from fair_retrieval import FairEmbedder
from fair_retrieval.embedding import embedding_report as report

LIMIT = 3_000  # stands in for LONG_TEXT_CHARACTERS (200,000 characters take a minute to embed)


@pytest.fixture(scope="module")
def embedder(minilm: str) -> FairEmbedder:
    return FairEmbedder(minilm, max_length=128, calibration=None, batch_size=4)


def test_a_long_text_is_announced_with_its_windows_and_shows_progress(
    embedder: FairEmbedder,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(report, "LONG_TEXT_CHARACTERS", LIMIT)
    monkeypatch.delenv("TQDM_DISABLE", raising=False)
    long_text = " ".join(f"Sentence {i} says something about the harbour." for i in range(120))
    assert len(long_text) > LIMIT
    texts = ["a short text", long_text]
    plan = embedder.plan_documents(texts)
    long_windows = plan.owners.count(1)
    passes = -(-len(plan.pieces) // embedder.batch_size)
    capsys.readouterr()
    with caplog.at_level(logging.WARNING, logger="fair_retrieval"):
        embedder.embed_documents(texts, show_progress_bar=False)
    warnings = [r.getMessage() for r in caplog.records if "longer than" in r.getMessage()]
    assert len(warnings) == 1
    assert f"1 text longer than {LIMIT} characters (longest: {len(long_text)})" in warnings[0]
    assert f"as {long_windows} windows, {passes} forward passes of up to 4 windows" in warnings[0]
    assert f"{passes}/{passes}" in capsys.readouterr().err  # the bar ran to its end

    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fair_retrieval"):
        embedder.embed_documents(["a short text", "another one"], show_progress_bar=False)
    assert not [r for r in caplog.records if "longer than" in r.getMessage()]
    assert capsys.readouterr().err == ""  # short work: no bar unless asked for


def test_tqdm_disable_hides_the_long_work_bar(minilm: str) -> None:
    script = (
        "from fair_retrieval import FairEmbedder\n"
        "from fair_retrieval.embedding import embedding_report as report\n"
        f"report.LONG_TEXT_CHARACTERS = {LIMIT}\n"
        f"FairEmbedder({minilm!r}, max_length=128, calibration=None).embed_documents(['word ' * 1000])\n"
        "print('done')\n"
    )
    environment = {**os.environ, "HF_HUB_OFFLINE": "1"}
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=environment)
    assert shown.returncode == 0 and "Embedding documents" in shown.stderr
    hidden = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env={**environment, "TQDM_DISABLE": "1"}
    )
    assert hidden.returncode == 0 and hidden.stdout.strip() == "done"
    assert "Embedding documents" not in hidden.stderr and "longer than" in hidden.stderr  # the warning stays
