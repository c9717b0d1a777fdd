"""The bounds on what is read as documents, queries and metadata: nesting (`validate.MAX_NESTING`), size
(`text_checks.MAX_TEXT_BYTES`), links out of the input folder, one id rule for the CLI and the stores; each is a
listed, skippable problem of the input, or a ValueError at add time, never a RecursionError or a tokenizer error."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_retrieval import text_checks
from fair_retrieval.inputs import InputProblemsError, check_query, check_store_entries, read_documents, scan_documents
from fair_retrieval.validate import MAX_NESTING, nested_deeper_than


def nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def test_nesting_is_measured_without_recursion() -> None:
    assert not nested_deeper_than(nested(MAX_NESTING - 1)) and nested_deeper_than(nested(MAX_NESTING + 1))
    assert nested_deeper_than(nested(200_000))  # far deeper than Python's recursion limit
    assert not nested_deeper_than([1, "x", {"k": [None]}], 3) and nested_deeper_than([[[[]]]], 3)


@pytest.mark.parametrize("depth", [900, 5_000])
def test_deep_metadata_is_refused_at_add_time(depth: int) -> None:
    with pytest.raises(ValueError, match=rf"\[0\] \(id 'x'\): the metadata is nested deeper than {MAX_NESTING}"):
        check_store_entries(["text"], ["x"], [nested(depth)])


def test_a_deep_jsonl_line_is_a_listed_and_skippable_problem(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    deep = '{"text": "deep", "metadata": ' + "[" * 5_000 + "]" * 5_000 + "}"
    lines = [json.dumps({"id": "a", "text": "fine"}), deep, json.dumps({"id": "b", "text": "also fine"})]
    source.write_text("\n".join(lines) + "\n")
    documents, problems = scan_documents(source)
    assert [d.id for d in documents] == ["a", "b"]
    assert len(problems) == 1 and "line 2" in problems[0] and "nested deeper" in problems[0]
    with pytest.raises(InputProblemsError, match="line 2"):
        read_documents(source)
    assert [d.id for d in read_documents(source, skip_bad=True)] == ["a", "b"]


def test_texts_over_the_size_bound_are_refused_before_the_tokenizer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(text_checks, "MAX_TEXT_BYTES", 1_000)
    monkeypatch.setattr("fair_retrieval.inputs.MAX_TEXT_BYTES", 1_000)
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "big.txt").write_text("x" * 1_001)
    (folder / "small.txt").write_text("fine")
    documents, problems = scan_documents(folder)
    assert [d.id for d in documents] == ["small.txt"] and "big.txt holds 1001 bytes" in problems[0]
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"text": "y" * 2_000}) + "\n" + json.dumps({"text": "ok"}) + "\n")
    documents, problems = scan_documents(source)
    assert len(documents) == 1 and "line 1" in problems[0] and "longer than the 1000 bytes" in problems[0]
    with pytest.raises(ValueError, match="more than the 1000 a text may have"):
        check_query("z" * 1_001)
    assert text_checks.MAX_TEXT_BYTES == 1_000


def test_the_default_size_bound_is_documented_and_checked() -> None:
    assert text_checks.MAX_TEXT_BYTES == 8 << 20
    assert text_checks.text_problem("a" * (8 << 20)) is None
    assert "more than the" in (text_checks.text_problem("a" * ((8 << 20) + 1)) or "")


def test_file_links_out_of_the_input_folder_are_listed_and_skippable(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    folder.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    (folder / "inside.txt").write_text("inside")
    (folder / "leak.txt").symlink_to(tmp_path / "secret.txt")
    (folder / "alias.txt").symlink_to(folder / "inside.txt")  # a link inside the folder is read
    documents, problems = scan_documents(folder)
    assert sorted(d.id for d in documents) == ["alias.txt", "inside.txt"]
    assert len(problems) == 1 and "leak.txt is a symbolic link" in problems[0] and "outside" in problems[0]
    assert sorted(d.id for d in read_documents(folder, skip_bad=True)) == ["alias.txt", "inside.txt"]


def test_one_id_rule_for_the_command_line_and_the_stores(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text(json.dumps({"id": "", "text": "empty id"}) + "\n" + json.dumps({"id": "ok", "text": "t"}) + "\n")
    documents, problems = scan_documents(source)
    assert [d.id for d in documents] == ["ok"] and "line 1" in problems[0] and "is empty" in problems[0]
    with pytest.raises(ValueError, match="the id is empty"):
        check_store_entries(["t"], [""])


@pytest.mark.parametrize("query", ["caf\udce9", "\ud800", "", "   "])
def test_queries_are_checked_like_documents(query: str) -> None:
    with pytest.raises(ValueError, match="the query: the text"):
        check_query(query)
    with pytest.raises(TypeError, match="must be a str"):
        check_query(b"caf\xe9")
    assert check_query("café") == "café"
