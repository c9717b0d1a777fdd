"""Pooling token vectors into one vector per text, for a `FairEmbedder` whose pooling is not the model's own.

A sentence-transformers model pools with its own `Pooling` module. When the user asks for another mode (e.g. "last"
for a model configured with "cls"), or the model has no `Pooling` module at all, the modules run one by one and the
token vectors are pooled here instead. "cls" and "last" read the token that
`fair_retrieval.engine.hook.pooled_token` names, the same token whose attention row calibration changes.
"""

from __future__ import annotations

from typing import Any

import torch

from fair_retrieval.engine.hook import Pooling, pooled_token


def pool(pooling: Pooling, features: dict[str, Any]) -> torch.Tensor:
    """Pool token vectors (B, L, d) into (B, d): first real token, last real token, or mean over real tokens."""
    tokens = features["token_embeddings"]
    mask = features["attention_mask"].to(tokens.device).bool()  # (B, L)
    if pooling != "mean":
        return tokens[torch.arange(mask.shape[0], device=tokens.device), pooled_token(mask, pooling)]
    weights = mask.to(tokens.dtype)[:, :, None]
    return (tokens * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)


def sentence_embeddings(model: Any, features: dict[str, Any], task: str, pooling: Pooling | None) -> torch.Tensor:
    """(B, d) the SentenceTransformer `model`'s embeddings of tokenized `features`, unnormalised.

    Args:
        model: a SentenceTransformer.
        features: its tokenizer's output for one batch, on the model's device.
        task: "query" or "document" (sentence-transformers routes some modules by task).
        pooling: the mode to pool with in place of the model's `Pooling` module; None runs the model as it is.
    """
    return sentence_features(model, features, task, pooling)["sentence_embedding"]  # type: ignore[no-any-return]


def sentence_features(model: Any, features: dict[str, Any], task: str, pooling: Pooling | None) -> dict[str, Any]:
    """The SentenceTransformer `model`'s output features for one batch, as `sentence_embeddings` computes them:
    "sentence_embedding" (B, d), and "token_embeddings" (B, L, h), the token states its pooling read (what a
    one-pass call reads smaller windows from). Arguments as in `sentence_embeddings`."""
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling as STPooling

    if pooling is None:
        return model.forward(features, task=task)  # type: ignore[no-any-return]
    for module in model:
        if isinstance(module, STPooling):
            features["sentence_embedding"] = pool(pooling, features)
        else:
            features = module(features)
    if "sentence_embedding" not in features:  # the model had no Pooling module
        features["sentence_embedding"] = pool(pooling, features)
    return features


def after_pooling(model: Any, pooled: torch.Tensor) -> torch.Tensor:
    """(n, d) what the modules that follow the SentenceTransformer `model`'s pooling (a Dense layer, Normalize, …)
    make of pooled token states `pooled` (n, h): the same steps a pooled vector of the model's own takes.

    A model without a `Pooling` module pools last (`sentence_features`), so nothing follows: `pooled` itself.
    """
    from sentence_transformers.sentence_transformer.modules.pooling import Pooling as STPooling

    modules = list(model)
    found = [i for i, module in enumerate(modules) if isinstance(module, STPooling)]
    features: dict[str, Any] = {"sentence_embedding": pooled}
    for module in modules[found[0] + 1 :] if found else []:
        parameter = next(module.parameters(), None)
        if parameter is not None:  # a module with weights reads its own dtype (half precision on a GPU)
            features["sentence_embedding"] = features["sentence_embedding"].to(parameter.dtype)
        features = module(features)
    return features["sentence_embedding"]  # type: ignore[no-any-return]
