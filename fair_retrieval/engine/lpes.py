"""LPES: layer-specific RoPE position scaling (arXiv 2606.27705; defined in docs/method.md).

`PositionalScaling` is a frozen, validated value object: one factor s_ℓ > 0 per layer, so that layer ℓ sees the
rotary angles of positions m / s_ℓ instead of m (s = 1 everywhere is the unmodified model; s > 1 compresses
distances, so far-apart tokens look closer). `PositionalScaling.bezier` draws the factors from a Bézier curve over
depth, which is what the genetic search (`fair_retrieval.tuning.genetic`) optimises.

How it plugs in
    `install_positional_scaling(model)` finds the model-level rotary module(s) and the stack of layers and adds two
    kinds of inert hooks: a forward hook on each rotary module that remembers how it was called, and a pre-hook on
    each layer that swaps the `position_embeddings=(cos, sin)` it receives for the angles of the scaled positions.
    The hooks do nothing unless a scaling is active in *this* context (`RopeLayers.applying`, a `ContextVar`), so
    other threads, coroutines and plain calls see the model exactly as it was. The scaled cos/sin are computed by
    the model's own rotary module (same frequencies, same rope type, same dtype) once per distinct factor and
    rotary call within a forward pass, and shared by every layer with that factor.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, ClassVar

import torch
from torch import nn

from fair_retrieval.engine.layers import UnsupportedModelError, layer_stack
from fair_retrieval.frozen_json import FrozenJson, check_fields
from fair_retrieval.validate import is_int, is_number

# --------------------------------------------------------------------------------------------------------------
# The configuration
# --------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PositionalScaling(FrozenJson):
    """Per-layer RoPE position-scaling factors: layer ℓ uses the rotary angles of positions m / factors[ℓ].

    Args:
        factors: one positive, finite factor per transformer layer (1.0 leaves a layer unchanged).
        control_points: the Bézier control points the factors were drawn from, when built with `bezier`
            (kept for reports and reproducibility; not part of equality).
    """

    JSON_KEY: ClassVar[str] = "positional_scaling"

    factors: tuple[float, ...]
    control_points: tuple[float, ...] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "factors", _positive_floats(self.factors, "factors"))
        if self.control_points is not None:
            object.__setattr__(self, "control_points", _positive_floats(self.control_points, "control_points"))

    @classmethod
    def bezier(cls, control_points: Sequence[float], num_layers: int) -> PositionalScaling:
        """Factors s_ℓ = B(ℓ / (N − 1)) of the Bézier curve B with the given control points, for N layers.

        The curve starts at the first control point (layer 0) and ends at the last (layer N − 1); monotone control
        points give monotone factors, and a single control point gives the same factor everywhere.

        Raises:
            ValueError: for no control points, a non-positive or non-finite point, or num_layers < 1.
        """
        points = _positive_floats(control_points, "control_points")
        if not is_int(num_layers):
            raise TypeError(f"num_layers must be an int ≥ 1, got {type(num_layers).__name__}.")
        if num_layers < 1:
            raise ValueError(f"num_layers must be ≥ 1, got {num_layers}.")
        ts = [layer / (num_layers - 1) if num_layers > 1 else 0.0 for layer in range(num_layers)]
        return cls(factors=tuple(bezier_curve(points, t) for t in ts), control_points=points)

    @classmethod
    def identity(cls, num_layers: int) -> PositionalScaling:
        """All factors 1: the unmodified model (useful as a baseline)."""
        return cls.bezier([1.0], num_layers)

    @property
    def num_layers(self) -> int:
        """Number of layers the factors are for."""
        return len(self.factors)

    @property
    def is_identity(self) -> bool:
        """True when every factor is exactly 1 (nothing is changed)."""
        return all(factor == 1.0 for factor in self.factors)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-compatible dict: {"factors": [...], "control_points": [...] or None}."""
        points = list(self.control_points) if self.control_points is not None else None
        return {"factors": list(self.factors), "control_points": points}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PositionalScaling:
        """Build a PositionalScaling from `to_dict` output; unknown keys are an error, not silently dropped."""
        fields = check_fields(data, ("factors", "control_points"), "PositionalScaling")
        if "factors" not in fields:
            raise ValueError("A PositionalScaling needs 'factors': a list with one positive number per layer.")
        points = fields.get("control_points")
        return cls(factors=fields["factors"], control_points=tuple(points) if points is not None else None)


def bezier_curve(control_points: Sequence[float], t: float) -> float:
    """Value at t ∈ [0, 1] of the Bézier curve Σ_k C(K−1, k)·(1 − t)^(K−1−k)·t^k·P_k (Bernstein form)."""
    degree = len(control_points) - 1
    return math.fsum(
        math.comb(degree, k) * (1.0 - t) ** (degree - k) * t**k * point for k, point in enumerate(control_points)
    )


def _positive_floats(values: object, name: str) -> tuple[float, ...]:
    if isinstance(values, str | bytes) or not isinstance(values, Sequence):
        raise TypeError(f"{name} must be a sequence of positive numbers, got {type(values).__name__}.")
    if len(values) == 0:
        raise ValueError(f"{name} must hold at least one value.")
    result = []
    for index, value in enumerate(values):
        if not is_number(value):
            raise TypeError(f"{name}[{index}] must be a number, got {type(value).__name__}.")
        if not math.isfinite(float(value)) or float(value) <= 0.0:
            raise ValueError(
                f"{name}[{index}] = {value}: scaling factors must be finite and > 0 (1.0 leaves a layer unchanged)."
            )
        result.append(float(value))
    return tuple(result)


# --------------------------------------------------------------------------------------------------------------
# The mechanism
# --------------------------------------------------------------------------------------------------------------


@dataclass
class _RotaryCall:
    """One call of a rotary module in the current forward pass: how to call it again, and what it returned."""

    compute: Callable[[torch.Tensor], tuple[torch.Tensor, torch.Tensor]]  # scaled position_ids → (cos, sin)
    position_ids: torch.Tensor  # (B|1, L)
    output: tuple[torch.Tensor, torch.Tensor]  # (B|1, L, D) each


@dataclass
class _ScalingRequest:
    """The scaling active in one context, and the per-forward cache of scaled angles."""

    owner: RopeLayers
    factors: tuple[float, ...]
    calls: dict[int, _RotaryCall] = field(default_factory=dict)  # id(cos) → its rotary call
    scaled: dict[tuple[int, float], tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)
    layers_run: set[int] = field(default_factory=set)


_ACTIVE: ContextVar[_ScalingRequest | None] = ContextVar("fair_retrieval_positional_scaling", default=None)
_INSTALLED: weakref.WeakKeyDictionary[nn.Module, RopeLayers] = weakref.WeakKeyDictionary()
_INSTALL_LOCK = threading.Lock()


class RopeLayers:
    """A RoPE model's rotary modules and layers, hooked so that an active `PositionalScaling` applies to them.

    Built by `install_positional_scaling`; one per model, shared by every embedder of that model.
    """

    def __init__(self, model: nn.Module, model_name: str) -> None:
        self.model_name = model_name
        self.layers = layer_stack(model, model_name)
        self.rotaries = _rotary_modules(model, self.layers, model_name)
        self._signatures = {id(rotary): inspect.signature(_undecorated_forward(rotary)) for rotary in self.rotaries}
        for rotary in self.rotaries:
            rotary.register_forward_hook(self._remember_call, with_kwargs=True)
        for index, layer in enumerate(self.layers):
            layer.register_forward_pre_hook(self._make_layer_hook(index), with_kwargs=True)

    @property
    def num_layers(self) -> int:
        """Number of transformer layers (what `PositionalScaling.factors` must match)."""
        return len(self.layers)

    def check(self, scaling: PositionalScaling) -> None:
        """Raise a ValueError/TypeError unless `scaling` has one factor per layer of this model."""
        if not isinstance(scaling, PositionalScaling):
            raise TypeError(f"positional_scaling must be a PositionalScaling or None, got {type(scaling).__name__}.")
        if scaling.num_layers != self.num_layers:
            raise ValueError(
                f"positional_scaling has {scaling.num_layers} factors but {self.model_name} has {self.num_layers} "
                f"layers; build it with PositionalScaling.bezier(control_points, num_layers={self.num_layers})."
            )

    @contextlib.contextmanager
    def applying(self, scaling: PositionalScaling) -> Iterator[None]:
        """Make forward passes run inside the block (in this context only) use `scaling`'s factors.

        Meant for one forward pass (or a few): the scaled angles of every pass are kept until the block ends.

        Raises:
            UnsupportedModelError: if a scaled layer did not receive rotary position embeddings from the model's
                rotary module (its angles could not be replaced).
        """
        self.check(scaling)
        request = _ScalingRequest(owner=self, factors=scaling.factors)
        token = _ACTIVE.set(request)
        try:
            yield
        finally:
            _ACTIVE.reset(token)
        skipped = sorted(set(range(self.num_layers)) - request.layers_run)
        if request.calls and skipped:
            raise UnsupportedModelError(
                f"{self.model_name}: layers {skipped} did not run through the hooked layer stack, so their "
                "positions could not be scaled."
            )

    # ---------------------------------------------------------------------------------------------- hooks

    def _remember_call(self, module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any], output: Any) -> None:
        request = _ACTIVE.get()
        if request is None or request.owner is not self:
            return
        bound = self._signatures[id(module)].bind(module, *args, **kwargs)
        position_ids = bound.arguments.get("position_ids")
        if not isinstance(position_ids, torch.Tensor):
            raise UnsupportedModelError(
                f"{self.model_name}: its rotary module {type(module).__name__} was called without position_ids, "
                "so scaled positions cannot be computed."
            )

        def compute(scaled_positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            arguments = dict(bound.arguments)
            arguments["position_ids"] = scaled_positions
            cos, sin = _undecorated_forward(module)(**arguments)
            return cos, sin

        request.calls[id(output[0])] = _RotaryCall(compute=compute, position_ids=position_ids, output=output)

    def _make_layer_hook(self, index: int) -> Callable[..., Any]:
        def scale_positions(
            module: nn.Module, args: tuple[Any, ...], kwargs: dict[str, Any]
        ) -> tuple[tuple[Any, ...], dict[str, Any]] | None:
            request = _ACTIVE.get()
            if request is None or request.owner is not self:
                return None
            request.layers_run.add(index)
            factor = request.factors[index]
            if factor == 1.0:
                return None
            kwargs = dict(kwargs)
            kwargs["position_embeddings"] = self._scaled_angles(request, kwargs.get("position_embeddings"), index)
            return args, kwargs

        return scale_positions

    def _scaled_angles(self, request: _ScalingRequest, received: Any, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(cos, sin) of positions m / s_ℓ for layer `index`, computed once per rotary call and factor."""
        call = None
        if isinstance(received, tuple) and len(received) == 2:
            call = request.calls.get(id(received[0]))
        if call is None or call.output[0] is not received[0]:
            raise UnsupportedModelError(
                f"{self.model_name}: layer {index} did not receive position_embeddings=(cos, sin) from the model's "
                "rotary module, so its positions cannot be scaled. LPES supports models whose layers get rotary "
                "embeddings from a model-level rotary module (Qwen3, Llama, Gemma, ModernBERT, …)."
            )
        factor = request.factors[index]
        key = (id(received[0]), factor)
        if key not in request.scaled:
            scaled_positions = call.position_ids.to(torch.float32) / factor  # (B|1, L) m / s_ℓ
            request.scaled[key] = call.compute(scaled_positions)
        return request.scaled[key]


def install_positional_scaling(model: nn.Module, model_name: str) -> RopeLayers:
    """Hook `model` (a transformers PreTrainedModel with RoPE) for LPES; idempotent, returns its `RopeLayers`.

    The hooks are inert: outputs change only inside `RopeLayers.applying`.

    Raises:
        UnsupportedModelError (a ValueError): for models without rotary position embeddings (BERT, XLM-R, MiniLM
            use learned absolute positions), or whose rotary embedding is computed inside each attention module.
    """
    with _INSTALL_LOCK:
        installed = _INSTALLED.get(model)
        if installed is None:
            installed = RopeLayers(model, model_name)
            _INSTALLED[model] = installed
        return installed


def _undecorated_forward(module: nn.Module) -> Callable[..., Any]:
    """The rotary module's forward without transformers' `dynamic_rope_update` wrapper.

    The wrapper may recompute (and store) the module's frequencies from the largest position it sees; the scaled
    angles must use the same frequencies as the plain call of the same forward pass, and must not change them.
    """
    forward = type(module).forward
    return getattr(forward, "__wrapped__", forward)  # type: ignore[no-any-return]


def _is_rotary(module: nn.Module) -> bool:
    names = [name for name, _ in module.named_buffers(recurse=False)]
    return "Rotary" in type(module).__name__ or any(name.endswith("inv_freq") for name in names)


def _rotary_modules(model: nn.Module, layers: nn.ModuleList, model_name: str) -> list[nn.Module]:
    inside = {id(sub) for layer in layers for sub in layer.modules()}
    rotaries = [m for m in model.modules() if _is_rotary(m) and id(m) not in inside]
    if rotaries:
        for rotary in rotaries:
            parameters = inspect.signature(_undecorated_forward(rotary)).parameters
            if "position_ids" not in parameters:
                raise UnsupportedModelError(
                    f"{model_name}: its rotary module {type(rotary).__name__} takes no position_ids, so LPES cannot "
                    "give it scaled positions."
                )
        return rotaries
    if any(_is_rotary(m) for m in layers.modules()):
        raise UnsupportedModelError(
            f"{model_name} computes its rotary embedding inside each attention module, which LPES does not "
            "support; it needs models whose layers receive position_embeddings from a model-level rotary module "
            "(Qwen3, Llama, Gemma, ModernBERT, …)."
        )
    raise UnsupportedModelError(
        f"{model_name} ({type(model).__name__}) has no rotary position embeddings (RoPE), so there are no rotary "
        "angles to scale: BERT, XLM-R and MiniLM use learned absolute positions. Use positional_scaling=None with "
        "this model (attention calibration still works), or a RoPE model such as Qwen3, Llama or ModernBERT."
    )
