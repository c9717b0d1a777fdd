"""EmbedderOptions: the FairEmbedder settings, declared, defaulted and validated in this one place.

Every surface that takes these settings (`FairEmbedder` itself, the Ray `EmbedderSpec`, the LlamaIndex and LangChain
adapters, the command line) describes them with `EmbedderOptions`: its fields are the option names, its defaults the
defaults (`DEFAULTS`), its `__post_init__` the validation, and the allowed values of a Literal option are that
Literal's `typing.get_args`. A surface forwards what it was given with `EmbedderOptions.from_arguments` and builds
with `build(model)`, so adding or changing an option touches this module and the signatures that expose it.

`resolve_embedder` is the rule the adapters share: a caller gives either a model to load or a ready `FairEmbedder`,
never both, and options that only matter when loading cannot come with a ready embedder. Both may also set the
model's prompts (`PROMPT_NAMES`: a text put before every query or every document, as an instruct model expects),
which a `FairEmbedder` reads from the model when it is built.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, get_args

import torch

from fair_retrieval.attention import Pooling
from fair_retrieval.calibration import Calibration
from fair_retrieval.loading import (
    cuda_half_precision,
    has_sentence_transformers_config,
    load_sentence_transformer,
    pick_device,
    resolve_model,
    unknown_pooling,
    validate_pooling,
)
from fair_retrieval.positional import PositionalScaling
from fair_retrieval.validate import int_at_least, one_of, positive_int
from fair_retrieval.windows import LongDocuments

if TYPE_CHECKING:
    from fair_retrieval.embedder import FairEmbedder

__all__ = [
    "DEFAULTS",
    "INSTANCE_DEFAULT",
    "LOADING_OPTIONS",
    "PROMPT_NAMES",
    "EmbedderOptions",
    "Precision",
    "as_calibration",
    "resolve_embedder",
]

Precision = Literal["auto", "float32", "float16", "bfloat16"]
"""Numeric precision of the model weights; "auto" is float32 on CPU/MPS and, for a model loaded here, bfloat16 (else
float16) on CUDA."""


class _Default:
    """Marker for 'use the embedder's own calibration' (None already means 'plain')."""

    def __repr__(self) -> str:
        return "<instance default>"


INSTANCE_DEFAULT: Any = _Default()
"""An argument left at its default: `FairEmbedder.embed_documents` uses the instance's own value for it, and
`EmbedderOptions.from_arguments` the option's default."""

LOADING_OPTIONS: tuple[str, ...] = (
    "pooling",
    "max_length",
    "batch_size",
    "device",
    "precision",
    "model_kwargs",
    "long_documents",
    "window_overlap",
)
"""Options that only act while a model is loaded; a ready `FairEmbedder` has them fixed already."""

PROMPT_NAMES: tuple[str, ...] = ("query", "document")
"""The prompts `EmbedderOptions.build` can set: the text before every query, and before every document (window)."""


@dataclass(frozen=True)
class EmbedderOptions:
    """Every `FairEmbedder` argument except the model, validated when created; the defaults of every surface.

    Validation happens here, before any model is loaded, so a wrong value fails where it was written (on a Ray
    driver rather than on each worker, in an adapter's constructor rather than at the first embedding). Change one
    option of a value with `dataclasses.replace(options, max_length=256)`.

    Args:
        calibration: the default document `Calibration`; None embeds documents plainly. Default: `Calibration()`.
        pooling: "cls", "mean" or "last" (`Pooling`); None (the default) takes it from the model's
            sentence-transformers config.
        max_length: token limit per text or window; None (the default) uses the model's.
        batch_size: texts per forward pass. Default: 32.
        device: "cpu", "cuda", "mps", … (or a `torch.device`); None (the default) picks cuda, then mps, then cpu.
        precision: "auto" (the default), "float32", "float16" or "bfloat16" (`Precision`).
        show_progress_bar: default for the per-call flag of the same name. Default: False.
        model_kwargs: extra keyword arguments for the transformers model when loading by name (kept read-only).
            Default: None.
        positional_scaling: the default LPES `PositionalScaling` for documents; None (the default) leaves positions
            unchanged.
        long_documents: "windows" (the default: split documents longer than the window, embed each window, pool)
            or "truncate" (`LongDocuments`).
        window_overlap: tokens consecutive windows share; None (the default) = an eighth of a window.

    Raises:
        TypeError: for a value of the wrong type (calibration, device, show_progress_bar, model_kwargs,
            positional_scaling).
        ValueError: for a pooling, precision or long_documents that is not one of its Literal's values, a
            max_length or batch_size that is not a positive int, or a window_overlap that is not an int ≥ 0.
    """

    calibration: Calibration | None = Calibration()  # noqa: RUF009 - frozen, so sharing it is safe
    pooling: Pooling | None = None
    max_length: int | None = None
    batch_size: int = 32
    device: str | torch.device | None = None
    precision: Precision = "auto"
    show_progress_bar: bool = False
    model_kwargs: Mapping[str, Any] | None = None
    positional_scaling: PositionalScaling | None = None
    long_documents: LongDocuments = "windows"
    window_overlap: int | None = None

    def __post_init__(self) -> None:
        if self.calibration is not None and not isinstance(self.calibration, Calibration):
            raise TypeError(f"calibration must be a Calibration or None, got {type(self.calibration).__name__}.")
        if self.pooling is not None:
            validate_pooling(self.pooling)
        positive_int(self.max_length, "max_length", or_none=True)
        positive_int(self.batch_size, "batch_size")
        if self.device is not None and not isinstance(self.device, str | torch.device):
            raise TypeError(f"device must be a str, a torch.device or None, got {type(self.device).__name__}.")
        one_of(self.precision, "precision", get_args(Precision), words=True)
        if not isinstance(self.show_progress_bar, bool):
            raise TypeError(f"show_progress_bar must be a bool, got {type(self.show_progress_bar).__name__}.")
        if self.model_kwargs is not None:
            if not isinstance(self.model_kwargs, Mapping):
                raise TypeError(f"model_kwargs must be a dict or None, got {type(self.model_kwargs).__name__}.")
            object.__setattr__(self, "model_kwargs", MappingProxyType(dict(self.model_kwargs)))
        if self.positional_scaling is not None and not isinstance(self.positional_scaling, PositionalScaling):
            raise TypeError(
                f"positional_scaling must be a PositionalScaling or None, got {type(self.positional_scaling).__name__}."
            )
        one_of(self.long_documents, "long_documents", get_args(LongDocuments))
        int_at_least(self.window_overlap, "window_overlap", 0, or_none=True, note="an eighth of a window")

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in declaration order (the keyword arguments of `FairEmbedder` after the model)."""
        return tuple(field.name for field in fields(cls))

    @classmethod
    def from_arguments(cls, arguments: Mapping[str, Any], renamed: Mapping[str, str] | None = None) -> EmbedderOptions:
        """The options among `arguments`: a function's parameters (`locals()`), parsed flags (`vars(args)`), a
        model's fields. Why: a surface forwards everything it was given in one call instead of option by option.

        Args:
            arguments: values by name; names that are not options are ignored. An option that is missing, or whose
                value is `INSTANCE_DEFAULT`, keeps its default.
            renamed: the name an option has in `arguments` where it differs, e.g. {"batch_size": "embed_batch_size"}.

        Raises:
            ValueError, TypeError: as `EmbedderOptions` does for an invalid value.
        """
        renamed = renamed or {}
        given = {
            name: arguments[renamed.get(name, name)] for name in cls.names() if renamed.get(name, name) in arguments
        }
        return cls(**{name: value for name, value in given.items() if value is not INSTANCE_DEFAULT})

    def to_kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments for `FairEmbedder` (model_kwargs as a plain dict of their own)."""
        kwargs = {name: getattr(self, name) for name in self.names()}
        if self.model_kwargs is not None:
            kwargs["model_kwargs"] = dict(self.model_kwargs)
        return kwargs

    def build(self, model: Any, prompts: Mapping[str, str] | None = None) -> FairEmbedder:
        """Load `model` (a Hub id, a local folder or a `SentenceTransformer`) as a `FairEmbedder` with these options.

        Args:
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
        from fair_retrieval.embedder import FairEmbedder  # the embedder's own signature refers to these options

        kwargs = self.to_kwargs()
        if prompts is not None:
            model, kwargs = self._load_with_prompts(model, dict(prompts), kwargs)
        return FairEmbedder(model, **kwargs)

    def _load_with_prompts(
        self, model: Any, prompts: dict[str, str], kwargs: dict[str, Any]
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
        if self.pooling is None and not has_sentence_transformers_config(name):  # as FairEmbedder refuses it
            raise unknown_pooling(name)
        device = pick_device(self.device)
        loaded = load_sentence_transformer(name, device, kwargs["model_kwargs"])
        loaded.prompts = {**(getattr(loaded, "prompts", None) or {}), **prompts}
        card = getattr(loaded, "model_card_data", None)
        if card is not None:
            card.base_model = name  # FairEmbedder names a model it did not load itself by its card's base model
        precision = self.precision
        if precision == "auto" and device.type == "cuda":  # what "auto" means for a model FairEmbedder loads
            precision = cuda_half_precision()
        return loaded, {**kwargs, "device": device, "precision": precision, "model_kwargs": None}

    def non_default(self) -> frozenset[str]:
        """Names of the options whose value differs from the default: what a caller set, as far as values tell."""
        return frozenset(name for name in self.names() if getattr(self, name) != getattr(DEFAULTS, name))


DEFAULTS = EmbedderOptions()
"""The default of every option (`DEFAULTS.batch_size`, …): what a surface that exposes an option defaults it to."""


def as_calibration(value: Any) -> Calibration | None:
    """`value` as a Calibration: a Calibration or None as it is, a dict (from `Calibration.to_dict()`) converted.

    Raises:
        TypeError: for anything else.
    """
    if isinstance(value, dict):
        return Calibration.from_dict(value)
    if value is not None and not isinstance(value, Calibration):
        raise TypeError(f"calibration must be a Calibration, a dict or None, got {type(value).__name__}.")
    return value


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
        prompts: the model's prompts to replace when loading it (see `EmbedderOptions.build`); refused together
            with `embedder`, which has read its model's prompts already.

    Raises:
        ValueError: if both or neither of `model` and `embedder` are given, or loading options or prompts come with
            `embedder`.
        TypeError: if `embedder` is not a `FairEmbedder`.
    """
    if embedder is None:
        if model is None:
            raise ValueError(f"{owner} needs a model (Hub id or local folder) or an embedder=FairEmbedder(...).")
        return (options or EmbedderOptions()).build(model, prompts=prompts)
    if model is not None:
        raise ValueError(f"Pass either model or embedder to {owner}, not both.")
    from fair_retrieval.embedder import FairEmbedder

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
