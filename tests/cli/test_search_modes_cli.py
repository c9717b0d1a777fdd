"""`fair-retrieval search --mode`: sparse (BM25 over documents.jsonl, no model loaded), hybrid (fused with the
dense results as the stores fuse them) and dense (the default), with `--language`, `--fusion` and `--alpha`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_retrieval.cli import cmd_search, main
from fair_retrieval.lexical import fuse
from tests.cli.test_search_limits import small_index  # noqa: F401  (the module's index fixture)

pytest.importorskip("faiss")
pytest.importorskip("bm25s")

BASE = ["--gpu", "off"]


def _results(index: Path, capsys: pytest.CaptureFixture[str], *args: str) -> list[dict]:  # type: ignore[type-arg]
    capsys.readouterr()
    assert main(["search", "--index", str(index), *BASE, "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)["results"]  # type: ignore[no-any-return]


def test_sparse_finds_by_words_without_loading_the_model(
    small_index: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_model(*args: object) -> None:
        raise AssertionError("a sparse search loaded the model")

    monkeypatch.setattr(cmd_search, "build_embedder", no_model)
    found = _results(small_index, capsys, "--query", "number 11", "--mode", "sparse", "-k", "3")
    assert found[0]["id"] == "d11" and found[0]["score"] > 0
    capsys.readouterr()
    assert main(["search", "--index", str(small_index), *BASE, "--query", "zebra", "--mode", "sparse"]) == 0
    assert "no document shares a word with the query" in capsys.readouterr().out


def test_hybrid_is_the_fusion_of_the_dense_and_the_sparse_results(
    small_index: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    query = ["--query", "topic 0 number 12"]  # one-character words are not words
    dense = _results(small_index, capsys, *query, "--mode", "dense", "-k", "15")
    sparse = _results(small_index, capsys, *query, "--mode", "sparse", "-k", "15")
    hybrid = _results(small_index, capsys, *query, "--mode", "hybrid", "--fusion", "relative_score", "--alpha", "0.3")
    expected = fuse(
        [(r["id"], r["score"]) for r in dense],
        [(r["id"], r["score"]) for r in sparse],
        5,
        fusion="relative_score",
        alpha=0.3,
    )
    assert [(r["id"], pytest.approx(r["score"], abs=1e-6)) for r in hybrid] == [
        (i, pytest.approx(s, abs=1e-6)) for i, s in expected
    ]
    assert hybrid[0]["id"] == "d12"


def test_bad_mode_arguments_are_refused_before_any_work(
    small_index: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["search", "--index", str(small_index), *BASE, "--query", "x", "--mode", "fuzzy"])
    for extra, message in ((["--language", "klingon"], "language must be one of"), (["--alpha", "2"], "alpha must")):
        capsys.readouterr()
        code = main(["search", "--index", str(small_index), *BASE, "--query", "x", "--mode", "hybrid", *extra])
        assert code != 0 and message in capsys.readouterr().err
