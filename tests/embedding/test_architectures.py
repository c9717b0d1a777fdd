"""The long-context embedders transformers ships natively, as tiny random models: calibration and LPES on each.

NomicBert (nomic-embed-text), Gte (gte-multilingual-base, gte-base-en-v1.5), JinaEmbeddingsV3, EuroBERT and
bidirectional Gemma3 (EmbeddingGemma) are RoPE encoders whose attention goes through `ALL_ATTENTION_FUNCTIONS`.
Calibration is checked against the naive reference (tests/reference.py) for every pooling, at lengths where it is
active; LPES against hand-computed rotary angles (tests/engine/test_lpes.py). MPNet (all-mpnet-base-v2) computes
attention in its own code and must get the clear UnsupportedModelError.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fair_retrieval import Calibration, FairEmbedder, PositionalScaling, UnsupportedModelError
from tests.engine.test_attention import make_text
from tests.engine.test_lpes import assert_single_layer_matches_hand_rope, hand_scaled, manual_angles, single_layer
from tests.models import build_tiny_model, with_pooling
from tests.reference import reference_embeddings

ARCHS = ["nomic-bert", "gte", "jina-v3", "eurobert", "gemma3-bidirectional"]
POOLINGS = {"cls": "cls", "mean": "mean", "last": "lasttoken"}  # FairEmbedder's name → sentence-transformers'
# 5 words stay plain under every config below; 47, 95 and 70 words (~50–100 tokens) hold several baskets of 16.
TEXTS = [make_text(5, 41), make_text(47, 42), make_text(95, 43), make_text(70, 44)]
CONFIGS = [
    Calibration(strength=1.0, basket_size=16, special_tokens="content", min_full_baskets=1),
    Calibration(strength=0.5, basket_size=23, isolated="equal", partial_basket="proportional"),
    Calibration(strength=1.0, basket_size=16, layers=(0, -1), min_full_baskets=4),  # the 47-word text stays plain
]
NUM_LAYERS = 4


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], str]:
    """A tiny random model per (architecture, pooling), pooling as declared in its sentence-transformers config."""
    root = tmp_path_factory.mktemp("architectures")
    folders = {}
    for arch in ARCHS:
        built = build_tiny_model(arch, "mean", Path(root / arch))
        for pooling, st_mode in POOLINGS.items():
            folders[(arch, pooling)] = with_pooling(built, st_mode, Path(root / f"{arch}-{pooling}"))
    return folders


@pytest.fixture(scope="module")
def embedders(models: dict[tuple[str, str], str]) -> dict[str, FairEmbedder]:
    """One plain embedder per architecture (mean pooling) for the LPES tests."""
    return {arch: FairEmbedder(models[(arch, "mean")], calibration=None, batch_size=2) for arch in ARCHS}


# ------------------------------------------------------------------------------------------------ calibration


@pytest.mark.parametrize("pooling", list(POOLINGS))
@pytest.mark.parametrize("arch", ARCHS)
def test_calibration_matches_reference(models: dict[tuple[str, str], str], arch: str, pooling: str) -> None:
    embedder = FairEmbedder(models[(arch, pooling)], batch_size=3)
    assert embedder.pooling == pooling
    plain = embedder.embed_documents(TEXTS, calibration=None)
    for config in CONFIGS:
        ours = embedder.embed_documents(TEXTS, calibration=config)
        expected = reference_embeddings(embedder.model, TEXTS, config, pooling, embedder.max_length)
        np.testing.assert_allclose(ours, expected, atol=1e-4, err_msg=str(config))
        changed = np.abs(ours - plain).max(axis=1) > 1e-3
        assert changed.tolist() == embedder.calibrated_texts(TEXTS, config), config
        assert changed[2], f"the longest text must be calibrated under {config}"
        np.testing.assert_allclose(ours[0], plain[0], atol=1e-6)  # 5 words: plain


def test_reference_sees_the_sliding_window_of_bidirectional_gemma3(models: dict[tuple[str, str], str]) -> None:
    """Guards the comparison above: the sliding layers' symmetric window (|i − j| < 17) reaches the attention mask."""
    embedder = FairEmbedder(models[("gemma3-bidirectional", "mean")], calibration=None)
    config = embedder._transformer.config
    assert config.use_bidirectional_attention and config.sliding_window == 17
    seen: dict[int, torch.Tensor] = {}
    handles = [
        layer.self_attn.register_forward_pre_hook(
            lambda _m, _a, kw, i=i: seen.__setitem__(i, kw["attention_mask"]), with_kwargs=True
        )
        for i, layer in enumerate(embedder._transformer.layers)
    ]
    try:
        embedder.embed_documents(TEXTS[2:3])
    finally:
        for handle in handles:
            handle.remove()
    length = embedder.token_lengths(TEXTS[2:3])[0]
    assert length > 40
    positions = torch.arange(length)
    window = (positions[:, None] - positions[None, :]).abs() < 17
    for index, mask in seen.items():
        allowed = mask[0, 0] if mask.dtype == torch.bool else mask[0, 0] > torch.finfo(mask.dtype).min / 2
        expected = window if config.layer_types[index] == "sliding_attention" else torch.ones_like(window)
        assert torch.equal(allowed.cpu(), expected), index


# -------------------------------------------------------------------------------------------------------- LPES


@pytest.mark.parametrize("arch", ARCHS)
def test_lpes_identity_reproduces_plain_outputs(embedders: dict[str, FairEmbedder], arch: str) -> None:
    embedder = embedders[arch]
    plain = embedder.embed_documents(TEXTS)
    identity = FairEmbedder(
        embedder.model, calibration=None, batch_size=2, positional_scaling=PositionalScaling.identity(NUM_LAYERS)
    )
    np.testing.assert_allclose(identity.embed_documents(TEXTS), plain, atol=1e-6)
    # The hooks active with all factors 1 (applying() itself, not the identity shortcut) change nothing either.
    features = embedder.model.preprocess(TEXTS[1:3])
    with torch.inference_mode():
        before = embedder.model(features)["sentence_embedding"]
        with embedder._rope_layers().applying(PositionalScaling.identity(NUM_LAYERS)):
            during = embedder.model(features)["sentence_embedding"]
    torch.testing.assert_close(during, before, atol=1e-6, rtol=0)


@pytest.mark.parametrize("arch", ARCHS)
def test_lpes_scales_each_layer_by_its_own_factor(embedders: dict[str, FairEmbedder], arch: str) -> None:
    """Every layer receives the rotary angles of m / s_ℓ for its own s_ℓ (and its own θ, for Gemma3's layer types)."""
    embedder = embedders[arch]
    factors = [1.0, 2.0, 0.5, 1.5]
    received: dict[int, torch.Tensor] = {}
    handles = [
        layer.register_forward_hook(
            lambda _m, _a, kw, _out, i=i: received.__setitem__(i, kw["position_embeddings"][0]), with_kwargs=True
        )
        for i, layer in enumerate(embedder._transformer.layers)
    ]
    try:
        scaled = embedder.embed_documents(TEXTS[2:3], positional_scaling=PositionalScaling(factors=factors))
    finally:
        for handle in handles:
            handle.remove()
    config: Any = embedder._transformer.config
    length = received[0].shape[1]
    for index, factor in enumerate(factors):
        expected, _ = manual_angles(config, index, length, factor)
        torch.testing.assert_close(received[index].float(), expected, atol=1e-5, rtol=0, msg=f"layer {index}")
    assert np.abs(scaled - embedder.embed_documents(TEXTS[2:3])).max() > 1e-3


@pytest.mark.parametrize(
    ("arch", "layer", "factor"),
    [
        ("nomic-bert", 1, 1.4),
        ("gte", 2, 1.8),
        ("jina-v3", 3, 2.2),
        ("eurobert", 1, 0.6),
        ("gemma3-bidirectional", 1, 2.5),  # a global layer (θ = 10⁶)
        ("gemma3-bidirectional", 2, 1.5),  # a sliding-window layer (θ = 10⁴)
    ],
)
def test_lpes_single_layer_matches_hand_computed_rope(
    embedders: dict[str, FairEmbedder], arch: str, layer: int, factor: float
) -> None:
    assert_single_layer_matches_hand_rope(embedders[arch], TEXTS, NUM_LAYERS, layer, factor)


@pytest.mark.parametrize("arch", ["gte", "gemma3-bidirectional"])
def test_lpes_combines_with_calibration(embedders: dict[str, FairEmbedder], arch: str) -> None:
    embedder = embedders[arch]
    cal = CONFIGS[0]
    both = embedder.embed_documents(TEXTS, calibration=cal, positional_scaling=single_layer(NUM_LAYERS, 3, 1.8))
    with hand_scaled(embedder, 3, 1.8):
        expected = embedder.embed_documents(TEXTS, calibration=cal)
    np.testing.assert_allclose(both, expected, atol=1e-5)
    assert np.abs(both - embedder.embed_documents(TEXTS, calibration=cal)).max() > 1e-3


# ------------------------------------------------------------------------------ attention outside the interface


def test_mpnet_gets_the_unsupported_model_error(tmp_path: Path) -> None:
    """MPNet (all-mpnet-base-v2) computes attention in its own code, not through ALL_ATTENTION_FUNCTIONS."""
    path = build_tiny_model("mpnet", "mean", tmp_path / "mpnet")
    for calibration in (Calibration(basket_size=16), None):
        with pytest.raises(UnsupportedModelError, match=r"MPNetModel.*ALL_ATTENTION_FUNCTIONS") as error:
            FairEmbedder(path, calibration=calibration)
        assert isinstance(error.value, ValueError)
