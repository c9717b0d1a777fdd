"""The math of attention calibration (docs/method.md), tensor shapes in comments.

`basket_blend` is the one definition of the redistribution: from a row's basket masses and its isolated keys'
attention it gives every basket's and isolated key's blended mass. `calibrated_rows` applies it to a few query rows
whose attention probabilities it forms explicitly (O(heads·L) memory per row, never L×L). For mean pooling on models
whose every row sees the same keys, `calibrate_every_row` applies it to all rows from every basket's attention
output and log-sum-exp, all baskets of a layer in one fused-kernel call (fair_retrieval.engine.kernels: PyTorch's
CPU flash kernel; on CUDA FlashAttention-2 or the memory-efficient kernel; explicit tiles only as the fallback).
`fair_retrieval.engine.hook` decides, per layer, which of the two runs.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from fair_retrieval.engine import kernels
from fair_retrieval.engine.calibration import Calibration

# Mean pooling keeps at most this many basket outputs (B, H, L, D) before folding them in as they come.
HELD_BASKETS = 16


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
