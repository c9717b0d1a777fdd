"""EmbedderOptions and resolve_embedder: validation, building like FairEmbedder itself, the model-or-embedder rule."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from fair_retrieval import Calibration, FairEmbedder, PositionalScaling
from fair_retrieval.embedding.embedder_building import build_embedder, resolve_embedder
from fair_retrieval.embedding.embedder_options import LOADING_OPTIONS, EmbedderOptions, as_calibration
from fair_retrieval.embedding.loading import hf_model
from tests.models import build_tiny_model

TEXTS = ["a short text", "a somewhat longer text that has quite a few more words in it than the first one", "x"]


@pytest.fixture(scope="module")
def tiny_qwen(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny Qwen3 (RoPE, so positional scaling applies) with last-token pooling in its config."""
    return build_tiny_model("qwen3", "lasttoken", Path(tmp_path_factory.mktemp("options") / "qwen3"))


@pytest.fixture(scope="module")
def shared(tiny_qwen: str) -> FairEmbedder:
    return FairEmbedder(tiny_qwen, calibration=Calibration(strength=0.8), device="cpu")


# ------------------------------------------------------------------------------------------------ validation


@pytest.mark.parametrize(
    ("field", "value", "error", "message"),
    [
        ("calibration", {"strength": 0.5}, TypeError, "calibration must be a Calibration or None, got dict"),
        ("pooling", "max", ValueError, r"pooling must be one of \('cls', 'mean', 'last'\)"),
        ("max_length", 0, ValueError, "max_length must be a positive int or None, got 0"),
        ("max_length", True, ValueError, "max_length must be a positive int or None, got True"),
        ("max_length", 12.0, ValueError, "max_length must be a positive int or None"),
        ("batch_size", 0, ValueError, "batch_size must be a positive int, got 0"),
        ("batch_size", None, ValueError, "batch_size must be a positive int, got None"),
        ("device", 0, TypeError, "device must be a str, a torch.device or None, got int"),
        ("precision", "fp16", ValueError, "precision must be 'auto', 'float32', 'float16' or 'bfloat16'"),
        ("show_progress_bar", "yes", TypeError, "show_progress_bar must be a bool, got str"),
        ("model_kwargs", ["eager"], TypeError, "model_kwargs must be a dict or None, got list"),
        ("positional_scaling", (1.0, 1.0), TypeError, "positional_scaling must be a PositionalScaling or None"),
    ],
)
def test_invalid_options_fail_on_creation(field: str, value: Any, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        EmbedderOptions(**{field: value})


def test_defaults_are_fair_embedders_defaults() -> None:
    import inspect

    parameters = inspect.signature(FairEmbedder.__init__).parameters
    expected = {name: p.default for name, p in parameters.items() if name not in ("self", "model")}
    options = EmbedderOptions()
    assert {f.name: getattr(options, f.name) for f in dataclasses.fields(options)} == expected
    assert set(LOADING_OPTIONS) < set(expected)


def test_options_are_frozen_and_keep_a_private_copy_of_model_kwargs() -> None:
    kwargs = {"attn_implementation": "eager"}
    options = EmbedderOptions(model_kwargs=kwargs, device=torch.device("cpu"))
    kwargs["attn_implementation"] = "sdpa"  # the caller's dict changes later; the options do not
    assert options.model_kwargs == {"attn_implementation": "eager"}
    with pytest.raises(TypeError):
        options.model_kwargs["attn_implementation"] = "sdpa"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.max_length = 12  # type: ignore[misc]
    assert dataclasses.replace(options, max_length=12).max_length == 12


def test_as_calibration_accepts_calibrations_dicts_and_none() -> None:
    calibration = Calibration(strength=0.3, layers=(1, 2))
    assert as_calibration(calibration) is calibration
    assert as_calibration(calibration.to_dict()) == calibration
    assert as_calibration(None) is None
    with pytest.raises(TypeError, match="calibration must be a Calibration, a dict or None, got str"):
        as_calibration("strong")


# ------------------------------------------------------------------------------------------------ building


def test_build_equals_fair_embedder_called_directly(tiny_qwen: str) -> None:
    kwargs: dict[str, Any] = {
        "calibration": Calibration(strength=0.6, basket_size=2),
        "pooling": "mean",  # not the model's own (last), so FairEmbedder pools itself
        "max_length": 24,
        "batch_size": 2,
        "device": "cpu",
        "precision": "float32",
        "show_progress_bar": True,
        "model_kwargs": {"attn_implementation": "eager"},
        "positional_scaling": PositionalScaling(factors=(1.0, 1.5, 2.0, 1.2)),
    }
    built = build_embedder(EmbedderOptions(**kwargs), tiny_qwen)
    direct = FairEmbedder(tiny_qwen, **kwargs)
    attributes = ("model_name", "calibration", "pooling", "max_length", "batch_size", "show_progress_bar")
    assert [getattr(built, a) for a in attributes] == [getattr(direct, a) for a in attributes]
    assert built.positional_scaling == direct.positional_scaling == kwargs["positional_scaling"]
    assert (
        (built.device, built.model.dtype) == (direct.device, direct.model.dtype) == (torch.device("cpu"), torch.float32)
    )
    attention = hf_model(built.model).config._attn_implementation  # model_kwargs reached transformers
    assert attention == hf_model(direct.model).config._attn_implementation and attention.endswith("eager")
    np.testing.assert_allclose(built.embed_documents(TEXTS), direct.embed_documents(TEXTS), atol=1e-6)
    np.testing.assert_allclose(built.embed_queries(TEXTS), direct.embed_queries(TEXTS), atol=1e-6)
    plain = FairEmbedder(tiny_qwen, calibration=None, pooling="mean", max_length=24, device="cpu")
    assert not np.allclose(built.embed_documents(TEXTS), plain.embed_documents(TEXTS), atol=1e-4)


def test_build_with_defaults_takes_the_models_own_settings(tiny_qwen: str) -> None:
    built = build_embedder(EmbedderOptions(device="cpu"), tiny_qwen)
    assert (built.pooling, built.max_length, built.batch_size) == ("last", 512, 32)
    assert built.calibration == Calibration() and built.positional_scaling is None


def test_build_reports_model_dependent_errors_like_fair_embedder(tiny_qwen: str) -> None:
    with pytest.raises(ValueError, match="exceeds what"):
        build_embedder(EmbedderOptions(max_length=4096, device="cpu"), tiny_qwen)
    with pytest.raises(ValueError, match="factor"):
        build_embedder(
            EmbedderOptions(positional_scaling=PositionalScaling(factors=(1.0, 2.0)), device="cpu"), tiny_qwen
        )


# ------------------------------------------------------------------------------------------------ resolve_embedder


def test_resolve_returns_the_given_embedder_or_loads_the_model(tiny_qwen: str, shared: FairEmbedder) -> None:
    assert resolve_embedder("Owner", model=None, embedder=shared) is shared
    # Options that act per call (calibration, progress bar, positional scaling) may come with an embedder.
    per_call = {"calibration", "show_progress_bar", "positional_scaling"}
    assert resolve_embedder("Owner", model=None, embedder=shared, explicitly_set=per_call) is shared
    loaded = resolve_embedder(
        "Owner", model=tiny_qwen, embedder=None, options=EmbedderOptions(max_length=16, device="cpu")
    )
    assert loaded is not shared and loaded.max_length == 16
    assert resolve_embedder("Owner", model=tiny_qwen, embedder=None).calibration == Calibration()


def test_resolve_refuses_both_neither_and_a_wrong_embedder(tiny_qwen: str, shared: FairEmbedder) -> None:
    with pytest.raises(ValueError, match=r"^Pass either model or embedder to MyAdapter, not both\.$"):
        resolve_embedder("MyAdapter", model=tiny_qwen, embedder=shared)
    with pytest.raises(ValueError, match=r"^MyAdapter needs a model \(Hub id or local folder\) or an embedder="):
        resolve_embedder("MyAdapter", model=None, embedder=None)
    with pytest.raises(TypeError, match=r"embedder must be a fair_retrieval\.FairEmbedder, got str"):
        resolve_embedder("MyAdapter", model=None, embedder="model-name")  # type: ignore[arg-type]


def test_resolve_refuses_loading_options_with_an_embedder(shared: FairEmbedder) -> None:
    with pytest.raises(ValueError, match=r"^MyAdapter: max_length configure\(s\) model loading.*on the FairEmbedder"):
        resolve_embedder("MyAdapter", model=None, embedder=shared, explicitly_set={"max_length", "calibration"})
    with pytest.raises(ValueError, match=r"MyAdapter: pooling, batch_size, precision configure\(s\)"):
        resolve_embedder(
            "MyAdapter", model=None, embedder=shared, explicitly_set=["precision", "pooling", "batch_size"]
        )
    for name in LOADING_OPTIONS:
        with pytest.raises(ValueError, match=f"MyAdapter: {name} configure"):
            resolve_embedder("MyAdapter", model=None, embedder=shared, explicitly_set=[name])


def test_the_ray_spec_validates_and_builds_through_the_options(tiny_qwen: str) -> None:
    from fair_retrieval.distributed.spec import EmbedderSpec

    with pytest.raises(ValueError, match="pooling must be one of"):
        EmbedderSpec(tiny_qwen, pooling="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch_size must be a positive int"):
        EmbedderSpec(tiny_qwen, batch_size=0)
    spec = EmbedderSpec(tiny_qwen, calibration=Calibration(strength=0.5), pooling="mean", max_length=20, batch_size=2)
    assert spec.options() == EmbedderOptions(
        calibration=Calibration(strength=0.5), pooling="mean", max_length=20, batch_size=2
    )
    built = spec.build(has_gpu=False)  # no device given: a worker without a GPU uses the CPU
    assert (built.device, built.pooling, built.max_length, built.batch_size) == (torch.device("cpu"), "mean", 20, 2)
    assert built.calibration == Calibration(strength=0.5)
