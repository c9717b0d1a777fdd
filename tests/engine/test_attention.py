"""FairEmbedder's fused attention engine against the naive reference implementation in tests/reference.py."""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pytest

from fair_retrieval import Calibration, FairEmbedder
from tests.reference import reference_embeddings

WORDS = [
    *"river mountain quantum ledger violet harbor engine pepper silence orbit canvas lantern meadow copper".split(),
    *"whisper glacier compass velvet thunder marble".split(),
]


def make_text(n_words: int, seed: int) -> str:
    rng = np.random.default_rng(seed)
    return " ".join(rng.choice(WORDS, size=n_words))


# Short (plain), medium and long texts; lengths chosen so that baskets of 16/23/37 leave a short last basket.
TINY_TEXTS = [make_text(5, 1), make_text(47, 2), make_text(95, 3), make_text(70, 4)]

TINY_CONFIGS = [
    Calibration(strength=0.5, basket_size=16),
    Calibration(strength=1.0, basket_size=37, partial_basket="proportional"),
    Calibration(strength=1.0, basket_size=37, isolated="equal"),
    Calibration(strength=0.5, basket_size=23, isolated="equal", partial_basket="proportional", layers=(0, -1)),
    Calibration(strength=0.0, basket_size=16),
    Calibration(strength=1.0, basket_size=16, layers=1.0),
    Calibration(strength=1.0, basket_size=16, special_tokens="preserve"),
    Calibration(
        strength=0.5, basket_size=23, isolated="equal", partial_basket="proportional", special_tokens="preserve"
    ),
    Calibration(strength=1.0, basket_size=16, min_full_baskets=4),  # the 47-word text stays plain, longer ones not
    Calibration(strength=0.5, basket_size=23, special_tokens="preserve", min_full_baskets=3),
    Calibration(strength=1.0, basket_size=16, min_full_baskets=2, strength_ramp=40),  # λ(n) differs per text
    Calibration(strength=0.5, basket_size=23, special_tokens="preserve", strength_ramp=1000),  # far below λ
]

TINY_MODELS = ["bert-cls", "xlm-roberta-cls", "qwen3-last", "qwen3-last-left", "modernbert-cls", "modernbert-mean"]


@pytest.mark.parametrize("model_key", TINY_MODELS)
@pytest.mark.parametrize(
    "config",
    TINY_CONFIGS,
    ids=lambda c: (
        f"s{c.strength}-b{c.basket_size}-{c.isolated}-{c.partial_basket}-{c.layers}-{c.special_tokens}"
        f"-n{c.min_full_baskets}-r{c.strength_ramp}"
    ),
)
def test_tiny_models_match_reference(tiny_models: dict[str, str], model_key: str, config: Calibration) -> None:
    embedder = FairEmbedder(tiny_models[model_key], calibration=config, batch_size=3)
    ours = embedder.embed_documents(TINY_TEXTS)
    expected = reference_embeddings(embedder.model, TINY_TEXTS, config, embedder.pooling, embedder.max_length)
    np.testing.assert_allclose(ours, expected, atol=1e-4)


def test_reference_is_sensitive_to_calibration(tiny_models: dict[str, str]) -> None:
    """Guards the comparison above: calibrated and plain embeddings of long texts must differ clearly."""
    embedder = FairEmbedder(tiny_models["bert-cls"], calibration=Calibration(strength=1.0, basket_size=16))
    calibrated = embedder.embed_documents(TINY_TEXTS[1:])
    plain = embedder.embed_documents(TINY_TEXTS[1:], calibration=None)
    assert np.abs(calibrated - plain).max() > 1e-2


MINILM_TEXTS = [make_text(40, 11), make_text(330, 12), make_text(260, 13), make_text(450, 14)]  # 42–452 tokens


@pytest.mark.parametrize(
    ("pooling", "config"),
    [
        ("mean", Calibration()),
        ("mean", Calibration.paper()),
        ("mean", Calibration(strength=1.0, basket_size=100, partial_basket="proportional")),
        ("cls", Calibration()),
        ("cls", Calibration.paper()),
        ("cls", Calibration(strength=1.0, basket_size=100, isolated="equal", layers=2)),
        ("mean", Calibration(special_tokens="preserve")),
        ("mean", Calibration(strength=0.75, basket_size=100, special_tokens="preserve", min_full_baskets=3)),
    ],
)
def test_minilm_matches_reference(minilm: str, pooling: str, config: Calibration) -> None:
    embedder = FairEmbedder(minilm, calibration=config, pooling=pooling, max_length=512)  # type: ignore[arg-type]
    ours = embedder.embed_documents(MINILM_TEXTS)
    expected = reference_embeddings(embedder.model, MINILM_TEXTS, config, pooling, 512)
    np.testing.assert_allclose(ours, expected, atol=1e-4)
    plain = embedder.embed_documents(MINILM_TEXTS, calibration=None)
    assert np.abs(ours[1:] - plain[1:]).max() > 1e-3, "long texts must be changed by calibration"
    np.testing.assert_allclose(ours[0], plain[0], atol=1e-6)  # 40 words, shorter than any basket: not calibrated


def test_embedder_says_how_many_texts_were_calibrated_and_warns_once_when_none(minilm: str, caplog) -> None:
    """The default leaves texts under 384 content tokens plain; the log must say so rather than stay silent."""
    embedder = FairEmbedder(minilm, max_length=512)
    lengths = embedder.token_lengths(MINILM_TEXTS)
    expected = sum(min(n, 512) - 2 >= 384 for n in lengths)  # [CLS] and [SEP] are isolated keys under "preserve"
    assert 0 < expected < len(MINILM_TEXTS)
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.embedder"):
        embedder.embed_documents(MINILM_TEXTS)
        embedder.embed_documents(MINILM_TEXTS[:1])
        embedder.embed_documents(MINILM_TEXTS[:1])
        embedder.embed_documents(MINILM_TEXTS[:1], calibration=None)
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and "Embedded" in r.getMessage()]
    assert infos[0] == f"Embedded 4 documents, {expected} calibrated." and len(infos) == 4  # one per call
    assert infos[3] == "Embedded 1 document, 0 calibrated."  # plain calls are counted too
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "None of these 1 documents has a window with the 384 content tokens" in warnings[0]


def test_min_full_baskets_leaves_shorter_texts_plain_and_calibrates_longer_ones(minilm: str) -> None:
    """With B = 100 and N = 3 only texts of ≥ 300 content tokens change (MINILM_TEXTS have 40, 330, 260, 450 words)."""
    embedder = FairEmbedder(minilm, max_length=512)
    lengths = embedder.token_lengths(MINILM_TEXTS)
    config = Calibration(strength=1.0, basket_size=100, min_full_baskets=3)
    ours = embedder.embed_documents(MINILM_TEXTS, calibration=config)
    plain = embedder.embed_documents(MINILM_TEXTS, calibration=None)
    every = embedder.embed_documents(MINILM_TEXTS, calibration=Calibration(strength=1.0, basket_size=100))
    for i, length in enumerate(lengths):
        if min(length, 512) >= 300:
            np.testing.assert_allclose(ours[i], every[i], atol=1e-5)  # as with N = 1
            assert np.abs(ours[i] - plain[i]).max() > 1e-3
        else:
            np.testing.assert_allclose(ours[i], plain[i], atol=1e-6)
    assert any(min(n, 512) >= 300 for n in lengths) and any(min(n, 512) < 300 for n in lengths)


def test_strength_ramp_gives_each_text_the_strength_of_its_length(minilm: str) -> None:
    """With a ramp, a text gets exactly the embedding of a step calibration at λ(n) = λ·min(1, (n − N·B + 1)/R)."""
    embedder = FairEmbedder(minilm, max_length=512)
    ramp = Calibration(strength=1.0, basket_size=100, min_full_baskets=2, strength_ramp=300)
    ours = embedder.embed_documents(MINILM_TEXTS, calibration=ramp)
    counts = [min(n, 512) - 2 for n in embedder.token_lengths(MINILM_TEXTS)]  # content tokens: [CLS], [SEP] apart
    strengths = [ramp.strength_at(n) for n in counts]
    assert 0.0 < min(x for x in strengths if x) < max(strengths) < 1.0 and 0.0 in strengths  # three regimes
    for i, strength in enumerate(strengths):
        step = dataclasses.replace(ramp, strength=strength, strength_ramp=0) if strength else None
        expected = embedder.embed_documents([MINILM_TEXTS[i]], calibration=step)
        np.testing.assert_allclose(ours[i], expected[0], atol=1e-5)


def test_calibrated_texts_tells_which_documents_calibration_changes(minilm: str) -> None:
    """The prediction (tokenizer only) must agree with what embedding actually changes, for several thresholds."""
    embedder = FairEmbedder(minilm, max_length=512, batch_size=3)
    plain = embedder.embed_documents(MINILM_TEXTS, calibration=None)
    for config in (Calibration(), Calibration(basket_size=100, min_full_baskets=3), Calibration.paper()):
        predicted = embedder.calibrated_texts(MINILM_TEXTS, config)
        changed = np.abs(embedder.embed_documents(MINILM_TEXTS, calibration=config) - plain).max(axis=1) > 1e-4
        assert predicted == changed.tolist(), config
    assert embedder.calibrated_texts(MINILM_TEXTS, None) == [False] * len(MINILM_TEXTS)
    assert embedder.calibrated_texts([], Calibration()) == []


def test_texts_with_different_numbers_of_isolated_keys_in_one_batch(minilm: str) -> None:
    """[UNK] is a special token, so under special_tokens="preserve" texts of one batch can have 2 or 4 isolated keys;
    with isolated="equal" every real isolated key gets a flat share and a text's unused slots must get none."""
    texts = [MINILM_TEXTS[1], MINILM_TEXTS[2] + " 🜲 ☃"]  # the second has two [UNK]s
    config = Calibration(strength=1.0, basket_size=100, isolated="equal", special_tokens="preserve", min_full_baskets=1)
    embedder = FairEmbedder(minilm, calibration=config, max_length=512)
    ours = embedder.embed_documents(texts)
    np.testing.assert_allclose(ours, reference_embeddings(embedder.model, texts, config, "mean", 512), atol=1e-4)
