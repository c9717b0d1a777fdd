"""Faults while saving and loading index folders: SIGKILL mid-write, damaged files, loads during saves.

* Killed writers. A child process (forked from a forkserver that has the libraries loaded, so a child costs well
  under a second) saves over an existing folder and stops at the k-th file operation of the save (`Interruption`:
  every os.replace / os.fsync / os.unlink, and faiss' write of index.faiss, left half-written) after writing a
  marker file; the test SIGKILLs it there, loads the folder and checks that it holds the old or the new version
  whole. k runs over every operation of a full save (counted by a dry run), so each interruption point is tried,
  and both outcomes are seen (the commit lies between them).
* Damaged files: index.faiss cut in half, emptied, overwritten by random bytes or with one flipped byte;
  index.json / manifest.json cut or emptied; each gives a ValueError naming the file and saying to rebuild, from
  FaissIndex.load and from `fair-retrieval search` (exit status 2, one line).
* Loads during saves: a process saves two versions into one folder in turn while the test loads and searches it.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

faiss = pytest.importorskip("faiss")

from fair_retrieval import DocumentWindows, FaissIndex, MultiVectorIndex  # noqa: E402
from fair_retrieval.cli import main  # noqa: E402
from fair_retrieval.cli.common import dump_json  # noqa: E402
from fair_retrieval.cli.index_folder import publish, read_manifest, read_rows, write_documents  # noqa: E402
from fair_retrieval.index.exact_rerank import RerankedIndex  # noqa: E402
from fair_retrieval.inputs import Document  # noqa: E402
from fair_retrieval.jsonio import DamagedFileError  # noqa: E402
from tests.fault_injection import (  # noqa: E402
    CHILD_TIMEOUT_S,
    Interruption,
    forkserver_context,
    load_while_saving,
    run_child,
)

INDEX = ("index", "--output-format", "index")  # the command writing the earlier index folder

DIM = 16
QUERIES = np.random.default_rng(99).standard_normal((4, DIM)).astype(np.float32)


# ---------------------------------------------------------------------------------------------------- helpers


def interrupted_everywhere(
    context: Any,
    root: Path,
    prepare: Callable[[Path], None],
    child: Callable[..., None],
    check: Callable[[Path], int],
) -> dict[int, set[str]]:
    """For every file operation k of `child(folder, pause_at, marker)` on a folder made by `prepare` under `root`,
    kill the child at k and `check` the folder (the version it holds); then once more with the save let finish.
    Returns {version: outcomes}."""
    dry = root / "dry"
    prepare(dry)
    with Interruption().installed() as counter:
        child(str(dry), None, "")
    assert counter.events >= 3, "the save no longer goes through the hooked file operations"
    seen: dict[int, set[str]] = {}
    for pause_at in range(1, counter.events + 2):  # the last one is past the end: the save finishes
        folder = root / f"at-{pause_at}"
        prepare(folder)
        marker = folder.parent / f"at-{pause_at}.marker"
        outcome = run_child(context, child, str(folder), pause_at, str(marker), marker=marker)
        version = check(folder)
        seen.setdefault(version, set()).add(outcome)
    return seen


def build_index(version: int) -> FaissIndex:
    """Version v: 100 + 40·v random vectors (seeded by v) under ids 1000·v + i, so versions never look alike."""
    count = 100 + 40 * version
    vectors = np.random.default_rng(version).standard_normal((count, DIM)).astype(np.float32)
    index = FaissIndex(DIM, gpu=False)
    index.add(vectors, np.arange(count) + 1000 * version)
    return index


def index_version(folder: Path) -> int:
    """The version `folder` holds, after checking that it is that version whole (ids, vectors, search)."""
    loaded = FaissIndex.load(folder, gpu=False)
    version = (len(loaded) - 100) // 40
    expected = build_index(version)
    np.testing.assert_array_equal(loaded.ids, expected.ids)
    np.testing.assert_array_equal(loaded.get_vectors(expected.ids), expected.get_vectors(expected.ids))
    for got, want in zip(loaded.search(QUERIES, 5), expected.search(QUERIES, 5), strict=True):
        np.testing.assert_array_equal(got, want)
    return version


def save_child(folder: str, pause_at: int | None, marker: str) -> None:
    index = build_index(2)
    with Interruption(pause_at, Path(marker)).installed():
        index.save(folder, overwrite=True)


def save_repeatedly(folder: str, stop: str) -> None:
    """Save versions 1 and 2 into `folder` in turn until `stop` exists (each a fresh index replacing the other)."""
    turn = 0
    while not Path(stop).exists():
        build_index(turn % 2 + 1).save(folder, overwrite=True)
        turn += 1
    Path(stop).write_text(str(turn))


def build_cli_folder(folder: Path, version: int) -> Path:
    """An index folder as `fair-retrieval index` writes it (same helpers: save, documents, manifest, publish), with
    version-stamped documents and manifest, and no model: its vectors are random."""
    staging = folder.parent / f".{folder.name}.staging-{version}"
    staging.mkdir(parents=True)
    index = build_index(version)
    index.save(staging)
    documents = [Document(f"v{version}-doc{i}", f"text {i} of version {version}", {"v": version}) for i in index.ids]
    write_documents(documents, staging / "documents.jsonl")
    manifest = {"format": "fair-retrieval-index", "version": 1, "model": f"model-v{version}", "count": len(index)}
    dump_json(manifest, staging / "manifest.json")
    publish(staging, folder)
    shutil.rmtree(staging)
    return folder


def cli_version(folder: Path) -> int:
    """The version of a CLI folder, read as `search` reads it, after checking that all its files agree."""
    manifest = read_manifest(folder)
    version = index_version(folder)
    assert manifest["model"] == f"model-v{version}"
    rows = read_rows(folder / "documents.jsonl", set(range(manifest["count"])))
    assert {row["metadata"]["v"] for row in rows.values()} == {version}
    return version


def publish_child(folder: str, pause_at: int | None, marker: str) -> None:
    target = Path(folder)
    staging = target.parent / f".{target.name}.new"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    index = build_index(2)
    index.save(staging)
    rows = [Document(f"v2-doc{i}", f"text {i} of version 2", {"v": 2}) for i in index.ids]
    write_documents(rows, staging / "documents.jsonl")
    dump_json(
        {"format": "fair-retrieval-index", "version": 1, "model": "model-v2", "count": len(index)},
        staging / "manifest.json",
    )
    with Interruption(pause_at, Path(marker)).installed():
        publish(staging, target)


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "random":
        path.write_bytes(np.random.default_rng(5).integers(0, 256, len(data), dtype=np.uint8).tobytes())
    elif how == "flipped":
        middle = len(data) // 2
        path.write_bytes(data[:middle] + bytes([data[middle] ^ 0xFF]) + data[middle + 1 :])
    else:  # pragma: no cover
        raise AssertionError(how)


def strip_publication(folder: Path) -> None:
    """Make `folder`'s index.json lack its publication entry (as the first format version wrote it)."""
    meta = json.loads((folder / "index.json").read_text())
    meta.pop("publication", None)
    (folder / "index.json").write_text(json.dumps(meta))


# ---------------------------------------------------------------------------------------------------- killed saves


@pytest.fixture(scope="module")
def forkserver() -> multiprocessing.context.BaseContext:
    return forkserver_context()


def test_sigkill_anywhere_in_a_save_leaves_the_old_or_the_new_index(forkserver: Any, tmp_path: Path) -> None:
    def prepare(folder: Path) -> None:
        build_index(1).save(folder)

    seen = interrupted_everywhere(forkserver, tmp_path, prepare, save_child, index_version)
    assert set(seen) == {1, 2} and "killed" in seen[2], seen  # killed before and after the commit, both whole

    # the next save into a killed folder finishes what was left (renames) or removes it (temporary files)
    folder = tmp_path / "at-1"
    build_index(3).save(folder, overwrite=True)
    assert index_version(folder) == 3
    assert sorted(p.name for p in folder.iterdir()) == ["index.faiss", "index.json"]


def windows_of(first: int, count: int) -> DocumentWindows:
    """Documents `first` … `first + count - 1`, three windows each, seeded by the document (the same every call)."""
    vectors = np.concatenate(
        [np.random.default_rng(number).standard_normal((3, DIM)) for number in range(first, first + count)]
    )
    owners = np.repeat(np.arange(count), 3).astype(np.int64)
    spans = np.tile(np.array([[0, 10], [5, 15], [10, 20]], dtype=np.int64), (count, 1))
    pooled = np.zeros((count, DIM), dtype=np.float32)
    return DocumentWindows(pooled, vectors.astype(np.float32), owners, spans, np.full(owners.size, 5))


def prepare_segments(folder: Path) -> None:
    """A compressed multi-vector index of 200 documents saved, then one more saved: two segments."""
    index = MultiVectorIndex.over(RerankedIndex(DIM, codes="PQ4", gpu=False))
    index.add(windows_of(0, 200), ids=np.arange(200))
    index.save(folder)
    index.add(windows_of(200, 1), ids=[200])
    index.save(folder)


def segments_version(folder: Path) -> int:
    """How many documents `folder` holds, after checking every one's windows and that a save leaves only listed
    segments behind."""
    loaded = MultiVectorIndex.load(folder)
    count = len(loaded)
    np.testing.assert_array_equal(loaded.ids, np.arange(count))
    for number in (0, 150, count - 1):
        np.testing.assert_array_equal(loaded.get_window_vectors(number), windows_of(number, 1).vectors)
    return count


def segment_save_child(folder: str, pause_at: int | None, marker: str) -> None:
    index = MultiVectorIndex.load(folder)
    index.add(windows_of(201, 1), ids=[201])  # merged with the one-document segment: a new segment replaces it
    with Interruption(pause_at, Path(marker)).installed():
        index.save(folder)


def test_sigkill_anywhere_in_a_segment_save_leaves_the_old_or_the_new_rows(forkserver: Any, tmp_path: Path) -> None:
    seen = interrupted_everywhere(forkserver, tmp_path, prepare_segments, segment_save_child, segments_version)
    assert set(seen) == {201, 202} and "killed" in seen[202], seen  # killed before and after the commit, both whole
    for folder in sorted(path for path in tmp_path.glob("at-*") if path.is_dir()):  # the next save cleans up
        index = MultiVectorIndex.load(folder)
        index.add(windows_of(len(index), 1), ids=[len(index)])
        index.save(folder)
        listed = {entry["name"] for entry in json.loads((folder / "reranked.json").read_text())["segments"]}
        assert {path.name for path in folder.glob("rows-*")} == listed, folder
        assert not list(folder.glob("*.tmp")) and segments_version(folder) in (202, 203)


def test_sigkill_anywhere_in_a_publish_leaves_a_whole_cli_folder(forkserver: Any, tmp_path: Path) -> None:
    def prepare(folder: Path) -> None:
        build_cli_folder(folder, 1)

    seen = interrupted_everywhere(forkserver, tmp_path, prepare, publish_child, cli_version)
    assert set(seen) == {1, 2} and "killed" in seen[2], seen

    folder = tmp_path / "at-2"
    build_cli_folder(folder, 3)
    assert cli_version(folder) == 3
    assert sorted(p.name for p in folder.iterdir()) == ["documents.jsonl", "index.faiss", "index.json", "manifest.json"]


def index_cli_child(model: str, source: str, output: str, replaced: str, after: bool, marker: str) -> None:
    """Run `fair-retrieval index --overwrite`, stopping before or after the rename onto `replaced`."""
    original = os.replace

    def replace(src: Any, dst: Any) -> None:
        if not after and os.path.abspath(dst) == replaced:
            Path(marker).write_text("before")
            time.sleep(CHILD_TIMEOUT_S)
        original(src, dst)
        if after and os.path.abspath(dst) == replaced:
            Path(marker).write_text("after")
            time.sleep(CHILD_TIMEOUT_S)

    os.replace = replace
    main([*INDEX, "--model", model, "--input", source, "--output", output, "--overwrite", "--gpu", "off"])


@pytest.mark.parametrize("after", [False, True], ids=["before-commit", "after-commit"])
def test_sigkill_of_the_index_command_leaves_a_searchable_index(
    forkserver: Any, tmp_path: Path, minilm: str, capsys: pytest.CaptureFixture[str], after: bool
) -> None:
    """The real command, killed with SIGKILL just before or just after index.json lands in --output: `search`
    answers from the old documents or from the new ones, and the next run cleans up."""
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    old.write_text("\n".join(json.dumps({"id": f"old-{i}", "text": f"An old note about lava {i}."}) for i in range(3)))
    new.write_text("\n".join(json.dumps({"id": f"new-{i}", "text": f"A new note about bread {i}."}) for i in range(4)))
    output = tmp_path / "index"
    assert main([*INDEX, "--model", minilm, "--input", str(old), "--output", str(output), "--gpu", "off"]) == 0
    marker = tmp_path / "marker"
    args = (minilm, str(new), str(output), os.path.abspath(output / "index.json"), after, str(marker))
    assert run_child(forkserver, index_cli_child, *args, marker=marker) == "killed"

    capsys.readouterr()
    assert main(["search", "--index", str(output), "--query", "bread", "-k", "10", "--json", "--gpu", "off"]) == 0
    ids = {hit["id"] for hit in json.loads(capsys.readouterr().out)["results"]}
    assert ids == ({f"new-{i}" for i in range(4)} if after else {f"old-{i}" for i in range(3)})
    assert any(p.name.startswith(".index.partial-") for p in tmp_path.iterdir())  # SIGKILL skipped the clean-up

    assert main([*INDEX, "--model", minilm, "--input", str(new), "--output", str(output), "--overwrite"]) == 0
    assert sorted(p.name for p in output.iterdir()) == ["documents.jsonl", "index.faiss", "index.json", "manifest.json"]


def test_the_next_run_removes_staging_folders_of_killed_runs_only(tmp_path: Path) -> None:
    from fair_retrieval.cli.index_folder import staging_folder

    output = tmp_path / "index"
    abandoned = tmp_path / ".index.partial-killed"
    abandoned.mkdir()
    (abandoned / "documents.jsonl").write_text("{}\n")
    os.utime(abandoned, (time.time() - 3600, time.time() - 3600))
    with staging_folder(output) as running:
        os.utime(running, (time.time() - 3600, time.time() - 3600))  # old, but held by this run
        assert not abandoned.exists()
        with staging_folder(output) as other:
            assert running.is_dir() and other.is_dir()
    assert [p.name for p in tmp_path.iterdir()] == []


# ---------------------------------------------------------------------------------------------------- damaged files


@pytest.mark.parametrize(
    ("layout", "how"),
    [
        *[("current", how) for how in ("half", "empty", "random", "flipped")],
        # a record without its checksums is refused, naming the record: nothing is read unchecked
        *[("earlier-release", how) for how in ("half", "empty", "random")],
    ],
)
def test_a_damaged_index_faiss_is_refused_naming_the_file(tmp_path: Path, layout: str, how: str) -> None:
    build_index(1).save(tmp_path)
    named = "index.faiss"
    if layout == "earlier-release":
        strip_publication(tmp_path)
        named = "index.json"
    damage(tmp_path / "index.faiss", how)
    with pytest.raises(ValueError, match=rf"{named} is damaged") as caught:
        FaissIndex.load(tmp_path, gpu=False)
    message = str(caught.value)
    assert "Rebuild the index" in message and "\n" not in message
    assert isinstance(caught.value, DamagedFileError) and caught.value.path == tmp_path / named


@pytest.mark.parametrize("how", ["half", "empty", "random"])
def test_a_damaged_index_json_is_refused_naming_the_file(tmp_path: Path, how: str) -> None:
    build_index(1).save(tmp_path)
    damage(tmp_path / "index.json", how)
    with pytest.raises(ValueError, match=r"index\.json is damaged: it (is empty|is not valid JSON).*Rebuild the index"):
        FaissIndex.load(tmp_path, gpu=False)


@pytest.mark.parametrize(
    ("name", "how"),
    [
        ("index.faiss", "half"),
        ("index.faiss", "random"),
        ("index.faiss", "empty"),
        ("index.json", "half"),
        ("index.json", "empty"),
        ("manifest.json", "half"),
        ("manifest.json", "random"),
        ("manifest.json", "empty"),
    ],
)
def test_search_on_a_damaged_folder_exits_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, how: str
) -> None:
    folder = build_cli_folder(tmp_path / "index", 1)
    damage(folder / name, how)
    capsys.readouterr()
    assert main(["search", "--index", str(folder), "--query", "anything", "--gpu", "off"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith("fair-retrieval search: error: ") and f"{name} is damaged" in err and "Rebuild" in err


def test_a_damaged_documents_row_names_the_file(tmp_path: Path) -> None:
    folder = build_cli_folder(tmp_path / "index", 1)
    lines = (folder / "documents.jsonl").read_text().splitlines()
    lines[2] = lines[2][:10]
    (folder / "documents.jsonl").write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"documents\.jsonl is damaged: it holds \d+ bytes where index.json.*Rebuild"):
        read_rows(folder / "documents.jsonl", {0, 2})


def test_a_copied_folder_still_loads(tmp_path: Path) -> None:
    """The record checks the files it lists, not where they live: a copy loads."""
    folder = build_cli_folder(tmp_path / "index", 1)
    copy = tmp_path / "copy"
    shutil.copytree(folder, copy)
    assert cli_version(copy) == 1 and read_manifest(copy) == read_manifest(folder)


@pytest.mark.parametrize(
    ("name", "edit"),
    [
        ("manifest.json", "pooling"),
        ("manifest.json", "byte"),
        ("documents.jsonl", "byte"),
        ("documents.jsonl", "swap"),
    ],
)
def test_an_edited_manifest_or_documents_file_is_refused(tmp_path: Path, name: str, edit: str) -> None:
    """manifest.json and documents.jsonl are checked against the size and CRC-32 index.json records for them
    before they are used: an edit that changes how queries are embedded, a changed byte in a text, or two rows
    swapped (the wrong document for a vector) are refused, naming the file and saying to rebuild."""
    folder = build_cli_folder(tmp_path / "index", 1)
    path = folder / name
    if edit == "pooling":
        manifest = json.loads(path.read_text())
        path.write_text(json.dumps({**manifest, "pooling": "cls" if manifest.get("pooling") != "cls" else "mean"}))
    elif edit == "swap":
        lines = path.read_text().splitlines()
        lines[0], lines[1] = lines[1], lines[0]
        path.write_text("\n".join(lines) + "\n")
    else:
        raw = bytearray(path.read_bytes())
        position = raw.index(b'"model"' if name == "manifest.json" else b'"text"') + 10
        raw[position] = ord("Q") if raw[position] != ord("Q") else ord("R")
        path.write_bytes(bytes(raw))
    with pytest.raises(DamagedFileError, match=rf"{name} is damaged.*Rebuild") as caught:
        read_manifest(folder) if name == "manifest.json" else read_rows(path, {0, 1})
    assert caught.value.path == path


# ------------------------------------------------------------------------------------------------ loads during saves


def test_loads_during_repeated_saves_see_one_version_or_the_other(forkserver: Any, tmp_path: Path) -> None:
    folder = tmp_path / "index"
    build_index(1).save(folder)
    saves, seen = load_while_saving(forkserver, save_repeatedly, folder, index_version)
    assert saves > 10 and min(seen.values()) >= 3, (saves, seen)
