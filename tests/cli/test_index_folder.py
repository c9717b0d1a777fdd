"""`fair-retrieval index` and the files of yours in --output: a run refuses, before the model loads, an --output
holding any name it would write or replace unless --overwrite, and with --overwrite removes only the files a saved
index or store record there names as its own (`cli.index_folder.recorded_files`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_retrieval.cli import main
from fair_retrieval.cli.index_folder import REPLACED_FILES
from tests.models import build_tiny_model

pytest.importorskip("faiss")

ROWS = [{"id": f"d{i}", "text": f"The ferry number {i} crosses the harbour at dawn."} for i in range(4)]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model("bert", "mean", tmp_path_factory.mktemp("tiny-cli"))


def _command(tiny: str, source: Path, output: Path, *flags: str) -> list[str]:
    return ["index", "--model", tiny, "--input", str(source), "--output", str(output), "--gpu", "off", *flags]


def _source(tmp_path: Path) -> Path:
    source = tmp_path / "docs.jsonl"
    source.write_text("\n".join(json.dumps(row) for row in ROWS) + "\n", encoding="utf-8")
    return source


def _no_model(monkeypatch: pytest.MonkeyPatch) -> None:
    import fair_retrieval.cli.cmd_index as cmd_index

    def never(*_: object) -> None:
        raise AssertionError("the model was loaded before --output was checked")

    monkeypatch.setattr(cmd_index, "build_embedder", never)


@pytest.mark.parametrize("output_format", ["store", "index"])
@pytest.mark.parametrize("name", REPLACED_FILES)
def test_an_output_holding_a_name_the_run_replaces_is_refused_before_the_model(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], name: str, output_format: str
) -> None:
    output = tmp_path / "out"
    output.mkdir()
    mine = output / name
    if name == "index":
        mine.mkdir()
        (mine / "notes.txt").write_text("my notes", encoding="utf-8")
    else:
        mine.write_text("a file of mine", encoding="utf-8")
    _no_model(monkeypatch)
    capsys.readouterr()
    assert main(_command("unused", _source(tmp_path), output, "--output-format", output_format)) == 2
    err = capsys.readouterr().err
    assert f"already holds {name}, which this command writes or replaces; pass --overwrite" in err
    assert (mine / "notes.txt").read_text() == "my notes" if name == "index" else mine.read_text() == "a file of mine"


def test_an_index_run_over_a_folder_of_yours_named_index_keeps_it(tiny: str, tmp_path: Path) -> None:
    output = tmp_path / "out"
    (output / "index").mkdir(parents=True)
    (output / "index" / "notes.txt").write_text("my notes", encoding="utf-8")
    assert main(_command(tiny, _source(tmp_path), output, "--output-format", "index")) == 2  # refused: it is there
    assert main(_command(tiny, _source(tmp_path), output, "--output-format", "index", "--overwrite")) == 0
    assert (output / "index" / "notes.txt").read_text() == "my notes"  # no record names it: not the command's


def test_input_inside_the_stores_index_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    output = tmp_path / "out"
    documents = output / "index"
    documents.mkdir(parents=True)
    (documents / "a.txt").write_text("a document", encoding="utf-8")
    _no_model(monkeypatch)
    assert main(_command("unused", documents, output, "--overwrite")) == 2
    assert sorted(path.name for path in documents.iterdir()) == ["a.txt"]


def test_overwrite_replaces_the_commands_own_files_and_only_those(tiny: str, tmp_path: Path) -> None:
    source, output = _source(tmp_path), tmp_path / "out"
    assert main(_command(tiny, source, output)) == 0  # a store folder
    (output / "index" / "notes.txt").write_text("mine", encoding="utf-8")
    assert main(_command(tiny, source, output, "--output-format", "index", "--overwrite")) == 0
    # the store's files went (its record named them); the index folder stays only for the file of yours in it
    assert sorted(path.name for path in (output / "index").iterdir()) == ["notes.txt"]
    assert not (output / "store.json").exists() and (output / "manifest.json").is_file()
    (output / "vectors.f32").write_text("mine too", encoding="utf-8")  # a name an index folder may list
    (output / "index" / "notes.txt").unlink()
    (output / "index").rmdir()
    assert main(_command(tiny, source, output, "--overwrite")) == 0  # the index folder replaced by a store
    assert (output / "vectors.f32").read_text() == "mine too"  # the index record did not name it
    assert not (output / "manifest.json").exists() and not (output / "index.json").exists()
    assert (output / "store.json").is_file()
    assert main(_command(tiny, source, output, "--output-format", "index", "--overwrite")) == 0
    assert (output / "vectors.f32").read_text() == "mine too"  # a publication removes only what it replaced


def _search_error(folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    capsys.readouterr()
    assert main(["search", str(folder), "--query", "ferry", "--gpu", "off"]) == 2
    return capsys.readouterr().err


def test_a_folder_that_lost_its_store_file_is_told_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "store"
    (folder / "index").mkdir(parents=True)
    (folder / "index" / "index.json").write_text("{}")  # what a store folder without its store.json keeps
    err = _search_error(folder, capsys)
    assert f"{folder / 'store.json'} is missing" in err and "manifest.json" not in err
    assert "Restore store.json from a backup, or rebuild the store with `fair-retrieval index" in err


def test_a_llamaindex_persist_folder_is_named_with_how_to_open_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "storage"
    folder.mkdir()
    for name in ("default__vector_store.json", "docstore.json", "index_store.json"):
        (folder / name).write_text("{}")
    err = _search_error(folder, capsys)
    assert "is a LlamaIndex persist folder (default__vector_store.json, docstore.json; no store.json)" in err
    assert f"FairFaissVectorStore.from_persist_dir({str(folder)!r})" in err and "manifest.json" not in err
    assert "`fair-retrieval index --input DOCS --output DIR`" in err
