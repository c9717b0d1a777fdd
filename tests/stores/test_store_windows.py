"""The windows a multi-vector store keeps (StoreWindows) and the default mode of a new store."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from fair_retrieval import FairEmbedder
from fair_retrieval.jsonio import DamagedFileError
from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.store_mode import (
    DEFAULT_WINDOW_BOUNDARIES,
    StoreWindows,
    default_windows,
)
from fair_retrieval.stores.window_embedders import gives_windows
from tests.embedding.test_boundaries import article

pytest.importorskip("faiss")

TEXTS = [article(61, paragraphs=6), "One short text.", article(62, paragraphs=3)]


class PooledOnly:
    """Embeddings of another framework: one vector per text, no windows."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0]] * len(texts)


@pytest.fixture(scope="module")
def embedder(minilm: str) -> FairEmbedder:
    return FairEmbedder(minilm, calibration=None)


def test_a_store_over_embeddings_without_windows_is_pooled_and_says_so(caplog: pytest.LogCaptureFixture) -> None:
    assert not gives_windows(PooledOnly())
    with caplog.at_level(logging.INFO, logger="fair_retrieval.stores"):
        store: DocumentStore[str] = DocumentStore(gpu=False, embedder=PooledOnly(), name="FaissVectorStore")
    assert not store.multivector and store.windows is None
    said = [r.getMessage() for r in caplog.records if "gives no window vectors" in r.getMessage()]
    assert len(said) == 1 and said[0].startswith("FaissVectorStore: PooledOnly gives no window vectors")
    with pytest.raises(TypeError, match="only fair-retrieval's embedders give"):
        DocumentStore(gpu=False, embedder=PooledOnly(), multivector=True)  # asked for: refused, not downgraded


def test_a_new_store_keeps_whole_and_half_windows_at_the_texts_boundaries(embedder: FairEmbedder) -> None:
    store: DocumentStore[str] = DocumentStore(gpu=False, embedder=embedder)
    whole, half = embedder.window_content_tokens, 127  # 254 content tokens and half of it
    assert store.multivector and store.windows == StoreWindows((whole, half), DEFAULT_WINDOW_BOUNDARIES)
    windows = store.embed_windows(TEXTS)
    by_size = [
        FairEmbedder(
            embedder.model, calibration=None, window_boundaries="text", window_tokens=n
        ).embed_document_windows(TEXTS)
        for n in (whole, half)
    ]
    np.testing.assert_allclose(windows.pooled, by_size[0].pooled, atol=1e-5)
    for document in (0, 2):
        expected = np.concatenate([w.vectors[w.of(document)] for w in by_size])
        np.testing.assert_allclose(windows.vectors[windows.of(document)], expected, atol=1e-5)
    assert len(windows.vectors[windows.of(1)]) == 1  # a short text: its one window at both sizes, kept once
    identity = store.identity()
    assert identity is not None
    assert identity["store_windows"] == {"tokens": [whole, half], "boundaries": "text"}
    assert identity["window_tokens"] is None  # the embedder's own option, recorded apart
    assert default_windows(FairEmbedder(embedder.model, long_documents="truncate")) == StoreWindows()


def test_several_sizes_keep_every_documents_windows_together(embedder: FairEmbedder) -> None:
    both = StoreWindows((254, 127), "text").embed(embedder, TEXTS)
    one = [StoreWindows((n,), "text").embed(embedder, TEXTS) for n in (254, 127)]
    assert len(both.vectors) == sum(len(w.vectors) for w in one) - 1  # the short text's one window, kept once
    assert len(both.spans[both.of(1)]) == 1
    np.testing.assert_array_equal(both.pooled, one[0].pooled)
    for document in (0, 2):  # long enough to have different windows at both sizes
        rows = both.spans[both.of(document)]
        expected = np.concatenate([w.spans[w.of(document)] for w in one])
        np.testing.assert_array_equal(rows, expected)


def test_the_shape_is_saved_and_read_back_and_a_bad_one_is_refused() -> None:
    shape = StoreWindows((127,), "text")
    assert shape.settings() == {"store_windows": {"tokens": [127], "boundaries": "text"}}
    assert StoreWindows.saved(shape.settings(), Path("store.json"), "Rebuild.") == shape
    assert StoreWindows.saved({}, Path("store.json"), "Rebuild.") == StoreWindows()  # saved before: own windows
    bad_shapes = ({"tokens": 127}, {"tokens": [0]}, {"tokens": [], "boundaries": "words"}, [127])
    for bad in ({"store_windows": shape} for shape in bad_shapes):
        with pytest.raises(DamagedFileError, match="window shape is malformed"):
            StoreWindows.saved(bad, Path("store.json"), "Rebuild.")


def test_window_settings_and_whole_windows_say_how_a_call_cuts(embedder: FairEmbedder) -> None:
    settings = embedder.window_settings(127, "text")
    assert settings == (127, embedder.window_settings(127).overlap, "text", True)
    assert embedder.window_settings() == (embedder.window_content_tokens, embedder.window_overlap, "tokens", True)
    own, small = embedder.whole_windows(TEXTS, [None, 127])
    for size, found in ((None, own), (127, small)):
        made = embedder.embed_document_windows(TEXTS, window_tokens=size, window_boundaries="text")
        for document, weight in enumerate(found):
            rows = made.of(document)
            if weight is None:
                assert rows.stop - rows.start > 1  # cut into windows
            else:
                assert made.spans[rows].tolist() == [[0, len(TEXTS[document])]]
                assert made.weights[rows].tolist() == [weight]
    assert own[1] is not None and small[1] == own[1] and own[0] is None and small[2] is None


def test_stores_of_other_window_shapes_are_not_merged(embedder: FairEmbedder) -> None:
    from tests.stores.test_document_store import Doc

    default: DocumentStore[Doc] = DocumentStore(gpu=False, embedder=embedder)
    own: DocumentStore[Doc] = DocumentStore(gpu=False, embedder=embedder, windows=StoreWindows())
    for store, key in ((default, "a"), (own, "b")):
        store.add_texts([Doc(key, TEXTS[0], {})], [TEXTS[0]], embedder.embed_documents)
    with pytest.raises(ValueError, match="nor windows of another shape"):
        default.merge_from(own)
    assert len(default) == 1


def test_each_window_pass_names_what_it_embeds_in_its_progress_bar(tiny_models: dict[str, str]) -> None:
    embedder = FairEmbedder(tiny_models["bert-mean"], max_length=64, device="cpu")
    labels: list[str] = []
    real = embedder._embed_pieces

    def spy(*args: object, **kwargs: object) -> object:
        from fair_retrieval.embedding.embedding_report import current_passes

        passes = current_passes()
        labels.append(passes.label if passes is not None and passes.label else "")
        return real(*args, **kwargs)  # type: ignore[arg-type]

    embedder._embed_pieces = spy  # type: ignore[method-assign]
    StoreWindows((62, 31), "text").embed(embedder, TEXTS)
    assert labels == ["whole windows", "half windows"]
    StoreWindows((62, 20), "text").embed(embedder, TEXTS)
    assert labels[2:] == ["whole windows", "20-token windows"]
