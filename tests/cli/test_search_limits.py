"""`fair-retrieval search` and `index` at their limits: a huge -k is clamped to what the index holds, a query that
is not valid text is refused like a document, an --output that cannot be written is one line (exit 2), and a run
that lost a race to another run says so in the command line's words."""

from __future__ import annotations

import json
import resource
from pathlib import Path

import pytest

from fair_retrieval.cli import cmd_index, main
from fair_retrieval.cli.index_folder import publish
from fair_retrieval.jsonio import StoreConflictError
from tests.test_faults import build_cli_folder, build_index

INDEX = ("index", "--output-format", "index")  # the command writing the earlier index folder

pytest.importorskip("faiss")

DOCS = [{"id": f"d{i}", "text": f"Document number {i} talks about topic {i % 3}."} for i in range(15)]


@pytest.fixture(scope="module")
def small_index(tmp_path_factory: pytest.TempPathFactory, minilm: str) -> Path:
    folder = tmp_path_factory.mktemp("limits")
    source = folder / "docs.jsonl"
    source.write_text("\n".join(json.dumps(d) for d in DOCS) + "\n")
    assert (
        main(
            [
                *INDEX,
                "--model",
                minilm,
                "--input",
                str(source),
                "--output",
                str(folder / "index"),
                "--no-calibration",
                "--gpu",
                "off",
            ]
        )
        == 0
    )
    return folder / "index"


def test_a_huge_k_is_clamped_to_the_documents_held(small_index: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    capsys.readouterr()
    assert (
        main(["search", "--index", str(small_index), "--query", "topic", "-k", "100000000", "--json", "--gpu", "off"])
        == 0
    )
    results = json.loads(capsys.readouterr().out)["results"]
    assert len(results) == 15
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 500_000, grown_kib  # not gigabytes for 15 documents


@pytest.mark.parametrize("query", ["caf\udce9", "\ud800"])  # what a non-UTF-8 argument becomes in Python
def test_a_query_that_is_not_text_is_refused_in_one_line(
    small_index: Path, capsys: pytest.CaptureFixture[str], query: str
) -> None:
    capsys.readouterr()
    assert main(["search", "--index", str(small_index), "--query", query, "--gpu", "off"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--query: the text holds a lone surrogate" in err
    assert "TextEncodeInput" not in err


def test_an_output_that_cannot_be_written_is_one_line(
    tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps(d) for d in DOCS[:3]) + "\n")

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(cmd_index, "publish", read_only)
    capsys.readouterr()
    code = main(
        [
            *INDEX,
            "--model",
            minilm,
            "--input",
            str(source),
            "--output",
            str(tmp_path / "out"),
            "--no-calibration",
            "--gpu",
            "off",
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()[-1]  # after the progress bars
    assert code == 2 and err.startswith("fair-retrieval index: error: --output") and "Traceback" not in err
    assert "cannot write the index there (Permission denied)" in err


def test_a_run_that_lost_a_race_says_so_in_command_line_words(tmp_path: Path) -> None:
    folder = build_cli_folder(tmp_path / "index", 1)
    staging = tmp_path / "staging"
    staging.mkdir()
    build_index(2).save(staging)
    with pytest.raises(StoreConflictError) as caught:
        publish(staging, folder, base=("a generation that is gone",))
    message = str(caught.value)
    assert "--output" in message and "Run the command again" in message and "Reload it" not in message


def test_an_output_folder_without_write_permission_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps(DOCS[0]) + "\n")
    monkeypatch.setattr(cmd_index.os, "access", lambda path, mode: False)  # as a read-only folder for a non-root user
    capsys.readouterr()
    assert main([*INDEX, "--model", "never-loaded", "--input", str(source), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("fair-retrieval index: error: --output") and "is not writable" in err
