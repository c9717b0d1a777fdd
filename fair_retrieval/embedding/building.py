"""Building a `FairEmbedder` from `EmbedderOptions`: what every surface that takes options runs (the CLI, the Ray
workers' `EmbedderSpec`, the LangChain and LlamaIndex adapters).

- `build_embedder(options, model, prompts=...)`: load `model` with `options`, optionally replacing the model's
  prompts (`PROMPT_NAMES`) before the embedder reads them.
- `resolve_embedder(...)`: the rule the adapters share: a caller gives either a model to load or a ready
  `FairEmbedder`, never both, and options that only matter when loading (`LOADING_OPTIONS`) or prompts cannot come
  with a ready embedder.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import Any

from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.loading import (
    cuda_half_precision,
    has_sentence_transformers_config,
    load_sentence_transformer,
    pick_device,
    resolve_model,
    unknown_pooling,
)
from fair_retrieval.embedding.options import LOADING_OPTIONS, PROMPT_NAMES, EmbedderOptions

__all__ = ["build_embedder", "resolve_embedder"]


def build_embedder(
    options: EmbedderOptions | None, model: Any, prompts: Mapping[str, str] | None = None
) -> FairEmbedder:
    """Load `model` (a Hub id, a local folder or a `SentenceTransformer`) as a `FairEmbedder` with `options`.

    Args:
        options: the embedder's options; None for the defaults.
        model: what to load.
        prompts: prompts that replace the model's own, by name ("query" and/or "document", `PROMPT_NAMES`): the
            text sentence-transformers puts before every query or every document, and so does the
            `FairEmbedder` (before every window of a long document, too). "" means no prompt; a name left out
            keeps the model's configured prompt. Only for a model loaded here (a Hub id or a local folder),
            whose sentence-transformers prompts are set before the `FairEmbedder` reads them.

    Raises:
        ValueError, TypeError: as `FairEmbedder` does for the model (unknown pooling, too long a max_length, …),
            and for prompts that are not str values under `PROMPT_NAMES`, or come with a loaded model.
    """
    options = options or EmbedderOptions()
    kwargs = options.to_kwargs()
    if prompts is not None:
        model, kwargs = _load_with_prompts(options, model, dict(prompts), kwargs)
    return FairEmbedder(model, **kwargs)


def _load_with_prompts(
    options: EmbedderOptions, model: Any, prompts: dict[str, str], kwargs: dict[str, Any]
) -> tuple[Any, dict[str, Any]]:
    """The SentenceTransformer of `model`, loaded as `FairEmbedder` would load it but with `prompts` set, and
    the `FairEmbedder` arguments that give the embedder it would have built (its name, device and precision)."""
    unknown = sorted(set(prompts) - set(PROMPT_NAMES))
    if unknown:
        raise ValueError(f"Unknown prompt name(s) {unknown}; the prompts that can be set are {list(PROMPT_NAMES)}.")
    for name, prompt in prompts.items():
        if not isinstance(prompt, str):
            raise TypeError(f"The {name} prompt must be a str, got {type(prompt).__name__}.")
    if not isinstance(model, str | os.PathLike):
        raise TypeError(
            f"prompts can be set for a model loaded here (a Hub id or a local folder), not for a "
            f"{type(model).__name__}; set the prompts of a loaded SentenceTransformer yourself "
            "(model.prompts = {...}) before building the FairEmbedder."
        )
    name = resolve_model(model)
    if options.pooling is None and not has_sentence_transformers_config(name):  # as FairEmbedder refuses it
        raise unknown_pooling(name)
    device = pick_device(options.device)
    loaded = load_sentence_transformer(name, device, kwargs["model_kwargs"])
    loaded.prompts = {**(getattr(loaded, "prompts", None) or {}), **prompts}
    card = getattr(loaded, "model_card_data", None)
    if card is not None:
        card.base_model = name  # FairEmbedder names a model it did not load itself by its card's base model
    precision = options.precision
    if precision == "auto" and device.type == "cuda":  # what "auto" means for a model FairEmbedder loads
        precision = cuda_half_precision()
    return loaded, {**kwargs, "device": device, "precision": precision, "model_kwargs": None}


def resolve_embedder(
    owner: str,
    *,
    model: str | os.PathLike[str] | None,
    embedder: FairEmbedder | None,
    options: EmbedderOptions | None = None,
    explicitly_set: Iterable[str] = (),
    prompts: Mapping[str, str] | None = None,
) -> FairEmbedder:
    """The embedder a wrapper such as an adapter works with: `embedder` itself, or `model` loaded with `options`.

    Args:
        owner: the caller's name, for the error messages (e.g. "FairEmbeddings").
        model: a Hub id or local folder to load; mutually exclusive with `embedder`.
        embedder: a ready `FairEmbedder` to share (its loaded model, pooling, max_length, … are used as they are).
        options: how to load `model`; defaults to `EmbedderOptions()`.
        explicitly_set: names of the options the caller's user gave; those in `LOADING_OPTIONS` are refused
            together with `embedder`, because they could not take effect.
        prompts: the model's prompts to replace when loading it (see `build_embedder`); refused together
            with `embedder`, which has read its model's prompts already.

    Raises:
        ValueError: if both or neither of `model` and `embedder` are given, or loading options or prompts come with
            `embedder`.
        TypeError: if `embedder` is not a `FairEmbedder`.
    """
    if embedder is None:
        if model is None:
            raise ValueError(f"{owner} needs a model (Hub id or local folder) or an embedder=FairEmbedder(...).")
        return build_embedder(options, model, prompts=prompts)
    if model is not None:
        raise ValueError(f"Pass either model or embedder to {owner}, not both.")
    if not isinstance(embedder, FairEmbedder):
        raise TypeError(f"embedder must be a fair_retrieval.FairEmbedder, got {type(embedder).__name__}.")
    given = set(explicitly_set)
    clashing = [name for name in LOADING_OPTIONS if name in given]
    if clashing:
        raise ValueError(
            f"{owner}: {', '.join(clashing)} configure(s) model loading, which an embedder has done already; set "
            "them on the FairEmbedder instead, or pass model= to load one here."
        )
    if prompts is not None:
        raise ValueError(
            f"{owner}: prompts are read from the model when a FairEmbedder is built, which this embedder has been "
            "already; pass model= to load one here with these prompts."
        )
    return embedder
