"""A store file saved with its index folder in one commit, and read back consistently."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fair_retrieval import FaissIndex
from fair_retrieval.jsonio import ChangedWhileReadingError
from fair_retrieval.stores import files
from fair_retrieval.stores.files import load_store_file, save_store_file

pytest.importorskip("faiss")


def _index(count: int) -> FaissIndex:
    index = FaissIndex(4, gpu=False)
    index.add(np.eye(4, dtype=np.float32)[:count])
    return index


def _load(store_file: Path, index_folder: Path) -> tuple[dict, int]:
    def restore(raw: bytes) -> tuple[dict, int]:
        state = json.loads(raw)
        held = len(FaissIndex.load(index_folder, gpu=False)) if state["has_index"] else 0
        return state, held

    return load_store_file(store_file, index_folder, restore, missing="nothing saved here")


def test_the_store_file_and_the_index_are_published_together(tmp_path: Path) -> None:
    store_file, index_folder = tmp_path / "store.json", tmp_path / "index"
    save_store_file(store_file, b'{"has_index": true, "n": 3}', _index(3), index_folder)
    assert _load(store_file, index_folder) == ({"has_index": True, "n": 3}, 3)
    record = json.loads((index_folder / "index.json").read_text())
    assert "../store.json" in json.dumps(record)  # the index's record names the store file it was saved with
    assert sorted(path.name for path in tmp_path.iterdir()) == ["index", "store.json"]  # no temporary left


def test_a_store_without_an_index_replacing_one_with_an_index(tmp_path: Path) -> None:
    store_file, index_folder = tmp_path / "store.json", tmp_path / "index"
    save_store_file(store_file, b'{"has_index": true, "n": 2}', _index(2), index_folder)
    save_store_file(store_file, b'{"has_index": false, "n": 0}', None, index_folder, overwrite=True)
    assert _load(store_file, index_folder) == ({"has_index": False, "n": 0}, 0)
    save_store_file(tmp_path / "alone.json", b'{"has_index": false}', None, tmp_path / "alone")
    # a store without vectors has a commit record too (it lists the store file, and no index file)
    assert json.loads((tmp_path / "alone" / "index.json").read_text())["publication"]["files"].keys() == {
        "../alone.json"
    }
    assert _load(tmp_path / "alone.json", tmp_path / "alone")[1] == 0


def test_a_missing_store_file_says_what_writes_one(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nothing saved here"):
        _load(tmp_path / "store.json", tmp_path / "index")


def test_an_error_during_a_save_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure while another save replaces the files is retried, not reported; a lasting one is reported."""
    store_file, index_folder = tmp_path / "store.json", tmp_path / "index"
    save_store_file(store_file, b'{"has_index": true, "n": 1}', _index(1), index_folder)
    calls = []

    def restore(raw: bytes) -> str:
        calls.append(raw)
        if len(calls) == 1:
            save_store_file(store_file, b'{"has_index": true, "n": 2}', _index(2), index_folder, overwrite=True)
            raise ValueError("read half of the old files")
        return json.loads(raw)["n"]

    assert load_store_file(store_file, index_folder, restore, missing="-") == 2 and len(calls) == 2

    def broken(raw: bytes) -> None:
        raise ValueError("damaged")

    with pytest.raises(ValueError, match="damaged"):  # nothing changed meanwhile: the error stands
        load_store_file(store_file, index_folder, broken, missing="-")
    assert files.ChangedWhileReadingError is ChangedWhileReadingError
