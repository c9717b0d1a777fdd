"""LPES: PositionalScaling validation/JSON/Bézier, and the RoPE mechanism against an independent computation.

The independent reference computes the rotary angles of positions m / s from the config (θ, head size) in float64
and hands them to one layer through a test-only hook; the library must produce the same embeddings through the
model's own rotary module and its ContextVar-scoped hooks.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fair_retrieval import Calibration, FairEmbedder, PositionalScaling, UnsupportedModelError
from fair_retrieval.engine.lpes import bezier_curve, install_positional_scaling
from tests.engine.test_attention import make_text
from tests.models import build_tiny_model

TEXTS = [make_text(6, 31), make_text(50, 32), make_text(100, 33), make_text(30, 34)]
ROPE_ARCHS = ["qwen3", "llama", "modernbert"]
POOLING = {"qwen3": "lasttoken", "llama": "mean", "modernbert": "cls", "bert": "cls"}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Tiny random RoPE models (and a BERT) saved as sentence-transformers folders."""
    root = tmp_path_factory.mktemp("lpes")
    return {arch: build_tiny_model(arch, mode, Path(root / arch)) for arch, mode in POOLING.items()}


@pytest.fixture(scope="module")
def embedders(models: dict[str, str]) -> dict[str, FairEmbedder]:
    return {arch: FairEmbedder(models[arch], calibration=None, batch_size=2) for arch in ROPE_ARCHS}


# ------------------------------------------------------------------------------------------ the configuration


def test_factors_are_validated() -> None:
    assert PositionalScaling(factors=[1, 2.5]).factors == (1.0, 2.5)
    for bad in ([], [1.0, 0.0], [1.0, -2.0], [float("nan")], [float("inf")]):
        with pytest.raises(ValueError, match="factors"):
            PositionalScaling(factors=bad)
    for bad_type in ("1.0", [1.0, "2"], [True], 3.0):
        with pytest.raises(TypeError):
            PositionalScaling(factors=bad_type)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_layers"):
        PositionalScaling.bezier([1.0, 2.0], 0)
    with pytest.raises(ValueError, match="control_points"):
        PositionalScaling.bezier([1.0, -1.0], 4)


def test_json_round_trip(tmp_path: Path) -> None:
    scaling = PositionalScaling.bezier([1.0, 1.7, 1.2], 6)
    again = PositionalScaling.from_json(scaling.to_json())
    assert again == scaling and again.control_points == scaling.control_points
    scaling.save(tmp_path / "lpes.json")
    assert PositionalScaling.load(tmp_path / "lpes.json").factors == scaling.factors
    plain = PositionalScaling.from_dict({"factors": [1.0, 2.0]})
    assert plain.control_points is None and plain.to_dict() == {"factors": [1.0, 2.0], "control_points": None}
    with pytest.raises(ValueError, match="Unknown"):
        PositionalScaling.from_dict({"factors": [1.0], "scale": 2})
    with pytest.raises(ValueError, match="needs 'factors'"):
        PositionalScaling.from_dict({"control_points": [1.0]})


def test_bezier_endpoints_and_known_values() -> None:
    scaling = PositionalScaling.bezier([1.3, 0.7, 2.1], 9)
    assert scaling.factors[0] == pytest.approx(1.3) and scaling.factors[-1] == pytest.approx(2.1)
    assert scaling.factors[4] == pytest.approx((1.3 + 2 * 0.7 + 2.1) / 4)  # quadratic at t = 1/2
    linear = PositionalScaling.bezier([1.0, 3.0], 5)
    np.testing.assert_allclose(linear.factors, [1.0, 1.5, 2.0, 2.5, 3.0])
    assert PositionalScaling.bezier([1.4], 7).factors == (1.4,) * 7
    assert PositionalScaling.bezier([1.2, 5.0], 1).factors == (1.2,)
    assert PositionalScaling.identity(3).is_identity and not linear.is_identity
    assert bezier_curve([2.0, 4.0, 8.0, 1.0], 0.0) == 2.0 and bezier_curve([2.0, 4.0, 8.0, 1.0], 1.0) == 1.0


@pytest.mark.parametrize("points", [[1.0, 1.2, 1.9, 2.0], [2.0, 2.0, 1.1, 1.0], [1.0, 1.0, 1.0, 3.0], [0.5, 4.0]])
def test_monotone_control_points_give_monotone_factors(points: list[float]) -> None:
    factors = np.array(PositionalScaling.bezier(points, 12).factors)
    steps = np.diff(factors)
    assert (steps >= -1e-12).all() or (steps <= 1e-12).all()
    assert factors.min() >= min(points) - 1e-12 and factors.max() <= max(points) + 1e-12


# ------------------------------------------------------------------------------- the independent reference


def manual_angles(config: Any, layer: int, length: int, factor: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), (1, L, head_dim) float32, of positions m / factor for `layer`, from the config alone."""
    params = config.rope_parameters
    if "rope_theta" not in params:  # ModernBERT: one entry per layer type (global / sliding attention)
        params = params[config.layer_types[layer]]
    assert params.get("rope_type", "default") == "default"
    dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    inv_freq = params["rope_theta"] ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)  # (D/2,)
    angles = (torch.arange(length, dtype=torch.float64) / factor)[None, :, None] * inv_freq  # (1, L, D/2)
    angles = torch.cat([angles, angles], dim=-1)  # (1, L, D)
    return angles.cos().float(), angles.sin().float()


@contextmanager
def hand_scaled(embedder: FairEmbedder, layer: int, factor: float) -> Iterator[None]:
    """Test-only: feed `layer` the hand-computed angles of positions m / factor (no library code involved)."""
    config = embedder._transformer.config

    def substitute(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        cos, _ = kwargs["position_embeddings"]
        kwargs = {**kwargs, "position_embeddings": manual_angles(config, layer, cos.shape[1], factor)}
        return args, kwargs

    handle = embedder._transformer.layers[layer].register_forward_pre_hook(substitute, with_kwargs=True)
    try:
        yield
    finally:
        handle.remove()


def single_layer(num_layers: int, layer: int, factor: float) -> PositionalScaling:
    return PositionalScaling(factors=[factor if i == layer else 1.0 for i in range(num_layers)])


def assert_single_layer_matches_hand_rope(
    embedder: FairEmbedder, texts: list[str], num_layers: int, layer: int, factor: float
) -> None:
    """LPES with `factor` on `layer` alone gives the vectors of hand-scaled rotary angles on that layer; it changes
    the long texts and leaves nothing behind."""
    ours = embedder.embed_documents(texts, positional_scaling=single_layer(num_layers, layer, factor))
    with hand_scaled(embedder, layer, factor):
        expected = embedder.embed_documents(texts, positional_scaling=None)
    np.testing.assert_allclose(ours, expected, atol=1e-5)
    plain = embedder.embed_documents(texts, positional_scaling=None)
    assert np.abs(ours - plain)[1:].max() > 1e-3  # the factor really changes long texts
    np.testing.assert_allclose(embedder.embed_documents(texts), plain, atol=0)  # nothing leaked


# ---------------------------------------------------------------------------------------------- the mechanism


@pytest.mark.parametrize("arch", ROPE_ARCHS)
def test_identity_reproduces_plain_outputs(embedders: dict[str, FairEmbedder], arch: str) -> None:
    embedder = embedders[arch]
    plain = embedder.embed_documents(TEXTS)
    with_identity = FairEmbedder(
        embedder.model, calibration=None, batch_size=2, positional_scaling=PositionalScaling.identity(4)
    )
    np.testing.assert_allclose(with_identity.embed_documents(TEXTS), plain, atol=1e-6)
    # The hooks themselves, active with all factors 1, leave the model's output untouched.
    rope = install_positional_scaling(embedder._transformer, arch)
    features = embedder.model.preprocess(TEXTS[1:3])
    with torch.inference_mode():
        before = embedder.model(features)["sentence_embedding"]
        with rope.applying(PositionalScaling.identity(4)):
            during = embedder.model(features)["sentence_embedding"]
    torch.testing.assert_close(during, before, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    ("arch", "layer", "factor"), [("qwen3", 2, 1.7), ("llama", 0, 2.5), ("modernbert", 1, 1.5), ("modernbert", 2, 0.6)]
)
def test_single_layer_factor_matches_hand_computed_rope(
    embedders: dict[str, FairEmbedder], arch: str, layer: int, factor: float
) -> None:
    assert_single_layer_matches_hand_rope(embedders[arch], TEXTS, 4, layer, factor)


def test_sliding_and_global_layers_use_their_own_rotary(embedders: dict[str, FairEmbedder]) -> None:
    """ModernBERT's sliding layers (θ = 10⁴) and global layers (θ = 1.6·10⁵) must each get their own angles."""
    embedder = embedders["modernbert"]
    install_positional_scaling(embedder._transformer, "modernbert")  # the library's hooks first: ours see their output
    received: dict[int, torch.Tensor] = {}
    handles = [
        layer.register_forward_pre_hook(
            lambda _m, _a, kw, i=i: received.__setitem__(i, kw["position_embeddings"][0]), with_kwargs=True
        )
        for i, layer in enumerate(embedder._transformer.layers)
    ]
    try:
        embedder.embed_documents(TEXTS[2:3], positional_scaling=PositionalScaling(factors=[2.0] * 4))
    finally:
        for handle in handles:
            handle.remove()
    config = embedder._transformer.config
    length = received[0].shape[1]
    for index in range(4):
        expected, _ = manual_angles(config, index, length, 2.0)
        torch.testing.assert_close(received[index].float(), expected, atol=1e-5, rtol=0)
    # Once per distinct (rotary call, factor): layers of the same type share one tensor.
    assert received[0] is received[2] and received[1] is received[3] and received[0] is not received[1]


def test_scaled_angles_are_computed_once_per_distinct_factor(embedders: dict[str, FairEmbedder]) -> None:
    embedder = embedders["qwen3"]
    install_positional_scaling(embedder._transformer, "qwen3")  # the library's hooks first: ours see their output
    received: list[torch.Tensor] = []
    handles = [
        layer.register_forward_pre_hook(
            lambda _m, _a, kw: received.append(kw["position_embeddings"][0]), with_kwargs=True
        )
        for layer in embedder._transformer.layers
    ]
    try:
        embedder.embed_documents(TEXTS[:2], positional_scaling=PositionalScaling(factors=[1.5, 1.5, 3.0, 1.0]))
    finally:
        for handle in handles:
            handle.remove()
    first, second, third, fourth = received  # one batch of 2 texts
    assert first is second and first is not third and fourth is not first and fourth is not third
    torch.testing.assert_close(first.float(), manual_angles(embedder._transformer.config, 0, first.shape[1], 1.5)[0])


def test_queries_stay_plain_unless_asked(embedders: dict[str, FairEmbedder]) -> None:
    scaling = PositionalScaling(factors=[2.0, 1.5, 1.0, 1.25])
    embedder = FairEmbedder(embedders["qwen3"].model, calibration=None, positional_scaling=scaling)
    plain = embedder.embed_documents(TEXTS, positional_scaling=None)
    np.testing.assert_allclose(embedder.embed_queries(TEXTS), plain, atol=1e-6)
    scaled_docs = embedder.embed_documents(TEXTS)
    assert np.abs(scaled_docs - plain).max() > 1e-3
    np.testing.assert_allclose(embedder.embed_queries(TEXTS, positional_scaling=scaling), scaled_docs, atol=1e-6)
    assert "positional_scaling=PositionalScaling" in repr(embedder)


@pytest.mark.parametrize("arch", ["qwen3", "modernbert"])
def test_calibration_and_scaling_combine(embedders: dict[str, FairEmbedder], arch: str) -> None:
    embedder = embedders[arch]
    cal = Calibration(strength=1.0, basket_size=16)
    calibrated = embedder.embed_documents(TEXTS, calibration=cal)
    identity = embedder.embed_documents(TEXTS, calibration=cal, positional_scaling=PositionalScaling.identity(4))
    np.testing.assert_allclose(identity, calibrated, atol=1e-6)
    both = embedder.embed_documents(TEXTS, calibration=cal, positional_scaling=single_layer(4, 3, 1.8))
    with hand_scaled(embedder, 3, 1.8):
        expected = embedder.embed_documents(TEXTS, calibration=cal)
    np.testing.assert_allclose(both, expected, atol=1e-5)
    scaled_only = embedder.embed_documents(TEXTS, positional_scaling=single_layer(4, 3, 1.8))
    assert np.abs(both - calibrated).max() > 1e-3 and np.abs(both - scaled_only).max() > 1e-3


def test_concurrent_threads_keep_their_own_scaling(embedders: dict[str, FairEmbedder]) -> None:
    embedder = embedders["llama"]
    scalings = [None, PositionalScaling(factors=[2.0] * 4), PositionalScaling.bezier([1.0, 3.0], 4)]
    expected = [embedder.embed_documents(TEXTS, positional_scaling=s) for s in scalings]
    results: dict[tuple[int, int], np.ndarray] = {}
    errors: list[BaseException] = []

    def work(index: int) -> None:
        try:
            for round_ in range(2):
                results[(index, round_)] = embedder.embed_documents(TEXTS, positional_scaling=scalings[index])
        except BaseException as error:  # reported by the main thread below
            errors.append(error)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(scalings))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    for (index, _), value in results.items():
        np.testing.assert_allclose(value, expected[index], atol=1e-5)


# ---------------------------------------------------------------------------------------------------- errors


@pytest.mark.parametrize("source", ["bert", "minilm"])
def test_non_rope_models_get_a_clear_error(models: dict[str, str], minilm: str, source: str) -> None:
    path = minilm if source == "minilm" else models["bert"]
    with pytest.raises(ValueError, match="no rotary position embeddings"):
        FairEmbedder(path, positional_scaling=PositionalScaling.identity(6 if source == "minilm" else 4))
    embedder = FairEmbedder(path)  # without LPES the model works as before
    with pytest.raises(UnsupportedModelError, match="BERT, XLM-R and MiniLM"):
        embedder.embed_documents(TEXTS, positional_scaling=PositionalScaling(factors=[1.5] * embedder.num_layers))
    with pytest.raises(ValueError, match="RoPE"):
        embedder.embed_queries(TEXTS, positional_scaling=PositionalScaling(factors=[1.5] * embedder.num_layers))
    assert embedder.embed_documents(TEXTS[:1]).shape[0] == 1


def test_factor_count_and_type_are_checked(embedders: dict[str, FairEmbedder]) -> None:
    with pytest.raises(ValueError, match=r"3 factors but .* 4 layers.*num_layers=4"):
        FairEmbedder(embedders["qwen3"].model, positional_scaling=PositionalScaling(factors=[1.0, 2.0, 1.0]))
    with pytest.raises(ValueError, match="5 factors"):
        embedders["llama"].embed_documents(TEXTS, positional_scaling=PositionalScaling(factors=[2.0] * 5))
    with pytest.raises(TypeError, match="PositionalScaling or None"):
        FairEmbedder(embedders["qwen3"].model, positional_scaling=[1.0, 1.0, 1.0, 1.0])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="PositionalScaling or None"):
        embedders["qwen3"].embed_documents(TEXTS, positional_scaling={"factors": [1.0] * 4})  # type: ignore[arg-type]


def test_unknown_layer_inputs_are_refused(embedders: dict[str, FairEmbedder]) -> None:
    """A layer handed cos/sin that did not come from the model's rotary module cannot be scaled: say so."""
    embedder = embedders["qwen3"]
    layer = embedder._transformer.layers[1]

    def foreign(module: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, dict[str, Any]]:
        cos, sin = kwargs["position_embeddings"]
        return args, {**kwargs, "position_embeddings": (cos.clone(), sin.clone())}

    # Registered first, so it runs before the library's hook would see the tensors: prepend.
    handle = layer.register_forward_pre_hook(foreign, with_kwargs=True, prepend=True)
    try:
        with pytest.raises(UnsupportedModelError, match="layer 1 did not receive"):
            embedder.embed_documents(TEXTS[:1], positional_scaling=single_layer(4, 1, 2.0))
    finally:
        handle.remove()
    scaled = embedder.embed_documents(TEXTS[1:2], positional_scaling=single_layer(4, 1, 2.0))  # works again
    assert np.abs(scaled - embedder.embed_documents(TEXTS[1:2])).max() > 1e-3
