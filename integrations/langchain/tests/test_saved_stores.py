"""Stores saved by the first format version: refused as they are (their index.json has no checksums, and nothing
is read unchecked); their content, once committed by a record as today's save writes it, loads.

`fixtures/store_v1_*` were written by the first version of `FaissVectorStore.save_local` (format version 1) with
`_build_store` below and the deterministic fake embeddings of langchain-core, so no model is needed. Each test
builds the same store with today's code and checks that the loaded one holds the same documents, finds the same
neighbours with the same scores, and keeps working (adds, upserts and deletes after loading).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_fair import FaissVectorStore

from fair_retrieval.jsonio import DamagedFileError
from tests.sealing import sealed_store_copy

FIXTURES = Path(__file__).parent / "fixtures"
STORES = {
    "store_v1_cosine_flat": {},
    "store_v1_l2_hnsw": {"metric": "l2", "kind": "hnsw", "M": 8},
}


def _embeddings() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=8)


def _build_store(**options: Any) -> FaissVectorStore:
    """The sequence that wrote the fixtures: an add, an upsert (the id keeps its slot) and a delete (a gap)."""
    store = FaissVectorStore(_embeddings(), gpu=False, **options)
    store.add_texts(
        ["The ferry leaves at nine.", "The bakery opens at six.", "Board games at the library.", "Trains run hourly."],
        metadatas=[{"n": 1, "tags": ["a", "b"], "nested": {"ok": None, "x": 1.5}}, {"n": 2}, {}, {"é": "ü"}],
        ids=["a", "b", "c", "d"],
    )
    store.add_texts(["The bakery now opens at seven."], metadatas=[{"n": 2, "v": 2}], ids=["b"])
    store.delete(["c"])
    return store


@pytest.mark.parametrize("name", sorted(STORES))
def test_version_1_store_loads_and_matches_a_fresh_build(name: str, tmp_path: Path) -> None:
    fresh = _build_store(**STORES[name])
    with pytest.raises(DamagedFileError, match=r"index\.json is damaged: it has no 'publication' entry"):
        FaissVectorStore.load_local(FIXTURES / name, _embeddings(), gpu=False)
    folder = sealed_store_copy(FIXTURES / name, tmp_path / name)  # changed and could be saved: never in place
    loaded = FaissVectorStore.load_local(folder, _embeddings(), gpu=False)

    assert loaded.ids == fresh.ids == ["a", "d", "b"]
    assert loaded.get_by_ids(loaded.ids) == fresh.get_by_ids(fresh.ids)
    assert loaded.index is not None and len(loaded.index) == 3
    for query in ("The bakery now opens at seven.", "ferry", "Trains run hourly."):
        hits, expected = loaded.similarity_search_with_score(query, k=3), fresh.similarity_search_with_score(query, k=3)
        assert [d.id for d, _ in hits] == [d.id for d, _ in expected]
        np.testing.assert_allclose([s for _, s in hits], [s for _, s in expected], atol=1e-5)
    assert loaded.similarity_search("The bakery now opens at seven.", k=1)[0].id == "b"

    loaded.add_texts(["A new note about the harbour."], ids=["e"])  # a new slot, not one the file still uses
    loaded.add_texts(["Trains run every half hour."], ids=["d"])
    loaded.delete(["a"])
    assert loaded.ids == ["b", "e", "d"] and len(loaded.index) == 3
    assert loaded.similarity_search("A new note about the harbour.", k=1)[0].id == "e"
    assert loaded.get_by_ids(["d"])[0].page_content == "Trains run every half hour."


@pytest.mark.parametrize("name", sorted(STORES))
def test_saved_file_keeps_the_version_1_layout(name: str, tmp_path: Path) -> None:
    """Today's save writes the same store.json content, so stores stay readable by the first release too.

    Besides the optional "embedder" key (the identity of the embeddings, checked by load_local), which the first
    release ignores; the version stays 1.
    """
    folder = _build_store(**STORES[name]).save_local(tmp_path / name)
    written = json.loads((folder / "store.json").read_text(encoding="utf-8"))
    embedder = written.pop("embedder")
    assert embedder == {"class": "langchain_core.embeddings.fake.DeterministicFakeEmbedding", "model": None}
    assert written == json.loads((FIXTURES / name / "store.json").read_text(encoding="utf-8"))


def test_a_folder_that_lost_its_store_file_says_it_is_missing(tmp_path: Path) -> None:
    folder = _build_store(**STORES[sorted(STORES)[0]]).save_local(tmp_path / "store")
    (folder / "store.json").unlink()
    with pytest.raises(DamagedFileError, match=r"store\.json is missing: index/ records it") as raised:
        FaissVectorStore.load_local(folder, _embeddings(), gpu=False)
    assert "damaged" not in str(raised.value)


def test_version_1_empty_store_loads(tmp_path: Path) -> None:
    with pytest.raises(DamagedFileError, match=r"index\.json is missing: it records the size and CRC-32 of store"):
        FaissVectorStore.load_local(FIXTURES / "store_v1_empty_ip", _embeddings(), gpu=False)
    folder = sealed_store_copy(FIXTURES / "store_v1_empty_ip", tmp_path / "empty")
    loaded = FaissVectorStore.load_local(folder, _embeddings(), gpu=False)
    assert len(loaded) == 0 and loaded.index is None
    assert loaded.similarity_search("anything") == []
    loaded.add_texts(["First note."], ids=["x"])
    assert loaded.similarity_search("First note.", k=1)[0].id == "x"
    assert loaded.index is not None and loaded.index.metric == "ip"
