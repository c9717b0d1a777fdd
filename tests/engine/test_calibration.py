"""Calibration: validation, layer resolution and JSON round trips."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_retrieval import Calibration


def test_defaults_are_the_studys_choice() -> None:
    default, paper = Calibration(), Calibration.paper()
    assert (default.strength, default.basket_size, default.layers, default.special_tokens) == (
        0.05,
        192,
        0.5,
        "preserve",
    )
    assert (default.isolated, default.partial_basket, default.min_full_baskets) == ("preserve", "equal", 2)
    assert default.min_content_tokens == 384
    assert default != paper


@pytest.mark.parametrize(
    ("kwargs", "error", "fragment"),
    [
        ({"strength": 1.5}, ValueError, "[0, 1]"),
        ({"strength": -0.1}, ValueError, "[0, 1]"),
        ({"strength": float("nan")}, ValueError, "[0, 1]"),
        ({"strength": "0.5"}, TypeError, "number"),
        ({"basket_size": 0}, ValueError, "≥ 1"),
        ({"basket_size": 12.5}, TypeError, "int"),
        ({"basket_size": True}, TypeError, "int"),
        ({"layers": 0.0}, ValueError, "(0, 1]"),
        ({"layers": 1.5}, ValueError, "(0, 1]"),
        ({"layers": 0}, ValueError, "≥ 1"),
        ({"layers": []}, ValueError, "at least one"),
        ({"layers": [1, 1]}, ValueError, "unique"),
        ({"layers": ["a"]}, TypeError, "ints"),
        ({"layers": "last"}, TypeError, "fraction"),
        ({"isolated": "keep"}, ValueError, "isolated"),
        ({"partial_basket": "drop"}, ValueError, "partial_basket"),
    ],
)
def test_invalid_values_are_refused(kwargs: dict, error: type, fragment: str) -> None:
    with pytest.raises(error, match=None) as info:
        Calibration(**kwargs)
    assert fragment in str(info.value)


def test_is_frozen_and_hashable() -> None:
    cal = Calibration(layers=[3, 4])
    assert cal.layers == (3, 4)
    with pytest.raises(AttributeError):
        cal.strength = 1.0  # type: ignore[misc]
    assert hash(cal) == hash(Calibration(layers=(3, 4)))


@pytest.mark.parametrize(
    ("layers", "num_layers", "expected"),
    [
        (0.5, 6, {3, 4, 5}),
        (0.5, 5, {3, 4}),
        (0.01, 6, {5}),
        (1.0, 4, {0, 1, 2, 3}),
        (2, 6, {4, 5}),
        ((0, -1), 6, {0, 5}),
        ((-6,), 6, {0}),
    ],
)
def test_resolve_layers(layers: object, num_layers: int, expected: set[int]) -> None:
    assert Calibration(layers=layers).resolve_layers(num_layers) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize("layers", [7, (6,), (-7,)])
def test_layers_outside_the_model(layers: object) -> None:
    with pytest.raises(ValueError, match="layer"):
        Calibration(layers=layers).resolve_layers(6)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "cal",
    [Calibration(), Calibration(0.25, 64, (1, -1), "equal", "proportional", "preserve"), Calibration(layers=3)],
)
def test_json_round_trip(cal: Calibration, tmp_path: Path) -> None:
    assert Calibration.from_json(cal.to_json()) == cal
    path = tmp_path / "cal.json"
    cal.save(path)
    assert Calibration.load(path) == cal
    assert json.loads(path.read_text())["basket_size"] == cal.basket_size


def test_load_accepts_a_report_with_a_calibration_object(tmp_path: Path) -> None:
    path = tmp_path / "tuned.json"
    path.write_text(json.dumps({"objective": 0.7, "calibration": Calibration(strength=0.75).to_dict()}))
    assert Calibration.load(path).strength == 0.75


def test_unknown_fields_are_an_error() -> None:
    with pytest.raises(ValueError, match="Unknown"):
        Calibration.from_dict({"strength": 0.5, "lambda": 0.3})


def test_paper_preset_is_the_published_configuration_whatever_the_default():
    paper = Calibration.paper()
    assert paper.to_dict() == {
        "strength": 0.5,
        "basket_size": 128,
        "layers": 0.5,
        "isolated": "preserve",
        "partial_basket": "equal",
        "special_tokens": "content",
        "min_full_baskets": 1,
        "strength_ramp": 0,
    }
    assert Calibration.from_json(paper.to_json()) == paper
    assert Calibration.paper() is not Calibration.paper() and Calibration.paper() == paper


@pytest.mark.parametrize(("value", "error"), [(0, ValueError), (-2, ValueError), (1.5, TypeError), (True, TypeError)])
def test_min_full_baskets_is_validated(value, error):
    with pytest.raises(error, match="min_full_baskets"):
        Calibration(min_full_baskets=value)


def test_min_full_baskets_round_trips_and_old_files_default_to_one():
    config = Calibration(basket_size=64, min_full_baskets=3)
    assert config.min_content_tokens == 192
    assert Calibration.from_json(config.to_json()) == config
    old = {  # written before the option (and before strength_ramp)
        k: v for k, v in Calibration().to_dict().items() if k not in ("min_full_baskets", "strength_ramp")
    }
    assert Calibration.from_dict(old).min_full_baskets == 1
    assert Calibration.from_dict({"strength": 0.6}).min_full_baskets == Calibration().min_full_baskets  # hand-written


@pytest.mark.parametrize(("value", "error"), [(-1, ValueError), (2.5, TypeError), (False, TypeError)])
def test_strength_ramp_is_validated(value, error):
    with pytest.raises(error, match="strength_ramp"):
        Calibration(strength_ramp=value)


def test_strength_ramp_raises_strength_linearly_from_the_bar():
    ramp = Calibration(strength=0.5, basket_size=100, min_full_baskets=2, strength_ramp=50)
    assert [ramp.strength_at(n) for n in (0, 199, 200, 224, 249, 250, 5000)] == [0.0, 0.0, 0.01, 0.25, 0.5, 0.5, 0.5]
    step = Calibration(strength=0.5, basket_size=100, min_full_baskets=2)
    assert [step.strength_at(n) for n in (199, 200, 5000)] == [0.0, 0.5, 0.5]
    assert Calibration.from_json(ramp.to_json()) == ramp
    with_min = {k: v for k, v in step.to_dict().items() if k != "strength_ramp"}  # written before strength_ramp
    assert Calibration.from_dict(with_min) == step
