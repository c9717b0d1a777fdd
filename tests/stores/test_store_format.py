"""save_store / load_store: the one save and restore sequence of every adapter's store."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

from fair_retrieval import FaissIndex, MultiVectorIndex
from fair_retrieval.index.exact_rerank import RerankedIndex
from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.store_format import StoreFormat, load_store, save_store
from tests.index.test_multivector import random_windows

pytest.importorskip("faiss")


class Doc(NamedTuple):
    key: str
    text: str


def _decode(entry: Mapping[str, Any]) -> tuple[int, Doc]:
    return int(entry["int_id"]), Doc(entry["id"], entry["text"])


FORMAT: StoreFormat[Doc] = StoreFormat(
    name="probe-store",
    version=1,
    store="ProbeStore",
    writer="ProbeStore.save()",
    upgrade="probe",
    records_key="documents",
    encode=lambda int_id, doc: {"int_id": int_id, "id": doc.key, "text": doc.text},
    decode=_decode,
    names_index_folder=True,
    replaced_move_to_end=True,
)


def _saved(tmp_path: Path) -> tuple[DocumentStore[Doc], Path]:
    store: DocumentStore[Doc] = DocumentStore(gpu=False)
    store.add([Doc("a", "alpha"), Doc("b", "beta")], np.eye(2, 4, dtype=np.float32) + 0.1)
    path = tmp_path / "store.json"
    save_store(store, FORMAT, path, tmp_path / "store.index")
    return store, path


def test_a_saved_store_loads_back_whole(tmp_path: Path) -> None:
    store, path = _saved(tmp_path)
    loaded = load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="none")
    assert loaded.records.keys == ["a", "b"] and loaded.metric == "cosine" and not loaded.multivector
    assert loaded.records.int_ids == store.records.int_ids and loaded.generation is not None
    np.testing.assert_allclose(loaded.vectors([0, 1]), store.vectors([0, 1]))


def test_the_mode_asked_for_on_load_must_be_the_saved_one(tmp_path: Path) -> None:
    _, path = _saved(tmp_path)
    with pytest.raises(ValueError, match="holds a store of pooled documents, but multivector=True"):
        load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, multivector=True, missing="-")
    with pytest.raises(ValueError, match="which has no aggregate"):
        load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, aggregate="max", missing="-")


def test_a_missing_store_file_says_what_writes_one(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="write one first"):
        load_store(FORMAT, tmp_path / "x.json", tmp_path / "x", gpu=False, embedder=None, missing="write one first")


@pytest.mark.parametrize("counter", [0, 1, -1, 2**63, 10**30, 1e308, 2.5, "3", None])
def test_a_crafted_id_counter_is_refused_naming_it(tmp_path: Path, counter: Any) -> None:
    """A counter at or below an int id in use would hand a new document an id the store holds; past int64, faiss
    cannot keep it: either way the store file is damaged (its CRC-32 computed again, as a crafted one would be)."""
    import json

    from fair_retrieval.jsonio import DamagedFileError
    from tests.test_crafted_folders import entry, reseal

    _, path = _saved(tmp_path)
    state = json.loads(path.read_text())
    state["next_int_id"] = counter
    path.write_text(json.dumps(state))
    reseal(
        tmp_path / "store.index" / "index.json",
        lambda r: r["publication"]["files"].update({"../store.json": entry(path)}),
    )
    with pytest.raises(DamagedFileError, match=r"store\.json is damaged: its id counter 'next_int_id'"):
        load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="none")


@pytest.mark.parametrize("int_id", [-1, 2**63, 1e308])
def test_a_crafted_int_id_is_refused_naming_the_file(tmp_path: Path, int_id: Any) -> None:
    import json

    from fair_retrieval.jsonio import DamagedFileError
    from tests.test_crafted_folders import entry, reseal

    _, path = _saved(tmp_path)
    state = json.loads(path.read_text())
    state["documents"][0]["int_id"] = int_id
    path.write_text(json.dumps(state))
    reseal(
        tmp_path / "store.index" / "index.json",
        lambda r: r["publication"]["files"].update({"../store.json": entry(path)}),
    )
    with pytest.raises(DamagedFileError, match=r"store\.json is damaged: an entry"):
        load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="none")


def test_an_embedder_that_gives_no_windows_is_refused_once_before_the_identity(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store: DocumentStore[Doc] = DocumentStore(gpu=False, multivector=True, dim=4)
    path = tmp_path / "store.json"
    save_store(store, FORMAT, path, tmp_path / "store.index")
    import fair_retrieval.stores.store_core as store_core

    checks: list[str] = []
    original = store_core.window_embedder

    def counted(embedding: Any, where: str, missing: str | None = None) -> Any:
        checks.append(where)
        return original(embedding, where, missing)

    monkeypatch.setattr(store_core, "window_embedder", counted)
    refused = r"^A multi-vector ProbeStore keeps each .* only fair-retrieval's embedders give"
    with pytest.raises(TypeError, match=refused):
        load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=object(), missing="none")
    assert checks == ["A multi-vector ProbeStore"]  # once, when the store is given its embedder
    loaded = load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="none")
    with pytest.raises(ValueError, match=r"^load it with an embed model$"):
        loaded.check_window_source("load it with an embed model")
    DocumentStore(gpu=False, multivector=False).check_window_source("a pooled store needs none")


def _windows_store(kind: str | None, count: int = 12) -> DocumentStore[Doc]:
    store: DocumentStore[Doc] = DocumentStore(gpu=False, multivector=True, kind=kind)
    store.add_windows([Doc(f"d{i}", f"text {i}") for i in range(count)], random_windows(count, 48, seed=5))
    return store


def test_a_default_multi_vector_store_saves_compressed_and_loads_back_compressed(tmp_path: Path) -> None:
    store = _windows_store(None)
    path = tmp_path / "store.json"
    save_store(store, FORMAT, path, tmp_path / "store.index")
    assert len(list((tmp_path / "store.index").glob("rows-*.seg"))) == 1
    assert json.loads(path.read_text())["kind"] == "compressed"
    loaded = load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="none")
    assert loaded.kind == "compressed" and isinstance(loaded.index, MultiVectorIndex)
    assert isinstance(loaded.index.windows, RerankedIndex)
    query = np.ones(48, dtype=np.float32) / np.sqrt(48)
    assert [h.record for h in loaded.search(query, 4)] == [h.record for h in store.search(query, 4)]
    loaded.delete(["d0", "d1"])
    save_store(loaded, FORMAT, path, tmp_path / "store.index")
    again = load_store(FORMAT, path, tmp_path / "store.index", gpu=False, embedder=None, missing="none")
    assert again.kind == "compressed" and again.records.keys == [f"d{i}" for i in range(2, 12)]


def test_a_flat_store_saves_and_loads_flat_and_an_empty_default_store_keeps_the_default(tmp_path: Path) -> None:
    flat = _windows_store("flat")  # as every multi-vector store was saved before the compressed default
    save_store(flat, FORMAT, tmp_path / "flat.json", tmp_path / "flat.index")
    assert not (tmp_path / "flat.index" / "vectors.f32").exists()
    loaded = load_store(FORMAT, tmp_path / "flat.json", tmp_path / "flat.index", gpu=False, embedder=None, missing="-")
    assert loaded.kind == "flat" and isinstance(loaded.index, MultiVectorIndex)
    assert isinstance(loaded.index.windows, FaissIndex) and loaded.index.windows.kind == "flat"
    empty: DocumentStore[Doc] = DocumentStore(gpu=False, multivector=True)
    save_store(empty, FORMAT, tmp_path / "empty.json", tmp_path / "empty.index")
    assert json.loads((tmp_path / "empty.json").read_text())["kind"] is None  # the default, not decided yet
    reopened = load_store(
        FORMAT, tmp_path / "empty.json", tmp_path / "empty.index", gpu=False, embedder=None, missing="-"
    )
    assert reopened.kind is None
    reopened.add_windows([Doc("a", "alpha")], random_windows(1, 48))
    assert reopened.kind == "compressed" and isinstance(reopened.index, MultiVectorIndex)
    assert isinstance(reopened.index.windows, RerankedIndex)
