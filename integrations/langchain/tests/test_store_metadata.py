"""FaissVectorStore metadata: what survives JSON is stored as a private copy, anything else is refused by path.

Uses langchain-core's deterministic fake embeddings: these tests are about the store, not the model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_fair import FaissVectorStore


def _store() -> FaissVectorStore:
    return FaissVectorStore(DeterministicFakeEmbedding(size=8), gpu=False)


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"a": {"b": (1, 2)}}, r"metadatas\[0\]\['a'\] would change through JSON"),
        ({"a": [{"b": 1}, {2: "x"}]}, r"metadatas\[0\]\['a'\] would change through JSON"),
        ({"a": [1.0, float("inf")]}, r"metadatas\[0\]\['a'\].*NaN or infinity"),
        ({"a": {"when": {1, 2}}}, r"metadatas\[0\]\['a'\] is a set.*JSON"),
        ({"a": {(1, 2): "x"}}, r"metadatas\[0\]\['a'\].*JSON"),
    ],
)
def test_nested_values_that_json_would_change_or_refuse_are_named(metadata: dict[str, Any], message: str) -> None:
    store = _store()
    with pytest.raises(TypeError, match=message):
        store.add_texts(["text"], metadatas=[metadata])
    assert len(store) == 0 and store.index is None


def test_metadata_is_a_private_copy_in_and_out(tmp_path: Path) -> None:
    store = _store()
    metadata = {"tags": ["a"], "nested": {"n": 1, "x": 1.5, "none": None, "ok": True}}
    store.add_texts(["text"], metadatas=[metadata], ids=["t"])
    metadata["tags"].append("changed by the caller")
    returned = store.get_by_ids(["t"])[0].metadata
    assert returned == {"tags": ["a"], "nested": {"n": 1, "x": 1.5, "none": None, "ok": True}}
    returned["tags"].append("changed by a reader")

    def editing_filter(seen: dict[str, Any]) -> bool:
        seen["tags"].append("changed by a filter")
        return True

    assert [d.id for d in store.similarity_search("text", k=1, filter=editing_filter)] == ["t"]
    assert store.get_by_ids(["t"])[0].metadata["tags"] == ["a"]
    loaded = FaissVectorStore.load_local(store.save_local(tmp_path / "s"), store.embeddings, gpu=False)
    assert loaded.get_by_ids(["t"])[0].metadata == store.get_by_ids(["t"])[0].metadata


def test_ids_from_none_entries_are_new_and_unique() -> None:
    store = _store()
    ids = store.add_texts(["one", "two", "three"], ids=[None, "b", None])
    assert ids[1] == "b" and len(set(ids)) == 3 and store.ids == ids
    with pytest.raises(TypeError, match=r"ids\[1\] is int"):
        store.add_texts(["x", "y"], ids=["x", 2])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="wrap it in a list"):
        store.add_texts(["x"], ids="x")  # type: ignore[arg-type]
    assert store.ids == ids
