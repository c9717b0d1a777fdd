"""The shared JSON I/O: atomic writes and the versioned-header checks every on-disk format relies on."""

import json
import math
from pathlib import Path

import pytest

from fair_retrieval.jsonio import DamagedFileError, read_versioned_json, write_atomically, write_json_atomically


def test_round_trip_and_no_temporary_left(tmp_path):
    path = tmp_path / "state.json"
    write_json_atomically(path, {"format": "x", "version": 1, "name": "é"})
    assert read_versioned_json(path, format_name="x", max_version=1, required=["name"])["name"] == "é"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


def test_write_replaces_existing_file(tmp_path):
    path = tmp_path / "blob"
    write_atomically(path, b"old")
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new"


def test_nan_is_refused_and_nothing_written(tmp_path):
    path = tmp_path / "state.json"
    with pytest.raises(ValueError):
        write_json_atomically(path, {"score": math.nan})
    assert not path.exists()


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("{not json", "not valid JSON"),
        (json.dumps({"format": "other", "version": 1}), "no format='x'"),
        (json.dumps(["x"]), "no format='x'"),
        (json.dumps({"format": "x", "version": 3}), "newer than this code reads"),
        (json.dumps({"format": "x", "version": "one"}), "malformed version"),
        (json.dumps({"format": "x", "version": 1}), "lacks ['name']"),
    ],
)
def test_bad_files_are_refused_with_a_reason(tmp_path, content, message):
    path = tmp_path / "state.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_versioned_json(path, format_name="x", max_version=2, required=["name"])


def test_missing_file_says_does_not_exist(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        read_versioned_json(tmp_path / "nope.json", format_name="x", max_version=1)


def test_json_nested_deeper_than_the_parser_takes_is_a_damaged_file(tmp_path: Path) -> None:
    from fair_retrieval.jsonio.versioned import parse_json

    raw = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(DamagedFileError, match=r"store\.json is damaged: its JSON is nested too deep"):
        parse_json(tmp_path / "store.json", raw, "Rebuild the store.")
