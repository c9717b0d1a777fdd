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
    models whose every row sees the same keys, `_calibrate_every_row_by_baskets` computes the same result for all
    rows with one fused attention call per basket plus the basket log-sum-exps.
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
    first_valid = torch.where(padding, positions, seq).amin(dim=1)  # (B,)
    last_valid = torch.where(padding, positions, -1).amax(dim=1)  # (B,)

    isolated_positions = _isolated_keys(request.pooling, padding, first_valid, last_valid)  # (B, 1, L)
    if cal.special_tokens == "preserve" and request.special_mask is not None:
        isolated_positions = isolated_positions | (request.special_mask.to(padding.device) & padding)[:, None, :]
    if request.pooling == "mean":
        if _every_row_sees_padding_only(attention_mask, padding, causal, sliding_window, request):
            # The basket outputs also give the plain output exactly, so the base attention is not run at all.
            content = padding & ~isolated_positions[:, 0]  # (B, L)
            if int(content.sum(dim=1).max().item()) < cal.basket_size:
                return base()  # no text in the batch is long enough to be calibrated
            blended = _calibrate_every_row_by_baskets(
                query, key, value, content, isolated_positions[:, 0], scale, cal
            )  # (B, L, H, D)
            return blended.to(query.dtype), None
        rows = positions.expand(batch, seq)  # (B, L): every row
    else:
        rows = (first_valid if request.pooling == "cls" else last_valid).clamp(0, seq - 1)[:, None]  # (B, 1)

    # The base output is a fresh tensor owned by this call: calibrated rows are written into it in place, so the
    # extra memory stays O(batch·heads·rows·L) per tile (for cls/last pooling, one row per text).
    output, weights = base()  # (B, L, H, D)
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
    return output, weights


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


def _calibrate_every_row_by_baskets(
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
    local output ô_b and log-sum-exp λ_b (B, H, L); the isolated keys' scores s_k are formed directly. From these,
    the row's full log-sum-exp is logsumexp(λ_b, s_k), so each basket's mass M_b = exp(λ_b − lse) and each isolated
    key's probability p_k = exp(s_k − lse) are exact, and p'·V = Σ_b share_b·ô_b + Σ_k t_k·v_k (renormalised if a
    basket's mass underflows to 0). The plain output p·V is Σ_b M_b·ô_b + Σ_k p_k·v_k from the same pieces, so
    the blend is one weighted sum of the ô_b and v_k; texts with fewer than B content keys get p·V. Returns the
    attention output in the model's layout, (B, L, H, D), float32 (float64 for float64 inputs).
    """
    batch, heads, seq, _ = query.shape
    basket = cal.basket_size
    work = torch.float64 if query.dtype == torch.float64 else torch.float32
    positions = torch.arange(seq, device=query.device)
    items = torch.arange(batch, device=query.device)[:, None]  # (B, 1)
    n_content = content.sum(dim=1)  # (B,)
    n_baskets = (n_content + basket - 1) // basket  # (B,)
    max_baskets = int(n_baskets.max().item())
    # Content positions in order, then the rest: the first n_content columns are the content keys.
    content_order = torch.sort(torch.where(content, positions, positions + seq), dim=1).indices  # (B, L)

    outputs, log_masses, sizes = [], [], []
    for b in range(max_baskets):
        slot = b * basket + torch.arange(basket, device=query.device)  # (Bsz,)
        in_basket = slot[None, :] < n_content[:, None]  # (B, Bsz)
        source = content_order[:, slot.clamp(max=seq - 1)]  # (B, Bsz)
        k_b = _repeat_kv(key[items, :, source].permute(0, 2, 1, 3), heads)  # (B, H, Bsz, D)
        v_b = _repeat_kv(value[items, :, source].permute(0, 2, 1, 3), heads)
        has_keys = in_basket.any(dim=1)  # (B,)
        mask = (in_basket | ~has_keys[:, None])[:, None, None, :]  # empty basket: attend anywhere, mass −inf below
        local, log_mass = _attention_with_logsumexp(query, k_b, v_b, mask, scale)  # (B,H,L,D), (B,H,L)
        outputs.append(local.to(work))
        log_masses.append(torch.where(has_keys[:, None, None], log_mass.to(work), float("-inf")))
        sizes.append(in_basket.sum(dim=1).to(work))  # (B,)

    # Isolated keys: their scores directly (|I| is a handful per text).
    n_isolated = isolated.sum(dim=1)  # (B,)
    max_isolated = int(n_isolated.max().item()) if isolated.numel() else 0
    isolated_order = torch.sort(torch.where(isolated, positions, positions + seq), dim=1).indices[:, :max_isolated]
    isolated_valid = torch.arange(max_isolated, device=query.device)[None, :] < n_isolated[:, None]  # (B, |I|)
    k_iso = _repeat_kv(key[items, :, isolated_order].permute(0, 2, 1, 3), heads).to(work)  # (B, H, |I|, D)
    v_iso = _repeat_kv(value[items, :, isolated_order].permute(0, 2, 1, 3), heads).to(work)
    iso_scores = torch.matmul(query.to(work), k_iso.transpose(-1, -2)) * scale  # (B, H, L, |I|)
    iso_scores = iso_scores.masked_fill(~isolated_valid[:, None, None, :], float("-inf"))

    stacked = torch.stack(log_masses, dim=-1)  # (B, H, L, n)
    lse = torch.logsumexp(torch.cat([stacked, iso_scores], dim=-1), dim=-1, keepdim=True)  # (B, H, L, 1)
    masses = torch.exp(stacked - lse)  # (B, H, L, n) M_b
    iso_probs = torch.exp(iso_scores - lse)  # (B, H, L, |I|) p_ik
    if cal.isolated == "preserve":
        t = iso_probs  # t_k = p_ik
    else:
        equal = 1.0 / (n_baskets + n_isolated).clamp(min=1).to(work)  # (B,) 1/(n + |I|)
        t = (equal[:, None] * isolated_valid)[:, None, None, :].expand_as(iso_scores)
    budget = 1.0 - t.sum(dim=-1, keepdim=True)  # (B, H, L, 1) R
    if cal.partial_basket == "equal":
        fraction = (1.0 / n_baskets.clamp(min=1).to(work))[:, None].expand(-1, max_baskets)  # (B, n)
    else:
        fraction = torch.stack(sizes, dim=-1) / n_content.clamp(min=1).to(work)[:, None]  # (B, n) |b|/|C|
    share = torch.where(masses > 0, budget * fraction[:, None, None, :], 0.0)  # (B, H, L, n)
    total = (share.sum(dim=-1, keepdim=True) + t.sum(dim=-1, keepdim=True)).clamp(min=torch.finfo(work).tiny)
    lam = cal.strength * (n_content >= basket).to(work)[:, None, None, None]  # (B, 1, 1, 1): λ, or 0 if too short
    basket_weights = lam * share / total + (1.0 - lam) * masses  # (B, H, L, n)
    isolated_weights = lam * t / total + (1.0 - lam) * iso_probs  # (B, H, L, |I|)
    out = torch.empty(batch, seq, heads, query.shape[-1], dtype=work, device=query.device)  # (B, L, H, D)
    view = out.transpose(1, 2)  # (B, H, L, D), written in place
    view.copy_(torch.matmul(isolated_weights, v_iso))
    for b, local in enumerate(outputs):
        view.addcmul_(basket_weights[..., b : b + 1], local)
    return out


def _attention_with_logsumexp(
    query: torch.Tensor,  # (B, H, L, D)
    key: torch.Tensor,  # (B, H, S, D)
    value: torch.Tensor,  # (B, H, S, D)
    mask: torch.Tensor,  # (B, 1, 1, S) bool
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output (B, H, L, D) and the log-sum-exp of its scores (B, H, L) over S keys (S = one basket).

    On CPU this is PyTorch's fused flash kernel, which returns both. Elsewhere (CUDA, MPS) the scores of one basket
    are formed explicitly: (B, H, L, S) with S = basket_size, in tiles of rows, never L×L.
    """
    if query.device.type == "cpu" and query.dtype in (torch.float32, torch.float64):
        op = getattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu", None)
        if op is not None:
            bias = torch.zeros(mask.shape, dtype=query.dtype, device=query.device).masked_fill_(~mask, float("-inf"))
            output, lse = op(query, key, value, 0.0, False, attn_mask=bias, scale=scale)
            return output, lse
    batch, heads, seq, _ = query.shape
    width = key.shape[2]
    rows = max(1, _TILE_ELEMENTS // max(1, batch * heads * width))
    outputs, lses = [], []
    for start in range(0, seq, rows):
        q = query[:, :, start : start + rows].float()
        scores = torch.matmul(q, key.float().transpose(-1, -2)) * scale  # (B, H, T, S)
        scores = scores.masked_fill(~mask, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)  # (B, H, T)
        outputs.append(torch.matmul(torch.exp(scores - lse[..., None]), value.float()))
        lses.append(lse)
    return torch.cat(outputs, dim=2), torch.cat(lses, dim=2)
