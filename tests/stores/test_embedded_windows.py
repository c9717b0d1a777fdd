"""Windows of documents a framework embedded: taken from the embedder's cache, the misses embedded once, spans moved."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fair_retrieval.embedding.window_planning import WindowSettings
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.stores.embedded_windows import content_offset, gathered_windows, within_content
from fair_retrieval.stores.store_mode import StoreWindows
from fair_retrieval.stores.window_embedders import WindowCache

DIM = 4


class WindowsByLength:
    """A fake window embedder: a text of n characters gets windows of `window_tokens` characters (10 by default),
    vectors from the text and the window alone; every call is recorded with its window size."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []
        self.sizes: list[int] = []

    def window_settings(self, window_tokens: int | None = None, window_boundaries: Any = None) -> WindowSettings:
        return WindowSettings(window_tokens or 10, 0, window_boundaries or "tokens", True)

    def embed_document_windows(
        self, texts: list[str], window_tokens: int | None = None, window_boundaries: Any = None
    ) -> DocumentWindows:
        size = window_tokens or 10
        self.calls.append(list(texts))
        self.sizes.append(size)
        vectors, owners, spans, weights = [], [], [], []
        for position, text in enumerate(texts):
            for window in range(max(1, -(-len(text) // size))):
                vector = np.zeros(DIM, dtype=np.float32)
                vector[(ord(text[0]) + window) % DIM] = 1.0  # the text decides, not its place in the batch
                vector[(len(text) + window + size) % DIM] += 0.5
                vectors.append(vector / np.linalg.norm(vector))
                owners.append(position)
                spans.append((window * size, min(len(text), window * size + size)))
                weights.append(spans[-1][1] - spans[-1][0])
        matrix = np.asarray(vectors, dtype=np.float32)
        pooled = np.stack([matrix[np.asarray(owners) == i].mean(axis=0) for i in range(len(texts))])
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return DocumentWindows(
            pooled, matrix, np.asarray(owners), np.asarray(spans, dtype=np.int64), np.asarray(weights, dtype=np.int64)
        )


OWN = WindowSettings(10, 0, "tokens", True)


def test_cached_texts_are_taken_and_only_misses_are_embedded_once_in_order() -> None:
    embedder = WindowsByLength()
    texts = ["a" * 25, "b" * 5, "c" * 31]
    first = embedder.embed_document_windows(texts)
    cache = WindowCache()
    cache.remember(texts[:2], first.select([0, 1]), OWN)  # the third was never seen
    embedder.calls.clear()
    gathered = gathered_windows(texts, first.pooled, embedder, cache)
    assert embedder.calls == [[texts[2]]]
    assert (gathered.misses, gathered.disagreeing, gathered.embedded, gathered.passes) == (1, 0, 1, 1)
    np.testing.assert_allclose(gathered.windows.vectors, first.vectors)
    assert gathered.windows.owners.tolist() == first.owners.tolist()
    assert gathered.windows.spans.tolist() == first.spans.tolist()


def test_a_shape_other_than_the_embedders_takes_what_its_pass_cut_and_asks_for_the_rest() -> None:
    embedder = WindowsByLength()
    texts = ["a" * 25, "b" * 4, "c" * 8]  # 3, 1 and 1 windows of 10; "b" also fits a window of 5, "c" does not
    own = embedder.embed_document_windows(texts)
    cache = WindowCache()
    cache.remember(texts, own, OWN)
    shape = StoreWindows((10, 5))
    expected = shape.embed(embedder, texts)
    embedder.calls.clear()
    gathered = gathered_windows(texts, own.pooled, embedder, cache, shape)
    assert embedder.calls == [[texts[0], texts[2]]] and embedder.sizes[-1] == 5  # the size-10 pass is the cache's
    assert (gathered.misses, gathered.embedded, gathered.passes) == (0, 2, 1)
    np.testing.assert_allclose(gathered.windows.vectors, expected.vectors)
    assert gathered.windows.spans.tolist() == expected.spans.tolist()
    np.testing.assert_array_equal(gathered.windows.pooled, own.pooled)  # the vectors given, kept
    _, left = cache.take(texts, own.pooled, OWN)
    assert left == 0 and len(cache) == 3  # the store only read the cache


def test_without_a_cache_everything_is_embedded_and_foreign_vectors_are_counted() -> None:
    embedder = WindowsByLength()
    texts = ["x" * 12, "y" * 3]
    own = embedder.embed_document_windows(texts).pooled
    foreign = own.copy()
    foreign[1] = np.roll(foreign[1], 1)  # another model's vector for the second text
    gathered = gathered_windows(texts, foreign, embedder, None)
    assert (gathered.misses, gathered.disagreeing) == (2, 1)
    assert len(embedder.calls) == 2 and embedder.calls[1] == texts  # one call for all misses
    with pytest.raises(ValueError, match="2 texts but vectors of shape"):
        gathered_windows(texts, own[:1], embedder, None)
    with pytest.raises(ValueError, match="4-d windows but the vectors are 3-d"):
        gathered_windows(texts, own[:, :3], embedder, None)


def test_a_cached_entry_with_another_pooled_vector_is_a_miss() -> None:
    embedder = WindowsByLength()
    texts = ["q" * 14]
    windows = embedder.embed_document_windows(texts)
    cache = WindowCache()
    cache.remember(texts, windows, OWN)
    other = np.roll(windows.pooled, 2, axis=1)
    assert gathered_windows(texts, windows.pooled, embedder, cache).misses == 0
    assert gathered_windows(texts, other, embedder, cache).misses == 1
    assert cache.take(texts, windows.pooled, OWN._replace(tokens=5))[1] == 1  # other settings: another entry


def test_content_offset_finds_the_text_after_a_header() -> None:
    assert content_offset("plain text", "plain text") == 0
    assert content_offset("title: text\n\ntext", "text") == len("title: text\n\n")  # the last occurrence
    assert content_offset("k: v\n\nbody", "  body") == len("k: v\n\n") - 2  # the embedded text was stripped
    assert content_offset("something else", "missing") == 0
    assert content_offset("header", "") == 0


def test_within_content_moves_and_clips_each_documents_spans() -> None:
    windows = WindowsByLength().embed_document_windows(["a" * 25, "b" * 12])
    moved = within_content(windows, offsets=[5, 0], lengths=[20, 12])
    assert moved.spans[windows.owners == 0].tolist() == [[0, 5], [5, 15], [15, 20]]
    assert moved.spans[windows.owners == 1].tolist() == windows.spans[windows.owners == 1].tolist()
    np.testing.assert_array_equal(moved.vectors, windows.vectors)
