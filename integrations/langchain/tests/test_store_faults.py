"""Faults while saving and loading FaissVectorStore folders: SIGKILL mid-save, damaged files, loads during saves.

Same method as tests/test_faults.py (the core's): a child forked from a forkserver saves over an existing store and
stops at the k-th file operation (every os.replace / os.fsync / os.unlink, and faiss' write of index.faiss, left
half-written), for every k of a full save; it is SIGKILLed there and the folder must load as the old store or the
new one, whole. The embeddings are langchain-core's deterministic fakes, so no model is needed.
"""

from __future__ import annotations

import json
import multiprocessing
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_fair import FaissVectorStore

from tests.fault_injection import Interruption, forkserver_context, load_while_saving, run_child

faiss = pytest.importorskip("faiss")

QUERIES = ["note 3 of version 1", "note 7 of version 2", "something else"]


def embeddings() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=16)


def build_store(version: int) -> FaissVectorStore:
    """Version v: 10 + 5·v notes stamped with v (version 0: an empty store)."""
    store = FaissVectorStore(embeddings(), gpu=False)
    count = 10 + 5 * version if version else 0
    if count:
        texts = [f"note {i} of version {version}" for i in range(count)]
        store.add_texts(texts, metadatas=[{"v": version}] * count, ids=[f"v{version}-{i}" for i in range(count)])
    return store


def store_version(folder: Path, index_name: str = "index") -> int:
    """The version the saved store holds, after checking that it is that version whole."""
    loaded = FaissVectorStore.load_local(folder, embeddings(), index_name, gpu=False)
    if len(loaded) == 0:
        assert loaded.index is None
        return 0
    version = (len(loaded) - 10) // 5
    expected = build_store(version)
    assert loaded.ids == expected.ids and loaded.index is not None and len(loaded.index) == len(expected)
    assert {d.metadata["v"] for d in loaded.get_by_ids(loaded.ids)} == {version}
    for query in QUERIES:
        got, want = loaded.similarity_search_with_score(query, k=4), expected.similarity_search_with_score(query, k=4)
        assert [d.id for d, _ in got] == [d.id for d, _ in want]
        np.testing.assert_allclose([s for _, s in got], [s for _, s in want], atol=1e-6)
    return version


def save_child(folder: str, version: int, index_name: str, pause_at: int | None, marker: str) -> None:
    store = build_store(version)
    with Interruption(pause_at, Path(marker)).installed():
        store.save_local(folder, index_name, overwrite=True)


def save_repeatedly(folder: str, stop: str) -> None:
    """Save versions 1 and 2 into `folder` in turn until `stop` exists (each a fresh store replacing the other)."""
    turn = 0
    while not Path(stop).exists():
        build_store(turn % 2 + 1).save_local(folder, overwrite=True)
        turn += 1
    Path(stop).write_text(str(turn))


def damage(path: Path, how: str) -> None:
    data = path.read_bytes()
    if how == "half":
        path.write_bytes(data[: len(data) // 2])
    elif how == "empty":
        path.write_bytes(b"")
    else:
        path.write_bytes(np.random.default_rng(5).integers(0, 256, len(data), dtype=np.uint8).tobytes())


def files_of(folder: Path) -> list[str]:
    return sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())


# ---------------------------------------------------------------------------------------------------- killed saves


@pytest.fixture(scope="module")
def forkserver() -> multiprocessing.context.BaseContext:
    return forkserver_context()


@pytest.mark.parametrize(("old", "new", "index_name"), [(1, 2, "index"), (1, 2, "products"), (1, 0, "index")])
def test_sigkill_anywhere_in_save_local_leaves_the_old_or_the_new_store(
    forkserver: Any, tmp_path: Path, old: int, new: int, index_name: str
) -> None:
    """Every file operation of save_local (a store over another one, under the default and another index_name,
    and an empty store over a full one): killed there, the folder loads as the old store or the new one."""
    dry = tmp_path / "dry"
    build_store(old).save_local(dry, index_name)
    with Interruption().installed() as counter:
        save_child(str(dry), new, index_name, None, "")
    assert counter.events >= 2
    seen: dict[int, set[str]] = {}
    for pause_at in range(1, counter.events + 2):  # the last one is past the end: the save finishes
        folder = tmp_path / f"at-{pause_at}"
        build_store(old).save_local(folder, index_name)
        marker = tmp_path / f"at-{pause_at}.marker"
        outcome = run_child(forkserver, save_child, str(folder), new, index_name, pause_at, str(marker), marker=marker)
        seen.setdefault(store_version(folder, index_name), set()).add(outcome)
    assert set(seen) == {old, new}, seen
    if new:  # a kill after the commit (among the renames) gives the new store; an empty store is one rename
        assert "killed" in seen[new], seen

    folder = tmp_path / "at-1"  # the next save finishes or removes what the killed one left
    build_store(3).save_local(folder, index_name, overwrite=True)
    assert store_version(folder, index_name) == 3
    prefix = "" if index_name == "index" else f"{index_name}."
    assert files_of(folder) == sorted([f"{index_name}/index.faiss", f"{index_name}/index.json", f"{prefix}store.json"])


# ---------------------------------------------------------------------------------------------------- damaged files


@pytest.mark.parametrize(
    ("name", "how", "remedy"),
    [
        ("store.json", "half", "Rebuild the store"),
        ("store.json", "empty", "Rebuild the store"),
        ("store.json", "random", "Rebuild the store"),
        ("index/index.faiss", "half", "Rebuild the index"),
        ("index/index.faiss", "empty", "Rebuild the index"),
        ("index/index.faiss", "random", "Rebuild the index"),
        ("index/index.json", "half", "Rebuild the index"),
        ("index/index.json", "empty", "Rebuild the index"),
    ],
)
def test_a_damaged_file_is_refused_naming_it(tmp_path: Path, name: str, how: str, remedy: str) -> None:
    folder = build_store(1).save_local(tmp_path / "store")
    damage(folder / name, how)
    with pytest.raises(ValueError, match=f"{name.split('/')[-1]} is damaged") as caught:
        FaissVectorStore.load_local(folder, embeddings(), gpu=False)
    assert remedy in str(caught.value) and "\n" not in str(caught.value)
    from fair_retrieval.jsonio import DamagedFileError

    assert isinstance(caught.value, DamagedFileError) and caught.value.path == folder / name


@pytest.mark.parametrize("edit", ["metadata", "byte", "swap"])
def test_an_edited_store_file_is_refused(tmp_path: Path, edit: str) -> None:
    """store.json is checked against the size and CRC-32 index.json records for it: an edit by hand, a changed
    byte or two documents swapped are refused as damage, naming the file."""
    folder = build_store(1).save_local(tmp_path / "store")
    path = folder / "store.json"
    state = json.loads(path.read_text())
    if edit == "metadata":
        state["documents"][0]["metadata"]["edited"] = True
        path.write_text(json.dumps(state))
    elif edit == "swap":
        first, second = state["documents"][0], state["documents"][1]
        first["int_id"], second["int_id"] = second["int_id"], first["int_id"]
        state["documents"][0], state["documents"][1] = second, first
        path.write_text(json.dumps(state))
    else:
        raw = bytearray(path.read_bytes())
        raw[raw.index(b"note 3")] = ord("m")  # same size, one byte changed inside a text
        path.write_bytes(bytes(raw))
    from fair_retrieval.jsonio import DamagedFileError

    with pytest.raises(DamagedFileError, match=r"store\.json is damaged.*Rebuild the store") as caught:
        FaissVectorStore.load_local(folder, embeddings(), gpu=False)
    assert caught.value.path == path


# ------------------------------------------------------------------------------------------------ loads during saves


def test_loads_during_repeated_saves_see_one_store_or_the_other(forkserver: Any, tmp_path: Path) -> None:
    folder = tmp_path / "store"
    build_store(1).save_local(folder)
    saves, seen = load_while_saving(forkserver, save_repeatedly, folder, store_version)
    assert saves > 10 and min(seen.values()) >= 3, (saves, seen)
