"""Windows cut at the text's own boundaries (window_boundaries="text"): whole paragraphs, else whole sentences."""

from __future__ import annotations

import itertools
import random
import re

import numpy as np
import pytest

from fair_retrieval import FairEmbedder
from fair_retrieval.embedding.boundaries import boundary_windows
from fair_retrieval.embedding.embedder_options import EmbedderOptions
from fair_retrieval.embedding.windows import WindowPiece

WORDS = "river stone light garden paper window quiet market signal harbor winter planet copper".split()


def sentence(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words)).capitalize() + "."


def article(seed: int, paragraphs: int = 12, sentences: tuple[int, int] = (2, 6), words: tuple[int, int] = (6, 20)):
    rng = random.Random(seed)
    return "\n\n".join(
        " ".join(sentence(rng, rng.randint(*words)) for _ in range(rng.randint(*sentences))) for _ in range(paragraphs)
    )


@pytest.fixture(scope="module")
def text_embedder(minilm: str) -> FairEmbedder:
    return FairEmbedder(minilm, window_boundaries="text", max_length=64, calibration=None)


def windows_of(embedder: FairEmbedder, text: str) -> list[WindowPiece]:
    return embedder._windows([text])[0]


def token_count(embedder: FairEmbedder, text: str) -> int:
    return embedder.token_lengths([text])[0]


def covered(text: str, pieces: list[WindowPiece]) -> np.ndarray:
    mask = np.zeros(len(text), dtype=bool)
    for piece in pieces:
        mask[piece.start : piece.end] = True
    return mask


@pytest.mark.parametrize("seed", range(6))
def test_windows_fit_cover_every_character_and_keep_exact_spans(text_embedder: FairEmbedder, seed: int) -> None:
    text = article(seed)
    pieces = windows_of(text_embedder, text)
    assert len(pieces) > 1
    assert max(token_count(text_embedder, p.text) for p in pieces) <= text_embedder.max_length
    for piece in pieces:
        assert text[piece.start : piece.end] == piece.text
    mask = covered(text, pieces)
    assert all(mask[i] for i, ch in enumerate(text) if not ch.isspace())


def test_windows_end_at_sentence_ends_and_keep_fitting_paragraphs_whole(text_embedder: FairEmbedder) -> None:
    text = article(7, paragraphs=20, sentences=(1, 3), words=(4, 10))  # most paragraphs fit a 62-token window
    pieces = windows_of(text_embedder, text)
    for piece in pieces:
        assert piece.text.endswith(".")  # never inside a sentence
    paragraphs = [(m.start(), m.end()) for m in re.finditer(r"[^\n]+", text)]
    for start, end in paragraphs:
        if token_count(text_embedder, text[start:end]) <= text_embedder.window_content_tokens:
            assert any(p.start <= start and end <= p.end for p in pieces), text[start:end]


def test_overlap_repeats_whole_sentences_only(minilm: str) -> None:
    text = article(3, paragraphs=2, sentences=(12, 12), words=(4, 8))  # two paragraphs of short sentences
    embedder = FairEmbedder(minilm, window_boundaries="text", max_length=64, window_overlap=20, calibration=None)
    pieces = windows_of(embedder, text)
    shared = [(b.start, a.end) for a, b in itertools.pairwise(pieces) if b.start < a.end]
    assert shared, "short sentences within the overlap budget are carried into the next window"
    for start, end in shared:
        repeated = text[start:end]
        assert repeated[0].isupper() and repeated.endswith(".")  # whole sentences
        assert token_count(embedder, repeated) - 2 <= 20


def test_text_without_boundaries_falls_back_to_token_windows(minilm: str) -> None:
    text = " ".join(random.Random(1).choice(WORDS) for _ in range(400))  # no sentence end, no line break
    by_text = FairEmbedder(minilm, window_boundaries="text", max_length=64, calibration=None)
    by_tokens = FairEmbedder(minilm, window_boundaries="tokens", max_length=64, calibration=None)
    assert windows_of(by_text, text) == windows_of(by_tokens, text)
    np.testing.assert_array_equal(by_text.embed_documents([text]), by_tokens.embed_documents([text]))


def test_a_sentence_longer_than_a_window_is_cut_by_tokens(text_embedder: FairEmbedder) -> None:
    rng = random.Random(5)
    long_sentence = " ".join(rng.choice(WORDS) for _ in range(200)) + "."
    text = f"{sentence(rng, 8)} {long_sentence} {sentence(rng, 8)}"
    pieces = windows_of(text_embedder, text)
    assert len(pieces) >= 4
    assert max(token_count(text_embedder, p.text) for p in pieces) <= text_embedder.max_length
    assert all(covered(text, pieces)[i] for i, ch in enumerate(text) if not ch.isspace())


def test_full_width_sentence_ends_are_boundaries() -> None:
    text = "。".join(["ab" * 3] * 6) + "。"
    offsets = [(i, i + 1) for i in range(len(text))]  # one token per character
    pieces = boundary_windows(text, offsets, 16, 0, 18, lambda texts: [len(t) + 2 for t in texts])
    assert all(p.text.endswith("。") for p in pieces) and max(p.tokens for p in pieces) <= 16


def test_a_window_that_retokenizes_longer_is_packed_again() -> None:
    text = "aa bb. cc dd. ee ff. gg hh. ii jj. kk ll."
    offsets = [(m.start(), m.end()) for m in re.finditer(r"\w+\.?", text)]
    calls: list[int] = []

    def lengths(texts: list[str]) -> list[int]:  # a tokenizer that counts one more token than the offsets say
        calls.append(len(texts))
        return [len(re.findall(r"\w+\.?", t)) + 3 for t in texts]

    pieces = boundary_windows(text, offsets, 4, 0, 6, lengths)
    assert len(calls) >= 2 and max(lengths([p.text for p in pieces])) <= 6


def test_short_texts_and_short_texts_in_a_batch_are_unchanged(text_embedder: FairEmbedder, minilm: str) -> None:
    tokens = FairEmbedder(minilm, max_length=64, calibration=None)
    texts = ["One short sentence.", article(11)]
    by_text = text_embedder.embed_document_windows(texts)
    by_tokens = tokens.embed_document_windows(texts)
    np.testing.assert_allclose(by_text.pooled[0], by_tokens.pooled[0], atol=1e-6)
    assert len(by_text.vectors) == len(by_text.spans) and by_text.of(1).stop - by_text.of(1).start > 1


def test_option_is_validated_and_part_of_the_identity(text_embedder: FairEmbedder) -> None:
    with pytest.raises(ValueError, match="window_boundaries"):
        EmbedderOptions(window_boundaries="paragraphs")  # type: ignore[arg-type]
    assert text_embedder.identity()["window_boundaries"] == "text"
    assert "window_boundaries='text'" in repr(text_embedder)


def test_a_record_without_the_field_means_token_windows(text_embedder: FairEmbedder, minilm: str) -> None:
    from fair_retrieval.embedding.identity import identity_differences

    tokens = FairEmbedder(minilm, max_length=64, calibration=None).identity()
    old = {k: v for k, v in tokens.items() if k != "window_boundaries"}
    assert identity_differences(old, tokens) == {}
    assert set(identity_differences(old, text_embedder.identity())) == {"window_boundaries"}


def test_window_tokens_makes_smaller_windows_that_fit_and_cover(minilm: str) -> None:
    text = article(21, paragraphs=8)
    full = FairEmbedder(minilm, window_boundaries="text", calibration=None)
    half = FairEmbedder(minilm, window_boundaries="text", window_tokens=127, calibration=None)
    assert half.window_content_tokens == 127 and half.window_overlap == 16  # an eighth of the smaller window
    pieces = windows_of(half, text)
    assert len(pieces) > len(windows_of(full, text))
    assert max(token_count(half, p.text) for p in pieces) <= 127 + 2
    assert all(covered(text, pieces)[i] for i, ch in enumerate(text) if not ch.isspace())
    medium = article(22, paragraphs=3, sentences=(4, 4), words=(12, 14))  # between half and the whole window
    assert half.token_lengths([medium])[0] - 2 > 127 >= 0 and full.token_lengths([medium])[0] <= full.max_length
    assert len(half.plan_documents([medium]).pieces) > 1 and len(full.plan_documents([medium]).pieces) == 1
    assert half.identity()["window_tokens"] == 127 and full.identity()["window_tokens"] is None


def test_window_tokens_above_the_window_is_refused(minilm: str) -> None:
    with pytest.raises(ValueError, match="window_tokens=300 is more than the 254 content tokens"):
        FairEmbedder(minilm, window_tokens=300)
    with pytest.raises(ValueError, match="window_tokens"):
        EmbedderOptions(window_tokens=0)


def test_window_tokens_for_one_call_equals_an_embedder_with_that_window(minilm: str) -> None:
    texts = [article(31, paragraphs=5), "A short one."]
    text_full = FairEmbedder(minilm, window_boundaries="text", calibration=None)
    text_half = FairEmbedder(minilm, window_boundaries="text", window_tokens=127, calibration=None)
    once = text_full.embed_document_windows(texts, window_tokens=127)
    fixed = text_half.embed_document_windows(texts)
    np.testing.assert_array_equal(once.spans, fixed.spans)
    np.testing.assert_allclose(once.vectors, fixed.vectors, atol=1e-6)
    assert len(text_full.embed_document_windows(texts).vectors) < len(once.vectors)  # the embedder is unchanged
    with pytest.raises(ValueError, match="window_tokens must be a positive int of at most 254"):
        text_full.embed_document_windows(texts, window_tokens=255)


def test_window_boundaries_for_one_call_equals_an_embedder_with_them(minilm: str) -> None:
    texts = [article(32, paragraphs=5)]
    by_tokens = FairEmbedder(minilm, calibration=None)
    by_text = FairEmbedder(minilm, window_boundaries="text", window_tokens=127, calibration=None)
    once = by_tokens.embed_document_windows(texts, window_tokens=127, window_boundaries="text")
    np.testing.assert_array_equal(once.spans, by_text.embed_document_windows(texts).spans)
    with pytest.raises(ValueError, match="window_boundaries"):
        by_tokens.embed_document_windows(texts, window_boundaries="words")  # type: ignore[arg-type]
