"""The keywords the adapters' constructors take: the `FairEmbedder` options, and those of the anchors.

The anchors are the classes users come from, llama-index's `HuggingFaceEmbedding` and langchain-huggingface's
`HuggingFaceEmbeddings`: both load a sentence-transformers model, with `SentenceTransformer` constructor keywords
(`read_sentence_transformers`) and, in LangChain, `encode` keywords (`read_encode`). Each of them is taken here with
sentence-transformers' meaning, under its own name or as the option that means the same (device, batch_size, a
prompt), or refused with a ValueError that says why and what to use instead (`REFUSED`).

One rule decides which options a caller set, for both adapters: an option is set when its keyword was passed,
whatever its value (`AdapterSettings.given`). A `KeywordReader` collects what the keywords say, refusing two
keywords that say different things about one setting, and `AdapterSettings` validates it all at once and builds
(or shares) the embedder, handing the calibration to it once.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.embedder_building import LOADING_KEYWORDS, resolve_embedder, with_calibration
from fair_retrieval.embedding.embedder_options import EmbedderOptions, as_calibration
from fair_retrieval.embedding.loading import DEFAULT_MODEL

__all__ = [
    "ENCODE_KEYWORDS",
    "REFUSED",
    "ST_KEYWORDS",
    "AdapterSettings",
    "KeywordReader",
    "adapter_model",
    "closest",
    "refuse_unknown",
    "resolved_options",
    "shared_recipe",
]

_PARALLEL = (
    "calibration runs inside this process's model (hooks on its attention), so it cannot be spread over a "
    "sentence-transformers process pool; embed in parallel with several processes that each hold their own "
    "embedding object (e.g. LlamaIndex's IngestionPipeline(num_workers=N), which pickles it), or pass "
    "device='cuda'"
)

REFUSED: dict[str, tuple[Callable[[Any], bool], str]] = {
    "trust_remote_code": (
        lambda value: value is False or value is None,
        "calibration works through transformers' own model code, which a model's remote code bypasses, so "
        "remote-code models are not supported; drop trust_remote_code (models that transformers implements, e.g. "
        "BERT, XLM-R, ModernBERT, Qwen3, load without it)",
    ),
    "backend": (
        lambda value: value in (None, "torch"),
        "calibration hooks the attention of the PyTorch model; an ONNX or OpenVINO backend runs none of it; drop "
        "backend (the model runs in PyTorch; precision='float16' makes it faster on a GPU)",
    ),
    "truncate_dim": (
        lambda value: value is None,
        "vectors are full-size and L2-normalised (windows are pooled and the stores compare them as such); "
        "truncate the returned vectors yourself (v[:d] / |v[:d]|) if you need fewer dimensions",
    ),
    "similarity_fn_name": (
        lambda value: value in (None, "cosine", "dot"),
        "vectors are L2-normalised and the stores score by inner product, which is the cosine; drop similarity_fn_name",
    ),
    "use_kernels": (
        lambda value: not value,
        "Hub kernels replace the attention functions that calibration hooks; drop use_kernels",
    ),
    "kernel_config": (lambda value: value is None, "Hub kernels are not used (see use_kernels); drop kernel_config"),
    "model_card_data": (
        lambda value: value is None,
        "a model card describes a model being trained, not used to embed; drop model_card_data",
    ),
    "modules": (lambda value: value is None, "pass a saved model's folder or Hub id as model= instead of modules"),
    "model_name_or_path": (lambda value: value is None, "pass the model as model="),
    "normalize_embeddings": (
        lambda value: value is True,
        "vectors are always L2-normalised here (calibration and the pooling of windows are defined for them), and "
        "this model's own vectors are not; drop normalize_embeddings (a model that "
        "ends in a Normalize module, as all-MiniLM-L6-v2 does, takes False: its vectors are the same either way)",
    ),
    "normalize": (
        lambda value: value is True,
        "vectors are always L2-normalised here (calibration and the pooling of windows are defined for them), and "
        "this model's own vectors are not; drop normalize (a model that ends in a "
        "Normalize module, as all-MiniLM-L6-v2 does, takes False: its vectors are the same either way)",
    ),
    "precision": (
        lambda value: value in (None, "float32"),
        "quantized vectors (int8, binary, …) are not made here: quantize the returned float32 vectors (e.g. "
        "sentence_transformers.quantization.quantize_embeddings); for the weights' precision pass precision= "
        "('float16', 'bfloat16') to the embedding class itself",
    ),
    "convert_to_numpy": (lambda value: value is True, "the adapters return lists of floats; drop convert_to_numpy"),
    "convert_to_tensor": (lambda value: value is False, "the adapters return lists of floats; drop convert_to_tensor"),
    "output_value": (
        lambda value: value in (None, "sentence_embedding"),
        "only sentence embeddings are made (one vector per text); drop output_value",
    ),
    "multi_process": (lambda value: value is False, _PARALLEL),
    "parallel_process": (lambda value: value is False, _PARALLEL),
    "target_devices": (lambda value: value is None, _PARALLEL),
    "pool": (lambda value: value is None, _PARALLEL),
    "chunk_size": (lambda value: value is None, _PARALLEL),
}
"""Anchor keywords taken only with the value that changes nothing here: (is that value?, why others are refused)."""

# SentenceTransformer constructor keywords and what they become here.
_ST_OPTIONS = {"device": "device", "model_kwargs": "model_kwargs"}
_ST_ALIASES = {"tokenizer_kwargs": "processor_kwargs", "use_auth_token": "token"}
_ST_REFUSED = (
    "trust_remote_code",
    "backend",
    "truncate_dim",
    "similarity_fn_name",
    "use_kernels",
    "kernel_config",
    "model_card_data",
    "modules",
    "model_name_or_path",
)
_ENCODE_REFUSED = (
    "normalize_embeddings",
    "precision",
    "convert_to_numpy",
    "convert_to_tensor",
    "output_value",
    "truncate_dim",
    "pool",
    "chunk_size",
)
ST_KEYWORDS = (*_ST_OPTIONS, *LOADING_KEYWORDS, *_ST_ALIASES, *_ST_REFUSED)
"""The `SentenceTransformer` constructor keywords `read_sentence_transformers` knows (taken or refused)."""
ENCODE_KEYWORDS = ("prompt", "prompt_name", "batch_size", "show_progress_bar", "device", *_ENCODE_REFUSED)
"""The sentence-transformers `encode` keywords `read_encode` knows (taken or refused with the reason)."""


def closest(name: str, valid: Iterable[str]) -> str | None:
    """The valid name closest to `name` (a typo's likely meaning), or None when none is close."""
    found = difflib.get_close_matches(name, list(valid), n=1)
    return found[0] if found else None


def refuse_unknown(owner: str, names: Iterable[str], valid: Iterable[str], what: str = "option") -> None:
    """Raise a ValueError naming each unknown keyword with the closest valid one ("did you mean"), if any.

    Why: a typo dropped silently leaves a setting at its default, which only shows in the results.
    """
    valid = list(valid)
    unknown = list(names)
    if not unknown:
        return
    described = []
    for name in unknown:
        near = closest(name, valid)
        described.append(f"{name!r}" + (f" (did you mean {near!r}?)" if near else ""))
    raise ValueError(
        f"{owner} got unknown {what}{'s' if len(unknown) > 1 else ''} {', '.join(described)}. "
        f"Valid {what}s: {', '.join(valid)}."
    )


def check_refused(owner: str, name: str, value: Any, where: str = "") -> None:
    """Raise the ValueError of `REFUSED` when keyword `name` has a value that cannot be honoured here."""
    accepts, why = REFUSED[name]
    if not accepts(value):
        raise ValueError(f"{owner}: {where}{name}={value!r} cannot be honoured: {why}.")


def adapter_model(model: str | os.PathLike[str] | None, embedder: FairEmbedder | None) -> str | os.PathLike[str] | None:
    """The model an adapter loads: `model`, or with neither it nor a shared `embedder` given the default model
    (`fair_retrieval.embedding.loading.DEFAULT_MODEL`, all-MiniLM-L6-v2, its bundled copy when the Hub cannot be
    reached), as `HuggingFaceEmbeddings()` and `HuggingFaceEmbedding()` load theirs."""
    return DEFAULT_MODEL if model is None and embedder is None else model


@dataclass
class KeywordReader:
    """What an adapter's keywords say, by setting: options (by `EmbedderOptions` name), prompts ("query_prompt",
    "document_prompt"), prompt names ("query_prompt_name", "document_prompt_name") and loading keywords
    (`LOADING_KEYWORDS`). Two keywords that give one setting different values are refused."""

    owner: str
    given: dict[str, Any] = field(default_factory=dict)
    _sources: dict[str, str] = field(default_factory=dict)

    def set(self, name: str, value: Any, source: str) -> None:
        """Record that keyword `source` sets `name` to `value`.

        Raises:
            ValueError: when another keyword set `name` to a different value.
        """
        if name in self.given and self.given[name] != value:
            raise ValueError(
                f"{self.owner}: {source}={value!r} and {self._sources[name]}={self.given[name]!r} both set {name}; "
                "pass one of them."
            )
        self.given[name] = value
        self._sources[name] = source

    def read_sentence_transformers(self, kwargs: Mapping[str, Any], source: str, *, others: str) -> list[str]:
        """Read `SentenceTransformer` constructor keywords as sentence-transformers reads them.

        Args:
            kwargs: the keywords.
            source: how the caller passed them, for messages (e.g. "model_kwargs").
            others: what a keyword that is no constructor keyword is: "model_kwargs" (a keyword for the
                transformers model, as `FairEmbeddings(model_kwargs=...)` has always taken them) or "unknown"
                (returned, for the caller to refuse with the closest valid name).

        Returns:
            The unknown keywords (none when `others` is "model_kwargs").

        Raises:
            ValueError: for a refused value (`REFUSED`) or a conflict.
        """
        transformers: dict[str, Any] = {}
        unknown = []
        for name, value in kwargs.items():
            label = f"{source}[{name!r}]" if source else name
            if name in _ST_OPTIONS:
                self.set(_ST_OPTIONS[name], value, label)
            elif name in LOADING_KEYWORDS or name in _ST_ALIASES:
                self.set(_ST_ALIASES.get(name, name), value, label)
            elif name in _ST_REFUSED:
                check_refused(self.owner, name, value, f"{source}: " if source else "")
            elif others == "model_kwargs":
                transformers[name] = value
            else:
                unknown.append(name)
        if transformers:
            merged = {**transformers, **dict(self.given.get("model_kwargs") or {})}
            self.given["model_kwargs"] = merged
            self._sources.setdefault("model_kwargs", source)
        return unknown

    def read_encode(self, kwargs: Mapping[str, Any], tasks: tuple[str, ...], source: str) -> None:
        """Read sentence-transformers `encode` keywords, meant for `tasks` ("query", "document" or both).

        Raises:
            ValueError: for a refused value (`REFUSED`), a conflict, or an unknown keyword (with the closest one).
        """
        if not isinstance(kwargs, Mapping):
            raise TypeError(f"{source} must be a dict, got {type(kwargs).__name__}.")
        refuse_unknown(
            f"{self.owner} {source}", [k for k in kwargs if k not in ENCODE_KEYWORDS], ENCODE_KEYWORDS, "key"
        )
        for name, value in kwargs.items():
            label = f"{source}[{name!r}]"
            if name in ("prompt", "prompt_name"):
                for task in tasks:
                    self.set(f"{task}_{name}", value, label)
            elif name in ("batch_size", "show_progress_bar", "device"):
                self.set(name, value, label)
            elif name == "normalize_embeddings" and value is False:
                self.set("normalize_embeddings", False, label)  # checked against the model once it is loaded
            else:
                check_refused(self.owner, name, value, f"{source}: ")


@dataclass(frozen=True)
class AdapterSettings:
    """What an adapter's constructor was given, validated: its options, prompts and loading keywords.

    Attributes:
        options: the `EmbedderOptions` of the options given (the others at their defaults).
        given: the names of the options given: the one rule for "explicitly set" in both adapters.
        prompts: the query and document prompts to set ({"query": …, "document": …}), or None.
        prompt_names: which of the model's prompts are the query and document prompts, by name.
        loading: sentence-transformers loading keywords (`LOADING_KEYWORDS`).
        normalize: False when unnormalised vectors were asked for (normalize=False, normalize_embeddings=False):
            taken only for a model whose vectors are normalised anyway (it ends in a Normalize module).
    """

    options: EmbedderOptions
    given: frozenset[str]
    prompts: dict[str, str] | None
    prompt_names: dict[str, str]
    loading: dict[str, Any]
    normalize: bool = True

    @classmethod
    def of(cls, settings: Mapping[str, Any]) -> AdapterSettings:
        """Validate `settings` (what a `KeywordReader` collected; a calibration may be its dict form).

        Raises:
            ValueError, TypeError: as `EmbedderOptions` does; for a prompt or prompt name that is not a str.
        """
        names = set(EmbedderOptions.names())
        options = {name: value for name, value in settings.items() if name in names}
        if "calibration" in options:
            options["calibration"] = as_calibration(options["calibration"])
        prompts: dict[str, str] = {}
        prompt_names: dict[str, str] = {}
        for task in ("query", "document"):
            for key, target in ((f"{task}_prompt", prompts), (f"{task}_prompt_name", prompt_names)):
                value = settings.get(key)
                if value is None:
                    continue
                if not isinstance(value, str):
                    raise TypeError(
                        f"The {task} prompt{' name' if target is prompt_names else ''} must be a str, "
                        f"got {type(value).__name__}."
                    )
                target[task] = value
            if task in prompts and task in prompt_names:
                raise ValueError(f"Both a {task} prompt and a {task} prompt name were given; pass one of them.")
        loading = {name: value for name, value in settings.items() if name in LOADING_KEYWORDS and value is not None}
        if isinstance(loading.get("cache_folder"), os.PathLike):
            loading["cache_folder"] = os.fspath(loading["cache_folder"])
        normalize = settings.get("normalize_embeddings", True)
        if not isinstance(normalize, bool):
            raise TypeError(f"normalize must be a bool, got {type(normalize).__name__}.")
        return cls(EmbedderOptions(**options), frozenset(options), prompts or None, prompt_names, loading, normalize)

    def embedder(self, owner: str, model: str | os.PathLike[str] | None, embedder: FairEmbedder | None) -> FairEmbedder:
        """The adapter's embedder: `model` loaded with these settings (neither it nor `embedder` given: the default
        model, `adapter_model`), or `embedder` shared, with the calibration given (if any) handed to it here, once.

        Raises:
            ValueError, TypeError: as `resolve_embedder`.
        """
        built = resolve_embedder(
            owner,
            model=adapter_model(model, embedder),
            embedder=embedder,
            options=self.options,
            explicitly_set=self.given,
            prompts=self.prompts,
            loading=self.loading,
            prompt_names=self.prompt_names,
        )
        if not self.normalize and not any(type(module).__name__ == "Normalize" for module in built.model):
            source = "normalize_embeddings" if owner == "FairEmbeddings" else "normalize"
            raise ValueError(f"{owner}: {source}=False cannot be honoured: {REFUSED[source][1]}.")
        if embedder is not None and "calibration" in self.given:
            return with_calibration(built, self.options.calibration)
        return built


def resolved_options(embedder: FairEmbedder) -> dict[str, Any]:
    """The options `embedder` resolved (a default of None becomes the model's own): calibration, pooling,
    max_length, long_documents, window_overlap, window_boundaries, window_tokens and device. One list for what an
    adapter's fields show and what a pickled adapter loads again."""
    return {
        "calibration": embedder.calibration,
        "pooling": embedder.pooling,
        "max_length": embedder.max_length,
        "long_documents": embedder.long_documents,
        "window_overlap": embedder.window_overlap,
        "window_boundaries": embedder.window_boundaries,
        "window_tokens": embedder.window_tokens,
        "device": str(embedder.device),
    }


def shared_recipe(embedder: FairEmbedder) -> tuple[str, dict[str, Any]]:
    """What a pickled adapter over a shared `embedder` loads instead of it: the model by name and the settings
    that give the same vectors (`resolved_options`, batch size, positional scaling, prompts), for
    `AdapterSettings.of`.

    Why: a loaded model does not pickle (locks, hooks), and a worker process loads its own copy anyway.
    """
    identity = embedder.identity()
    settings = {
        **resolved_options(embedder),
        "batch_size": embedder.batch_size,
        "positional_scaling": embedder.positional_scaling,
        "query_prompt": identity["query_prompt"],
        "document_prompt": identity["document_prompt"],
    }
    return embedder.model_name, settings
