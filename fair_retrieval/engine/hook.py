"""How calibrated attention plugs into any transformers model that uses `ALL_ATTENTION_FUNCTIONS`, and which path
each calibrated layer takes (the math itself is `fair_retrieval.engine.attention`).

How it plugs in
    `install(model)` switches the model to a registered attention function named ``fair_<base>`` (``fair_sdpa`` for
    the usual SDPA models). That function always computes the model's ordinary fused attention with the original
    implementation, and then — only while a calibrated request is active in *this* context (a `ContextVar`, so other
    threads and coroutines are unaffected) — replaces the outputs of the pooling rows in the calibrated layers.
    With no active request the model's outputs are bit-for-bit those of the base implementation.

Which path a layer takes
    `_calibrate_layer`: for mean pooling on a bidirectional model whose rows all see exactly the real tokens, every
    row at once (`calibrate_every_row`, which replaces the model's attention); otherwise the model's attention runs
    and the pooled rows (cls/last: one per text; mean with another mask: every row, in tiles) are recomputed by
    `calibrated_rows`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import torch
from torch import nn

from fair_retrieval.engine import kernels
from fair_retrieval.engine.attention import calibrate_every_row, calibrated_rows
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.layers import UnsupportedModelError, layer_of_module

logger = logging.getLogger(__name__)

Pooling = Literal["cls", "mean", "last"]
POOLING_MODES: tuple[str, ...] = get_args(Pooling)

_PREFIX = "fair_"
_REGISTER_LOCK = threading.Lock()


@dataclass
class CalibrationRequest:
    """What one calibrated forward pass needs; lives in a context variable for the duration of the pass.

    Attributes:
        calibration: the configuration to apply.
        layers: resolved 0-based indices of the calibrated layers.
        pooling: which rows are calibrated (cls → first valid token, last → last valid token, mean → every row).
        padding_mask: (batch, seq) bool, True for real tokens — the tokenizer's attention mask.
        special_mask: (batch, seq) bool, True for the tokenizer's special tokens (used by special_tokens="preserve").
        layer_of_module: id(attention module) → layer index, built by `install`.
        calls: layers in which the calibrated function actually ran (to detect models that bypass the interface).
    """

    calibration: Calibration
    layers: frozenset[int]
    pooling: Pooling
    padding_mask: torch.Tensor
    special_mask: torch.Tensor | None
    layer_of_module: dict[int, int]
    calls: set[int] = field(default_factory=set)
    _pure_masks: dict[int, tuple[torch.Tensor, bool]] = field(default_factory=dict)


_ACTIVE: ContextVar[CalibrationRequest | None] = ContextVar("fair_retrieval_calibration", default=None)


@contextlib.contextmanager
def calibrating(request: CalibrationRequest) -> Iterator[CalibrationRequest]:
    """Activate `request` for forward passes run inside the block, in this context only."""
    token = _ACTIVE.set(request)
    try:
        yield request
    finally:
        _ACTIVE.reset(token)


def install(model: nn.Module, model_name: str) -> dict[int, int]:
    """Route `model`'s attention through the calibrating function; return id(attention module) → layer index.

    Plain outputs are unchanged: the function delegates to the model's own implementation (sdpa, eager,
    flash_attention_*) whenever no calibrated request is active.

    Raises:
        UnsupportedModelError: if the model cannot switch its attention implementation (e.g. remote-code models
            that do not use `ALL_ATTENTION_FUNCTIONS`) or has no recognisable stack of layers.
    """
    from transformers import PreTrainedModel

    if not isinstance(model, PreTrainedModel):
        raise UnsupportedModelError(
            f"{model_name}: calibration needs a transformers PreTrainedModel, got {type(model).__name__}."
        )
    current = model.config._attn_implementation or "sdpa"
    base = current[len(_PREFIX) :] if current.startswith(_PREFIX) else current
    if not type(model)._can_set_attn_implementation():
        raise UnsupportedModelError(
            f"{model_name} ({type(model).__name__}) computes attention in its own code instead of through "
            "transformers' ALL_ATTENTION_FUNCTIONS, so fair-retrieval cannot calibrate it. Supported: models whose "
            "modeling code calls ALL_ATTENTION_FUNCTIONS.get_interface (BERT, XLM-R, MiniLM, ModernBERT, Qwen3, "
            "Llama, Gemma, …); load remote-code models without trust_remote_code to use the transformers version."
        )
    name = _register(base)
    if current != name:
        model.set_attn_implementation(name)
    if model.config._attn_implementation != name:
        raise UnsupportedModelError(
            f"{model_name}: transformers refused the calibrating attention function (still "
            f"{model.config._attn_implementation!r})."
        )
    return layer_of_module(model, model_name)


def _register(base: str) -> str:
    """Register ``fair_<base>`` (attention + mask function) once per process and return its name."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    name = _PREFIX + base
    with _REGISTER_LOCK:
        if name in ALL_ATTENTION_FUNCTIONS:
            return name
        if base == "eager":
            base_fn: Callable[..., Any] | None = None  # resolved per module: each model has its own eager function
        elif base in ALL_ATTENTION_FUNCTIONS:
            base_fn = ALL_ATTENTION_FUNCTIONS[base]
        else:
            raise UnsupportedModelError(
                f"Attention implementation {base!r} is not registered in transformers; use 'sdpa', 'eager' or a "
                "flash_attention_* implementation."
            )
        mask_base = base if base in ALL_MASK_ATTENTION_FUNCTIONS else "sdpa"
        AttentionInterface.register(name, _make_attention_function(base, base_fn))
        # Without a mask function registered under the same name the model would pass attention_mask=None.
        AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS[mask_base])
    return name


def _make_attention_function(base: str, base_fn: Callable[..., Any] | None) -> Callable[..., Any]:
    def fair_attention(
        module: nn.Module,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        attention_mask: torch.Tensor | None,
        **kwargs: Any,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        fn = base_fn if base_fn is not None else _eager_function_of(module)

        def base() -> tuple[torch.Tensor, torch.Tensor | None]:
            return fn(module, query, key, value, attention_mask, **kwargs)  # type: ignore[no-any-return]

        request = _ACTIVE.get()
        if request is None:
            return base()
        layer = request.layer_of_module.get(id(module), getattr(module, "layer_idx", None))
        if layer is None:
            return base()
        request.calls.add(int(layer))
        if int(layer) not in request.layers or request.calibration.strength == 0.0:
            return base()
        return _calibrate_layer(module, query, key, value, attention_mask, base, request, kwargs)

    fair_attention.__name__ = f"fair_attention_{base}"
    return fair_attention


def _eager_function_of(module: nn.Module) -> Callable[..., Any]:
    import sys

    model_module = sys.modules.get(type(module).__module__)
    fn = getattr(model_module, "eager_attention_forward", None)
    if fn is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward
    return fn  # type: ignore[no-any-return]


# ----------------------------------------------------------------------------------------------------------------
# Per-layer dispatch
# ----------------------------------------------------------------------------------------------------------------


def _calibrate_layer(
    module: nn.Module,
    query: torch.Tensor,  # (B, H, L, D)
    key: torch.Tensor,  # (B, Hkv, L, D)
    value: torch.Tensor,  # (B, Hkv, L, D)
    attention_mask: torch.Tensor | None,
    base: Callable[[], tuple[torch.Tensor, torch.Tensor | None]],  # the model's own attention → (B, L, H, D), weights
    request: CalibrationRequest,
    kwargs: dict[str, Any],
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Attention output (B, L, H, D) of a calibrated layer, and the base implementation's weights (if it ran)."""
    batch, heads, seq, head_dim = query.shape
    if key.shape[2] != seq:
        raise RuntimeError("fair-retrieval calibrates full-sequence encoding only (no KV cache); pass use_cache=False.")
    if tuple(request.padding_mask.shape) != (batch, seq):
        raise RuntimeError(
            f"Attention saw a (batch={batch}, seq={seq}) input but the tokenizer produced "
            f"{tuple(request.padding_mask.shape)}: the model packs or unpads sequences (e.g. sentence-transformers' "
            "unpad_inputs=True with FlashAttention). Load it with unpad_inputs=False to calibrate it."
        )
    padding = request.padding_mask.to(device=query.device, dtype=torch.bool)  # (B, L)
    scaling = kwargs.get("scaling")
    scale = float(scaling) if scaling is not None else head_dim**-0.5
    causal = bool(kwargs.get("is_causal", getattr(module, "is_causal", False)))
    sliding_window = kwargs.get("sliding_window")
    cal = request.calibration
    positions = torch.arange(seq, device=query.device)

    isolated_positions = isolated_keys(request, padding.device)[:, None, :]  # (B, 1, L)
    if request.pooling == "mean":
        if _every_row_sees_padding_only(attention_mask, padding, causal, sliding_window, request):
            # The basket outputs also give the plain output exactly, so the base attention is not run at all.
            content = padding & ~isolated_positions[:, 0]  # (B, L)
            if int(content.sum(dim=1).max().item()) < cal.min_content_tokens:
                return base()  # no text in the batch is long enough to be calibrated
            blended = calibrate_every_row(
                query, key, value, content, isolated_positions[:, 0], scale, cal
            )  # (B, L, H, D)
            return blended.to(query.dtype), None
        rows = positions.expand(batch, seq)  # (B, L): every row
    else:
        rows = pooled_token(padding, request.pooling)[:, None]  # (B, 1)

    # The base output is a fresh tensor owned by this call: calibrated rows are written into it in place, so the
    # extra memory stays O(batch·heads·rows·L) per tile (for cls/last pooling, one row per text).
    output, weights = base()  # (B, L, H, D)
    items = torch.arange(batch, device=query.device)[:, None]  # (B, 1)
    tile = max(1, kernels.TILE_ELEMENTS // max(1, batch * heads * seq))
    for start in range(0, rows.shape[1], tile):
        row_tile = rows[:, start : start + tile]  # (B, T)
        allowed = _allowed_keys(attention_mask, row_tile, padding, causal, sliding_window)  # (B, T, L)
        isolated = isolated_positions & allowed  # (B, T, L)
        q_rows = query[items, :, row_tile].permute(0, 2, 1, 3)  # (B, H, T, D)
        original = output[items, row_tile].permute(0, 2, 1, 3)  # (B, H, T, D)
        new_rows = calibrated_rows(q_rows, key, value, allowed, isolated, scale, cal, original)
        output[items, row_tile] = new_rows.permute(0, 2, 1, 3).to(output.dtype)
    return output, weights


def isolated_keys(request: CalibrationRequest, device: torch.device | None = None) -> torch.Tensor:
    """(B, L) bool: every text's isolated keys I — the pooling-defined ones (cls → first real token; last → first and
    last; mean → none) and, with special_tokens="preserve", the special tokens. Every other real token is content."""
    padding = request.padding_mask.to(device=device, dtype=torch.bool)  # (B, L)
    seq = padding.shape[1]
    positions = torch.arange(seq, device=padding.device)[None, :]  # (1, L)
    isolated = torch.zeros_like(padding)
    if request.pooling != "mean":
        isolated = positions == pooled_token(padding, "cls")[:, None]
        if request.pooling == "last":
            isolated = isolated | (positions == pooled_token(padding, "last")[:, None])
    if request.calibration.special_tokens == "preserve" and request.special_mask is not None:
        isolated = isolated | request.special_mask.to(padding.device)
    return isolated & padding


def pooled_token(padding: torch.Tensor, pooling: Literal["cls", "last"]) -> torch.Tensor:
    """(B,) the position of the token whose vector "cls" (first real token) or "last" (last real token) pooling
    reads, from a (B, L) bool mask of real tokens; kept inside [0, L) for a row without real tokens."""
    positions = torch.arange(padding.shape[1], device=padding.device)
    if pooling == "cls":
        return torch.where(padding, positions, padding.shape[1]).amin(dim=1).clamp(max=padding.shape[1] - 1)
    return torch.where(padding, positions, -1).amax(dim=1).clamp(min=0)


def content_token_counts(request: CalibrationRequest) -> torch.Tensor:
    """(B,) every text's content keys |C| (real tokens that are not isolated): a text is calibrated only if this
    reaches `calibration.min_content_tokens`."""
    padding = request.padding_mask.to(dtype=torch.bool)
    return (padding & ~isolated_keys(request, padding.device)).sum(dim=1)


def _allowed_keys(
    attention_mask: torch.Tensor | None,
    rows: torch.Tensor,  # (B, T) query positions
    padding: torch.Tensor,  # (B, L)
    causal: bool,
    sliding_window: int | None,
) -> torch.Tensor:
    """(B, T, L) bool: the keys each row may attend to in this layer (padding, causal and window masks)."""
    batch, seq = padding.shape
    if attention_mask is not None and attention_mask.dim() == 4:
        mask = attention_mask
        if mask.dtype != torch.bool:
            mask = mask > torch.finfo(mask.dtype).min / 2  # additive float masks: 0 allowed, min/-inf blocked
        mask = mask.any(dim=1) if mask.shape[1] > 1 else mask[:, 0]  # (B|1, Lq, L)
        mask = mask.expand(batch, -1, -1)
        allowed = torch.gather(mask, 1, rows[:, :, None].expand(-1, -1, mask.shape[-1]))
        return allowed & padding[:, None, :]
    keys = torch.arange(seq, device=padding.device)[None, None, :]
    allowed = padding[:, None, :].expand(-1, rows.shape[1], -1)
    if causal:
        allowed = allowed & (keys <= rows[:, :, None])
    if sliding_window is not None:
        allowed = allowed & ((keys - rows[:, :, None]).abs() < int(sliding_window))
    return allowed


def _every_row_sees_padding_only(
    attention_mask: torch.Tensor | None,
    padding: torch.Tensor,
    causal: bool,
    sliding_window: int | None,
    request: CalibrationRequest,
) -> bool:
    """True when every real query row attends to exactly the real tokens (bidirectional, no window)."""
    if causal or sliding_window is not None:
        return False
    if attention_mask is None:
        return True
    if attention_mask.dim() != 4:
        return True  # 2-D masks (flash attention) carry padding only
    cached = request._pure_masks.get(id(attention_mask))
    if cached is not None and cached[0] is attention_mask:
        return cached[1]
    mask = (
        attention_mask
        if attention_mask.dtype == torch.bool
        else attention_mask > torch.finfo(attention_mask.dtype).min / 2
    )
    mask = mask.expand(padding.shape[0], -1, -1, -1)
    same = (mask == padding[:, None, None, :]) | ~padding[:, None, :, None]
    pure = bool(same.all())
    request._pure_masks[id(attention_mask)] = (attention_mask, pure)
    return pure
