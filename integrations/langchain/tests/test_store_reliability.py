"""What a FaissVectorStore folder guarantees against racing writers and crafted folders: two writers that start on
an empty folder keep every acknowledged add; a fresh store never replaces a saved one unless told to; a stale
writer saving through a symbolic link to the folder is refused; a linked index folder, a store file that is a link
or a FIFO, and too deeply nested metadata are refused with errors that name the cause."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_fair import FaissVectorStore, StoreConflictError

from fair_retrieval.jsonio import DamagedFileError
from fair_retrieval.validate import MAX_NESTING
from tests.concurrency import expected_keys, run_writers
from tests.fault_injection import forkserver_context

pytest.importorskip("faiss")


def embeddings() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=8)


def load_or_create_and_add(folder: str, key: str) -> None:
    """One writer's cycle from nothing: load the store if one is saved, else build one; add `key`; save."""
    if (Path(folder) / "store.json").exists():
        store = FaissVectorStore.load_local(folder, embeddings(), gpu=False)
        store.add_texts([f"text of {key}"], ids=[key])
    else:
        store = FaissVectorStore.from_texts([f"text of {key}"], embeddings(), ids=[key], gpu=False)
    store.save_local(folder)


def test_two_writers_starting_on_an_empty_folder_keep_every_add(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    saved, _ = run_writers(forkserver_context(), load_or_create_and_add, folder, writers=2, cycles=15)
    assert saved == expected_keys(writers=2, cycles=15)
    assert set(FaissVectorStore.load_local(folder, embeddings(), gpu=False).ids) == saved


def test_a_fresh_store_does_not_replace_a_saved_one_unless_asked(tmp_path: Path) -> None:
    FaissVectorStore.from_texts(["a0"], embeddings(), ids=["a0"], gpu=False).save_local(tmp_path / "seq")
    fresh = FaissVectorStore.from_texts(["b0"], embeddings(), ids=["b0"], gpu=False)
    with pytest.raises(StoreConflictError, match=r"already holds a saved store.*overwrite=True"):
        fresh.save_local(tmp_path / "seq")
    assert FaissVectorStore.load_local(tmp_path / "seq", embeddings(), gpu=False).ids == ["a0"]
    fresh.save_local(tmp_path / "seq", overwrite=True)
    assert FaissVectorStore.load_local(tmp_path / "seq", embeddings(), gpu=False).ids == ["b0"]


def test_a_stale_writer_through_an_alias_of_the_folder_is_refused(tmp_path: Path) -> None:
    real, alias = tmp_path / "real", tmp_path / "alias"
    FaissVectorStore.from_texts(["first"], embeddings(), ids=["first"], gpu=False).save_local(real)
    alias.symlink_to(real)
    stale = FaissVectorStore.load_local(alias, embeddings(), gpu=False)
    newer = FaissVectorStore.load_local(real, embeddings(), gpu=False)
    newer.add_texts(["newer"], ids=["newer"])
    newer.save_local(real)
    stale.add_texts(["stale"], ids=["stale"])
    with pytest.raises(StoreConflictError):
        stale.save_local(alias)
    assert "newer" in FaissVectorStore.load_local(real, embeddings(), gpu=False).ids


def test_an_index_folder_linked_elsewhere_is_refused(tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    FaissVectorStore.from_texts(["x"], embeddings(), ids=["x"], gpu=False).save_local(elsewhere)
    store_folder = tmp_path / "store"
    store_folder.mkdir()
    (store_folder / "index").symlink_to(elsewhere / "index")
    before = (elsewhere / "store.json").read_bytes()
    store = FaissVectorStore.from_texts(["y"], embeddings(), ids=["y"], gpu=False)
    with pytest.raises(DamagedFileError, match="leads out of"):
        store.save_local(store_folder, overwrite=True)
    assert (elsewhere / "store.json").read_bytes() == before and not (store_folder / "store.json").exists()


@pytest.mark.parametrize("how", ["dev-zero", "fifo"])
def test_a_store_file_that_is_a_link_or_a_fifo_is_refused_without_hanging(tmp_path: Path, how: str) -> None:
    FaissVectorStore.from_texts(["x"], embeddings(), ids=["x"], gpu=False).save_local(tmp_path)
    (tmp_path / "store.json").unlink()
    if how == "fifo":
        os.mkfifo(tmp_path / "store.json")
    else:
        (tmp_path / "store.json").symlink_to("/dev/zero")
    errors: list[BaseException] = []

    def load() -> None:
        try:
            FaissVectorStore.load_local(tmp_path, embeddings(), gpu=False)
        except BaseException as error:  # handed to the test
            errors.append(error)

    thread = threading.Thread(target=load, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "load_local hangs"
    assert len(errors) == 1 and isinstance(errors[0], DamagedFileError) and "store.json is damaged" in str(errors[0])


def test_metadata_nested_too_deep_is_refused_at_add_time() -> None:
    store = FaissVectorStore.from_texts(["x"], embeddings(), ids=["x"], gpu=False)
    deep: dict = {}
    for _ in range(900):
        deep = {"a": deep}
    with pytest.raises(ValueError, match=f"nested deeper than {MAX_NESTING} levels"):
        store.add_texts(["y"], metadatas=[deep], ids=["y"])
    assert store.ids == ["x"]


@pytest.mark.parametrize("query", ["\ud800", "caf\udce9", ""])
def test_a_query_that_is_not_text_is_refused_like_a_document(query: str) -> None:
    store = FaissVectorStore.from_texts(["x"], embeddings(), ids=["x"], gpu=False)
    with pytest.raises(ValueError, match="the query: the text"):
        store.similarity_search(query)
    with pytest.raises(ValueError, match="the query: the text"):
        store.max_marginal_relevance_search(query)


def test_a_huge_k_is_clamped_to_the_documents_held() -> None:
    store = FaissVectorStore.from_texts([f"text {i}" for i in range(5)], embeddings(), gpu=False)
    assert len(store.similarity_search("text", k=10**9)) == 5


def test_a_fresh_store_saved_once_saves_there_again_and_is_then_checked(tmp_path: Path) -> None:
    folder = tmp_path / "store"
    store = FaissVectorStore.from_texts(["a0"], embeddings(), gpu=False)
    store.save_local(folder)
    store.add_texts(["a1"])
    store.save_local(folder)  # its own folder now: no overwrite needed
    assert len(FaissVectorStore.load_local(folder, embeddings(), gpu=False)) == 2
    with pytest.raises(StoreConflictError):
        FaissVectorStore.from_texts(["b0"], embeddings(), gpu=False).save_local(folder)
    FaissVectorStore.from_texts(["b0"], embeddings(), gpu=False).save_local(folder, overwrite=True)
    store.add_texts(["a2"])
    with pytest.raises(StoreConflictError):
        store.save_local(folder)  # another writer replaced the folder since this store saved it
    loaded = FaissVectorStore.load_local(folder, embeddings(), gpu=False)
    assert [document.page_content for document in loaded.get_by_ids(loaded.ids)] == ["b0"]


def test_a_reserved_metadata_key_is_refused_at_add_time_so_no_result_replaces_it() -> None:
    """A multi-vector result puts its best window under "best_window": a user's value there would be replaced in
    every result, so it is refused when added (in either mode), naming the key and the entry."""
    store = FaissVectorStore.from_texts(["x"], embeddings(), ids=["x"], gpu=False)
    with pytest.raises(ValueError, match=r"\[1\] \(id 'y'\): metadata key 'best_window' is reserved.*rename the key"):
        store.add_texts(["fine", "y"], metadatas=[{"user_best_window": 1}, {"best_window": "USERVAL"}], ids=["f", "y"])
    assert store.ids == ["x"]
    with pytest.raises(ValueError, match="'best_window' is reserved"):
        FaissVectorStore.from_texts(["y"], embeddings(), metadatas=[{"best_window": "USERVAL"}], gpu=False)
