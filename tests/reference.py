"""An independent, deliberately naive implementation of attention calibration (docs/method.md) for the tests.

One text at a time, no padding: every layer's attention probabilities are formed explicitly (L×L, float64) by an
eager attention function registered under its own name; calibrated rows are rewritten with plain Python loops over
heads, rows and baskets. Nothing here is shared with fair_retrieval's engine.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

_STATE: dict[str, Any] = {}
_NAME = "reference_eager_calibration"


def _reference_probs(row: np.ndarray, allowed: np.ndarray, isolated: np.ndarray, cal: Any) -> np.ndarray:
    """Calibrate one row of probabilities (H, L) following the definition in docs/method.md literally."""
    content = [j for j in range(len(allowed)) if allowed[j] and not isolated[j]]
    iso = [j for j in range(len(allowed)) if allowed[j] and isolated[j]]
    if len(content) < cal.min_full_baskets * cal.basket_size:
        return row
    baskets = [content[k : k + cal.basket_size] for k in range(0, len(content), cal.basket_size)]
    n = len(baskets)
    out = np.zeros_like(row)
    for h in range(row.shape[0]):
        t = {k: (row[h, k] if cal.isolated == "preserve" else 1.0 / (n + len(iso))) for k in iso}
        budget = 1.0 - sum(t.values())
        for basket in baskets:
            share = budget / n if cal.partial_basket == "equal" else budget * len(basket) / len(content)
            mass = row[h, basket].sum()
            if mass == 0:
                continue
            out[h, basket] = share * row[h, basket] / mass
        for k, value in t.items():
            out[h, k] = value
        out[h] /= out[h].sum()
    above = len(content) - cal.min_full_baskets * cal.basket_size + 1  # λ ramps up over strength_ramp tokens
    lam = cal.strength if cal.strength_ramp == 0 else cal.strength * min(1.0, above / cal.strength_ramp)
    return lam * out + (1.0 - lam) * row


def _reference_attention(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    _, heads, seq, dim = query.shape
    k = key.repeat_interleave(heads // key.shape[1], dim=1).double()
    v = value.repeat_interleave(heads // value.shape[1], dim=1).double()
    scale = scaling if scaling is not None else dim**-0.5
    scores = (query.double() @ k.transpose(-1, -2) * scale)[0].numpy()  # (H, L, L)
    if attention_mask is not None:
        mask = attention_mask
        allowed = (mask if mask.dtype == torch.bool else mask > torch.finfo(mask.dtype).min / 2)[0, 0].numpy()
    else:
        allowed = np.ones((seq, seq), dtype=bool)
        if kwargs.get("is_causal", getattr(module, "is_causal", False)):
            allowed = np.tril(allowed)
        window = kwargs.get("sliding_window")
        if window is not None:
            positions = np.arange(seq)
            allowed &= np.abs(positions[:, None] - positions[None, :]) < window
    scores = np.where(allowed[None], scores, -np.inf)
    probs = np.exp(scores - scores.max(axis=-1, keepdims=True))
    probs /= probs.sum(axis=-1, keepdims=True)  # (H, L, L)
    layer = _STATE["layer_of"][id(module)]
    cal = _STATE["calibration"]
    if cal is not None and layer in _STATE["layers"]:
        pooling = _STATE["pooling"]
        rows = {"cls": [0], "last": [seq - 1], "mean": list(range(seq))}[pooling]
        isolated = np.zeros(seq, dtype=bool)
        if pooling in ("cls", "last"):
            isolated[0] = True
        if pooling == "last":
            isolated[seq - 1] = True
        if cal.special_tokens == "preserve":
            isolated |= _STATE["special"]
        for i in rows:
            probs[:, i, :] = _reference_probs(probs[:, i, :], allowed[i], isolated & allowed[i], cal)
    out = torch.from_numpy(probs) @ v[0]  # (H, L, D)
    return out.transpose(0, 1)[None].to(query.dtype), None


def _layers_of(model: torch.nn.Module) -> dict[int, int]:
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.ModuleList) and name.split(".")[-1] in ("layer", "layers"):
            return {id(sub): i for i, layer in enumerate(module) for sub in layer.modules()}
    raise AssertionError("no layer list found")


@contextlib.contextmanager
def reference_mode(hf_model: torch.nn.Module, calibration: Any, layers: frozenset[int], pooling: str) -> Iterator[None]:
    """Run `hf_model` with the reference attention for the duration of the block."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    AttentionInterface.register(_NAME, _reference_attention)
    AttentionMaskInterface.register(_NAME, ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    previous = hf_model.config._attn_implementation
    _STATE.update(calibration=calibration, layers=layers, pooling=pooling, layer_of=_layers_of(hf_model))
    hf_model.set_attn_implementation(_NAME)
    try:
        yield
    finally:
        hf_model.set_attn_implementation(previous)


@torch.inference_mode()
def reference_embeddings(
    st_model: Any, texts: list[str], calibration: Any, pooling: str, max_length: int
) -> np.ndarray:
    """Embed `texts` one at a time with the reference engine; returns (n, d) L2-normalised float64."""
    hf = st_model[0].auto_model
    layers = calibration.resolve_layers(hf.config.num_hidden_layers) if calibration is not None else frozenset()
    rows = []
    with reference_mode(hf, calibration, layers, pooling):
        for text in texts:
            enc = st_model[0].tokenizer([text], truncation=True, max_length=max_length, return_tensors="pt")
            special_ids = set(st_model[0].tokenizer.all_special_ids)
            _STATE["special"] = np.array([int(t) in special_ids for t in enc["input_ids"][0]])
            token_vectors = hf(**enc, use_cache=False).last_hidden_state[0].double()  # (L, d)
            pooled = {"cls": token_vectors[0], "last": token_vectors[-1], "mean": token_vectors.mean(0)}[pooling]
            for module in list(st_model)[2:]:  # modules after Pooling (Dense, Normalize)
                pooled = module({"sentence_embedding": pooled[None].float()})["sentence_embedding"][0].double()
            rows.append((pooled / pooled.norm()).numpy())
    return np.stack(rows)
