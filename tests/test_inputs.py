"""The one walk of an input folder (`inputs.visible_files`): what every reader of a folder sees."""

from __future__ import annotations

from pathlib import Path

from fair_retrieval.distributed.source import _format_of
from fair_retrieval.inputs import read_documents, visible_files


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
