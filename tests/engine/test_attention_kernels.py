"""The engine's two paths and its attention kernels, on random tensors, against each other and the reference math.

The every-row path (fused basket attention + log-sum-exps) and the row-wise path (explicit probabilities) must give
the same calibrated outputs, both equal to tests/reference.py's per-row calibration; each basket-attention kernel
that can run on CPU is forced in turn, and the CUDA kernels' argument plumbing is checked with CPU stand-ins.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from fair_retrieval import Calibration
from fair_retrieval.engine import attention, kernels
from tests.reference import _reference_probs

CONFIGS = [
    Calibration(strength=1.0, basket_size=7),
    Calibration(strength=0.5, basket_size=7, partial_basket="proportional"),
    Calibration(strength=1.0, basket_size=5, isolated="equal"),
    Calibration(strength=0.7, basket_size=6, isolated="equal", partial_basket="proportional"),
    Calibration(strength=1.0, basket_size=40),  # longer than every text: nothing is calibrated
]


def random_batch(seed: int, kv_heads: int = 2) -> dict[str, torch.Tensor]:
    """Three texts of 30 positions: right-padded lengths 30, 23 and 9, isolated keys at both ends of each text."""
    generator = torch.Generator().manual_seed(seed)
    batch, heads, seq, dim = 3, 4, 30, 8
    query = torch.randn(batch, heads, seq, dim, generator=generator, dtype=torch.float64) * 1.5
    key = torch.randn(batch, kv_heads, seq, dim, generator=generator, dtype=torch.float64) * 1.5
    value = torch.randn(batch, kv_heads, seq, dim, generator=generator, dtype=torch.float64)
    lengths = torch.tensor([30, 23, 9])
    padding = torch.arange(seq)[None, :] < lengths[:, None]  # (B, L)
    isolated = torch.zeros(batch, seq, dtype=torch.bool)
    isolated[:, 0] = True
    isolated[torch.arange(batch), lengths - 1] = True
    return {"query": query, "key": key, "value": value, "padding": padding, "isolated": isolated}


def reference_outputs(data: dict[str, torch.Tensor], cal: Calibration, isolated: torch.Tensor) -> torch.Tensor:
    """(B, H, L, D) calibrated outputs of every real row, computed row by row with the reference math."""
    query, key, value, padding = data["query"], data["key"], data["value"], data["padding"]
    heads = query.shape[1]
    key = key.repeat_interleave(heads // key.shape[1], dim=1)
    value = value.repeat_interleave(heads // value.shape[1], dim=1)
    out = torch.zeros_like(query)
    for item in range(query.shape[0]):
        allowed = padding[item].numpy()
        scores = (query[item] @ key[item].transpose(-1, -2) * query.shape[-1] ** -0.5).numpy()  # (H, L, L)
        scores = np.where(allowed[None, None], scores, -np.inf)
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        for row in np.flatnonzero(allowed):
            blended = _reference_probs(probs[:, row], allowed, isolated[item].numpy() & allowed, cal)  # (H, L)
            out[item, :, row] = torch.einsum("hl,hld->hd", torch.from_numpy(blended), value[item])
    return out


@pytest.mark.parametrize("cal", CONFIGS, ids=range(len(CONFIGS)))
@pytest.mark.parametrize("with_isolated", [False, True])
@pytest.mark.parametrize("kernel", ["cpu_flash", "explicit"])
@pytest.mark.parametrize("held", [8, 1], ids=["held", "online"])
def test_every_row_path_equals_reference(
    monkeypatch: pytest.MonkeyPatch, cal: Calibration, with_isolated: bool, kernel: str, held: int
) -> None:
    """Both accumulation modes (basket outputs held, or folded in as they come) and both kernels."""
    data = random_batch(0)
    isolated = data["isolated"] & data["padding"] if with_isolated else torch.zeros_like(data["padding"])
    monkeypatch.setattr(kernels, "kernels_for", lambda query, masked: [kernel])
    monkeypatch.setattr(attention, "HELD_BASKETS", held)
    out = attention.calibrate_every_row(
        data["query"],
        data["key"],
        data["value"],
        data["padding"] & ~isolated,
        isolated,
        data["query"].shape[-1] ** -0.5,
        cal,
    ).transpose(1, 2)  # (B, H, L, D)
    expected = reference_outputs(data, cal, isolated)
    real = data["padding"][:, None, :, None].expand_as(out)
    torch.testing.assert_close(out[real], expected[real], atol=1e-9, rtol=1e-9)


@pytest.mark.parametrize("cal", CONFIGS, ids=range(len(CONFIGS)))
def test_row_wise_path_equals_every_row_path(cal: Calibration) -> None:
    """Both paths go through `basket_blend`; on every row of the same inputs they agree."""
    data = random_batch(1, kv_heads=4)
    query, key, value, padding, isolated = (data[k] for k in ("query", "key", "value", "padding", "isolated"))
    isolated = isolated & padding
    batch, _, seq, _ = query.shape
    scale = query.shape[-1] ** -0.5
    every = attention.calibrate_every_row(query, key, value, padding & ~isolated, isolated, scale, cal)
    allowed = padding[:, None, :].expand(batch, seq, seq)  # (B, T, L), every row sees the text
    plain = torch.nn.functional.scaled_dot_product_attention(query, key, value, attn_mask=padding[:, None, None, :])
    rows = attention.calibrated_rows(query, key, value, allowed, isolated[:, None, :] & allowed, scale, cal, plain)
    real = padding[:, :, None, None].expand_as(every)
    torch.testing.assert_close(every[real], rows.transpose(1, 2)[real], atol=1e-9, rtol=1e-9)


def kernel_inputs(dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    query, key, value = (torch.randn(2, 3, 40, 8, generator=generator, dtype=dtype) for _ in range(3))
    mask = torch.ones(2, 1, 1, 13, dtype=torch.bool)
    mask[1, ..., 9:] = False
    return query, key[:, :, :13], value[:, :, :13], mask


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("masked", [False, True])
def test_cpu_flash_kernel_equals_explicit_tiles(
    monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype, masked: bool
) -> None:
    query, key, value, mask = kernel_inputs(dtype)
    fused = kernels.attention_with_logsumexp(query, key, value, mask if masked else None, 0.3, kernel="cpu_flash")
    monkeypatch.setattr(kernels, "TILE_ELEMENTS", 2 * 3 * 13 * 7)  # several row tiles
    explicit = kernels.attention_with_logsumexp(query, key, value, mask if masked else None, 0.3, kernel="explicit")
    tolerance = 1e-5 if dtype == torch.float32 else 1e-10
    torch.testing.assert_close(explicit[0], fused[0], atol=tolerance, rtol=tolerance)
    torch.testing.assert_close(explicit[1], fused[1], atol=tolerance, rtol=tolerance)
    if masked:  # the mask matters: the second text's last keys are ignored
        assert not torch.allclose(fused[1][1], kernels.attention_with_logsumexp(query, key, value, None, 0.3)[1][1])


def test_cuda_efficient_kernel_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """The memory-efficient kernel gets an aligned (B, H, L, S) bias and its padded log-sum-exp is cut to L."""
    query, key, value, mask = kernel_inputs()
    seen = {}

    def efficient(q, k, v, bias, compute_log_sumexp, dropout_p, is_causal, *, scale):  # type: ignore[no-untyped-def]
        seen.update(shape=tuple(bias.shape), strides=bias.stride(), lse=compute_log_sumexp, causal=is_causal)
        output, lse = kernels.explicit_attention_with_logsumexp(q, k, v, bias[:, :1, :1] == 0, scale)
        padded = torch.full((*lse.shape[:2], 64), float("nan"))  # the CUDA kernel pads L to a multiple of 32
        padded[..., : lse.shape[2]] = lse
        return output, padded, torch.tensor(0), torch.tensor(0)

    monkeypatch.setattr(torch.ops.aten, "_scaled_dot_product_efficient_attention", efficient, raising=False)
    output, lse = kernels.attention_with_logsumexp(query, key, value, mask, 0.3, kernel="cuda_efficient")
    # (B, H, L, S) broadcast from one padded row per text: strides (16, 0, 0, 1), aligned to 16 elements.
    assert seen == {"shape": (2, 3, 40, 13), "strides": (16, 0, 0, 1), "lse": True, "causal": False}
    expected = kernels.attention_with_logsumexp(query, key, value, mask, 0.3, kernel="explicit")
    assert lse.shape == (2, 3, 40)
    torch.testing.assert_close(output, expected[0])
    torch.testing.assert_close(lse, expected[1])


def test_cuda_flash_kernel_takes_only_unmasked_baskets(monkeypatch: pytest.MonkeyPatch) -> None:
    query, key, value, mask = kernel_inputs()

    def flash(q, k, v, dropout_p, is_causal, return_debug_mask, *, scale):  # type: ignore[no-untyped-def]
        output, lse = kernels.explicit_attention_with_logsumexp(q, k, v, None, scale)
        return (output, lse, None, None, 40, 13, None, None, None)

    monkeypatch.setattr(torch.ops.aten, "_scaled_dot_product_flash_attention", flash, raising=False)
    output, lse = kernels.attention_with_logsumexp(query, key, value, None, 0.3, kernel="cuda_flash")
    expected = kernels.attention_with_logsumexp(query, key, value, None, 0.3, kernel="explicit")
    torch.testing.assert_close(output, expected[0])
    torch.testing.assert_close(lse, expected[1])
    with pytest.raises(RuntimeError, match="no mask"):
        kernels.attention_with_logsumexp(query, key, value, mask, 0.3, kernel="cuda_flash")


def test_a_failing_kernel_falls_back_to_the_next(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    query, key, value, mask = kernel_inputs()
    calls = []

    def broken(*args: object) -> tuple[torch.Tensor, torch.Tensor]:
        calls.append(1)
        raise RuntimeError("no kernel image for this GPU")

    monkeypatch.setitem(kernels.FUSED_KERNELS, "cpu_flash", broken)
    monkeypatch.setattr(kernels, "BROKEN_KERNELS", set())
    expected = kernels.attention_with_logsumexp(query, key, value, mask, 0.3, kernel="explicit")
    for _ in range(2):
        output, lse = kernels.attention_with_logsumexp(query, key, value, mask, 0.3)
        torch.testing.assert_close(output, expected[0])
        torch.testing.assert_close(lse, expected[1])
    assert calls == [1], "a kernel that failed once is not tried again"
    assert "cpu_flash failed" in caplog.text
    with pytest.raises(RuntimeError, match="no kernel image"):
        kernels.attention_with_logsumexp(query, key, value, mask, 0.3, kernel="cpu_flash")


def test_kernel_choice() -> None:
    query = torch.zeros(1, 1, 4, 8)
    assert kernels.kernels_for(query, masked=True) == ["cpu_flash", "explicit"]
    assert kernels.kernels_for(query.half(), masked=False) == ["explicit"]


def test_block_calls_fold_every_basket_into_one_call() -> None:
    """One call for up to `held` baskets; a last basket that no text fills gets a call of its own, as wide as needed."""
    assert kernels.block_calls(3, 3 * 192, 192, 16) == [(0, 3, 192)]
    assert kernels.block_calls(3, 487, 192, 16) == [(0, 2, 192), (2, 1, 103)]
    assert kernels.block_calls(1, 100, 192, 16) == [(0, 1, 100)]
    assert kernels.block_calls(16, 16 * 32, 32, 16) == [(0, 16, 32)]
    assert kernels.block_calls(20, 20 * 8 - 3, 8, 16) == [(0, 16, 8), (16, 3, 8), (19, 1, 5)]


def test_block_mask_marks_each_texts_slots() -> None:
    n_content = torch.tensor([10, 4, 7])
    assert kernels.block_mask(n_content, 4, 0, 1, 4) is None  # every text fills the first basket
    mask = kernels.block_mask(n_content, 4, 1, 2, 4)  # baskets 1 and 2
    assert mask is not None and mask.shape == (2, 3, 4)
    assert mask[0].tolist() == [[True] * 4, [True] * 4, [True, True, True, False]]  # text 1 has no key: all slots
    assert mask[1].tolist() == [[True, True, False, False], [True] * 4, [True] * 4]


@pytest.mark.parametrize("kv_heads", [4, 2])
@pytest.mark.parametrize("gathered", [False, True], ids=["slice", "gather"])
def test_attention_per_block_equals_one_call_per_basket(kv_heads: int, gathered: bool) -> None:
    """The folded call (baskets as the kernel's batch, query rows of one key head stacked) gives every basket's
    output and log-sum-exp exactly as attending to that basket alone, for grouped-query attention too."""
    data = random_batch(2, kv_heads=kv_heads)
    query, key, value, padding = (data[k].float() if k != "padding" else data[k] for k in data if k != "isolated")
    content = padding.clone()
    if gathered:  # content that is not one run from a common start (left padding)
        content = content.flip(1)
        key, value = key.flip(2), value.flip(2)
    n_content = content.sum(dim=1)
    size, batch, heads = 7, query.shape[0], query.shape[1]
    run_k, run_v = kernels.content_runs(key, value, content, n_content, 5 * size)
    calls = kernels.block_calls(5, int(n_content.max()), size, 16)
    assert len(calls) == 2
    for first, count, width in calls:
        k_blocks, v_blocks = (kernels.block_views(run, batch, size, first, count, width) for run in (run_k, run_v))
        mask = kernels.block_mask(n_content, size, first, count, width)
        output, lse = kernels.attention_per_block(query, k_blocks, v_blocks, mask, 0.3)
        assert output.shape == (count, batch, kv_heads, heads // kv_heads, query.shape[2], query.shape[3])
        for j in range(count):
            positions = [torch.flatten(torch.nonzero(content[i]))[(first + j) * size :][:width] for i in range(batch)]
            for i in range(batch):
                if not len(positions[i]):
                    continue  # a text with no key in this basket: its mass is zeroed by the caller
                keys = key[i : i + 1, :, positions[i]].repeat_interleave(heads // kv_heads, dim=1)
                values = value[i : i + 1, :, positions[i]].repeat_interleave(heads // kv_heads, dim=1)
                expected = kernels.attention_with_logsumexp(query[i : i + 1], keys, values, None, 0.3)
                torch.testing.assert_close(output[j, i].reshape(heads, *query.shape[2:]), expected[0][0])
                torch.testing.assert_close(lse[j, i].reshape(heads, -1), expected[1][0])


def test_a_calibrated_layer_makes_the_same_kernel_calls_for_any_basket_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """One call when the longest text fills its last basket, two when it does not, for 2 baskets as for 15."""
    data = random_batch(3)
    counted = []
    flash = kernels.FUSED_KERNELS["cpu_flash"]

    def counting(*args: object) -> tuple[torch.Tensor, torch.Tensor]:
        counted.append(1)
        return flash(*args)

    monkeypatch.setitem(kernels.FUSED_KERNELS, "cpu_flash", counting)
    padding = data["padding"]  # 30, 23 and 9 content keys
    calls = {}
    for basket in (15, 13, 5, 4, 2):
        counted.clear()
        cal = Calibration(strength=1.0, basket_size=basket, min_full_baskets=1)
        attention.calibrate_every_row(data["query"], data["key"], data["value"], padding, padding & False, 0.3, cal)
        calls[basket] = len(counted)
    assert calls == {15: 1, 13: 2, 5: 1, 4: 2, 2: 1}
