"""The attention engine: calibrated attention inside any transformers model that uses `ALL_ATTENTION_FUNCTIONS`.

How it plugs in
    `install(model)` switches the model to a registered attention function named ``fair_<base>`` (``fair_sdpa`` for
    the usual SDPA models). That function always computes the model's ordinary fused attention with the original
    implementation, and then — only while a calibrated request is active in *this* context (a `ContextVar`, so other
    threads and coroutines are unaffected) — replaces the outputs of the pooling rows in the calibrated layers.
    With no active request the model's outputs are bit-for-bit those of the base implementation.

The math (DESIGN.md §2)
    `calibrated_rows` is the definition: for a few query rows it forms the row's attention probabilities explicitly
    (O(heads·L) memory per row, never L×L), redistributes them over baskets and blends them. For mean pooling on
    models whose every row sees the same keys, `_mix_basket_outputs` computes the same result with one fused
    SDPA call per basket, because then the shares do not depend on the query row.
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

from fair_retrieval.calibration import Calibration

logger = logging.getLogger(__name__)

Pooling = Literal["cls", "mean", "last"]
POOLING_MODES: tuple[str, ...] = ("cls", "mean", "last")

_PREFIX = "fair_"
_REGISTER_LOCK = threading.Lock()
# Upper bound on the elements of one (batch, heads, rows, keys) score tile in the row-wise path.
_TILE_ELEMENTS = 1 << 24


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


class UnsupportedModelError(ValueError):
    """The model does not route attention through transformers' `ALL_ATTENTION_FUNCTIONS`."""


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
    return _layer_map(model, model_name)


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


def _layer_map(model: nn.Module, model_name: str) -> dict[int, int]:
    """Map every submodule of the i-th transformer layer to i, using the model's stack of layers."""
    num_layers = int(getattr(model.config, "num_hidden_layers", 0))
    for module in model.modules():
        if isinstance(module, nn.ModuleList) and len(module) == num_layers and num_layers > 0:
            mapping: dict[int, int] = {}
            for index, layer in enumerate(module):
                for sub in layer.modules():
                    mapping[id(sub)] = index
            return mapping
    raise UnsupportedModelError(
        f"{model_name}: could not find its {num_layers} transformer layers (an nn.ModuleList of that length)."
    )


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
        output, weights = fn(module, query, key, value, attention_mask, **kwargs)
        request = _ACTIVE.get()
        if request is None:
            return output, weights
        layer = request.layer_of_module.get(id(module), getattr(module, "layer_idx", None))
        if layer is None:
            return output, weights
        request.calls.add(int(layer))
        if int(layer) not in request.layers or request.calibration.strength == 0.0:
            return output, weights
        calibrated = _calibrate_layer(module, query, key, value, attention_mask, output, request, kwargs)
        return calibrated, weights

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
    output: torch.Tensor,  # (B, L, H, D), the base implementation's output
    request: CalibrationRequest,
    kwargs: dict[str, Any],
) -> torch.Tensor:
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
    first_valid = torch.where(padding, positions, seq).amin(dim=1)  # (B,)
    last_valid = torch.where(padding, positions, -1).amax(dim=1)  # (B,)

    isolated_positions = _isolated_keys(request.pooling, padding, first_valid, last_valid)  # (B, 1, L)
    if cal.special_tokens == "preserve" and request.special_mask is not None:
        isolated_positions = isolated_positions | (request.special_mask.to(padding.device) & padding)[:, None, :]
    if request.pooling == "mean":
        no_isolated = not bool(isolated_positions.any())
        if no_isolated and _every_row_sees_padding_only(attention_mask, padding, causal, sliding_window, request):
            original = output.transpose(1, 2)  # (B, H, L, D) o
            mixed = _mix_basket_outputs(query, key, value, padding, first_valid, scale, cal)  # (B, H, L, D)
            blended = cal.strength * mixed + (1.0 - cal.strength) * original.to(mixed.dtype)
            calibrated_item = (padding.sum(dim=1) >= cal.basket_size)[:, None, None, None]  # (B, 1, 1, 1)
            return torch.where(calibrated_item, blended.to(output.dtype), original).transpose(1, 2)
        rows = positions.expand(batch, seq)  # (B, L): every row
    else:
        rows = (first_valid if request.pooling == "cls" else last_valid).clamp(0, seq - 1)[:, None]  # (B, 1)

    # The base output is a fresh tensor owned by this call: calibrated rows are written into it in place, so the
    # extra memory stays O(batch·heads·rows·L) per tile (for cls/last pooling, one row per text).
    items = torch.arange(batch, device=query.device)[:, None]  # (B, 1)
    tile = max(1, _TILE_ELEMENTS // max(1, batch * heads * seq))
    for start in range(0, rows.shape[1], tile):
        row_tile = rows[:, start : start + tile]  # (B, T)
        allowed = _allowed_keys(attention_mask, row_tile, padding, causal, sliding_window)  # (B, T, L)
        isolated = isolated_positions & allowed  # (B, T, L)
        q_rows = query[items, :, row_tile].permute(0, 2, 1, 3)  # (B, H, T, D)
        original = output[items, row_tile].permute(0, 2, 1, 3)  # (B, H, T, D)
        new_rows = calibrated_rows(q_rows, key, value, allowed, isolated, scale, cal, original)
        output[items, row_tile] = new_rows.permute(0, 2, 1, 3).to(output.dtype)
    return output


def _repeat_kv(states: torch.Tensor, heads: int) -> torch.Tensor:
    """(B, Hkv, L', D) → (B, H, L', D) for grouped-query attention (used on basket slices only); no-op if Hkv == H."""
    kv_heads = states.shape[1]
    if kv_heads == heads:
        return states
    return states.repeat_interleave(heads // kv_heads, dim=1)


def _isolated_keys(
    pooling: Pooling, padding: torch.Tensor, first_valid: torch.Tensor, last_valid: torch.Tensor
) -> torch.Tensor:
    """(B, 1, L) bool: the pooling-defined isolated keys I (cls → first; last → first and last; mean → none)."""
    positions = torch.arange(padding.shape[1], device=padding.device)[None, :]
    if pooling == "mean":
        return torch.zeros_like(padding)[:, None, :]
    isolated = positions == first_valid[:, None]
    if pooling == "last":
        isolated = isolated | (positions == last_valid[:, None])
    return (isolated & padding)[:, None, :]


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
    """Calibrated attention outputs of a few query rows, exactly as DESIGN.md §2 defines them.

    Per row i: p_ij = softmax over the allowed keys; content keys C = allowed \\ I cut into consecutive baskets of
    B; isolated keys get t_k (their own p_ik, or 1/(n+|I|)); every basket gets its share of R = 1 − Σ t_k and
    keeps its internal proportions; p'' = λ·p' + (1 − λ)·p; out_i = p'' · V. Rows with fewer than B content keys
    keep `original`. Memory: a few (B, H, T, L) float32 buffers, updated in place — never the L×L matrix.
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
    n_baskets = (n_content + basket - 1) // basket  # (B, T)
    max_baskets = int(n_baskets.max().item()) if n_baskets.numel() else 0
    # Basket id per key; isolated/blocked keys go to a dump slot `max_baskets` whose share is 0.
    basket_id = torch.where(content, (content.cumsum(dim=-1) - 1).clamp_(min=0) // basket, max_baskets)  # (B,T,L)
    slots = max_baskets + 1
    index = basket_id[:, None].expand(batch, heads, rows, seq)  # (B, H, T, L), a view
    mass = torch.zeros(batch, heads, rows, slots, dtype=work, device=probs.device)
    mass.scatter_add_(-1, index, probs)  # (B, H, T, n+1) Σ_{j∈b} p_ij (slot n collects I and blocked keys)
    size = torch.zeros(batch, rows, slots, dtype=work, device=probs.device)
    size.scatter_add_(-1, basket_id, content.to(work))  # (B, T, n+1) |b|

    # Isolated mass t_k and the content budget R = 1 − Σ t_k.
    n_isolated = isolated.sum(dim=-1).to(work)  # (B, T)
    if cal.isolated == "preserve":
        budget = 1.0 - (probs * isolated[:, None]).sum(dim=-1)  # (B, H, T): t_k = p_ik
        equal_t = None
    else:
        equal_t = 1.0 / (n_baskets.to(work) + n_isolated).clamp(min=1.0)  # (B, T): t_k = 1/(n + |I|)
        budget = (1.0 - equal_t * n_isolated)[:, None].expand(batch, heads, rows)  # (B, H, T)

    # Basket shares: R/n each, or R·|b|/|C|; a basket with zero mass stays zero.
    if cal.partial_basket == "equal":
        fraction = (1.0 / n_baskets.clamp(min=1).to(work))[:, :, None].expand(-1, -1, slots)  # (B, T, n+1)
    else:
        fraction = size / n_content.clamp(min=1).to(work)[:, :, None]  # (B, T, n+1)
    share = budget[..., None] * fraction[:, None]  # (B, H, T, n+1)
    share = torch.where(mass > 0, share, torch.zeros_like(share))
    share[..., max_baskets] = 0.0
    factor = (share / mass.clamp(min=tiny)).gather(-1, index.reshape(batch, heads, rows, seq))  # (B,H,T,L)

    # p' = share_b·p_ij/Σ_b p + t_k on I, renormalised; then p'' = λ·p' + (1 − λ)·p, all in place.
    calibrated = factor.mul_(probs)  # (B, H, T, L)
    if equal_t is None:
        calibrated.add_(probs * isolated[:, None])
    else:
        calibrated.add_((equal_t[:, :, None] * isolated)[:, None])
    calibrated.div_(calibrated.sum(dim=-1, keepdim=True).clamp_(min=tiny))
    calibrated.mul_(cal.strength).add_(probs, alpha=1.0 - cal.strength)
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


def _mix_basket_outputs(
    query: torch.Tensor,  # (B, H, L, D)
    key: torch.Tensor,  # (B, Hkv, L, D)
    value: torch.Tensor,  # (B, Hkv, L, D)
    padding: torch.Tensor,  # (B, L) bool
    first_valid: torch.Tensor,  # (B,)
    scale: float,
    cal: Calibration,
) -> torch.Tensor:
    """Σ_b share_b·ô_b for every row at once: the fully calibrated output for mean pooling, padding-only masks.

    With mean pooling I = ∅, so R = 1 and the shares (1/n or |b|/|C|) are the same for every row: the calibrated
    output is a fixed mix of basket-local attention outputs ô_b, each one fused SDPA call over basket b's keys.
    Baskets start at each text's first real token (left or right padding). Returns (B, H, L, D) in float32.
    """
    batch, heads, seq, _ = query.shape
    basket = cal.basket_size
    n_valid = padding.sum(dim=1)  # (B,)
    n_baskets = (n_valid + basket - 1) // basket  # (B,)
    offsets = torch.arange(basket, device=query.device)  # (Bsz,)
    items = torch.arange(batch, device=query.device)[:, None]  # (B, 1)
    aligned = bool((first_valid == 0).all())
    mixed = torch.zeros_like(query, dtype=torch.float32 if query.dtype != torch.float64 else query.dtype)
    for b in range(int(n_baskets.max().item())):
        slot = b * basket + offsets  # (Bsz,) position of each slot among the real tokens
        in_basket = slot[None, :] < n_valid[:, None]  # (B, Bsz)
        if aligned and (b + 1) * basket <= seq:
            k_b, v_b = key[:, :, b * basket : (b + 1) * basket], value[:, :, b * basket : (b + 1) * basket]
        else:
            source = (first_valid[:, None] + slot[None, :]).clamp(max=seq - 1)  # (B, Bsz)
            k_b = key[items, :, source].permute(0, 2, 1, 3)  # (B, Hkv, Bsz, D)
            v_b = value[items, :, source].permute(0, 2, 1, 3)
            in_basket = in_basket & (first_valid[:, None] + slot[None, :] < seq)
        k_b, v_b = _repeat_kv(k_b, heads), _repeat_kv(v_b, heads)
        has_keys = in_basket.any(dim=1)  # (B,) items whose basket b is non-empty
        mask = in_basket | ~has_keys[:, None]  # empty baskets: attend anywhere, weight 0 below (avoids NaN)
        local = torch.nn.functional.scaled_dot_product_attention(
            query, k_b, v_b, attn_mask=mask[:, None, None, :], scale=scale
        )  # (B, H, L, D) ô_b for every row
        if cal.partial_basket == "equal":
            weight = has_keys.to(mixed.dtype) / n_baskets.clamp(min=1).to(mixed.dtype)  # (B,)
        else:
            weight = in_basket.sum(dim=1).to(mixed.dtype) / n_valid.clamp(min=1).to(mixed.dtype)  # (B,)
        mixed += weight[:, None, None, None] * local.to(mixed.dtype)
    return mixed
