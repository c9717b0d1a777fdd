"""Documents as (id, text, metadata) and the folder layout of a named store (`fair_retrieval.stores.text_documents`),
with the argument checks the LangChain store takes from the core (`require_some`, `ids_to_delete`, `record_filter`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from fair_retrieval.stores import BEST_WINDOW_KEY, DocumentStore, StoreHit, TextDocument
from fair_retrieval.stores.arguments import ids_to_delete, require_some
from fair_retrieval.stores.filters import record_filter
from fair_retrieval.stores.text_documents import (
    checked_documents,
    named_store_paths,
    pickled_folder_error,
    text_document_format,
)


def test_a_named_store_lives_beside_others_and_a_path_is_not_a_name(tmp_path: Path) -> None:
    assert named_store_paths(tmp_path, "index") == (tmp_path / "index", tmp_path / "store.json")
    assert named_store_paths(tmp_path, "products") == (tmp_path / "products", tmp_path / "products.store.json")
    for bad in ("", ".", "..", "a/b", "../x"):
        with pytest.raises(ValueError, match="plain file name"):
            named_store_paths(tmp_path, bad)


def test_a_pickled_community_folder_is_refused_with_the_way_to_convert_it(tmp_path: Path) -> None:
    store_file = tmp_path / "store.json"
    assert pickled_folder_error(tmp_path, "index", store_file, "FaissVectorStore") is None
    (tmp_path / "index.pkl").write_bytes(b"\x80")
    error = pickled_folder_error(tmp_path, "index", store_file, "FaissVectorStore")
    assert isinstance(error, FileNotFoundError) and "never unpickles" in str(error) and "from_embeddings" in str(error)
    store_file.write_text("{}")
    assert pickled_folder_error(tmp_path, "index", store_file, "FaissVectorStore") is None  # ours is there too


def test_documents_round_trip_through_their_entries_and_hits_give_copies() -> None:
    documents = checked_documents(["a text", "another"], [{"k": [1]}, None], ["a", None])
    assert documents[0] == TextDocument("a", "a text", {"k": [1]}) and documents[1].metadata == {}
    assert len(documents[1].key) == 36  # a new UUID
    fmt = text_document_format("S", "S.save()", "pkg")
    assert fmt.decode(fmt.encode(7, documents[0])) == (7, documents[0])
    assert fmt.name == "langchain-fair-faiss-store"  # one name, whoever writes it: the files saved so far carry it
    hit = StoreHit(7, documents[0], 0.5, {"start": 0, "end": 4, "window": 0})
    metadata = DocumentStore.hit_metadata(hit)
    assert metadata == {"k": [1], BEST_WINDOW_KEY: {"start": 0, "end": 4, "window": 0}}
    metadata["k"].append(2)
    assert documents[0].metadata == {"k": [1]}  # the stored one is untouched
    assert DocumentStore.hit_metadata(StoreHit(7, documents[0], 0.5, None)) == {"k": [1]}
    [(found, score)] = DocumentStore.found([hit])  # what an adapter turns into its documents: a copy, its score
    assert found == TextDocument("a", "a text", {"k": [1], BEST_WINDOW_KEY: {"start": 0, "end": 4, "window": 0}})
    assert score == 0.5 and found.metadata["k"] is not documents[0].metadata["k"]
    with pytest.raises(ValueError, match="Nothing was stored"):
        checked_documents([" "], None, None)


def test_the_argument_checks_name_the_fix() -> None:
    with pytest.raises(ValueError, match=r"use S\(embedding\) and add later"):
        require_some([], "from_texts", "texts", "S")
    require_some(["x"], "from_texts", "texts", "S")
    with pytest.raises(ValueError, match=r"pass store\.ids"):
        ids_to_delete(None)
    with pytest.raises(TypeError):
        ids_to_delete("abc")
    assert ids_to_delete(("a", "b")) == ["a", "b"]
    keep = record_filter({"year": {"$gte": 2024}})
    assert keep is not None and keep(TextDocument("a", "t", {"year": 2025})) and not keep(TextDocument("b", "t", {}))
    assert record_filter(None) is None
