"""A store never changes the embed model it is given: the same texts and queries give the same vectors before,
during (between adds) and after a `FairFaissVectorStore` is built over a `FairEmbedding`, in both modes.

A tiny random model with a 32-token window cuts the texts into several windows, so the store's window shape (the
window study's default: whole and half windows at the text's boundaries) differs from the embed model's own.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode
from llama_index.embeddings.fair import FairEmbedding
from llama_index.vector_stores.fair import FairFaissVectorStore

from fair_retrieval import FairEmbedder
from fair_retrieval.stores import StoreWindows

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


def _vectors(embed_model: FairEmbedding) -> tuple[np.ndarray, np.ndarray]:
    texts = np.asarray(embed_model.get_text_embedding_batch(TEXTS))
    queries = np.asarray([embed_model.get_query_embedding(query) for query in QUERIES])
    return texts, queries


def _assert_unchanged(embed_model: FairEmbedding, before: tuple[np.ndarray, np.ndarray]) -> None:
    texts, queries = _vectors(embed_model)
    np.testing.assert_array_equal(texts, before[0])
    np.testing.assert_array_equal(queries, before[1])


@pytest.mark.parametrize("multivector", [True, False])
def test_the_embed_model_gives_the_same_vectors_before_during_and_after_a_store(
    embedder: FairEmbedder, multivector: bool
) -> None:
    embed_model = FairEmbedding(embedder=embedder)
    before = _vectors(embed_model)
    options: dict[str, Any] = {} if multivector else {"multivector": False}
    store = FairFaissVectorStore.create(embedder.dimension, gpu=False, embed_model=embed_model, **options)
    assert store.multivector is multivector
    _assert_unchanged(embed_model, before)
    index = VectorStoreIndex.from_documents(
        [Document(text=TEXTS[0], id_="a")],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
        transformations=[SentenceSplitter(chunk_size=200, chunk_overlap=0)],
    )
    _assert_unchanged(embed_model, before)  # between adds
    index.insert(Document(text=TEXTS[2], id_="b"))
    store.record_embed_model(embed_model)
    _assert_unchanged(embed_model, before)
    assert len(index.as_retriever(similarity_top_k=2).retrieve(QUERIES[0])) == 2
    del index, store
    _assert_unchanged(embed_model, before)  # after


def test_a_multi_vector_store_keeps_its_shape_and_takes_a_node_that_is_one_window(
    embedder: FairEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    embed_model = FairEmbedding(embedder=embedder)
    store = FairFaissVectorStore.create(embedder.dimension, gpu=False, embed_model=embed_model)
    assert store._store.windows is not None and len(store._store.windows.tokens) == 2
    asked: list[dict[str, Any]] = []
    original = embedder.embed_document_windows

    def spy(texts: Any, *args: Any, **kwargs: Any) -> Any:
        asked.append({"texts": list(texts), **kwargs})
        return original(texts, *args, **kwargs)

    monkeypatch.setattr(embedder, "embed_document_windows", spy)
    document = Document(text=TEXTS[1], id_="short")  # one window at both sizes: its vector is its window
    VectorStoreIndex.from_documents(
        [document], storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
    )
    embedded = document.get_content(metadata_mode=MetadataMode.EMBED)
    assert [call["texts"] for call in asked] == [[embedded], [embedded]]  # the embed model's pass, then the check
    assert asked[0]["window_tokens"] is None and asked[0]["window_boundaries"] is None
    assert asked[1]["window_tokens"] == store._store.windows.tokens[0]  # read once at one size, not at both
    assert store.client.window_count == 1  # type: ignore[union-attr]  # the one window, kept once


def _rows_read(embedder: FairEmbedder) -> list[int]:
    """The windows each forward pass of `embedder`'s model reads, appended as it runs (the rows of the token ids
    its first module, the transformer, is called with)."""
    rows: list[int] = []

    def count(module: Any, args: tuple[Any, ...]) -> None:
        rows.append(int(args[0]["input_ids"].shape[0]))

    embedder.model[0].register_forward_pre_hook(count)
    return rows


@pytest.mark.parametrize("boundaries", ["text", "tokens"])
def test_the_model_reads_each_window_the_store_keeps_once_beside_the_embed_models_pass(
    tiny_model: str, boundaries: Literal["text", "tokens"]
) -> None:
    """A multi-vector store over the `FairEmbedding` that embedded its nodes keeps nothing of that pass: the
    model reads the embed model's windows once, and the windows of the store's shape once more each (one pass per
    size; a store of the embed model's own windows: that pass once more), nothing else. Counted in the model's
    forward passes, against the same calls made directly."""
    texts = [TEXTS[0], TEXTS[2]]  # several windows at the whole and the half size
    embedder = FairEmbedder(tiny_model, max_length=32, device="cpu", window_boundaries=boundaries)
    embed_model = FairEmbedding(embedder=embedder)
    store = FairFaissVectorStore.create(embedder.dimension, gpu=False, embed_model=embed_model)
    assert store._store.windows is not None and store._store.windows.boundaries == "text"
    whole, half = store._store.windows.tokens
    rows = _rows_read(embedder)
    embedder.embed_document_windows(texts)  # the embed model's own pass
    embedder.embed_document_windows(texts, window_tokens=whole, window_boundaries="text")
    embedder.embed_document_windows(texts, window_tokens=half, window_boundaries="text")
    expected = sum(rows)
    assert expected > 0
    rows.clear()
    VectorStoreIndex.from_documents(
        [Document(text=text, id_=f"d{position}") for position, text in enumerate(texts)],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
        transformations=[SentenceSplitter(chunk_size=200, chunk_overlap=0)],
    )
    assert sum(rows) == expected and len(store.node_ids) == len(texts)
    rows.clear()
    own = FairFaissVectorStore.create(embedder.dimension, gpu=False, embed_model=embed_model, windows=StoreWindows())
    VectorStoreIndex.from_documents(  # a store of the embed model's own windows: its pass, and once more
        [Document(text=text, id_=f"e{position}") for position, text in enumerate(texts)],
        storage_context=StorageContext.from_defaults(vector_store=own),
        embed_model=embed_model,
        transformations=[SentenceSplitter(chunk_size=200, chunk_overlap=0)],
    )
    embedded = sum(rows)
    rows.clear()
    embedder.embed_document_windows(texts)
    assert embedded == 2 * sum(rows) and len(own._store.records) == len(texts)
