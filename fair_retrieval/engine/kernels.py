"""Attention over blocks of keys with its log-sum-exp: fused kernels where PyTorch has one, explicit tiles otherwise.

The calibration math (fair_retrieval.engine.attention) needs, for every block of keys (a basket), both the attention
output and the log-sum-exp of the scores, so that basket masses are exact. `attention_per_block` computes all blocks of
a layer in one kernel call: the blocks are folded into the kernel's batch dimension (laid out by `content_runs`,
`block_calls`, `block_views` and `block_mask`), the query repeated over them as a stride-0 view. PyTorch has fused
kernels that return both output and log-sum-exp:

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


# ----------------------------------------------------------------------------------------------------------------
# Blocks of keys (the calibration's baskets) laid out for one kernel call
# ----------------------------------------------------------------------------------------------------------------


def content_runs(
    key: torch.Tensor,  # (B, Hkv, L, D)
    value: torch.Tensor,  # (B, Hkv, L, D)
    content: torch.Tensor,  # (B, L) bool, the keys to cut into blocks
    n_content: torch.Tensor,  # (B,) content.sum(1)
    width: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every text's content keys and values in order, one contiguous (B·Hkv, width, D) copy each: slot s of text i's
    head h is its s-th content key (slots past n_content[i] hold other keys or zeros; callers mask them).

    Contiguous, so that the blocks of every (text, head) are views of one buffer that a single kernel call reads
    (`block_views`). When every text's content is the same run of positions from one start (right padding, with or
    without isolated [CLS]/[SEP] around it) this copies a slice of K and V; otherwise it gathers.
    """
    batch, kv_heads, seq, head_dim = key.shape
    positions = torch.arange(seq, device=content.device)
    first = torch.where(content, positions, seq).amin(dim=1)  # (B,)
    last = torch.where(content, positions, -1).amax(dim=1)  # (B,)
    start = int(first[0].item())
    one_run = bool(((last - first + 1 == n_content) & (first == start)).all())
    order = None if one_run else torch.sort(torch.where(content, positions, positions + seq), dim=1).indices
    runs = []
    for states in (key, value):
        if order is None:
            source = states[:, :, start : start + width]  # (B, Hkv, ≤ W, D)
        else:
            source = states.gather(2, order[:, None, :width, None].expand(-1, kv_heads, -1, head_dim))
        run = states.new_empty(batch, kv_heads, width, head_dim)
        run[:, :, : source.shape[2]] = source
        run[:, :, source.shape[2] :] = 0.0  # past the sequence: masked, but must not be NaN
        runs.append(run.view(batch * kv_heads, width, head_dim))
    return runs[0], runs[1]


def block_calls(blocks: int, longest: int, size: int, held: int) -> list[tuple[int, int, int]]:
    """The kernel calls for `blocks` blocks of `size` keys, as (first block, blocks, key slots each): one call per
    `held` blocks; a last block that even the longest text (`longest` keys) does not fill gets a call of its own, as
    wide as that text needs (padding it to `size` in the same call was measured slower), unless it is alone."""
    last_width = longest - (blocks - 1) * size  # 1..size
    calls = []
    for first in range(0, blocks, held):
        count = min(held, blocks - first)
        if first + count == blocks and last_width < size:
            if count > 1:
                calls.append((first, count - 1, size))
            calls.append((blocks - 1, 1, last_width))
        else:
            calls.append((first, count, size))
    return calls


def block_views(run: torch.Tensor, batch: int, size: int, first: int, count: int, width: int) -> torch.Tensor:
    """Blocks first … first+count−1 of a `content_runs` buffer (B·Hkv, W, D) as a view (c, B, Hkv, S = width, D)."""
    start = first * size
    if count == 1:
        blocks = run[None, :, start : start + width]  # (1, B·Hkv, S, D)
    else:
        blocks = run[:, start : start + count * size].unflatten(1, (count, size)).transpose(0, 1)  # (c, B·Hkv, S, D)
    return blocks.unflatten(1, (batch, -1))


def block_mask(n_content: torch.Tensor, size: int, first: int, count: int, width: int) -> torch.Tensor | None:
    """(c, B, S) bool: slot s of block first+k holds a content key of text i; None when every slot does. A text with
    no key in a block attends to all its slots (callers give that block no mass), so that no row is empty."""
    device = n_content.device
    slots = size * (first + torch.arange(count, device=device))[:, None, None] + torch.arange(width, device=device)
    in_block = slots < n_content[None, :, None]  # (c, B, S); slots (c, 1, S): each slot's rank among the content
    if bool(in_block.all()):
        return None
    return in_block | ~in_block.any(dim=2, keepdim=True)


def attention_per_block(
    query: torch.Tensor,  # (B, H, L, D)
    keys: torch.Tensor,  # (c, B, Hkv, S, D) c blocks of S keys per text; Hkv divides H (grouped-query attention)
    values: torch.Tensor,  # (c, B, Hkv, S, D)
    mask: torch.Tensor | None,  # (c, B, S) bool, True = attend; None = every key
    scale: float,
    kernel: Kernel | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Every query row attended to each of c blocks of keys alone, in one kernel call: the outputs
    (c, B, Hkv, G, L, D) and the log-sum-exps (c, B, Hkv, G, L), with G = H / Hkv query heads per key head.

    The blocks are the kernel's batch and the (text, key head) pairs its heads: entry (k, i·Hkv + h) attends the G·L
    query rows of text i that share key head h (stacked along the rows, which is exact, since rows are independent)
    to block k of that text. The query is made contiguous once and repeated over the blocks as a stride-0 view, so
    a layer pays one call whatever its number of blocks, and nothing L×L is formed. `keys` and `values` are best
    `block_views` of `content_runs` buffers: folding them then copies nothing.
    """
    batch, heads, seq, head_dim = query.shape
    blocks, _, kv_heads, width, _ = keys.shape
    group = heads // kv_heads
    rows = query.contiguous().view(1, batch * kv_heads, group * seq, head_dim).expand(blocks, -1, -1, -1)
    folded_mask = None  # (c, B·Hkv, 1, S)
    if mask is not None:
        folded_mask = mask[:, :, None, None, :].expand(-1, -1, kv_heads, -1, -1).reshape(blocks, -1, 1, width)
    output, lse = attention_with_logsumexp(
        rows,
        keys.reshape(blocks, batch * kv_heads, width, head_dim),
        values.reshape(blocks, batch * kv_heads, width, head_dim),
        folded_mask,
        scale,
        kernel,
    )  # (c, B·Hkv, G·L, D), (c, B·Hkv, G·L)
    return output.reshape(blocks, batch, kv_heads, group, seq, head_dim), lse.reshape(
        blocks, batch, kv_heads, group, seq
    )


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
    mask: torch.Tensor | None,  # (B, 1|H, 1, S) bool, True = attend; None = every key
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
    result = torch.ops.aten._scaled_dot_product_flash_attention(
        _dense(query), key, value, 0.0, False, False, scale=scale
    )
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
        padded = torch.zeros(batch, mask.shape[1], 1, -(-width // 16) * 16, dtype=query.dtype, device=query.device)
        padded[..., :width].masked_fill_(~mask, float("-inf"))
        bias = padded[..., :width].expand(batch, heads, seq, width)  # (B, H, L, S), stride 0 over L (and H)
    result = torch.ops.aten._scaled_dot_product_efficient_attention(
        _dense(query), key, value, bias, True, 0.0, False, scale=scale
    )
    return result[0], result[1][:, :, :seq]


def _dense(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor`, copied if it repeats along a dimension (stride 0): the CUDA kernels are not relied on for those."""
    repeated = any(stride == 0 and size > 1 for stride, size in zip(tensor.stride(), tensor.shape, strict=True))
    return tensor.contiguous() if repeated else tensor


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
