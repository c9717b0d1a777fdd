"""Building a `FairEmbedder` from `EmbedderOptions`: what every surface that takes options runs (the CLI, the Ray
workers' `EmbedderSpec`, the LangChain and LlamaIndex adapters).

- `build_embedder(options, model, prompts=..., loading=...)`: load `model` with `options`, optionally replacing the
  model's prompts (`PROMPT_NAMES`) before the embedder reads them, and with sentence-transformers' own loading
  keywords (revision, cache_folder, token, …; `LOADING_KEYWORDS`).
- `resolve_embedder(...)`: the rule the adapters share: a caller gives either a model to load or a ready
  `FairEmbedder`, never both, and options that only matter when loading (`LOADING_OPTIONS`), prompts or loading
  keywords cannot come with a ready embedder.
- `with_calibration(embedder, calibration)`: a ready embedder whose default calibration is another one, sharing
  its loaded model (an adapter given `embedder=` and `calibration=`).
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping
from typing import Any

from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.embedder_options import LOADING_OPTIONS, PROMPT_NAMES, EmbedderOptions
from fair_retrieval.embedding.loading import (
    cuda_half_precision,
    has_sentence_transformers_config,
    load_sentence_transformer,
    pick_device,
    resolve_model,
    unknown_pooling,
)
from fair_retrieval.engine.calibration import Calibration

__all__ = ["LOADING_KEYWORDS", "build_embedder", "resolve_embedder", "with_calibration"]

LOADING_KEYWORDS: tuple[str, ...] = (
    "cache_folder",
    "revision",
    "token",
    "local_files_only",
    "processor_kwargs",
    "config_kwargs",
    "prompts",
    "default_prompt_name",
)
"""`SentenceTransformer` constructor keywords a model loaded here takes as sentence-transformers does (where it is
downloaded from and to, its tokenizer's and config's extra arguments, its prompts); the ones not here are
`EmbedderOptions` (device, model_kwargs) or refused by the adapters with the reason."""


def build_embedder(
    options: EmbedderOptions | None,
    model: Any,
    prompts: Mapping[str, str] | None = None,
    loading: Mapping[str, Any] | None = None,
    prompt_names: Mapping[str, str] | None = None,
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
        loading: `SentenceTransformer` constructor keywords (`LOADING_KEYWORDS`), as sentence-transformers takes
            them; its "prompts" are added to the model's own. Only for a model loaded here.
        prompt_names: which of the model's prompts (after `loading`) is the query or the document prompt, e.g.
            {"document": "passage"}, as sentence-transformers' `encode(prompt_name=...)` picks one.

    Raises:
        ValueError, TypeError: as `FairEmbedder` does for the model (unknown pooling, too long a max_length, …),
            for prompts that are not str values under `PROMPT_NAMES`, or come with a loaded model, a loading keyword
            not in `LOADING_KEYWORDS`, or a prompt name the model does not have.
    """
    options = options or EmbedderOptions()
    kwargs = options.to_kwargs()
    if prompts is not None or loading or prompt_names:
        model, kwargs = _load_here(options, model, dict(prompts or {}), dict(loading or {}), dict(prompt_names or {}))
    return FairEmbedder(model, **kwargs)


def _check_prompts(prompts: Mapping[str, str], loading: Mapping[str, Any]) -> None:
    """Refuse prompt names other than `PROMPT_NAMES`, non-str prompts and unknown loading keywords."""
    unknown = sorted(set(prompts) - set(PROMPT_NAMES))
    if unknown:
        raise ValueError(f"Unknown prompt name(s) {unknown}; the prompts that can be set are {list(PROMPT_NAMES)}.")
    for name, prompt in prompts.items():
        if not isinstance(prompt, str):
            raise TypeError(f"The {name} prompt must be a str, got {type(prompt).__name__}.")
    unknown = sorted(set(loading) - set(LOADING_KEYWORDS))
    if unknown:
        raise ValueError(f"Unknown loading keyword(s) {unknown}; the ones taken are {list(LOADING_KEYWORDS)}.")


def _load_here(
    options: EmbedderOptions,
    model: Any,
    prompts: dict[str, str],
    loading: dict[str, Any],
    prompt_names: dict[str, str],
) -> tuple[Any, dict[str, Any]]:
    """The SentenceTransformer of `model`, loaded as `FairEmbedder` would load it but with `loading` and `prompts`,
    and the `FairEmbedder` arguments that give the embedder it would have built (its name, device and precision)."""
    _check_prompts(prompts, loading)
    if not isinstance(model, str | os.PathLike):
        raise TypeError(
            f"prompts and loading keywords can be set for a model loaded here (a Hub id or a local folder), not for "
            f"a {type(model).__name__}; set the prompts of a loaded SentenceTransformer yourself "
            "(model.prompts = {...}) before building the FairEmbedder."
        )
    name = resolve_model(model)
    hub = {key: loading[key] for key in ("cache_folder", "revision", "token") if key in loading}
    if options.pooling is None and not has_sentence_transformers_config(name, **hub):  # as FairEmbedder refuses it
        raise unknown_pooling(name)
    device = pick_device(options.device)
    loaded = load_sentence_transformer(name, device, _model_kwargs(options), **loading)
    loaded.prompts = {**(getattr(loaded, "prompts", None) or {}), **prompts}
    for task, prompt_name in prompt_names.items():
        if prompt_name not in loaded.prompts:
            raise ValueError(
                f"{name} has no prompt named {prompt_name!r} (its prompts: {sorted(loaded.prompts)}); pass the "
                "prompt's text instead, or add it with prompts={...}."
            )
        loaded.prompts[task] = loaded.prompts[prompt_name]
    card = getattr(loaded, "model_card_data", None)
    if card is not None:
        card.base_model = name  # FairEmbedder names a model it did not load itself by its card's base model
    precision = options.precision
    if precision == "auto" and device.type == "cuda":  # what "auto" means for a model FairEmbedder loads
        precision = cuda_half_precision()
    kwargs = options.to_kwargs()
    return loaded, {**kwargs, "device": device, "precision": precision, "model_kwargs": None}


def _model_kwargs(options: EmbedderOptions) -> dict[str, Any] | None:
    """The transformers model keywords of `options` as a dict of their own, or None."""
    return dict(options.model_kwargs) if options.model_kwargs is not None else None


def with_calibration(embedder: FairEmbedder, calibration: Calibration | None) -> FairEmbedder:
    """`embedder` with another default calibration, sharing its loaded model, tokenizer and hooks.

    Why: an adapter given a ready embedder and its own calibration (a calibrated and a plain object on one model)
    hands its calibration down once, here, instead of passing it on every call. The view runs the class's
    methods: one replaced on `embedder` itself (a wrapper around it) is not carried over, since it may use the
    other calibration.

    Raises:
        TypeError: for a calibration that is not a Calibration or None.
        ValueError: for a calibration whose layers the model does not have.
    """
    calibration = EmbedderOptions(calibration=calibration).calibration
    if calibration == embedder.calibration:
        return embedder
    if calibration is not None:
        calibration.resolve_layers(embedder.num_layers)
    view = copy.copy(embedder)
    for name in [name for name in vars(view) if callable(getattr(type(view), name, None))]:
        delattr(view, name)  # a method replaced on the instance may hold the other calibration: run the class's
    view.calibration = calibration
    view.last_report = None
    return view


def resolve_embedder(
    owner: str,
    *,
    model: str | os.PathLike[str] | None,
    embedder: FairEmbedder | None,
    options: EmbedderOptions | None = None,
    explicitly_set: Iterable[str] = (),
    prompts: Mapping[str, str] | None = None,
    loading: Mapping[str, Any] | None = None,
    prompt_names: Mapping[str, str] | None = None,
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
        loading: sentence-transformers loading keywords for `model` (see `build_embedder`); refused together with
            `embedder`, which is loaded already.
        prompt_names: which of the model's prompts are the query and document prompts (see `build_embedder`);
            refused together with `embedder`.

    Raises:
        ValueError: if both or neither of `model` and `embedder` are given, or loading options or prompts come with
            `embedder`.
        TypeError: if `embedder` is not a `FairEmbedder`.
    """
    if embedder is None:
        if model is None:
            raise ValueError(f"{owner} needs a model (Hub id or local folder) or an embedder=FairEmbedder(...).")
        return build_embedder(options, model, prompts=prompts, loading=loading, prompt_names=prompt_names)
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
    if loading:
        raise ValueError(
            f"{owner}: {', '.join(sorted(loading))} configure(s) how a model is loaded, which this embedder has been "
            "already; pass model= to load one here with them."
        )
    if prompts is not None or prompt_names:
        raise ValueError(
            f"{owner}: prompts are read from the model when a FairEmbedder is built, which this embedder has been "
            "already; pass model= to load one here with these prompts."
        )
    return embedder
