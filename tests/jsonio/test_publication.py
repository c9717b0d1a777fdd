"""Publication: a new generation removes the files of the one it replaces that it lacks (those the replaced record
named) and never a file no record named; it may keep files of the one it replaces (segments), and segments no
record lists are removed."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fair_retrieval.jsonio import DamagedFileError, Publication, Snapshot


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


SEGMENT = re.compile(r"seg-[0-9]+\.bin")


def _publish_segments(folder: Path, new: dict[str, str], kept: list[str]) -> None:
    with Publication(folder / "record.json", ["a.bin"], patterns=[SEGMENT]) as publication:
        publication.keep_published(kept)
        for name, text in new.items():
            publication.stage(name).write_text(text, encoding="utf-8")
        publication.commit({"format": "test", "version": 1})


def test_kept_files_are_listed_with_their_old_checksums_and_dropped_ones_go_even_after_a_kill(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    _publish_segments(folder, {"a.bin": "one", "seg-1.bin": "rows one"}, [])
    before = (folder / "seg-1.bin").stat().st_ino
    _publish_segments(folder, {"a.bin": "two", "seg-2.bin": "rows two"}, ["seg-1.bin"])
    record = Snapshot.read(folder / "record.json")
    assert sorted(record.files) == ["a.bin", "seg-1.bin", "seg-2.bin"]
    assert (folder / "seg-1.bin").stat().st_ino == before  # not written again
    with record.open("seg-1.bin") as handle:
        assert record.mismatch("seg-1.bin", handle) is None
    (folder / "seg-9.bin").write_text("a file under a segment's name that no record lists", encoding="utf-8")
    (folder / "seg-3.bin.0123456789abcdef0123456789abcdef.tmp").write_text("staged by a killed save", "utf-8")
    (folder / "notes.txt").write_text("yours", encoding="utf-8")
    _publish_segments(folder, {"seg-3.bin": "rows three"}, ["seg-2.bin"])  # seg-1 and a.bin dropped
    names = ["notes.txt", "record.json", "seg-2.bin", "seg-3.bin", "seg-9.bin"]
    assert sorted(path.name for path in folder.iterdir()) == names  # a file no record named stays
    assert Snapshot.read(folder / "record.json").value["publication"]["dropped"] == ["a.bin", "seg-1.bin"]
    (folder / "seg-1.bin").write_text("rows one", encoding="utf-8")  # as if the save was killed before removing it
    _publish_segments(folder, {"seg-4.bin": "rows four"}, ["seg-2.bin", "seg-3.bin"])
    assert not (folder / "seg-1.bin").exists() and (folder / "seg-9.bin").exists()


def test_keeping_a_file_the_current_generation_lacks_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    _publish_segments(folder, {"a.bin": "one", "seg-1.bin": "rows"}, [])
    (folder / "seg-2.bin").write_text("not published", encoding="utf-8")
    for kept in (["seg-2.bin"], ["seg-5.bin"]):
        with pytest.raises(DamagedFileError, match="does not hold"):
            _publish_segments(folder, {"a.bin": "two"}, kept)
    assert (folder / "a.bin").read_text() == "one" and sorted(Snapshot.read(folder / "record.json").files) == [
        "a.bin",
        "seg-1.bin",
    ]
    (folder / "seg-1.bin").unlink()
    with pytest.raises(DamagedFileError, match=r"seg-1\.bin"):
        _publish_segments(folder, {"a.bin": "two"}, ["seg-1.bin"])
