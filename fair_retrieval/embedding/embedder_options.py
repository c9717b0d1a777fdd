"""EmbedderOptions: the FairEmbedder settings, declared, documented, defaulted and validated in this one place.

Every surface that takes these settings (`FairEmbedder` itself, the Ray `EmbedderSpec`, the LlamaIndex and LangChain
adapters, the command line) describes them with `EmbedderOptions`: its fields are the option names, each declared
once with its default and its documentation as data (`option_doc`, `option_help`), its `__post_init__` the
validation, and the allowed values of a Literal option are that Literal's `typing.get_args`. A surface forwards what
it was given with `EmbedderOptions.from_arguments` and builds with
`fair_retrieval.embedding.embedder_building.build_embedder(options, model)`, so adding or changing an option touches
this module and the signatures that expose it. `PROMPT_NAMES` are the model prompts a builder may replace (a text put
before every query or every document, as an instruct model expects).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, get_args

import torch

from fair_retrieval.embedding.boundaries import WindowBoundaries
from fair_retrieval.embedding.loading import (
    Precision,
    validate_pooling,
)
from fair_retrieval.embedding.windows import DEFAULT_OVERLAP_WORDS, LongDocuments
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.hook import Pooling
from fair_retrieval.engine.lpes import PositionalScaling
from fair_retrieval.text_checks import LONG_TEXT_CHARACTERS
from fair_retrieval.validate import int_at_least, one_of, positive_int

__all__ = [
    "DEFAULTS",
    "INSTANCE_DEFAULT",
    "LOADING_OPTIONS",
    "PROMPT_NAMES",
    "EmbedderOptions",
    "Precision",
    "active_calibration",
    "as_calibration",
    "option_doc",
    "option_help",
]


class _Default:
    """Marker for an argument not given (None already means something: 'plain', 'the model's')."""

    def __repr__(self) -> str:
        return "<instance default>"


INSTANCE_DEFAULT: Any = _Default()
"""An argument left at its default: `FairEmbedder.embed_documents` uses the instance's own value for it,
`EmbedderOptions.from_arguments` the option's default, and `FairEmbedding` counts the option as not given."""

PROMPT_NAMES: tuple[str, ...] = ("query", "document")
"""The prompts `build_embedder` can set: the text before every query, and before every document (window)."""


def _doc(doc: str, summary: str, *, loading: bool = False, default_words: str = "") -> Mapping[str, Any]:
    """An option's documentation, as data: the metadata of its `dataclasses.field`.

    Args:
        doc: what the option means, its default and its allowed values, in full (the adapters' field descriptions,
            `option_doc`).
        summary: the same in a few words, for a command-line flag's help (`option_help`).
        loading: the option only acts while a model is loaded (`LOADING_OPTIONS`).
        default_words: the default in words, where the value alone does not say it (None meaning "the model's").
    """
    return MappingProxyType({"doc": doc, "summary": summary, "loading": loading, "default_words": default_words})


@dataclass(frozen=True)
class EmbedderOptions:
    """Every `FairEmbedder` argument except the model, validated when created; the defaults of every surface.

    Validation happens here, before any model is loaded, so a wrong value fails where it was written (on a Ray
    driver rather than on each worker, in an adapter's constructor rather than at the first embedding). Change one
    option of a value with `dataclasses.replace(options, max_length=256)`.

    Each field is declared once, with its default and its documentation as data (`option_doc(name)` gives the
    text, `option_help(name)` the command-line help): the adapters' field descriptions and the CLI's `--help` are
    generated from it, so a new option is one field here, written with `field(default=..., metadata=_doc(...))`.

    Raises:
        TypeError: for a value of the wrong type (calibration, device, show_progress_bar, model_kwargs,
            positional_scaling).
        ValueError: for a pooling, precision or long_documents that is not one of its Literal's values, a
            max_length or batch_size that is not a positive int, or a window_overlap that is not an int ≥ 0.
    """

    calibration: Calibration | None = field(
        default=Calibration(),
        metadata=_doc(
            "The default `Calibration` of `embed_documents`; None embeds documents plainly. Default: `Calibration()`.",
            "how documents are calibrated",
        ),
    )
    pooling: Pooling | None = field(
        default=None,
        metadata=_doc(
            '"cls", "mean" or "last" (`Pooling`); None (the default) takes it from the model\'s sentence-transformers '
            "config (required when the model has none, or when its pooling is not one of these).",
            "override the model's pooling",
            loading=True,
            default_words="the model's",
        ),
    )
    max_length: int | None = field(
        default=None,
        metadata=_doc(
            "The model's window: tokens per text or per window; None (the default) uses the model's configured limit.",
            "token limit per text",
            loading=True,
            default_words="the model's",
        ),
    )
    batch_size: int = field(
        default=32,
        metadata=_doc(
            "Texts per forward pass (texts are sorted by length, so batches pad little). Default: 32.",
            "texts per forward pass",
            loading=True,
        ),
    )
    device: str | torch.device | None = field(
        default=None,
        metadata=_doc(
            '"cpu", "cuda", "mps", … (or a `torch.device`); None (the default) picks cuda, then mps, then cpu.',
            "cpu, cuda, mps",
            loading=True,
            default_words="best available",
        ),
    )
    precision: Precision = field(
        default="auto",
        metadata=_doc(
            '"auto" (the default: float32 on CPU/MPS; bfloat16, else float16, on CUDA for a model loaded here), or '
            '"float32", "float16" or "bfloat16" (`Precision`).',
            "numeric precision of the weights",
            loading=True,
        ),
    )
    show_progress_bar: bool = field(
        default=False,
        metadata=_doc(
            "Default for the per-call flag of the same name: a progress bar per call, advancing per batch. "
            f"Default: False. A call holding a text longer than {LONG_TEXT_CHARACTERS:,} characters shows one "
            "anyway, after a warning with its cost (TQDM_DISABLE=1 hides it).",
            "show a progress bar",
        ),
    )
    model_kwargs: Mapping[str, Any] | None = field(
        default=None,
        metadata=_doc(
            "Extra keyword arguments for the transformers model when loading by name (e.g. "
            '{"attn_implementation": "flash_attention_2"}; kept read-only). Default: None.',
            "keyword arguments for the transformers model",
            loading=True,
        ),
    )
    positional_scaling: PositionalScaling | None = field(
        default=None,
        metadata=_doc(
            "The default LPES `PositionalScaling` of `embed_documents` (one factor per layer; RoPE models only; "
            "combines with calibration); None (the default) leaves positions unchanged.",
            "LPES factors per layer",
        ),
    )
    long_documents: LongDocuments = field(
        default="windows",
        metadata=_doc(
            'What happens to a document longer than the window (`LongDocuments`): "windows" (the default) cuts it into '
            "windows of `max_length` tokens, embeds (and calibrates) each and returns their token-weighted mean, "
            'L2-normalised, so every token counts; "truncate" cuts it off at the window, as sentence-transformers, '
            "LlamaIndex's HuggingFaceEmbedding and LangChain's HuggingFaceEmbeddings do. Queries are never windowed: "
            "they are truncated, with a logged warning.",
            "a document longer than --max-length: split into windows that are embedded (and calibrated) and pooled "
            "into one vector, or cut off",
            loading=True,
        ),
    )
    window_overlap: int | None = field(
        default=None,
        metadata=_doc(
            "Tokens consecutive windows share (0 ≤ overlap ≤ half a window's content tokens); None (the default) is "
            "an eighth of a window's content tokens (32 for MiniLM's 256-token window).",
            "tokens consecutive windows share",
            loading=True,
            default_words=DEFAULT_OVERLAP_WORDS,
        ),
    )
    window_boundaries: WindowBoundaries = field(
        default="tokens",
        metadata=_doc(
            'Where a long document is cut into windows (`WindowBoundaries`): "text" cuts at paragraph and sentence '
            "ends, packing whole paragraphs (else whole sentences) up to the window, so a window does not mix the end "
            'of one passage with the start of the next; "tokens" (the default) cuts equal token spans. A sentence '
            'longer than a window, or a text without such ends, is cut by tokens either way. With "text", '
            "window_overlap is a budget: the next window repeats the last whole sentences of the one before that fit.",
            "where long documents are cut into windows: paragraph and sentence ends (text) or equal token spans",
            loading=True,
        ),
    )
    window_tokens: int | None = field(
        default=None,
        metadata=_doc(
            "The most content tokens one window holds (at most what `max_length` holds after the prompt and special "
            "tokens); a document with more is cut into windows. Smaller windows let a multi-vector store find a "
            "passage by a window about its size. None (the default): all that `max_length` holds.",
            "the most content tokens one window holds",
            loading=True,
            default_words="all that --max-length holds",
        ),
    )

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
        int_at_least(self.window_overlap, "window_overlap", 0, or_none=True, note=DEFAULT_OVERLAP_WORDS)
        one_of(self.window_boundaries, "window_boundaries", get_args(WindowBoundaries))
        positive_int(self.window_tokens, "window_tokens", or_none=True)

    @classmethod
    def names(cls) -> tuple[str, ...]:
        """The option names, in declaration order (the keyword arguments of `FairEmbedder` after the model)."""
        return tuple(option.name for option in fields(cls))

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


def active_calibration(calibration: Calibration | None) -> Calibration | None:
    """`calibration` if it changes anything, else None: a calibration of strength 0 embeds as plainly as none.

    The one place that says so, for every check of "is this call calibrated" (the report's warnings, the
    embedder's forward pass).
    """
    return calibration if calibration is not None and calibration.strength > 0.0 else None


def option_doc(name: str, *, loading_note: bool = False) -> str:
    """The documentation of option `name`, as its declaration in `EmbedderOptions` holds it, on one line: what
    surfaces that describe the option themselves (the adapters' field descriptions) show.

    Args:
        name: an option name (`EmbedderOptions.names()`).
        loading_note: for an option in `LOADING_OPTIONS`, add that it only acts when a model is loaded (a ready
            `FairEmbedder` has it fixed).

    Raises:
        ValueError: for a name that is not an option.
    """
    text = str(_metadata(name)["doc"])
    return f"{text} Only when a model is loaded here." if loading_note and name in LOADING_OPTIONS else text


def option_help(name: str) -> str:
    """The command-line help of option `name`: its summary and its default, from its declaration.

    Raises:
        ValueError: for a name that is not an option.
    """
    metadata = _metadata(name)
    default = metadata["default_words"] or getattr(DEFAULTS, name)
    return f"{metadata['summary']} (default: {default})"


def _metadata(name: str) -> Mapping[str, Any]:
    """The declaration data of option `name` (doc, summary, loading, default_words)."""
    declared = {option.name: option.metadata for option in fields(EmbedderOptions)}
    if name not in declared:
        raise ValueError(f"{name!r} is not a FairEmbedder option; the options are {list(declared)}.")
    return declared[name]


LOADING_OPTIONS: tuple[str, ...] = tuple(
    option.name for option in fields(EmbedderOptions) if option.metadata["loading"]
)
"""Options that only act while a model is loaded; a ready `FairEmbedder` has them fixed already (declared with
`loading=True`)."""
