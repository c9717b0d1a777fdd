"""The store lock (`fair_retrieval.stores.store_lock`): threads sharing one DocumentStore see it whole, a lexical
side rebuilt by several readers at once answers each, and a save refuses a store its own load would refuse,
leaving the folder saved before as it was."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.text_documents import TextDocument
from tests.concurrency import run_threads

pytest.importorskip("faiss")
pytest.importorskip("bm25s")

DIM = 8
FORMAT = DocumentStore.text_format("TestStore", "TestStore.save()", "fair-retrieval")


def _store(count: int) -> DocumentStore[TextDocument]:
    store: DocumentStore[TextDocument] = DocumentStore.of_texts(dim=DIM, gpu=False)
    vectors = np.random.default_rng(0).standard_normal((count, DIM)).tolist()
    texts = [f"harbour ferry number{i} word{i % 7}" for i in range(count)]
    store.add_document_vectors(list(zip(texts, vectors, strict=True)), None, [f"d{i}" for i in range(count)])
    return store


def test_readers_rebuilding_the_lexical_side_at_once_each_get_its_answer() -> None:
    for round_number in range(20):
        store = _store(200)
        store.lexical_search("word3 harbour", 5)  # built once
        store.delete_ids([f"d{round_number}"])  # the next lexical search rebuilds the BM25 index
        results: list[list[int]] = []

        def read(store: DocumentStore[TextDocument] = store, results: list[list[int]] = results) -> None:
            results.append([hit.int_id for hit in store.lexical_search("word3 harbour", 5)])

        errors = run_threads([read] * 4)
        assert not errors, errors
        assert len(results) == 4 and all(result == results[0] for result in results)
        assert round_number not in results[0] and len(results[0]) == 5


def test_the_lock_is_the_stores_and_its_records_and_is_reentrant() -> None:
    store = _store(3)
    assert store.records.lock is store.lock
    with store.lock:  # a caller holding the lock may call the store (the adapters compose calls so)
        assert len(store.search_vector(np.ones(DIM), 2)) == 2


def test_a_save_never_publishes_a_store_its_load_would_refuse(tmp_path: Path) -> None:
    store = _store(4)
    store.save(FORMAT, tmp_path / "store.json", tmp_path / "index")
    saved = {path.name: path.read_bytes() for path in [tmp_path / "store.json", *(tmp_path / "index").iterdir()]}
    assert store.index is not None
    store.index.add(np.ones((1, DIM), np.float32), ids=np.asarray([99], np.int64))  # behind the store's back
    with pytest.raises(ValueError, match=r"4 documents and the 5 vectors of its index disagree.*nothing was written"):
        store.save(FORMAT, tmp_path / "store.json", tmp_path / "index")
    after = {path.name: path.read_bytes() for path in [tmp_path / "store.json", *(tmp_path / "index").iterdir()]}
    assert after == saved
    loaded = DocumentStore.load(
        FORMAT, tmp_path / "store.json", tmp_path / "index", gpu=False, embedder=None, missing="none"
    )
    assert sorted(loaded.records.keys) == ["d0", "d1", "d2", "d3"]
