"""A store never changes the embeddings it is given: the same texts and queries give the same vectors before,
during (between adds) and after a `FaissVectorStore` is built over a `FairEmbeddings`, in both modes.

A tiny random model with a 32-token window cuts the texts into several windows, so the store's window shape (the
window study's default: whole and half windows at the text's boundaries) differs from the embeddings' own.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from langchain_fair import FairEmbeddings, FaissVectorStore

from fair_retrieval import FairEmbedder

pytest.importorskip("faiss")

TEXTS = [
    "The ferry to the island leaves the harbour at nine. " * 6,
    "A farmers market fills the square with cheese and apples on Saturdays.",
    ("Volunteers repair bicycles behind the town hall. The choir rehearses in the chapel.\n\n" * 4).strip(),
]
QUERIES = ["when does the ferry leave", "where are bicycles repaired"]


@pytest.fixture(scope="module")
def embedder(tiny_model: str) -> FairEmbedder:
    return FairEmbedder(tiny_model, max_length=32, device="cpu")


def _vectors(embeddings: FairEmbeddings) -> tuple[np.ndarray, np.ndarray]:
    return np.asarray(embeddings.embed_documents(TEXTS)), np.asarray([embeddings.embed_query(q) for q in QUERIES])


def _assert_unchanged(embeddings: FairEmbeddings, before: tuple[np.ndarray, np.ndarray]) -> None:
    texts, queries = _vectors(embeddings)
    np.testing.assert_array_equal(texts, before[0])
    np.testing.assert_array_equal(queries, before[1])


@pytest.mark.parametrize("multivector", [True, False])
def test_the_embeddings_give_the_same_vectors_before_during_and_after_a_store(
    embedder: FairEmbedder, multivector: bool
) -> None:
    embeddings = FairEmbeddings(embedder=embedder)
    before = _vectors(embeddings)
    options: dict[str, Any] = {} if multivector else {"multivector": False}
    store = FaissVectorStore(embeddings, gpu=False, **options)
    assert store.multivector is multivector
    _assert_unchanged(embeddings, before)
    store.add_texts(TEXTS[:1])
    _assert_unchanged(embeddings, before)  # between adds
    store.add_texts(TEXTS[1:])
    _assert_unchanged(embeddings, before)
    assert len(store.similarity_search(QUERIES[0], k=2)) == 2
    other = FaissVectorStore.from_texts(TEXTS, embeddings, gpu=False, **options)
    del store, other
    _assert_unchanged(embeddings, before)  # after
