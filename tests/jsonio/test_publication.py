"""Publication: a new generation removes the files of the one it replaces that it lacks (those the replaced record
named) and never a file no record named."""

from __future__ import annotations

from pathlib import Path

from fair_retrieval.jsonio import Publication


def _publish(folder: Path, files: dict[str, str]) -> None:
    with Publication(folder / "record.json", ["a.bin", "b.bin", "c.bin"]) as publication:
        for name, text in files.items():
            publication.stage(name).write_text(text, encoding="utf-8")
        publication.commit({"format": "test", "version": 1})


def test_a_generation_removes_only_the_replaced_generations_files_it_lacks(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    _publish(folder, {"a.bin": "one", "b.bin": "one"})
    (folder / "c.bin").write_text("a file of yours, under a name the format may write", encoding="utf-8")
    (folder / "notes.txt").write_text("yours", encoding="utf-8")
    _publish(folder, {"a.bin": "two"})
    assert sorted(path.name for path in folder.iterdir()) == ["a.bin", "c.bin", "notes.txt", "record.json"]
    assert (folder / "a.bin").read_text() == "two"
