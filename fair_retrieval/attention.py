"""The attention engine: calibrated attention inside any transformers model that uses `ALL_ATTENTION_FUNCTIONS`.

How it plugs in
    `install(model)` switches the model to a registered attention function named ``fair_<base>`` (``fair_sdpa`` for
    the usual SDPA models). That function always computes the model's ordinary fused attention with the original
    implementation, and then — only while a calibrated request is active in *this* context (a `ContextVar`, so other
    threads and coroutines are unaffected) — replaces the outputs of the pooling rows in the calibrated layers.
    With no active request the model's outputs are bit-for-bit those of the base implementation.

The math (docs/method.md)
    `basket_blend` is the one definition of the redistribution: from a row's basket masses and its isolated keys'
    attention it gives every basket's and isolated key's blended mass. `calibrated_rows` applies it to a few query
    rows whose attention probabilities it forms explicitly (O(heads·L) memory per row, never L×L). For mean pooling
    on models whose every row sees the same keys, `calibrate_every_row` applies it to all rows from every basket's
    attention output and log-sum-exp, all baskets of a layer in one fused-kernel call (fair_retrieval.kernels:
    PyTorch's CPU flash kernel; on CUDA FlashAttention-2 or the memory-efficient kernel; explicit tiles only as the
    fallback).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Literal

import torch
from torch import nn

from fair_retrieval import kernels
from fair_retrieval.calibration import Calibration
from fair_retrieval.layers import UnsupportedModelError, layer_of_module

logger = logging.getLogger(__name__)

Pooling = Literal["cls", "mean", "last"]
POOLING_MODES: tuple[str, ...] = ("cls", "mean", "last")

_PREFIX = "fair_"
_REGISTER_LOCK = threading.Lock()
# Mean pooling keeps at most this many basket outputs (B, H, L, D) before folding them in as they come.
HELD_BASKETS = 16


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


# ----------------------------------------------------------------------------------------------------------------
# The math
# ----------------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Blend:
    """Blended attention p'' = λ·p' + (1 − λ)·p of one row, per basket and for its isolated keys."""

    baskets: torch.Tensor  # (..., n) p''_b, the blended mass of each basket (key j of b gets p''_b·p_ij / M_b)
    own: torch.Tensor  # (..., 1) every isolated key k gets p''_k = own·p_ik + flat
    flat: torch.Tensor  # (..., 1)
    share_scale: torch.Tensor  # (..., 1) baskets = share_scale·fraction_b·present_b + mass_scale·M_b
    mass_scale: torch.Tensor  # (..., 1)


def basket_blend(
    masses: torch.Tensor,  # (..., n) M_b = Σ_{j∈b} p_ij, each basket's share of the row's attention (0: no keys)
    iso_mass: torch.Tensor,  # (..., 1) Σ_{k∈I} p_ik, the row's attention on its isolated keys
    n_isolated: torch.Tensor,  # (...), broadcastable: |I|
    sizes: torch.Tensor,  # (..., n), broadcastable: |b|, the number of content keys in each basket (0: no basket)
    n_content: torch.Tensor,  # (...), broadcastable: |C|, the row's number of content keys
    cal: Calibration,
    present: torch.Tensor | None = None,  # (..., n) bool, broadcastable: baskets that get a share (default M_b > 0)
) -> Blend:
    """Blended attention mass of every basket and of the isolated keys of a row (docs/method.md).

    The one definition of the redistribution, used by both engine paths: isolated keys get t_k (their own p_ik, or
    1/(n + |I|)); every basket gets its share of R = 1 − Σ t_k (R/n each, or R·|b|/|C|), 0 if its mass is 0; p' is
    renormalised to sum to 1; p'' = λ(n)·p' + (1 − λ(n))·p, with λ(n) = 0 for rows with fewer than N·B content
    keys (N = min_full_baskets) and rising over `strength_ramp` tokens above that (`Calibration.strength_at`).
    Only the basket masses and the isolated keys' total are needed, so the caller may get them from explicit
    probabilities or from log-sum-exps. A basket gets a share only if `present` (by default: if its mass is > 0,
    since its keys' proportions p_ij / M_b are needed; the log-sum-exp path, which never divides by M_b, passes
    "has keys").
    """
    work = masses.dtype
    n_baskets = (n_content + cal.basket_size - 1) // cal.basket_size  # (...)
    above = (n_content - cal.min_content_tokens + 1).to(work)  # (...) content keys above the bar, + 1
    ramp = (above / cal.strength_ramp).clamp(max=1.0) if cal.strength_ramp else torch.ones_like(above)
    lam = (cal.strength * ramp * (above > 0).to(work))[..., None]  # (..., 1) λ(n), 0 below the bar (strength_at)
    if cal.isolated == "preserve":
        t_each = None  # t_k = p_ik
        t_total = iso_mass  # (..., 1)
    else:
        t_each = (1.0 / (n_baskets + n_isolated).clamp(min=1).to(work))[..., None]  # (..., 1) t_k = 1/(n + |I|)
        t_total = t_each * n_isolated.to(work)[..., None]
    fraction = basket_fraction(sizes, n_content, cal, work)  # (..., n)
    share = torch.where(masses > 0 if present is None else present, (1.0 - t_total) * fraction, 0.0)  # R·fraction
    total = (share.sum(dim=-1, keepdim=True) + t_total).clamp(min=torch.finfo(work).tiny)  # (..., 1) Σ p'
    baskets = lam * share / total + (1.0 - lam) * masses
    share_scale, mass_scale = lam * (1.0 - t_total) / total, (1.0 - lam).expand_as(total)
    if t_each is None:
        return Blend(baskets, lam / total + (1.0 - lam), torch.zeros_like(total), share_scale, mass_scale)
    return Blend(baskets, mass_scale, lam * t_each / total, share_scale, mass_scale)


def basket_fraction(sizes: torch.Tensor, n_content: torch.Tensor, cal: Calibration, dtype: torch.dtype) -> torch.Tensor:
    """(..., n) each basket's fraction of the content budget R: 1/n (partial_basket="equal") or |b|/|C|; 0 for slots
    that hold no basket (|b| = 0)."""
    n_baskets = (n_content + cal.basket_size - 1) // cal.basket_size
    if cal.partial_basket == "equal":
        return (sizes > 0).to(dtype) / n_baskets.clamp(min=1).to(dtype)[..., None]
    return sizes.to(dtype) / n_content.clamp(min=1).to(dtype)[..., None]


def calibrated_rows(
    q_rows: torch.Tensor,  # (B, H, T, D) the calibrated query rows
    key: torch.Tensor,  # (B, Hkv, L, D), Hkv divides H (grouped-query attention)
    value: torch.Tensor,  # (B, Hkv, L, D)
    allowed: torch.Tensor,  # (B, T, L) bool, keys each row attends to (its valid keys)
    isolated: torch.Tensor,  # (B, T, L) bool, the isolated keys I (subset of allowed)
    scale: float,
    cal: Calibration,
    original: torch.Tensor,  # (B, H, T, D) the base implementation's output for these rows
) -> torch.Tensor:
    """Calibrated attention outputs of a few query rows, exactly as docs/method.md defines them.

    Per row i: p_ij = softmax over the allowed keys; content keys C = allowed \\ I cut into consecutive baskets of
    B; the basket masses Σ_{j∈b} p_ij go through `basket_blend`, which gives each basket's and each isolated key's
    blended mass; out_i = p'' · V. Rows with fewer than B content keys keep `original`. Memory: a few (B, H, T, L)
    float32 buffers, updated in place — never the L×L matrix.
    """
    batch, heads, rows, _ = q_rows.shape
    kv_heads, seq = key.shape[1], key.shape[2]
    group = heads // kv_heads
    basket = cal.basket_size
    work = torch.float64 if q_rows.dtype == torch.float64 else torch.float32
    tiny = torch.finfo(work).tiny

    # p: attention probabilities of the rows over their allowed keys.
    probs = _row_scores(q_rows, key, scale).to(work)  # (B, H, T, L)
    probs.masked_fill_(~allowed[:, None], float("-inf"))
    probs = torch.softmax(probs, dim=-1).nan_to_num_(0.0)  # (B, H, T, L); a row with no key → 0

    # Basket plan: the rank of each content key among its row's content keys decides its basket.
    content = allowed & ~isolated  # (B, T, L)
    n_content = content.sum(dim=-1)  # (B, T)
    max_baskets = int(((n_content + basket - 1) // basket).max().item()) if n_content.numel() else 0
    # Basket id per key; isolated/blocked keys go to a dump slot `max_baskets` (size 0, so its blended mass is
    # zeroed below and isolated keys get theirs from `basket_blend` directly).
    basket_id = torch.where(content, (content.cumsum(dim=-1) - 1).clamp_(min=0) // basket, max_baskets)  # (B,T,L)
    slots = max_baskets + 1
    index = basket_id[:, None].expand(batch, heads, rows, seq)  # (B, H, T, L), a view
    mass = torch.zeros(batch, heads, rows, slots, dtype=work, device=probs.device)
    mass.scatter_add_(-1, index, probs)  # (B, H, T, n+1) M_b (slot n collects I and blocked keys)
    size = torch.zeros(batch, rows, slots, dtype=work, device=probs.device)
    size.scatter_add_(-1, basket_id, content.to(work))  # (B, T, n+1) |b|

    iso_mask = isolated[:, None]  # (B, 1, T, L)
    iso_mass = (probs * iso_mask).sum(dim=-1, keepdim=True)  # (B, H, T, 1) Σ_{k∈I} p_ik
    blend = basket_blend(mass, iso_mass, isolated.sum(dim=-1)[:, None], size[:, None], n_content[:, None], cal)
    blend.baskets[..., max_baskets] = 0.0  # (B, H, T, n+1) p''_b; the dump slot's isolated keys are set below

    # p''_ij = p''_b · p_ij / M_b on content keys; own·p_ik + flat on isolated keys; in place.
    factor = (blend.baskets / mass.clamp(min=tiny)).gather(-1, index.reshape(batch, heads, rows, seq))  # (B,H,T,L)
    factor = torch.where(iso_mask, blend.own, factor)
    calibrated = factor.mul_(probs).add_(iso_mask * blend.flat)  # (B, H, T, L)
    del probs

    out = _rows_times_values(calibrated, value, group)  # (B, H, T, D)
    calibrate = (n_content >= basket)[:, None, :, None]  # (B, 1, T, 1)
    return torch.where(calibrate, out.to(original.dtype), original)


def _row_scores(q_rows: torch.Tensor, key: torch.Tensor, scale: float) -> torch.Tensor:
    """(B, H, T, L) scaled scores q·kᵀ, one text at a time so K (a strided view) is never copied."""
    batch, heads, rows, head_dim = q_rows.shape
    kv_heads, seq = key.shape[1], key.shape[2]
    grouped = q_rows.reshape(batch, kv_heads, (heads // kv_heads) * rows, head_dim)  # (B, Hkv, G·T, D)
    scores = torch.empty(batch, kv_heads, grouped.shape[2], seq, dtype=q_rows.dtype, device=q_rows.device)
    for item in range(batch):
        torch.matmul(grouped[item], key[item].transpose(-1, -2), out=scores[item])  # (Hkv, G·T, L)
    return scores.mul_(scale).view(batch, heads, rows, seq)


def _rows_times_values(weights: torch.Tensor, value: torch.Tensor, group: int) -> torch.Tensor:
    """(B, H, T, D) = weights (B, H, T, L) · V (B, Hkv, L, D), one text at a time so V is never copied."""
    batch, heads, rows, seq = weights.shape
    kv_heads, head_dim = value.shape[1], value.shape[3]
    grouped = weights.to(value.dtype).reshape(batch, kv_heads, group * rows, seq)  # (B, Hkv, G·T, L)
    out = torch.empty(batch, kv_heads, group * rows, head_dim, dtype=value.dtype, device=value.device)
    for item in range(batch):
        torch.matmul(grouped[item], value[item], out=out[item])  # (Hkv, G·T, D)
    return out.view(batch, heads, rows, head_dim)


def calibrate_every_row(
    query: torch.Tensor,  # (B, H, L, D)
    key: torch.Tensor,  # (B, Hkv, L, D)
    value: torch.Tensor,  # (B, Hkv, L, D)
    content: torch.Tensor,  # (B, L) bool, content keys C (real tokens that are not isolated)
    isolated: torch.Tensor,  # (B, L) bool, isolated keys I (e.g. special tokens with special_tokens="preserve")
    scale: float,
    cal: Calibration,
) -> torch.Tensor:
    """(λ·p' + (1 − λ)·p)·V for every row at once (mean pooling, all rows see all real tokens), never L×L.

    Equivalent to `calibrated_rows` on every row. Each basket b of content keys is attended to alone, giving its
    local output ô_b and log-sum-exp λ_b (B, H, L) — all baskets in one fused-kernel call (`kernels.attention_per_
    block`; a second call for a last basket narrower than the others); the isolated keys' scores s_k are one
    matmul. The row's full log-sum-exp is logsumexp(λ_b, s_k), so each basket's mass M_b = exp(λ_b − lse) and each
    isolated key's probability p_k = exp(s_k − lse) are exact; `basket_blend` turns them into blended masses, and the
    output is Σ_b p''_b·ô_b + Σ_k p''_k·v_k (the plain output p·V is the same sum with the masses, which is why the
    base attention need not run). Returns the attention output in the model's layout, (B, L, H, D), float32
    (float64 for float64 inputs).
    """
    batch, heads, seq, head_dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads  # G query heads per key head
    basket = cal.basket_size
    work = torch.float64 if query.dtype == torch.float64 else torch.float32
    n_content = content.sum(dim=1)  # (B,)
    max_baskets = int(((n_content + basket - 1) // basket).max().item())
    rows = query.contiguous()  # (B, H, L, D): the folded kernel call repeats it per basket as a stride-0 view
    run_k, run_v = kernels.content_runs(key, value, content, n_content, max_baskets * basket)  # (B·Hkv,n·B,D)
    sizes = (n_content[:, None] - basket * torch.arange(max_baskets, device=query.device)).clamp(0, basket)  # (B,n)
    present = sizes > 0  # (B, n) baskets with keys

    # Up to HELD_BASKETS basket outputs are kept and summed once their weights are known; beyond that (long
    # texts) they are folded in call by call, so memory stays a few (B, H, L, D) buffers: the calibrated part as
    # A = Σ_b fraction_b·ô_b and the plain part as P = Σ_b exp(λ_b − m)·ô_b with a running max m (online softmax).
    online = max_baskets > HELD_BASKETS
    grouped = (batch, kv_heads, group, seq)  # a (B, H, L) quantity seen per key head: (B, Hkv, G, L)
    if online:
        fraction = basket_fraction(sizes, n_content, cal, work)  # (B, n)
        calibrated_sum = torch.zeros(*grouped, head_dim, dtype=work, device=query.device)  # A (B, Hkv, G, L, D)
        plain_sum = torch.zeros_like(calibrated_sum)  # P
        running_max = torch.full((*grouped, 1), -1e30, dtype=work, device=query.device)  # m (B, Hkv, G, L, 1)
    outputs, log_masses = [], []  # per call: (c, B, Hkv, G, L, D) basket outputs; (B, H, L, c) log-sum-exps
    for first, count, width in kernels.block_calls(max_baskets, int(n_content.max().item()), basket, HELD_BASKETS):
        k_blocks, v_blocks = (kernels.block_views(run, batch, basket, first, count, width) for run in (run_k, run_v))
        mask = kernels.block_mask(n_content, basket, first, count, width)  # (c, B, S) or None
        local, log_mass = kernels.attention_per_block(rows, k_blocks, v_blocks, mask, scale)
        log_mass = log_mass.to(work).reshape(count, batch, heads, seq).permute(1, 2, 3, 0)  # (B, H, L, c)
        log_masses.append(log_mass.masked_fill(~present[:, None, None, first : first + count], float("-inf")))
        if not online:
            outputs.append(local)
            continue
        for j in range(count):
            b = first + j
            calibrated_sum.addcmul_(fraction[:, b, None, None, None, None], local[j])
            log_b = log_masses[-1][..., j].reshape(*grouped, 1)  # (B, Hkv, G, L, 1)
            new_max = torch.maximum(running_max, log_b)
            plain_sum.mul_(torch.exp(running_max - new_max)).addcmul_(torch.exp(log_b - new_max), local[j])
            running_max = new_max

    # Isolated keys: their scores directly, one matmul with |I| columns (|I| is a handful per text).
    n_isolated = isolated.sum(dim=1)  # (B,)
    max_isolated = int(n_isolated.max().item()) if isolated.numel() else 0
    positions = torch.arange(seq, device=query.device)
    order = torch.sort(torch.where(isolated, positions, positions + seq), dim=1).indices[:, :max_isolated]  # (B,|I|)
    valid = torch.arange(max_isolated, device=query.device)[None, :] < n_isolated[:, None]  # (B, |I|)
    items = torch.arange(batch, device=query.device)[:, None]  # (B, 1)
    k_iso = key[items, :, order].permute(0, 2, 3, 1)  # (B, Hkv, D, |I|)
    v_iso = value[items, :, order].permute(0, 2, 1, 3).to(work)  # (B, Hkv, |I|, D)
    iso_scores = torch.matmul(rows.view(batch, kv_heads, group * seq, head_dim), k_iso)  # (B, Hkv, G·L, |I|) q·k_k
    iso_scores = iso_scores.to(work).view(batch, heads, seq, max_isolated).mul_(scale)  # (B, H, L, |I|)
    iso_scores.masked_fill_(~valid[:, None, None, :], float("-inf"))

    # Exact masses from the log-sum-exps, then the one blend.
    stacked = torch.cat([*log_masses, iso_scores], dim=-1)  # (B, H, L, n+|I|) log M_b + lse, s_k
    lse = torch.logsumexp(stacked, dim=-1, keepdim=True)  # (B, H, L, 1)
    stacked = stacked.sub_(lse).exp_()  # (B, H, L, n+|I|) M_b, then p_k
    masses, iso_probs = stacked[..., :max_baskets], stacked[..., max_baskets:]
    iso_mass = iso_probs.sum(dim=-1, keepdim=True)  # (B, H, L, 1) Σ_k p_k
    blend = basket_blend(
        masses,
        iso_mass,
        n_isolated[:, None, None],
        sizes[:, None, None, :],
        n_content[:, None, None],
        cal,
        present[:, None, None, :],
    )

    # Σ_b p''_b·ô_b + Σ_k p''_k·v_k, accumulated per key head (B, Hkv, G, L, D) in the (B, L, H, D) memory layout
    # the caller wants: the isolated keys first (one matmul), then one pass per basket output.
    out = torch.empty(batch, seq, heads, head_dim, dtype=work, device=query.device)  # (B, L, H, D)
    view = out.transpose(1, 2).view(*grouped, head_dim)  # (B, Hkv, G, L, D)
    if max_isolated:
        iso_weights = (blend.own * iso_probs + blend.flat) * valid[:, None, None, :].to(work)  # (B, H, L, |I|) p''_k
        iso_weights = iso_weights.view(batch, kv_heads, group * seq, max_isolated)  # (B, Hkv, G·L, |I|)
        view.copy_(torch.matmul(iso_weights, v_iso).view(*grouped, head_dim))  # unused slots have weight 0
    else:
        view.zero_()
    weights = blend.baskets.reshape(*grouped, max_baskets)  # (B, Hkv, G, L, n) p''_b
    for b, local in enumerate(basket_output for call in outputs for basket_output in call):  # (B, Hkv, G, L, D)
        view.addcmul_(weights[..., b : b + 1], local)
    if online:  # Σ_b p''_b·ô_b = share_scale·A + mass_scale·exp(m − lse)·P
        share_scale, mass_scale = (
            factor.expand_as(lse).reshape(*grouped, 1) for factor in (blend.share_scale, blend.mass_scale)
        )
        view.addcmul_(share_scale, calibrated_sum)
        view.addcmul_(mass_scale * torch.exp(running_max - lse.view(*grouped, 1)), plain_sum)
    return out
