"""CLI smoke tests of `eval`, `tune` and `demo` with the real MiniLM on a small needle benchmark."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from fair_retrieval.cli import main
from fair_retrieval.cli.cmd_demo import marked_window
from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.evaluation.data.needle import build_needle_benchmark
from fair_retrieval.evaluation.data.reference_questions import QUESTION_PREFIX, with_reference_questions
from fair_retrieval.evaluation.groups import position_thirds

SMALL = ["--data", "needle", "--needle-documents", "9", "--max-tokens", "256"]


@pytest.fixture
def count_document_embeddings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts FairEmbedder.embed_documents calls (one element per call)."""
    calls: list[int] = []
    original = FairEmbedder.embed_documents

    def counted(self, texts, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(len(texts))
        return original(self, texts, *args, **kwargs)

    monkeypatch.setattr(FairEmbedder, "embed_documents", counted)
    return calls


def test_eval_prints_table_and_writes_report_and_plot(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["eval", "--model", minilm, *SMALL, "--output-dir", str(tmp_path), "--strength", "0.75"])
    assert code == 0
    out = capsys.readouterr().out
    assert "needle@256: 9 queries, 9 documents" in out
    assert re.search(r"PSI \(lower = fairer\)\s+\d\.\d{4}\s+\d\.\d{4}", out)
    report = json.loads((tmp_path / "needle-256.json").read_text(encoding="utf-8"))
    assert [run["label"] for run in report["runs"]] == ["plain", "calibrated"]
    assert report["runs"][1]["calibration"]["strength"] == 0.75
    assert report["model"]["max_length"] == 256 and report["grouping"]["groups"] == {"begin": 3, "middle": 3, "end": 3}
    assert (tmp_path / "needle-256.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_without_calibration_and_bad_data(minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["eval", "--model", minilm, *SMALL, "--output-dir", str(tmp_path), "--no-calibration"]) == 0
    report = json.loads((tmp_path / "needle-256.json").read_text(encoding="utf-8"))
    assert len(report["runs"]) == 1 and report["comparison"] is None
    assert main(["eval", "--model", minilm, "--data", "nowhere/at/all"]) == 2
    assert "neither a known dataset" in capsys.readouterr().err


def test_tune_saves_a_loadable_configuration_and_reuses_cached_embeddings(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], count_document_embeddings: list[int]
) -> None:
    args = [
        "tune",
        "--model",
        minilm,
        *SMALL,
        "--cache-dir",
        str(tmp_path / "cache"),
        "--output",
        str(tmp_path / "best.json"),
        "--report-dir",
        str(tmp_path / "runs"),
        "--strengths",
        "0.5,1.0",
        "--basket-sizes",
        "64",
        "--layer-shares",
        "0.5",
        "--isolated-modes",
        "preserve",
        "--partial-basket-modes",
        "equal",
        "--special-tokens-modes",
        "content",
        "--min-full-baskets-values",
        "1",
        "--basket-size",
        "64",
        "--strength",
        "0.5",
        "--special-tokens",
        "content",
        "--min-full-baskets",
        "1",
        "--tolerance",
        "1.0",
    ]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert "Pareto frontier" in out and "configurations evaluated" in out
    first_calls = len(count_document_embeddings)
    assert first_calls == 3  # plain + strength 0.5 + strength 1.0 (basket 64, the start, is one of them)
    trials = json.loads((tmp_path / "runs" / "tune-needle-256.json").read_text(encoding="utf-8"))
    assert len(trials["trials"]) == 3 and trials["plain"]["label"] == "plain"
    if trials["improved"]:
        chosen = Calibration.load(tmp_path / "best.json")
        assert chosen.basket_size == 64 and chosen.strength in (0.5, 1.0)
        assert chosen.to_dict() == trials["best"]["calibration"]
        # the saved file is what --config reads
        assert (
            main(
                [
                    "eval",
                    "--model",
                    minilm,
                    *SMALL,
                    "--output-dir",
                    str(tmp_path / "e"),
                    "--config",
                    str(tmp_path / "best.json"),
                ]
            )
            == 0
        )
        first_calls = len(count_document_embeddings)
    # a re-run finds every embedding in the cache
    assert main(args) == 0
    assert len(count_document_embeddings) == first_calls


def test_demo_compares_the_stack_bm25_and_our_store_on_the_same_chunks(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["demo", "--model", minilm, "--needle-documents", "9", "--output-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    flat = " ".join(out.split())  # the notes are wrapped for a terminal
    assert "a window of 256 tokens; documents of up to 512 tokens, one chunk each" in flat
    labels = ["stack's embedding", "BM25", "ours, dense", "ours, hybrid"]
    assert re.search(r"^\s+" + r"\s+".join(re.escape(label) for label in labels) + r"\s+Δ$", out, re.MULTILINE)
    # the needle questions and, on the same chunks, the questions in other words about their prose
    count = FairEmbedder(minilm).token_lengths
    task = with_reference_questions(build_needle_benchmark(count, 512, num_documents=9), count)
    words = [qid for qid in task.query_ids if qid.startswith(QUESTION_PREFIX)]
    assert words and len(task.queries) == 9 + len(words)
    groups = {name: len(ids) for name, ids in position_thirds(task).items()}
    number = r"\s+(\d\.\d{4})"
    rows = [f"ndcg@10 {name} \\(n={size}\\)" for name, size in groups.items()]
    for row in ("ndcg@10", "recall@10", *rows):
        assert re.search(rf"^{row}{number * 4}\s+[+-]\d\.\d{{4}}$", out, re.MULTILINE), row
    # the stack's embedding reads 256 of each chunk's up to 512 tokens; the tables are the report's
    assert re.search(r"9 of 9 chunks are longer than its 256-token window, so \d+% of all tokens are never", flat)
    report = json.loads((tmp_path / "needle-512-stores.json").read_text(encoding="utf-8"))
    assert [run["label"] for run in report["runs"]] == labels
    ends = [run["groups"]["end"]["ndcg@10"] for run in report["runs"]]
    end = f"ndcg@10 end \\(n={groups['end']}\\)\\s+"
    assert re.search(end + r"\s+".join(f"{v:.4f}" for v in ends), out, re.MULTILINE)
    kinds = report["by_question_kind"]
    assert {kind: row["count"] for kind, row in kinds.items()} == {"names": 9, "other words": len(words)}
    assert kinds["names"]["BM25"] == 1.0  # each needle question names its fact's unique person
    for kind, row in kinds.items():
        printed = r"\s+".join(f"{row[label]:.4f}" for label in labels)
        assert re.search(rf"^{kind} \(n={row['count']}\)\s+{printed}$", out, re.MULTILINE), kind
    assert (tmp_path / "needle-512-stores.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    # the example's first hit, from the default (hybrid) query: its best window, marked » « in the chunk's own text
    assert "our default store, hybrid, its default" in flat
    hit = re.search(
        r"  1\. (needle-d\d{3}) \(score -?\d\.\d{3}\).*\n\s+best window: characters (\d+)–(\d+) of (\d+)", out
    )
    assert hit is not None
    doc, start, end, length = hit.group(1), int(hit.group(2)), int(hit.group(3)), int(hit.group(4))
    text = task.corpus[doc]
    assert length == len(text) and 0 <= start < end <= length
    lines = out[hit.end() :].splitlines()[1:]
    marked = " ".join(line.strip() for line in lines[: next(i for i, line in enumerate(lines) if "  2. " in line)])
    assert all(len(line) <= 88 for line in lines)  # wrapped for a terminal
    inside = marked[marked.index("»") + 1 : marked.index("«")]
    window = text[start:end].split()
    assert inside.startswith(" ".join(window[:4])) and inside.endswith(" ".join(window[-3:]))


def test_demo_refuses_bad_values_before_loading_a_model(capsys: pytest.CaptureFixture[str]) -> None:
    model = "./no/such/model"  # never loaded: every value is refused first
    for arguments, message in (
        (["--needle-documents", "0"], "--needle-documents must be at least 1"),
        (["--max-tokens", "64"], "--max-tokens must be at least 128"),
        (["--query", "  "], "--query is empty"),
        (["--no-squad"], "--no-squad: SQuAD v2 is read only with --calibration"),
    ):
        assert main(["demo", "--model", model, *arguments]) == 2
        assert message in capsys.readouterr().err


def test_marked_window_shows_the_window_its_edges_and_the_answer() -> None:
    text = " ".join(f"w{i}" for i in range(200))
    start, end = text.index("w50"), text.index("w150") + len("w150")
    answer = (text.index("w100"), text.index("w100") + 4)
    line = marked_window(text, start, end, answer, width=30)
    assert line.startswith("…") and line.endswith("…")
    inner = line[line.index("»") + 1 : line.index("«")]
    assert inner.startswith("w50 w51") and inner.endswith("w149 w150") and "w100" in inner
    assert inner.count(" … ") == 2 and "w75" not in inner  # the rest of the window is left out
    assert line[: line.index("»")].rstrip().endswith("w49") and line[line.index("«") + 1 :].lstrip().startswith("w151")
    assert marked_window("a b c", 0, 5) == "»a b c«"


def test_demo_calibration_shows_plain_vs_calibrated_on_the_needle_benchmark(
    minilm: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "demo",
            "--calibration",
            "--model",
            minilm,
            "--no-squad",
            "--needle-documents",
            "9",
            "--max-tokens",
            "256",
            "--output-dir",
            str(tmp_path),
        ]
    )
    assert code == 0
    out = capsys.readouterr().out
    assert "plain embeddings find late answers worse" in out and "of the position bias removed" in out
    assert "FAISS index of 9 calibrated needle@256 documents" in out
    assert re.search(r"  1\. needle-d\d{3} \(score 0\.\d{3}\)", out)
    assert (tmp_path / "needle-256.png").read_bytes()[:4] == b"\x89PNG"


def test_eval_without_data_announces_the_default_and_names_the_missing_files(
    minilm: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    monkeypatch.delenv("FAIR_RETRIEVAL_DATA", raising=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "empty-cache"))
    with caplog.at_level("WARNING", logger="fair_retrieval.cli.common"):
        assert main(["eval", "--model", minilm, "--output-dir", str(tmp_path)]) == 2
    assert "No --data given: using squad-v2" in caplog.text
    error = capsys.readouterr().err
    assert "squad-v2-dev/dev-v2.0.json" in error and "rajpurkar.github.io" in error and "--data-dir" in error


def test_help_shows_the_defaults_of_model_and_data(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("eval", "tune"):
        with pytest.raises(SystemExit):
            main([command, "--help"])
        text = "".join(capsys.readouterr().out.split())  # argparse wraps lines, also at hyphens
        assert "(default:squad-v2)" in text and "(default:sentence-transformers/all-MiniLM-L6-v2" in text
