"""Windows of several sizes from one model pass (`FairEmbedder.embed_multiscale_windows`): the smaller windows read
from the largest windows' token states, checked against one pass per size and against transformers' own states."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding.one_pass import Segment, multiscale_sizes, read_segments
from fair_retrieval.engine.hook import calibrating
from fair_retrieval.stores.store_mode import merged_passes
from tests.embedding.test_boundaries import article

SMALL_BASKETS = Calibration(strength=1.0, basket_size=16, min_full_baskets=2)  # windows of ≥ 32 tokens calibrated


def texts_of(seeds: range, paragraphs: int) -> list[str]:
    """Articles of sentences and paragraphs (so "text" boundaries apply), and a text that fits every window."""
    return [article(seed, paragraphs=paragraphs) for seed in seeds] + ["One short text. It fits."]


def two_passes(embedder: FairEmbedder, texts: list[str], sizes: tuple[int, ...], **arguments: Any) -> Any:
    """What a multi-vector store keeps today: one `embed_document_windows` pass per size, merged."""
    return merged_passes([embedder.embed_document_windows(texts, window_tokens=n, **arguments) for n in sizes])


def rows_of(windows: Any, large: Any) -> list[int]:
    """The rows of `windows` that hold `large`'s windows (same document and span), in `large`'s order."""
    keys = list(zip(windows.owners.tolist(), map(tuple, windows.spans.tolist()), strict=True))
    return [keys.index(key) for key in zip(large.owners.tolist(), map(tuple, large.spans.tolist()), strict=True)]


def hf_folder(key: str, tiny_models: dict[str, str], minilm: str) -> str:
    """The transformers folder of a test model (the tiny models keep theirs next to the sentence-transformers one)."""
    return minilm if key == "minilm" else str(Path(tiny_models[key]).parent / "hf")


@cache
def transformers_model(folder: str) -> tuple[Any, Any]:
    """transformers' tokenizer and model from `folder` (loaded once per test session)."""
    from transformers import AutoModel, AutoTokenizer

    return AutoTokenizer.from_pretrained(folder), AutoModel.from_pretrained(folder).eval()


def token_states(folder: str, text: str, prompt: str = "") -> tuple[np.ndarray, np.ndarray]:
    """transformers' own last hidden states of `prompt + text` (tokens, h) and each token's first character in
    `text` (-1 for the special and prompt tokens): computed without fair-retrieval."""
    tokenizer, model = transformers_model(folder)
    encoded = tokenizer(
        prompt + text, return_offsets_mapping=True, return_special_tokens_mask=True, return_tensors="pt"
    )
    offsets = encoded.pop("offset_mapping")[0].numpy()
    special = encoded.pop("special_tokens_mask")[0].numpy().astype(bool)
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state[0].numpy()  # (tokens, h)
    return hidden, np.where(special | (offsets[:, 0] < len(prompt)), -1, offsets[:, 0] - len(prompt))


def expected_vector(folder: str, text: str, large: list[tuple[int, int]], span: tuple[int, int]) -> np.ndarray:
    """A smaller window's vector by the documented rule, from transformers' states of the large windows: inside a
    large window (the one it sits farthest from an edge in), else each token from the window on its side of the
    middle of the text two consecutive windows share; the mean over its tokens, L2-normalised."""
    start, end = span
    holding = [i for i, (first, last) in enumerate(large) if first <= start and end <= last]
    if holding:
        best = max(holding, key=lambda i: (min(start - large[i][0], large[i][1] - end), -i))
        parts = [(best, start, end)]
    else:
        parts = []
        for i, (first, last) in enumerate(large):
            low = first if i == 0 else (large[i - 1][1] + first) // 2
            high = last if i == len(large) - 1 else (last + large[i + 1][0]) // 2
            parts.append((i, max(start, low), min(end, high)))
    picked = []
    for i, low, high in parts:
        first, last = large[i]
        hidden, starts = token_states(folder, text[first:last])
        inside = (starts >= 0) & (starts + first >= low) & (starts + first < high)
        picked.append(hidden[inside])
    mean = np.concatenate(picked).mean(axis=0)
    return mean / np.linalg.norm(mean)


def test_sizes_must_be_a_descending_sequence_of_positive_ints() -> None:
    assert multiscale_sizes((254, 127)) == multiscale_sizes([254, 127]) == (254, 127)
    assert multiscale_sizes((64,)) == (64,)
    for bad in (254, "254", None, {254, 127}):
        with pytest.raises(TypeError, match="list or tuple"):
            multiscale_sizes(bad)
    for bad in ((), (0,), (254, -1), (254, 12.5), (127, 254), (127, 127), (True,)):
        with pytest.raises(ValueError, match="window_tokens"):
            multiscale_sizes(bad)


def test_read_segments_inside_one_window_inside_two_and_straddling() -> None:
    windows = [(0, 0, 100), (1, 80, 180), (2, 160, 260)]  # (piece, start, end): overlaps [80, 100) and [160, 180)
    assert read_segments((10, 60), windows) == [Segment(0, 10, 60)]
    assert read_segments((120, 150), windows) == [Segment(1, 120, 150)]
    assert read_segments((85, 97), windows) == [Segment(1, 85, 97)]  # inside both: farther from 1's edges
    assert read_segments((82, 98), windows) == [Segment(0, 82, 98)]  # a tie: the earlier window
    assert read_segments((50, 130), windows) == [Segment(0, 50, 90), Segment(1, 90, 130)]  # split at the middle
    assert read_segments((50, 200), windows) == [Segment(0, 50, 90), Segment(1, 90, 170), Segment(2, 170, 200)]
    assert read_segments((90, 120), [(0, 0, 100), (1, 110, 200)]) == [Segment(0, 90, 100), Segment(1, 110, 120)]


@pytest.mark.parametrize("boundaries", ["text", "tokens"])
def test_minilm_layout_and_large_windows_equal_two_passes(minilm: str, boundaries: str) -> None:
    embedder = FairEmbedder(minilm, batch_size=4)
    texts = texts_of(range(3), paragraphs=8)
    sizes = (embedder.window_content_tokens, embedder.window_content_tokens // 2)
    one = embedder.embed_multiscale_windows(texts, sizes, window_boundaries=boundaries)
    two = two_passes(embedder, texts, sizes, window_boundaries=boundaries)
    assert one.owners.tolist() == two.owners.tolist() and len(one) == len(two) == len(texts)
    assert one.spans.tolist() == two.spans.tolist() and one.weights.tolist() == two.weights.tolist()
    assert np.array_equal(one.pooled, two.pooled)
    large = embedder.embed_document_windows(texts, window_tokens=sizes[0], window_boundaries=boundaries)
    rows = rows_of(one, large)  # every large window is kept
    assert np.array_equal(one.vectors[rows], large.vectors)  # exactly: the same pass
    short = one.of(len(texts) - 1)
    assert short.stop - short.start == 1 and np.array_equal(one.vectors[short], two.vectors[short])
    smaller = np.setdiff1d(np.arange(len(one.owners)), rows)
    assert len(smaller) and np.all((one.vectors[smaller] * two.vectors[smaller]).sum(axis=1) > 0.5)


@pytest.mark.parametrize("key", ["bert-mean", "modernbert-mean", "minilm"])
def test_smaller_windows_are_the_mean_of_the_large_pass_token_states(
    tiny_models: dict[str, str], minilm: str, key: str
) -> None:
    model = minilm if key == "minilm" else tiny_models[key]
    embedder = FairEmbedder(model, max_length=64, calibration=None, batch_size=3)
    texts = texts_of(range(10, 12), paragraphs=3)
    sizes = (embedder.window_content_tokens, embedder.window_content_tokens // 2)
    one = embedder.embed_multiscale_windows(texts, sizes, window_boundaries="text")
    folder = hf_folder(key, tiny_models, minilm)
    straddling = 0
    for document, text in enumerate(texts):
        large = [tuple(span) for span in embedder.plan_documents([text], sizes[0], "text").spans]
        for row in range(one.of(document).start, one.of(document).stop):
            span = tuple(one.spans[row].tolist())
            if span in large:
                continue
            straddling += not any(first <= span[0] and span[1] <= last for first, last in large)
            np.testing.assert_allclose(one.vectors[row], expected_vector(folder, text, large, span), atol=2e-5)
    assert straddling  # the texts hold smaller windows of both kinds


def test_smaller_windows_read_the_calibrated_pass(tiny_models: dict[str, str]) -> None:
    embedder = FairEmbedder(tiny_models["bert-mean"], max_length=128, calibration=SMALL_BASKETS, batch_size=2)
    text = article(21, paragraphs=4)
    sizes = (embedder.window_content_tokens, 40)
    one = embedder.embed_multiscale_windows([text], sizes, window_boundaries="text")
    plain = embedder.embed_multiscale_windows([text], sizes, window_boundaries="text", calibration=None)
    large = embedder.plan_documents([text], sizes[0], "text")
    assert embedder.last_report is not None and embedder.last_report.windows == len(large.pieces)  # one pass
    two = two_passes(embedder, [text], sizes, window_boundaries="text")
    rows = [one.spans.tolist().index(list(span)) for span in large.spans]
    assert np.array_equal(one.vectors[rows], two.vectors[rows])  # the large windows: calibrated as today
    smaller = [row for row in range(len(one.owners)) if row not in rows]
    row = next(r for r in smaller if large.spans[0][0] <= one.spans[r][0] and one.spans[r][1] <= large.spans[0][1])
    features = embedder.model.preprocess([large.pieces[0]], task="document", max_length=128)
    with torch.inference_mode(), calibrating(embedder._request(SMALL_BASKETS, features)):
        states = embedder.model.forward(features, task="document")["token_embeddings"][0]  # (tokens, h)
    encoded = embedder.tokenizer(large.pieces[0], return_offsets_mapping=True, return_special_tokens_mask=True)
    starts = np.asarray([begin for begin, _ in encoded["offset_mapping"]]) + large.spans[0][0]
    inside = (np.asarray(encoded["special_tokens_mask"]) == 0) & (starts >= one.spans[row][0])
    inside &= starts < one.spans[row][1]
    mean = states[torch.as_tensor(inside)].mean(dim=0).numpy()
    np.testing.assert_allclose(one.vectors[row], mean / np.linalg.norm(mean), atol=1e-5)
    assert float(one.vectors[row] @ plain.vectors[row]) < 0.9999  # calibration reached the smaller windows


def test_three_sizes_truncation_batches_and_no_texts(tiny_models: dict[str, str]) -> None:
    embedder = FairEmbedder(tiny_models["bert-mean"], max_length=64, calibration=None, batch_size=1)
    texts = texts_of(range(30, 33), paragraphs=4)
    original = list(texts)
    sizes = (62, 31, 15)
    one = embedder.embed_multiscale_windows(texts, sizes, window_boundaries="text")
    assert texts == original  # the caller's list is left as it was
    two = two_passes(embedder, texts, sizes, window_boundaries="text")
    assert one.owners.tolist() == two.owners.tolist() and one.spans.tolist() == two.spans.tolist()
    batched = FairEmbedder(embedder.model, max_length=64, calibration=None, batch_size=16)
    again = batched.embed_multiscale_windows(list(reversed(texts)), sizes, window_boundaries="text")
    np.testing.assert_allclose(again.select(range(len(texts) - 1, -1, -1)).vectors, one.vectors, atol=1e-5)
    assert np.array_equal(one.vectors[:1], embedder.embed_multiscale_windows(texts[:1], (62,), "text").vectors[:1])
    truncating = FairEmbedder(embedder.model, max_length=64, calibration=None, long_documents="truncate")
    cut = truncating.embed_multiscale_windows(texts, sizes)
    assert cut.owners.tolist() == list(range(len(texts)))
    assert np.array_equal(cut.vectors, truncating.embed_document_windows(texts).vectors)
    empty = embedder.embed_multiscale_windows([], sizes)
    assert len(empty) == 0 and empty.vectors.shape == (0, embedder.dimension)


@pytest.mark.parametrize("key", ["bert-cls", "qwen3-last"])
def test_a_pooling_token_has_no_one_pass_meaning(tiny_models: dict[str, str], key: str) -> None:
    embedder = FairEmbedder(tiny_models[key], max_length=64)
    with pytest.raises(ValueError, match="mean pooling"):
        embedder.embed_multiscale_windows(["A text."], (62, 31))


def test_bad_arguments_fail_before_any_model_work(tiny_models: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    embedder = FairEmbedder(tiny_models["bert-mean"], max_length=64)

    def no_model_work(*args: object, **kwargs: object) -> None:
        raise AssertionError("the model ran")

    monkeypatch.setattr(embedder, "_forward", no_model_work)
    texts = ["A text. Another sentence."]
    for sizes in ((31, 62), (62, 62), (62, 0), ()):
        with pytest.raises(ValueError, match="window_tokens"):
            embedder.embed_multiscale_windows(texts, sizes)
    with pytest.raises(ValueError, match="at most 62"):
        embedder.embed_multiscale_windows(texts, (100, 50))
    with pytest.raises(TypeError, match="list or tuple"):
        embedder.embed_multiscale_windows(texts, 62)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window_boundaries"):
        embedder.embed_multiscale_windows(texts, (62, 31), window_boundaries="words")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="calibration"):
        embedder.embed_multiscale_windows(texts, (62, 31), calibration="strong")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        embedder.embed_multiscale_windows("A text.", (62, 31))


def test_a_dense_layer_after_the_pooling_shapes_the_smaller_windows_too(
    tiny_models: dict[str, str], tmp_path: Path
) -> None:
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense, Normalize, Pooling, Transformer

    folder = hf_folder("bert-mean", tiny_models, "")
    torch.manual_seed(0)
    transformer = Transformer(folder, max_seq_length=64)
    dense = Dense(transformer.get_embedding_dimension(), 24)
    modules = [transformer, Pooling(transformer.get_embedding_dimension(), "mean"), dense, Normalize()]
    embedder = FairEmbedder(SentenceTransformer(modules=modules, device="cpu"), calibration=None)
    text = article(41, paragraphs=3)
    sizes = (embedder.window_content_tokens, embedder.window_content_tokens // 2)
    one = embedder.embed_multiscale_windows([text], sizes, window_boundaries="text")
    assert one.dim == 24
    row, (first, last) = inner_window(embedder, text, sizes[0], one.spans)
    hidden, starts = token_states(folder, text[first:last])
    inside = (starts >= 0) & (starts + first >= one.spans[row][0]) & (starts + first < one.spans[row][1])
    with torch.no_grad():
        expected = dense({"sentence_embedding": torch.as_tensor(hidden[inside].mean(axis=0))[None]})
    vector = expected["sentence_embedding"][0].numpy()
    np.testing.assert_allclose(one.vectors[row], vector / np.linalg.norm(vector), atol=2e-5)


def inner_window(embedder: FairEmbedder, text: str, size: int, spans: np.ndarray) -> tuple[int, tuple[int, int]]:
    """The row of the first smaller window lying inside one of `text`'s large windows (of `size` tokens, cut at the
    text's boundaries), and that large window's span."""
    large = [tuple(span) for span in embedder.plan_documents([text], size, "text").spans]
    return next(
        (r, (a, b)) for r, (s, e) in enumerate(spans.tolist()) for a, b in large if a <= s < e <= b and (s, e) != (a, b)
    )


def test_the_document_prompt_is_read_but_not_averaged(tiny_models: dict[str, str]) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(tiny_models["bert-mean"], device="cpu")
    model.prompts = {"document": "passage: "}
    embedder = FairEmbedder(model, max_length=64, calibration=None)
    text = article(51, paragraphs=3)
    sizes = (embedder.window_content_tokens, embedder.window_content_tokens // 2)
    one = embedder.embed_multiscale_windows([text], sizes, window_boundaries="text")
    assert one.spans.tolist() == two_passes(embedder, [text], sizes, window_boundaries="text").spans.tolist()
    row, (first, last) = inner_window(embedder, text, sizes[0], one.spans)
    hidden, starts = token_states(hf_folder("bert-mean", tiny_models, ""), text[first:last], "passage: ")
    inside = (starts >= 0) & (starts + first >= one.spans[row][0]) & (starts + first < one.spans[row][1])
    mean = hidden[inside].mean(axis=0)
    np.testing.assert_allclose(one.vectors[row], mean / np.linalg.norm(mean), atol=2e-5)
