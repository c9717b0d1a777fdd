"""The attention-calibration configuration (arXiv 2606.02737; defined in docs/method.md).

`Calibration` is a frozen, validated value object: it says *how* the pooling token's attention is redistributed
over baskets of consecutive tokens. It knows nothing about models; `resolve_layers` binds its `layers` field to a
model depth; its JSON round trip (`to_json`, `save`, `load`) comes from `FrozenJson`. The attention engine that
applies it lives in `fair_retrieval.engine.attention`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, ClassVar, Literal, get_args

from fair_retrieval.frozen_json import FrozenJson, check_fields
from fair_retrieval.validate import is_int, is_number

IsolatedMode = Literal["preserve", "equal"]
PartialBasketMode = Literal["equal", "proportional"]
SpecialTokensMode = Literal["content", "preserve"]
LayerSpec = float | int | tuple[int, ...]

_ISOLATED_MODES: tuple[str, ...] = get_args(IsolatedMode)
_PARTIAL_BASKET_MODES: tuple[str, ...] = get_args(PartialBasketMode)
_SPECIAL_TOKENS_MODES: tuple[str, ...] = get_args(SpecialTokensMode)


@dataclass(frozen=True)
class Calibration(FrozenJson):
    """How documents are calibrated at indexing time.

    The defaults (λ = 0.05 on the last half of the layers, baskets of 192 tokens, special tokens kept out of the
    baskets, only texts of at least two full baskets, 384 content tokens, calibrated; shorter texts embedded
    plainly) are the safe end of what was measured on two models: how they were chosen, and what larger strengths
    cost, is in docs/defaults.md. Pass a larger strength for more fairness where your model shows more position
    bias (`fair-retrieval eval` measures it). `Calibration.paper()` gives the published configuration.

    Args:
        strength: λ ∈ [0, 1], the blend between calibrated (1) and original (0) attention.
        basket_size: B ≥ 1, the number of consecutive content tokens that share one equal attention budget.
        layers: which layers are calibrated. A float f ∈ (0, 1] means the last max(1, ⌊f·N⌋) of N layers; an int
            k ≥ 1 the last k layers; a sequence of ints exactly those 0-based indices (negatives count from the end).
        isolated: mass of the isolated keys (the pooling token, and the first token for last-token pooling):
            "preserve" keeps their original attention (the paper's variant); "equal" gives each 1/(n + |I|).
        partial_basket: "equal" gives every basket the same share (the published method); "proportional" scales a
            basket's share by its size, so a short last basket gets less.
        special_tokens: "content" treats the tokenizer's special tokens ([CLS], [SEP], <s>, </s>, EOS) like any
            other token (the paper's basket grid); "preserve" makes every special token an isolated key that keeps
            its own attention mass, so sink tokens such as [SEP] do not inflate the last basket.
        min_full_baskets: N ≥ 1; a text is calibrated only if it holds at least N full baskets (N·B content tokens),
            otherwise it is embedded plainly. 1 is the published rule (texts shorter than one basket stay plain);
            larger values leave short texts alone, which is where calibration costs general retrieval most.
        strength_ramp: R ≥ 0 content tokens over which the strength rises linearly from the calibration bar: a text
            with n ≥ N·B content tokens gets λ · min(1, (n − N·B + 1) / R), so texts just long enough are calibrated
            only a little and λ is reached R tokens above the bar. 0 (the default) is a step: λ from the bar on.
    """

    JSON_KEY: ClassVar[str] = "calibration"

    strength: float = 0.05
    basket_size: int = 192
    layers: LayerSpec = 0.5
    isolated: IsolatedMode = "preserve"
    partial_basket: PartialBasketMode = "equal"
    special_tokens: SpecialTokensMode = "preserve"
    min_full_baskets: int = 2
    strength_ramp: int = 0

    def __post_init__(self) -> None:
        _check_strength(self.strength)
        _check_basket_size(self.basket_size)
        _check_min_full_baskets(self.min_full_baskets)
        _check_strength_ramp(self.strength_ramp)
        object.__setattr__(self, "layers", _normalise_layers(self.layers))
        if self.isolated not in _ISOLATED_MODES:
            raise ValueError(f"isolated must be one of {_ISOLATED_MODES}, got {self.isolated!r}.")
        if self.partial_basket not in _PARTIAL_BASKET_MODES:
            raise ValueError(f"partial_basket must be one of {_PARTIAL_BASKET_MODES}, got {self.partial_basket!r}.")
        if self.special_tokens not in _SPECIAL_TOKENS_MODES:
            raise ValueError(f"special_tokens must be one of {_SPECIAL_TOKENS_MODES}, got {self.special_tokens!r}.")
        object.__setattr__(self, "strength", float(self.strength))

    @property
    def min_content_tokens(self) -> int:
        """Content tokens a text needs to be calibrated: min_full_baskets · basket_size."""
        return self.min_full_baskets * self.basket_size

    def strength_at(self, content_tokens: int) -> float:
        """λ for a text of `content_tokens` content keys: 0 below `min_content_tokens`, then `strength`, reached
        linearly over `strength_ramp` tokens (docs/method.md, "Texts too short to calibrate")."""
        above = content_tokens - self.min_content_tokens + 1
        if above <= 0:
            return 0.0
        return self.strength if self.strength_ramp == 0 else self.strength * min(1.0, above / self.strength_ramp)

    @classmethod
    def paper(cls) -> Calibration:
        """The configuration published with the method, whatever this library's default is.

        Basket size 128, strength 0.5, the last half of the layers, isolated keys keep their own mass, every basket
        an equal share, special tokens treated as content. Use it to reproduce the paper or to compare with it.
        """
        return cls(
            strength=0.5,
            basket_size=128,
            layers=0.5,
            isolated="preserve",
            partial_basket="equal",
            special_tokens="content",
            min_full_baskets=1,
        )

    def resolve_layers(self, num_layers: int) -> frozenset[int]:
        """Return the 0-based indices of the calibrated layers of a model with `num_layers` layers.

        Raises:
            ValueError: if an explicit index lies outside the model, or `num_layers` < 1.
        """
        if num_layers < 1:
            raise ValueError(f"A model needs at least one layer to be calibrated, got num_layers={num_layers}.")
        spec = self.layers
        if isinstance(spec, float):
            count = max(1, math.floor(spec * num_layers))
            return frozenset(range(num_layers - count, num_layers))
        if isinstance(spec, int):
            if spec > num_layers:
                raise ValueError(
                    f"layers={spec} asks for the last {spec} layers, but the model has only {num_layers}. "
                    f"Use an int in [1, {num_layers}] or a fraction in (0, 1]."
                )
            return frozenset(range(num_layers - spec, num_layers))
        resolved = set()
        for index in spec:
            if not -num_layers <= index < num_layers:
                raise ValueError(
                    f"Layer index {index} is outside a model with {num_layers} layers; "
                    f"use indices in [{-num_layers}, {num_layers - 1}]."
                )
            resolved.add(index % num_layers)
        return frozenset(resolved)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-compatible dict (layers as a float, an int or a list of ints)."""
        data = asdict(self)
        if isinstance(self.layers, tuple):
            data["layers"] = list(self.layers)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        """Build a Calibration from `to_dict` output; unknown keys are an error, not silently dropped.

        Missing fields take the current defaults, with one exception: a dict holding every field but
        `min_full_baskets` was written before that option existed, when every text of one full basket was
        calibrated, so it reads as min_full_baskets=1 (saved configurations and index manifests keep meaning what
        they meant).
        """
        fields = check_fields(data, _FIELDS, "Calibration")
        older = set(_FIELDS) - {"min_full_baskets", "strength_ramp"}  # the fields before min_full_baskets existed
        if "min_full_baskets" not in fields and set(fields) == older:
            fields["min_full_baskets"] = 1
        if isinstance(fields.get("layers"), list):
            fields["layers"] = tuple(fields["layers"])
        return cls(**fields)


def _check_strength(strength: object) -> None:
    if not is_number(strength):
        raise TypeError(f"strength must be a number in [0, 1], got {type(strength).__name__}.")
    if not 0.0 <= float(strength) <= 1.0 or math.isnan(float(strength)):
        raise ValueError(f"strength must lie in [0, 1] (0 = plain, 1 = fully calibrated), got {strength}.")


def _check_min_full_baskets(value: object) -> None:
    if not is_int(value):
        raise TypeError(f"min_full_baskets must be an int ≥ 1, got {type(value).__name__}.")
    if value < 1:
        raise ValueError(f"min_full_baskets must be ≥ 1 (1 = calibrate every text with one full basket), got {value}.")


def _check_strength_ramp(value: object) -> None:
    if not is_int(value):
        raise TypeError(f"strength_ramp must be an int ≥ 0, got {type(value).__name__}.")
    if value < 0:
        raise ValueError(f"strength_ramp must be ≥ 0 content tokens (0 = full strength from the bar on), got {value}.")


def _check_basket_size(basket_size: object) -> None:
    if not is_int(basket_size):
        raise TypeError(f"basket_size must be an int ≥ 1, got {type(basket_size).__name__}.")
    if basket_size < 1:
        raise ValueError(f"basket_size must be ≥ 1 token, got {basket_size}.")


def _normalise_layers(layers: object) -> LayerSpec:
    if isinstance(layers, bool):
        raise TypeError("layers must be a fraction in (0, 1], a positive int, or a sequence of layer indices.")
    if isinstance(layers, float):
        if not 0.0 < layers <= 1.0:
            raise ValueError(f"A fractional layers value must lie in (0, 1], got {layers}.")
        return layers
    if isinstance(layers, int):
        if layers < 1:
            raise ValueError(f"layers={layers}: an int means 'the last k layers' and must be ≥ 1.")
        return layers
    if isinstance(layers, Sequence) and not isinstance(layers, str):
        indices = tuple(layers)
        if not indices:
            raise ValueError("layers must name at least one layer; use calibration=None for plain embeddings.")
        for index in indices:
            if not is_int(index):
                raise TypeError(f"Layer indices must be ints, got {index!r}.")
        if len(set(indices)) != len(indices):
            raise ValueError(f"Layer indices must be unique, got {list(indices)}.")
        return indices
    raise TypeError(
        f"layers must be a fraction in (0, 1], a positive int, or a sequence of ints, got {type(layers).__name__}."
    )


_FIELDS: tuple[str, ...] = tuple(field.name for field in dataclasses.fields(Calibration))
"""The fields of `Calibration`, in declaration order (what its JSON form holds)."""
