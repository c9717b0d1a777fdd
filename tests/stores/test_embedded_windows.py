"""Windows of documents a framework embedded: a document that is one window at a size is its given vector (checked
first), the rest embedded once per size, nothing kept; spans moved into the document's own text."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from fair_retrieval import FairEmbedder
from fair_retrieval.embedding.window_planning import WindowSettings
from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.stores.embedded_windows import GatheredWindows, content_offset, gathered_windows, within_content
from fair_retrieval.stores.store_mode import StoreWindows, default_windows

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


class Counted:
    """A fair-retrieval embedder's `embed_document_windows`, every call recorded (texts and window size)."""

    def __init__(self, embedder: FairEmbedder) -> None:
        self.fair_embedder = embedder
        self.calls: list[tuple[list[str], int | None]] = []

    def embed_document_windows(self, texts: list[str], **arguments: Any) -> DocumentWindows:
        self.calls.append((list(texts), arguments.get("window_tokens")))
        return self.fair_embedder.embed_document_windows(texts, **arguments)


def test_another_embedders_windows_are_all_embedded_and_foreign_vectors_are_counted() -> None:
    embedder = WindowsByLength()
    texts = ["x" * 12, "y" * 3]
    own = embedder.embed_document_windows(texts).pooled
    foreign = own.copy()
    foreign[1] = np.roll(foreign[1], 1)  # another model's vector for the second text
    embedder.calls.clear()
    gathered = gathered_windows(texts, foreign, embedder)
    assert embedder.calls == [texts]  # not fair-retrieval's: nothing is taken, one call for the shape's one size
    assert (gathered.taken, gathered.embedded, gathered.passes) == (0, 2, 1)
    assert (gathered.checked, gathered.disagreeing) == (2, 1)  # its own windows: the pass gives the pooled again
    shape = StoreWindows((10, 5))
    expected = shape.embed(embedder, texts)
    embedder.calls.clear()
    gathered = gathered_windows(texts, own, embedder, shape)
    assert embedder.calls == [texts, texts] and embedder.sizes[-2:] == [10, 5]
    _assert_same_windows(gathered, expected)
    with pytest.raises(ValueError, match="2 texts but vectors of shape"):
        gathered_windows(texts, own[:1], embedder)
    with pytest.raises(ValueError, match="4-d windows but the vectors are 3-d"):
        gathered_windows(texts, own[:, :3], embedder)


@pytest.fixture(scope="module")
def small(tiny_models: dict[str, str]) -> FairEmbedder:
    """A 64-token window: the default store shape keeps windows of 62 and 31 content tokens."""
    return FairEmbedder(tiny_models["bert-mean"], max_length=64, device="cpu")


def _texts(embedder: FairEmbedder, low: int, high: int, count: int, seed: int) -> list[str]:
    """`count` texts of more than `low` and at most `high` content tokens (sentences of random words)."""
    rng = np.random.default_rng(seed)
    words = "harbour ferry lantern orchard granite violin comet meadow basalt quarry falcon tundra".split()
    texts: list[str] = []
    while len(texts) < count:
        length = int(rng.integers(1, 80))
        text = ". ".join(" ".join(rng.choice(words, size=5)) for _ in range(length)) + "."
        tokens = embedder.token_lengths([text])[0] - embedder.token_lengths([""])[0]
        if low < tokens <= high:
            texts.append(text)
    return texts


def _assert_same_windows(gathered: GatheredWindows, expected: DocumentWindows) -> None:
    """The gathered windows are the ones embedding every text at every size gives (what the store would hold)."""
    windows = gathered.windows
    assert windows.owners.tolist() == expected.owners.tolist()
    assert windows.spans.tolist() == expected.spans.tolist()
    assert windows.weights.tolist() == expected.weights.tolist()
    np.testing.assert_allclose(windows.vectors, expected.vectors, atol=1e-5)


@pytest.mark.parametrize(
    ("kind", "calls"),
    [
        ("short", [1]),  # one window at both sizes: only the check reads one text, alone
        ("medium", [1, 3]),  # one window at the whole size: the check's text alone there, the half size's pass
        ("long", [3, 3]),  # several windows at both sizes: one pass per size, nothing to check
        ("mixed", [4, 5]),  # the check's text (the longest that fits) rides along the whole size's pass
    ],
)
def test_the_default_shape_reads_no_more_than_its_passes_and_keeps_the_same_windows(
    small: FairEmbedder, kind: str, calls: list[int]
) -> None:
    shape = default_windows(small)
    whole, half = shape.tokens
    short, medium, long = (
        _texts(small, *limits, 3, seed)
        for seed, limits in enumerate([(0, half), (half, whole), (whole + 20, 3 * whole)])
    )
    texts = {
        "short": short,
        "medium": medium,
        "long": long,
        "mixed": [medium[0], long[0], short[0], *long[1:], medium[1]],
    }[kind]
    own = small.embed_documents(texts)
    counted = Counted(small)
    gathered = gathered_windows(texts, own, counted, shape)
    assert [len(read) for read, _ in counted.calls] == calls
    assert gathered.passes == len(calls)
    assert gathered.embedded == len({text for read, _ in counted.calls for text in read})
    assert gathered.checked == (0 if kind == "long" else 1) and gathered.disagreeing == 0
    fitting = {"short": 2 * 3, "medium": 3, "long": 0, "mixed": 2 + 2}[kind]
    assert gathered.taken == fitting - (kind != "long")  # the checked text's window at its size is the fresh one
    if kind == "short":
        assert counted.calls[0][0] == [max(short, key=lambda text: small.token_lengths([text])[0])]
    np.testing.assert_array_equal(gathered.windows.pooled, own)  # the vectors given, kept
    _assert_same_windows(gathered, shape.embed(small, texts))


def test_vectors_of_another_model_are_never_taken(small: FairEmbedder) -> None:
    shape = default_windows(small)
    whole, half = shape.tokens
    texts = [*_texts(small, 0, half, 2, 7), *_texts(small, half, whole, 2, 8)]
    rotation, _ = np.linalg.qr(np.random.default_rng(0).standard_normal((small.dimension, small.dimension)))
    other = (small.embed_documents(texts) @ rotation).astype(np.float32)  # another model's space, unit vectors
    counted = Counted(small)
    gathered = gathered_windows(texts, other, counted, shape)
    assert gathered.checked == 4 and gathered.disagreeing == 4  # each one-window text compared, once it was read
    assert gathered.taken == 0 and gathered.embedded == 4
    assert gathered.passes == 4  # the check's text, the half size's pass, then the texts that were to be taken
    _assert_same_windows(gathered, shape.embed(small, texts))


def test_a_truncating_embedder_takes_every_given_vector_but_the_checked_one(tiny_models: dict[str, str]) -> None:
    embedder = FairEmbedder(tiny_models["bert-mean"], max_length=64, device="cpu", long_documents="truncate")
    shape = default_windows(embedder)
    assert shape == StoreWindows()  # every document one window: the embedder's own
    texts = [*_texts(embedder, 0, 62, 2, 3), *_texts(embedder, 100, 300, 2, 4)]
    own = embedder.embed_documents(texts)
    counted = Counted(embedder)
    gathered = gathered_windows(texts, own, counted, shape)
    assert [len(read) for read, _ in counted.calls] == [1]
    assert (gathered.taken, gathered.checked, gathered.disagreeing) == (3, 1, 0)
    _assert_same_windows(gathered, shape.embed(embedder, texts))


def test_the_embedders_own_windows_check_the_given_vectors_in_their_pass(small: FairEmbedder) -> None:
    texts = [*_texts(small, 0, 62, 2, 5), *_texts(small, 70, 200, 2, 6)]
    own = small.embed_documents(texts)
    counted = Counted(small)
    gathered = gathered_windows(texts, own, counted, StoreWindows())
    assert counted.calls == [(texts[2:], None)]  # the long ones; their pooled vectors are compared, no text alone
    assert (gathered.taken, gathered.checked, gathered.disagreeing) == (2, 2, 0)
    _assert_same_windows(gathered, StoreWindows().embed(small, texts))


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
