"""The one walk of an input folder (`inputs.visible_files`): what every reader of a folder sees."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

from fair_retrieval.distributed.source import _format_of
from fair_retrieval.inputs import (
    InputProblemsError,
    check_store_entries,
    input_kind,
    read_documents,
    readable_texts,
    scan_documents,
    visible_files,
)
from fair_retrieval.text_checks import id_problem


def test_hidden_paths_below_the_folder_are_skipped_not_the_folder_itself(tmp_path: Path) -> None:
    corpus = tmp_path / ".cache" / "corpus"  # a corpus that lives under a hidden folder is still read
    (corpus / "b").mkdir(parents=True)
    (corpus / ".git").mkdir()
    (corpus / "b" / "2.txt").write_text("two", encoding="utf-8")
    (corpus / "a.md").write_text("one", encoding="utf-8")
    (corpus / "b" / ".swp.txt").write_text("editor backup", encoding="utf-8")
    (corpus / ".git" / "HEAD.txt").write_text("ref", encoding="utf-8")
    assert [p.relative_to(corpus).as_posix() for p in visible_files(corpus)] == ["a.md", "b/2.txt"]
    assert [d.id for d in read_documents(corpus)] == ["a.md", "b/2.txt"]


def test_the_ray_input_format_ignores_the_same_hidden_files(tmp_path: Path) -> None:
    (tmp_path / ".meta").mkdir()
    (tmp_path / ".meta" / "schema.parquet").write_bytes(b"")  # hidden: not a second format
    (tmp_path / "part-0.jsonl").write_text('{"text": "x"}\n', encoding="utf-8")
    assert _format_of(str(tmp_path)) == "jsonl"


# ---------------------------------------------------------------------------------------------------- bad input


def _bad_folder(root: Path) -> Path:
    """A folder with two good files (one with a byte-order mark) and one of each problem."""
    root.mkdir()
    (root / "good.txt").write_text("a good document", encoding="utf-8")
    (root / "bom.txt").write_bytes(b"\xef\xbb\xbfwith a byte-order mark")
    (root / "empty.txt").write_bytes(b"")
    (root / "blank.md").write_text(" \n\t\u00a0\n", encoding="utf-8")
    (root / "latin1.txt").write_bytes(b"caf\xe9")
    (root / os.fsdecode(b"caf\xe9-name.txt")).write_text("its name is Latin-1", encoding="utf-8")
    return root


def test_every_problem_of_a_folder_is_listed_at_once(tmp_path: Path) -> None:
    root = _bad_folder(tmp_path / "docs")
    with pytest.raises(InputProblemsError) as caught:
        read_documents(root)
    problems = caught.value.problems
    assert len(problems) == 4 and str(caught.value).startswith(f"4 problems in {root}; nothing was indexed.")
    assert "--skip-bad-files" in str(caught.value) and "skip_bad=True" not in str(caught.value)  # the CLI's flag
    text = "\n".join(problems)
    assert "blank.md: the text is empty or whitespace only" in text and "empty.txt: the text is empty" in text
    assert "latin1.txt is not UTF-8 text" in text
    assert "the file name 'caf\\xe9-name.txt' is not UTF-8; rename the file" in text
    text.encode("utf-8")  # the messages themselves can be printed


def test_skip_bad_reads_the_rest_and_strips_a_byte_order_mark(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    root = _bad_folder(tmp_path / "docs")
    with caplog.at_level(logging.WARNING, logger="fair_retrieval"):
        documents = read_documents(root, skip_bad=True)
    assert {document.id: document.text for document in documents} == {
        "bom.txt": "with a byte-order mark",
        "good.txt": "a good document",
    }
    assert any(record.getMessage().startswith("Skipped 4 bad entries of") for record in caplog.records)


def test_every_problem_of_a_jsonl_file_is_listed_at_once(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    lines = [
        '{"id": "a", "text": "fine"}',
        '{"id": "b", "text": "bad\\udcff"}',
        '{"id": "c\\ud800", "text": "bad id"}',
        '{"id": "d", "text": "bad metadata", "metadata": {"k": ["x", "\\udcff"]}}',
        '{"id": "e", "text": "   "}',
        '{"id": "f", "text": "broken"',
        '{"id": "a", "text": "repeated"}',
    ]
    source.write_bytes(b"\xef\xbb\xbf" + "\n".join(lines).encode("utf-8") + b"\n")
    documents, problems = scan_documents(source)
    assert [document.id for document in documents] == ["a"]  # the byte-order mark of line 1 is no problem
    assert len(problems) == 6, problems
    assert "line 2: the text holds a lone surrogate '\\udcff' at character 3" in problems[0]
    assert "line 3: the 'id' holds a lone surrogate" in problems[1]
    assert "line 4: the metadata['k'][1] holds a lone surrogate" in problems[2]
    assert "line 5: the text is empty or whitespace only" in problems[3]
    assert "line 6: not valid JSON" in problems[4] and "line 7: id 'a' was already used on line 1" in problems[5]
    with pytest.raises(InputProblemsError, match="6 problems"):
        read_documents(source)


def test_a_single_problem_reads_as_before(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text('{"id": "a", "text": "fine"}\n{"id": "b", "text": ""}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"^\S+docs\.jsonl line 2: the text is empty or whitespace only"):
        read_documents(source)
    with pytest.raises(ValueError, match="Found no documents"):  # skipping everything leaves nothing to index
        read_documents(_only_bad(tmp_path), skip_bad=True)


def _only_bad(tmp_path: Path) -> Path:
    source = tmp_path / "bad.jsonl"
    source.write_text('{"text": " "}\n', encoding="utf-8")
    return source


@pytest.mark.parametrize(
    ("texts", "ids", "metadatas", "message"),
    [
        (["fine", ""], ["a", "b"], None, r"\[1\] \(id 'b'\): the text is empty or whitespace only"),
        (["fine", " \n "], ["a", "b"], None, r"\[1\] \(id 'b'\): the text is empty"),
        (["bad\udcff"], ["a"], None, r"\[0\] \(id 'a'\): the text holds a lone surrogate '\\udcff' at character 3"),
        (
            ["fine", "b\x00d"],
            ["a", "b"],
            None,
            r"\[1\] \(id 'b'\): the text holds a NUL character \('\\x00'\) at character 1",
        ),
        (["fine"], ["a\udcff"], None, r"\[0\] \(id 'a\\udcff'\): the id holds a lone surrogate"),
        (["fine"], [""], None, r"\[0\] \(id ''\): the id is empty"),
        (["fine"], ["a"], [{"k": {"x": "\udcff"}}], r"metadata\['k'\]\['x'\] holds a lone surrogate"),
        (["fine"], ["a"], [{"\udcff": 1}], r"metadata key '\\udcff' holds a lone surrogate"),
    ],
)
def test_store_entries_are_checked_with_position_and_id(
    texts: list[str], ids: list[str], metadatas: list[dict] | None, message: str
) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        check_store_entries(texts, ids, metadatas)
    str(caught.value).encode("utf-8")  # printable
    check_store_entries(["fine", "text"], ["a", "b"], [{"k": "é"}, {}])  # good entries pass


def test_jsonl_ids_are_strings_as_in_the_stores(tmp_path: Path) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text('{"id": 7, "text": "seven"}\n{"id": "8", "text": "eight"}\n', encoding="utf-8")
    documents = read_documents(source)
    assert [document.id for document in documents] == ["7", "8"]
    assert all(id_problem(document.id) is None for document in documents)
    source.write_text('{"id": 7, "text": "seven"}\n{"id": "7", "text": "seven again"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="id '7' was already used on line 1"):
        read_documents(source)
    source.write_text('{"id": "", "text": "no id"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match="is empty"):
        read_documents(source)


def test_readable_texts_are_a_list_of_strings_the_tokenizer_reads_checked_whole() -> None:
    assert readable_texts(iter(["a", "b"])) == ["a", "b"]
    with pytest.raises(TypeError, match=r"queries must be a list of strings, got a single str"):
        readable_texts("a", "queries")
    with pytest.raises(TypeError, match=r"texts\[1\] is int"):
        readable_texts(["a", 3])
    with pytest.raises(ValueError, match=r"^queries\[1\] "):
        readable_texts(["fine", "bad \ud800"], "queries")


def test_a_pdf_input_is_refused_as_not_supported_not_read_as_jsonl(tmp_path: Path) -> None:
    pdf = tmp_path / "report.pdf"
    pdf.write_bytes(b"%PDF-1.7\n%binary\n1 0 obj\n")
    with pytest.raises(ValueError, match=r"report\.pdf is a PDF .*not supported: extract its text first"):
        input_kind(pdf)
    renamed = tmp_path / "report.jsonl"  # a PDF by its content, whatever its name
    renamed.write_bytes(pdf.read_bytes())
    with pytest.raises(ValueError, match="not supported"):
        input_kind(renamed)
    (tmp_path / "docs.jsonl").write_text('{"text": "a"}\n')
    assert input_kind(tmp_path / "docs.jsonl") == "jsonl"


def test_a_utf16_file_is_named_as_utf16(tmp_path: Path) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "wide.txt").write_text("The ferry leaves at nine.", encoding="utf-16")  # with its byte-order mark
    with pytest.raises(ValueError, match=r"wide\.txt is not UTF-8 text \(it is UTF-16: it starts with a UTF-16 byte"):
        read_documents(root)
    jsonl = tmp_path / "wide.jsonl"
    jsonl.write_text('{"text": "The ferry leaves at nine."}\n', encoding="utf-16")
    with pytest.raises(ValueError, match=r"line 1: not UTF-8 \(it is UTF-16"):
        read_documents(jsonl)


def _unreadable(monkeypatch: pytest.MonkeyPatch, name: str, error: OSError) -> None:
    """Make reading the file called `name` raise `error` (tests run as root, whom chmod 000 does not stop)."""
    read_bytes = Path.read_bytes

    def refusing(self: Path) -> bytes:
        if self.name == name:
            raise error
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", refusing)


def _two_files(root: Path) -> Path:
    root.mkdir()
    (root / "good.txt").write_text("a good document", encoding="utf-8")
    (root / "locked.txt").write_text("a document no one may read", encoding="utf-8")
    return root


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (PermissionError(13, "Permission denied"), "Permission denied"),
        (OSError(5, "Input/output error"), "Input/output error"),
        (IsADirectoryError(21, "Is a directory"), "Is a directory"),
    ],
)
def test_a_file_the_os_will_not_read_is_a_listed_problem_and_skipped_on_request(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: OSError, cause: str
) -> None:
    root = _two_files(tmp_path / "docs")
    _unreadable(monkeypatch, "locked.txt", error)
    with pytest.raises(InputProblemsError) as caught:
        read_documents(root)
    assert caught.value.problems == [
        f"{root / 'locked.txt'} cannot be read ({cause}); check that it exists and is readable, or remove it."
    ]
    assert [document.id for document in read_documents(root, skip_bad=True)] == ["good.txt"]


def test_a_file_deleted_between_listing_and_reading_is_a_listed_problem(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import fair_retrieval.inputs as inputs

    root = _two_files(tmp_path / "docs")
    listed = inputs.text_file_names

    def then_deleted(folder: Path) -> list[str]:
        names = listed(folder)
        (folder / "locked.txt").unlink()  # another program removes it after the walk
        return names

    monkeypatch.setattr(inputs, "text_file_names", then_deleted)
    documents, problems = scan_documents(root)
    assert [document.id for document in documents] == ["good.txt"]
    assert len(problems) == 1 and f"{root / 'locked.txt'} cannot be read (No such file or directory)" in problems[0]


def test_an_unreadable_jsonl_file_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text('{"id": "a", "text": "one"}\n', encoding="utf-8")
    opened = Path.open

    def refusing(self: Path, *args: object, **kwargs: object) -> object:
        if self == source:
            raise PermissionError(13, "Permission denied")
        return opened(self, *args, **kwargs)  # type: ignore[call-overload]

    monkeypatch.setattr(Path, "open", refusing)
    for skip_bad in (False, True):  # the one input file: nothing to skip to
        with pytest.raises(ValueError, match=r"docs.jsonl cannot be read \(Permission denied\)"):
            read_documents(source, skip_bad=skip_bad)
