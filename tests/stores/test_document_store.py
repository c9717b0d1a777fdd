"""DocumentStore: the store both adapters wrap (construction checks, modes, adds, searches, deletes, merges)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from fair_retrieval import DocumentWindows, FaissIndex, MultiVectorIndex
from fair_retrieval.index import DEFAULT_AGGREGATE
from fair_retrieval.stores import DEFAULT_MULTIVECTOR
from fair_retrieval.stores.document_store import DocumentStore

pytest.importorskip("faiss")

DIM = 8


class Doc(NamedTuple):
    key: str
    text: str
    metadata: dict[str, int]


def _docs(count: int) -> list[Doc]:
    return [Doc(f"d{i}", f"text {i}", {"n": i}) for i in range(count)]


def _vectors(count: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)


class WindowEmbedder:
    """Gives each text two windows: its pooled vector and a second one."""

    def embed_document_windows(self, texts: list[str]) -> DocumentWindows:
        pooled = _vectors(len(texts), seed=len(texts))
        vectors = np.concatenate([pooled, pooled[::-1]])
        owners = np.concatenate([np.arange(len(texts)), np.arange(len(texts))])
        order = np.argsort(owners, kind="stable")
        spans = np.asarray([[0, 2] if k < len(texts) else [2, 4] for k in range(2 * len(texts))], np.int64)
        return DocumentWindows(pooled, vectors[order], owners[order], spans[order], np.ones(2 * len(texts), np.int64))


def test_the_default_mode_and_aggregate_come_from_one_place() -> None:
    store: DocumentStore[Doc] = DocumentStore(gpu=False, embedder=WindowEmbedder())
    assert store.multivector is DEFAULT_MULTIVECTOR
    multi: DocumentStore[Doc] = DocumentStore(gpu=False, multivector=True, embedder=WindowEmbedder())
    assert multi.mode.aggregate == DEFAULT_AGGREGATE
    assert not DocumentStore(gpu=False).multivector  # no embedder to take windows from: pooled


def test_arguments_are_checked_when_the_store_is_built() -> None:
    with pytest.raises(ValueError, match="metric must be one of"):
        DocumentStore(metric="dot", gpu=False)
    with pytest.raises(ValueError, match="kind must be one of"):
        DocumentStore(kind="annoy", gpu=False)
    with pytest.raises(ValueError, match="pass multivector=True with it"):
        DocumentStore(multivector=False, aggregate="max", gpu=False)
    with pytest.raises(TypeError, match="only fair-retrieval's embedders give"):
        DocumentStore(multivector=True, embedder=object(), gpu=False)
    with pytest.raises(ValueError, match="not both"):
        DocumentStore(index=FaissIndex(DIM, gpu=False), dim=DIM, gpu=False)
    with pytest.raises(ValueError, match="pass a MultiVectorIndex with multivector=True"):
        DocumentStore(index=FaissIndex(DIM, gpu=False), multivector=True, gpu=False)


def test_the_mode_is_the_type_of_the_index() -> None:
    store: DocumentStore[Doc] = DocumentStore(gpu=False, dim=DIM)
    assert isinstance(store.index, FaissIndex) and not store.multivector
    given = MultiVectorIndex(DIM, "ip", gpu=False, aggregate="max")
    multi: DocumentStore[Doc] = DocumentStore(index=given, multivector=True, gpu=False)
    assert multi.multivector and multi.mode.aggregate == "max" and multi.index is given


def test_add_search_delete_and_get() -> None:
    store: DocumentStore[Doc] = DocumentStore(gpu=False)
    docs, vectors = _docs(6), _vectors(6)
    store.add(docs, vectors)
    hits = store.search(vectors[2], 3)
    assert hits[0].record.key == "d2" and hits[0].best_window is None and len(hits) == 3
    kept = store.search(vectors[2], 3, keep=lambda doc: doc.metadata["n"] >= 4)
    assert [hit.record.key for hit in kept] in (["d4", "d5"], ["d5", "d4"])
    assert store.delete(["d2", "nope"]) == ["nope"] and "d2" not in store and len(store) == 5
    with pytest.raises(ValueError, match="not in the store: 'nope'"):
        store.delete(["d1", "nope"], strict=True)
    assert "d1" in store
    assert [key for _, (key, _, _) in store.get(["d5", "d0", "d5"])] == ["d5", "d0"]
    with pytest.raises(ValueError, match="gave 4-d vectors, but this store holds 8-d"):
        store.add(_docs(1), np.zeros((1, 4), np.float32), "the probe")


def test_a_multivector_store_returns_distinct_documents_with_their_best_window() -> None:
    store: DocumentStore[Doc] = DocumentStore(gpu=False, multivector=True, embedder=WindowEmbedder())
    docs = _docs(4)
    store.add_texts(docs, [doc.text for doc in docs], lambda texts: pytest.fail("pooled path in multi-vector mode"))
    assert isinstance(store.index, MultiVectorIndex) and store.index.window_count == 8
    hits = store.search(_vectors(4, seed=4)[1], 4)
    assert len({hit.record.key for hit in hits}) == 4 and all(hit.best_window is not None for hit in hits)
    with pytest.raises(TypeError, match="keeps one pooled vector"):
        DocumentStore(gpu=False).add_windows(docs, WindowEmbedder().embed_document_windows(["a"]))


def test_merge_from_copies_vectors_and_refuses_clashes() -> None:
    first: DocumentStore[Doc] = DocumentStore(gpu=False)
    second: DocumentStore[Doc] = DocumentStore(gpu=False)
    first.add(_docs(2), _vectors(2))
    second.add([Doc("x", "x", {})], _vectors(1, seed=3))
    assert first.merge_from(second) == 1 and first.records.keys == ["d0", "d1", "x"]
    with pytest.raises(ValueError, match="are in both stores"):
        first.merge_from(second)
    other_metric: DocumentStore[Doc] = DocumentStore(gpu=False, metric="l2")
    other_metric.add([Doc("y", "y", {})], _vectors(1))
    with pytest.raises(ValueError, match="metric='l2' into one with metric='cosine'"):
        first.merge_from(other_metric)
