"""Code written for langchain-community's FAISS store runs on FaissVectorStore.

The calls it makes: `save_local(folder, index_name)`, `load_local(folder, embeddings, index_name,
allow_dangerous_deserialization=...)`, `from_embeddings`, `add_embeddings` and `merge_from`. Random vectors looked up
by text stand in for a model.
"""

from __future__ import annotations

import json
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_core.embeddings import Embeddings
from langchain_fair import FaissVectorStore

DIM = 8


class TableEmbeddings(Embeddings):
    """A fixed random vector per text, counting the texts embedded as documents."""

    def __init__(self, dim: int = DIM) -> None:
        self.dim = dim
        self.documents_embedded = 0

    def vector(self, text: str) -> list[float]:
        return np.random.default_rng(zlib.crc32(text.encode("utf-8"))).standard_normal(self.dim).tolist()  # type: ignore[no-any-return]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.documents_embedded += len(texts)
        return [self.vector(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.vector(text)


def unit(vectors: Any) -> np.ndarray:
    array = np.asarray(vectors, dtype=np.float32)
    return array / np.linalg.norm(array, axis=-1, keepdims=True)  # type: ignore[no-any-return]


def stored_vectors(store: FaissVectorStore) -> dict[str, np.ndarray]:
    assert store.index is not None
    vectors = store.index.get_vectors([store._store.records.int_ids[id_] for id_ in store.ids])
    return dict(zip(store.ids, vectors, strict=True))


def pairs(texts: list[str], seed: int = 0) -> list[tuple[str, list[float]]]:
    rng = np.random.default_rng(seed)
    return [(text, rng.standard_normal(DIM).tolist()) for text in texts]


# ------------------------------------------------------------------------------------------------ save / load


def test_two_stores_share_a_folder_under_their_index_names(tmp_path: Path) -> None:
    embeddings = TableEmbeddings()
    products = FaissVectorStore.from_texts(["red shoe", "blue hat"], embeddings, [{"p": 1}, {"p": 2}], ids=["s", "h"])
    articles = FaissVectorStore.from_texts(["shoe care", "hat styles", "socks"], embeddings, ids=["1", "2", "3"])
    default = FaissVectorStore.from_texts(["the default"], embeddings, ids=["d"])
    folder = tmp_path / "shared"
    products.save_local(folder, index_name="products")
    articles.save_local(folder, "articles")  # positional, as langchain-community's signature allows
    default.save_local(folder)

    files = sorted(path.relative_to(folder).as_posix() for path in folder.rglob("*") if path.is_file())
    assert files == [
        "articles.store.json",
        "articles/index.faiss",
        "articles/index.json",
        "index/index.faiss",
        "index/index.json",
        "products.store.json",
        "products/index.faiss",
        "products/index.json",
        "store.json",  # the default name keeps the layout of earlier versions
    ]
    for path in folder.rglob("*"):
        assert not path.is_file() or not path.read_bytes().startswith(b"\x80")  # no pickle anywhere

    for name, original in (("products", products), ("articles", articles), ("index", default)):
        loaded = FaissVectorStore.load_local(folder, embeddings, index_name=name, allow_dangerous_deserialization=True)
        assert loaded.ids == original.ids
        assert loaded.get_by_ids(loaded.ids) == original.get_by_ids(original.ids)
        assert loaded.similarity_search_with_score("shoe", k=2) == original.similarity_search_with_score("shoe", k=2)
    positional = FaissVectorStore.load_local(folder, embeddings, "articles", allow_dangerous_deserialization=False)
    assert positional.ids == ["1", "2", "3"]
    assert FaissVectorStore.load_local(folder, embeddings).ids == ["d"]


def test_allow_dangerous_deserialization_changes_nothing(tmp_path: Path) -> None:
    embeddings = TableEmbeddings()
    store = FaissVectorStore.from_texts(["a", "b", "c"], embeddings, [{"n": 1}, {"n": 2}, {}], gpu=False)
    folder = store.save_local(tmp_path / "s", index_name="mine")
    loads = [
        FaissVectorStore.load_local(folder, embeddings, "mine", allow_dangerous_deserialization=flag, gpu=False)
        for flag in (False, True)
    ]
    assert loads[0].get_by_ids(loads[0].ids) == loads[1].get_by_ids(loads[1].ids) == store.get_by_ids(store.ids)
    assert loads[0].similarity_search_with_score("a", k=3) == loads[1].similarity_search_with_score("a", k=3)
    assert "allow_dangerous_deserialization" in (FaissVectorStore.load_local.__doc__ or "")


def test_an_index_name_that_was_not_saved_or_is_a_path_is_refused(tmp_path: Path) -> None:
    embeddings = TableEmbeddings()
    store = FaissVectorStore.from_texts(["a"], embeddings)
    store.save_local(tmp_path, index_name="one")
    with pytest.raises(FileNotFoundError, match=r"two\.store\.json"):
        FaissVectorStore.load_local(tmp_path, embeddings, index_name="two")
    with pytest.raises(FileNotFoundError, match=r"store\.json"):
        FaissVectorStore.load_local(tmp_path, embeddings)  # saved under "one", not the default
    for bad in ("", "a/b", "..", 3):
        with pytest.raises(ValueError, match="index_name must be a plain file name"):
            store.save_local(tmp_path, index_name=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="index_name must be a plain file name"):
            FaissVectorStore.load_local(tmp_path, embeddings, index_name=bad)  # type: ignore[arg-type]


def test_a_langchain_community_folder_is_refused_with_the_way_to_convert_it(tmp_path: Path) -> None:
    (tmp_path / "index.faiss").write_bytes(b"faiss bytes")
    (tmp_path / "index.pkl").write_bytes(b"\x80\x04 a pickle that must never be read")
    (tmp_path / "other.pkl").write_bytes(b"\x80\x04")
    with pytest.raises(FileNotFoundError, match=r"index\.faiss and index\.pkl.*never unpickles.*from_embeddings"):
        FaissVectorStore.load_local(tmp_path, TableEmbeddings(), allow_dangerous_deserialization=True)
    with pytest.raises(FileNotFoundError, match=r"other\.pkl.*langchain-community"):
        FaissVectorStore.load_local(tmp_path, TableEmbeddings(), "other", allow_dangerous_deserialization=True)


# ------------------------------------------------------------------------------------------------ from / add embeddings


def test_from_embeddings_stores_the_given_vectors_without_embedding() -> None:
    embeddings = TableEmbeddings()
    given = pairs(["alpha", "beta", "gamma"])
    metadatas: list[Any] = [{"n": 1}, {"n": 2}, None]  # None: no metadata, as add_texts takes it
    store = FaissVectorStore.from_embeddings(given, embeddings, metadatas, ["a", "b", "c"], gpu=False)
    assert embeddings.documents_embedded == 0
    assert store.ids == ["a", "b", "c"]
    assert [d.metadata for d in store.get_by_ids(store.ids)] == [{"n": 1}, {"n": 2}, {}]
    assert [d.page_content for d in store.get_by_ids(store.ids)] == ["alpha", "beta", "gamma"]
    vectors = stored_vectors(store)
    for (_, vector), id_ in zip(given, "abc", strict=True):
        np.testing.assert_allclose(vectors[id_], unit(vector), atol=1e-6)  # metric="cosine" normalises
    best = store.similarity_search_by_vector(given[1][1], k=1)[0]
    assert best.id == "b"

    l2 = FaissVectorStore.from_embeddings(iter(given), embeddings, metric="l2", kind="hnsw", gpu=False)
    assert l2.index is not None and l2.index.kind == "hnsw" and l2.index.metric == "l2"
    np.testing.assert_allclose(list(stored_vectors(l2).values()), [vector for _, vector in given], atol=1e-6)
    assert len(l2.ids) == 3 and len(set(l2.ids)) == 3  # new UUIDs


def test_add_embeddings_appends_and_upserts() -> None:
    embeddings = TableEmbeddings()
    store = FaissVectorStore.from_texts(["one", "two"], embeddings, ids=["1", "2"], gpu=False)
    embedded = embeddings.documents_embedded
    ids = store.add_embeddings(pairs(["three", "two, again"], seed=1), [{"v": 3}, {"v": 2}], ["3", "2"])
    assert ids == ["3", "2"] and embeddings.documents_embedded == embedded
    assert store.ids == ["1", "3", "2"]  # an upsert moves to the end, as with add_texts
    assert store.get_by_ids(["2"])[0].page_content == "two, again"
    np.testing.assert_allclose(
        stored_vectors(store)["2"], unit(pairs(["three", "two, again"], seed=1)[1][1]), atol=1e-6
    )
    new = store.add_embeddings(pairs(["four"], seed=2))
    assert len(new) == 1 and store.ids[-1] == new[0]
    assert store.add_embeddings([]) == []


def test_bad_embeddings_are_refused_and_change_nothing() -> None:
    embeddings = TableEmbeddings()
    store = FaissVectorStore.from_texts(["one", "two"], embeddings, ids=["1", "2"], gpu=False)
    before = (store.ids, stored_vectors(store))
    with pytest.raises(ValueError, match="from_embeddings got no"):
        FaissVectorStore.from_embeddings([], embeddings)
    with pytest.raises(TypeError, match=r"text_embeddings\[1\] is str, expected a \(text, vector\) pair"):
        store.add_embeddings([("x", [0.0] * DIM), "y"])  # type: ignore[list-item]
    with pytest.raises(TypeError, match=r"text_embeddings\[0\]\[0\] is int"):
        store.add_embeddings([(1, [0.0] * DIM)])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="zip"):
        store.add_embeddings("text")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not one numeric"):
        store.add_embeddings([("x", [0.0] * DIM), ("y", [0.0] * (DIM + 1))])
    with pytest.raises(ValueError, match=f"gave {DIM + 1}-d vectors, but this store holds {DIM}-d"):
        store.add_embeddings([("x", [0.0] * (DIM + 1))])
    with pytest.raises(ValueError, match="NaN or infinite"):
        store.add_embeddings([("two, broken", [float("nan")] * DIM)], ids=["2"])  # an upsert: would remove "2" first
    with pytest.raises(ValueError, match="1 texts but 2 ids"):
        store.add_embeddings([("x", [0.0] * DIM)], ids=["a", "b"])
    assert store.ids == before[0]
    after = stored_vectors(store)
    assert all(np.array_equal(after[id_], vector) for id_, vector in before[1].items())
    assert store.similarity_search("two", k=1)[0].id == "2"


# ------------------------------------------------------------------------------------------------ merge_from


def test_merge_from_copies_documents_and_vectors_without_embedding() -> None:
    embeddings = TableEmbeddings()
    first = FaissVectorStore.from_texts(
        ["red", "green"], embeddings, [{"c": "r"}, {"c": "g"}], ids=["r", "g"], gpu=False
    )
    second = FaissVectorStore.from_texts(
        ["blue", "cyan", "navy"], embeddings, [{"c": "b"}, {"c": "c"}, {"c": "n"}], ids=["b", "c", "n"], kind="hnsw"
    )
    second.delete(["c"])
    embedded = embeddings.documents_embedded
    first.merge_from(second)
    assert embeddings.documents_embedded == embedded  # nothing re-embedded
    assert first.ids == ["r", "g", "b", "n"] and second.ids == ["b", "n"]  # the other store is unchanged
    assert first.get_by_ids(["b", "n"]) == second.get_by_ids(["b", "n"])
    merged, source = stored_vectors(first), stored_vectors(second)
    for id_ in ("b", "n"):
        np.testing.assert_allclose(merged[id_], source[id_], atol=1e-6)
    assert first.similarity_search_with_score("navy", k=1) == second.similarity_search_with_score("navy", k=1)
    assert [d.id for d in first.similarity_search("x", k=4, filter={"c": {"$in": ["b", "r"]}})] != []
    merged_doc = first.get_by_ids(["b"])[0]
    merged_doc.metadata["c"] = "changed"
    assert second.get_by_ids(["b"])[0].metadata == {"c": "b"}
    first.delete(["b"])  # the merged documents are the first store's own
    assert first.ids == ["r", "g", "n"] and second.ids == ["b", "n"]


def test_merge_into_an_empty_store_and_from_an_empty_one() -> None:
    embeddings = TableEmbeddings()
    full = FaissVectorStore.from_texts(["a", "b"], embeddings, ids=["a", "b"], gpu=False)
    empty = FaissVectorStore(embeddings, gpu=False)
    empty.merge_from(full)
    assert empty.ids == ["a", "b"] and empty.index is not None and empty.index.dim == DIM
    full.merge_from(FaissVectorStore(embeddings))
    assert full.ids == ["a", "b"]


def test_merge_from_refuses_clashing_ids_other_dimensions_and_metrics() -> None:
    embeddings = TableEmbeddings()
    first = FaissVectorStore.from_texts(["a", "b", "c"], embeddings, ids=["a", "b", "c"], gpu=False)
    clashing = FaissVectorStore.from_texts(["x", "b2", "c2", "y"], embeddings, ids=["x", "b", "c", "y"], gpu=False)
    with pytest.raises(ValueError, match=r"2 id\(s\) are in both stores: 'b', 'c'.*nothing was merged"):
        first.merge_from(clashing)
    with pytest.raises(ValueError, match="every id would clash"):
        first.merge_from(first)
    wider = FaissVectorStore.from_texts(["z"], TableEmbeddings(dim=DIM * 2), gpu=False)
    with pytest.raises(ValueError, match=f"{DIM * 2}-d vectors into one of {DIM}-d"):
        first.merge_from(wider)
    l2 = FaissVectorStore.from_texts(["z"], embeddings, metric="l2", gpu=False)
    with pytest.raises(ValueError, match="metric='l2' into one with metric='cosine'"):
        first.merge_from(l2)
    with pytest.raises(TypeError, match="another FaissVectorStore"):
        first.merge_from(object())  # type: ignore[arg-type]
    assert first.ids == ["a", "b", "c"] and first.index is not None and len(first.index) == 3


def test_a_converted_community_store_round_trips(tmp_path: Path) -> None:
    """The conversion load_local's docstring gives: vectors, texts, metadata and ids as community's store has them."""
    embeddings = TableEmbeddings()
    texts = ["ferry at nine", "bakery at six", "library games"]
    vectors = np.stack([embeddings.vector(text) for text in texts])
    ids = ["id-a", "id-b", "id-c"]
    store = FaissVectorStore.from_embeddings(zip(texts, vectors, strict=True), embeddings, [{"n": 1}, {}, {}], ids)
    folder = store.save_local(tmp_path / "converted", index_name="index")
    loaded = FaissVectorStore.load_local(folder, embeddings, "index", allow_dangerous_deserialization=True)
    assert loaded.similarity_search("bakery at six", k=1)[0].id == "id-b"
    assert json.loads((folder / "store.json").read_text())["documents"][0]["metadata"] == {"n": 1}
