"""Attention over one block of keys with its log-sum-exp: fused kernels where PyTorch has one, explicit tiles otherwise.

The calibration math (fair_retrieval.attention) needs, for a block of keys (a basket), both the attention output and
the log-sum-exp of the scores, so that basket masses are exact. PyTorch has fused kernels that return both:

- CPU: the flash-attention kernel (float32, float64), which takes a mask;
- CUDA: FlashAttention-2 (float16/bfloat16, no mask) and the memory-efficient kernel (takes a mask).

`attention_with_logsumexp` tries them best first (`kernels_for`) and falls back to explicit tiles of rows
(`explicit_attention_with_logsumexp`: one basket's (B, H, T, S) scores at a time, never L×L). A fused kernel that
raises once (an unsupported head size or GPU) is remembered in `BROKEN_KERNELS` and not tried again for that device
and dtype.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Literal

import torch

logger = logging.getLogger(__name__)

# Upper bound on the elements of one (batch, heads, rows, keys) score tile of the explicit paths.
TILE_ELEMENTS = 1 << 24


Kernel = Literal["cpu_flash", "cuda_flash", "cuda_efficient", "explicit"]
BROKEN_KERNELS: set[tuple[str, str, torch.dtype]] = set()  # (kernel, device type, dtype) that raised once


def kernels_for(query: torch.Tensor, masked: bool) -> list[Kernel]:
    """Fused kernels to try, best first, for these inputs; `explicit` (always correct) ends every list."""
    kernels: list[Kernel] = []
    if query.device.type == "cpu" and query.dtype in (torch.float32, torch.float64):
        kernels.append("cpu_flash")
    elif query.device.type == "cuda":
        half = query.dtype in (torch.float16, torch.bfloat16)
        if half and not masked and query.shape[-1] % 8 == 0 and query.shape[-1] <= 256:
            kernels.append("cuda_flash")  # FlashAttention-2 takes no mask, so only for baskets full in every text
        if query.dtype in (torch.float16, torch.bfloat16, torch.float32):
            kernels.append("cuda_efficient")
    usable = [k for k in kernels if (k, query.device.type, query.dtype) not in BROKEN_KERNELS]
    return [*usable, "explicit"]


def attention_with_logsumexp(
    query: torch.Tensor,  # (B, H, L, D)
    key: torch.Tensor,  # (B, H, S, D)
    value: torch.Tensor,  # (B, H, S, D)
    mask: torch.Tensor | None,  # (B, 1, 1, S) bool, True = attend; None = every key
    scale: float,
    kernel: Kernel | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention output (B, H, L, D) and the log-sum-exp of its scores (B, H, L) over S keys (S = one basket).

    Uses a fused kernel that returns both where PyTorch has one (CPU flash attention; on CUDA FlashAttention-2 for
    unmasked fp16/bf16 baskets, else the memory-efficient kernel, which takes a mask), else the explicit tiles: the
    scores of one basket, (B, H, T, S) in tiles of T rows, never L×L. A fused kernel that raises (an unsupported
    head size or GPU) is logged once and not tried again for that device and dtype. `kernel` forces one path.
    """
    candidates: list[Kernel] = [kernel] if kernel is not None else kernels_for(query, mask is not None)
    for name in candidates:
        if name == "explicit":
            return explicit_attention_with_logsumexp(query, key, value, mask, scale)
        try:
            return FUSED_KERNELS[name](query, key, value, mask, scale)
        except RuntimeError as error:
            if kernel is not None or isinstance(error, torch.OutOfMemoryError):
                raise  # a forced kernel, or memory (not the kernel) ran out
            BROKEN_KERNELS.add((name, query.device.type, query.dtype))
            logger.warning("Attention kernel %s failed (%s); using the next one for %s.", name, error, query.dtype)
    raise AssertionError("unreachable: 'explicit' ends every kernel list")


def _cpu_flash(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """PyTorch's CPU flash-attention kernel: output (B, H, L, D) and log-sum-exp (B, H, L)."""
    bias = None if mask is None else _additive_bias(mask, query.dtype)  # (B, 1, 1, S)
    output, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
        query, key, value, 0.0, False, attn_mask=bias, scale=scale
    )
    return output, lse


def _cuda_flash(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """FlashAttention-2 (fp16/bf16, no mask): output (B, H, L, D) and float32 log-sum-exp (B, H, L)."""
    if mask is not None:
        raise RuntimeError("FlashAttention takes no mask")
    result = torch.ops.aten._scaled_dot_product_flash_attention(query, key, value, 0.0, False, False, scale=scale)
    return result[0], result[1]


def _cuda_efficient(
    query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, mask: torch.Tensor | None, scale: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """The memory-efficient kernel: output (B, H, L, D) and float32 log-sum-exp (B, H, L).

    Its bias must have a 16-element-aligned row stride (so it is allocated padded and sliced, as SDPA itself does)
    and the full (B, H, L, S) shape (a broadcast view, no copy). Its log-sum-exp may come padded along L.
    """
    batch, heads, seq, _ = query.shape
    bias = None
    if mask is not None:
        width = mask.shape[-1]
        padded = torch.zeros(batch, 1, 1, -(-width // 16) * 16, dtype=query.dtype, device=query.device)
        padded[..., :width].masked_fill_(~mask, float("-inf"))
        bias = padded[..., :width].expand(batch, heads, seq, width)  # (B, H, L, S), stride 0 over H and L
    result = torch.ops.aten._scaled_dot_product_efficient_attention(
        query, key, value, bias, True, 0.0, False, scale=scale
    )
    return result[0], result[1][:, :, :seq]


FUSED_KERNELS: dict[str, Callable[..., tuple[torch.Tensor, torch.Tensor]]] = {
    "cpu_flash": _cpu_flash,
    "cuda_flash": _cuda_flash,
    "cuda_efficient": _cuda_efficient,
}


def _additive_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """0 where `mask` is True, −inf where False."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def explicit_attention_with_logsumexp(
    query: torch.Tensor,  # (B, H, L, D)
    key: torch.Tensor,  # (B, H, S, D)
    value: torch.Tensor,  # (B, H, S, D)
    mask: torch.Tensor | None,  # (B, 1, 1, S) bool
    scale: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The fallback: float32 scores of one basket in tiles of rows, (B, H, T, S) each, never L×L."""
    batch, heads, seq, _ = query.shape
    width = key.shape[2]
    rows = max(1, TILE_ELEMENTS // max(1, batch * heads * width))
    work = torch.float64 if query.dtype == torch.float64 else torch.float32
    keys, values = key.to(work).transpose(-1, -2), value.to(work)  # (B, H, D, S), (B, H, S, D)
    outputs, lses = [], []
    for start in range(0, seq, rows):
        scores = torch.matmul(query[:, :, start : start + rows].to(work), keys) * scale  # (B, H, T, S)
        if mask is not None:
            scores.masked_fill_(~mask, float("-inf"))
        lse = torch.logsumexp(scores, dim=-1)  # (B, H, T)
        outputs.append(torch.matmul(scores.sub_(lse[..., None]).exp_(), values).to(query.dtype))
        lses.append(lse)
    return torch.cat(outputs, dim=2), torch.cat(lses, dim=2)
