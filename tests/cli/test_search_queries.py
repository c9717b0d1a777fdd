"""`fair-retrieval search` with several queries per model load: `--query` repeated, `--queries FILE`, and
`--queries -` (standard input, answered line by line); every query is checked, a file's before the model loads."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from fair_retrieval.cli import cmd_search, main
from tests.cli.test_search_limits import small_index  # noqa: F401  (the module's index fixture)

pytest.importorskip("faiss")

BASE = ["--gpu", "off", "-k", "2"]


def _search(index: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = main(["search", "--index", str(index), *BASE, *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_repeated_queries_load_the_model_once_and_answer_each_as_one_alone(
    small_index: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    alone = [
        json.loads(_search(small_index, capsys, "--query", query, "--json")[1]) for query in ("topic 1", "number 7")
    ]
    builds = []
    original = cmd_search.build_embedder
    monkeypatch.setattr(cmd_search, "build_embedder", lambda *a: builds.append(a) or original(*a))
    code, out, _ = _search(small_index, capsys, "--query", "topic 1", "--query", "number 7", "--json")
    assert code == 0 and len(builds) == 1
    lines = out.splitlines()
    assert [json.loads(line) for line in lines] == alone  # JSON Lines: one object per query, in order
    assert len(_search(small_index, capsys, "--query", "topic 1", "--json")[1].splitlines()) == 1  # one query too
    code, out, _ = _search(small_index, capsys, "--query", "topic 1", "--query", "number 7")
    assert code == 0 and out.count("Query: ") == 2 and out.index("Query: topic 1") < out.index("Query: number 7")
    assert len(out.splitlines()) == 2 + 2 * 2


def test_a_queries_file_is_checked_whole_before_the_model_loads(
    small_index: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    queries = tmp_path / "queries.txt"
    queries.write_bytes("\ufefftopic 1\r\n\n   \nnumber 7\n".encode())
    code, out, _ = _search(small_index, capsys, "--queries", str(queries), "--json")
    assert code == 0
    assert [json.loads(line)["query"] for line in out.splitlines()] == ["topic 1", "number 7"]

    def no_model(*args: object) -> None:
        raise AssertionError("the model was loaded before the queries were checked")

    monkeypatch.setattr(cmd_search, "build_embedder", no_model)
    queries.write_bytes(b"topic 1\ncaf\xe9\n")
    code, _, err = _search(small_index, capsys, "--queries", str(queries))
    assert code == 2 and f"{queries} line 2: not UTF-8" in err
    queries.write_text("\n \n")
    code, _, err = _search(small_index, capsys, "--queries", str(queries))
    assert code == 2 and "no queries" in err
    code, _, err = _search(small_index, capsys, "--queries", str(tmp_path))
    assert code == 2 and "not a file" in err
    code, _, err = _search(small_index, capsys, "--query", "topic", "--query", "")
    assert code == 2 and "--query is empty" in err


def test_standard_input_is_answered_line_by_line(
    small_index: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Stdin:
        buffer = io.BytesIO(b"topic 2\nnumber 3\n")

    monkeypatch.setattr(cmd_search.sys, "stdin", Stdin())
    code, out, _ = _search(small_index, capsys, "--queries", "-")
    assert code == 0 and out.count("Query: ") == 2 and "Query: number 3" in out
    Stdin.buffer = io.BytesIO(b"topic 2\n\xff\n")
    code, out, err = _search(small_index, capsys, "--queries", "-")
    assert code == 2 and "standard input line 2: not UTF-8" in err
    assert out.count("Query: ") == 1  # the first line was answered as it came


def test_query_and_queries_exclude_each_other(
    small_index: Path,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit):
        main(["search", "--index", str(small_index), "--query", "a", "--queries", "-"])
    with pytest.raises(SystemExit):
        main(["search", "--index", str(small_index)])
