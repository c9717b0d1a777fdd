"""The one layer-stack finder shared by attention calibration and LPES, and the JSON mixin of the frozen configs."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from torch import nn

from fair_retrieval import Calibration
from fair_retrieval.engine.layers import UnsupportedModelError, layer_of_module, layer_stack
from fair_retrieval.engine.lpes import PositionalScaling


class Toy(nn.Module):
    def __init__(self, layers: int, config_layers: int) -> None:
        super().__init__()
        self.config = SimpleNamespace(num_hidden_layers=config_layers)
        self.head = nn.ModuleList([nn.Linear(2, 2)])  # a list of another length is not the stack
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(2, 2), nn.ReLU()) for _ in range(layers)])


def test_layer_stack_is_the_list_of_num_hidden_layers() -> None:
    model = Toy(3, 3)
    assert layer_stack(model, "toy") is model.blocks
    mapping = layer_of_module(model, "toy")
    for index, block in enumerate(model.blocks):
        assert mapping[id(block)] == index and mapping[id(block[0])] == index
    assert id(model.head[0]) not in mapping


def test_missing_stack_is_an_unsupported_model() -> None:
    with pytest.raises(UnsupportedModelError, match="could not find its 5 transformer layers"):
        layer_stack(Toy(3, 5), "toy")
    assert issubclass(UnsupportedModelError, ValueError)


@pytest.mark.parametrize(
    ("config", "key"),
    [
        (Calibration(strength=0.25, layers=(0, -1)), "calibration"),
        (PositionalScaling.bezier([1, 2], 4), "positional_scaling"),
    ],
)
def test_frozen_configs_share_one_json_round_trip(
    config: Calibration | PositionalScaling, key: str, tmp_path: Path
) -> None:
    cls = type(config)
    assert cls.from_json(config.to_json()) == config
    config.save(tmp_path / "config.json")
    assert cls.load(tmp_path / "config.json") == config
    assert [p.name for p in tmp_path.iterdir()] == ["config.json"], "save writes through a temporary file"
    (tmp_path / "report.json").write_text(json.dumps({"score": 1.0, key: config.to_dict()}))
    assert cls.load(tmp_path / "report.json") == config
    with pytest.raises(TypeError, match="expects a dict"):
        cls.from_dict([1, 2])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="Unknown"):
        cls.from_dict({**config.to_dict(), "extra": 1})
