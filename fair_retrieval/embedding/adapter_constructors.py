"""What the two embeddings adapters do with their constructors' keywords, free of either framework.

The LlamaIndex `FairEmbedding` takes the keywords of llama-index's `HuggingFaceEmbedding`, the LangChain
`FairEmbeddings` those of langchain-huggingface's `HuggingFaceEmbeddings`, each beside the `FairEmbedder` options.
Each adapter hands what it was given to one function here (`llamaindex_keywords`, `langchain_keywords`), which reads
it with a `KeywordReader` (`fair_retrieval.embedding.keywords`: the anchors' keywords taken or refused with the
reason, an unknown one refused with the closest valid name) into the settings `AdapterSettings` validates and builds
from. The rest of what both adapters share is here too:

- `ADAPTER_FIELDS`: the documentation of each adapter field, options and anchor keywords alike, as data (the
  fields' descriptions, which `python -OO` keeps);
- `OPTION_PARAMETERS`: the options an adapter takes under their own names;
- `embedder_values(embedder, options)`: the option values of a built embedder, what the adapter's fields show;
- `recalibrated`: a calibration set on a built adapter, and the embedder view that uses it;
- `EmbedderRecipe`: what a pickled adapter loads again in the process that unpickles it (a loaded model does not
  pickle);
- `SplitterPlan`: the chunk size, overlap and token counter of a text splitter feeding the embedder;
- `chunk_starts`: each chunk's character offset in its text, for a splitter whose overlap is counted in tokens.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.embedder_building import with_calibration
from fair_retrieval.embedding.embedder_options import DEFAULTS, INSTANCE_DEFAULT, EmbedderOptions, as_calibration
from fair_retrieval.embedding.embedder_options import option_doc as _option_doc
from fair_retrieval.embedding.keywords import (
    ST_KEYWORDS,
    AdapterSettings,
    KeywordReader,
    adapter_model,
    check_refused,
    refuse_unknown,
    resolved_options,
)
from fair_retrieval.embedding.keywords import shared_recipe as _shared_recipe
from fair_retrieval.embedding.windows import chunk_plan
from fair_retrieval.engine.calibration import Calibration

__all__ = [
    "ADAPTER_FIELDS",
    "LANGCHAIN_ALIASES",
    "OPTION_PARAMETERS",
    "EmbedderRecipe",
    "LlamaIndexKeywords",
    "SplitterPlan",
    "chunk_starts",
    "embedder_values",
    "langchain_keywords",
    "langchain_recipe",
    "langchain_renamed",
    "langchain_settings",
    "llamaindex_keywords",
    "recalibrated",
    "valid_keywords",
]

OPTION_PARAMETERS = tuple(name for name in EmbedderOptions.names() if name not in ("batch_size", "positional_scaling"))
"""The `FairEmbedder` options both adapters take under their own names (LlamaIndex calls batch_size
embed_batch_size; the adapters expose no LPES)."""

_WITH_EMBEDDER = " With `embedder` and no value given: the embedder's own."
ADAPTER_FIELDS: Mapping[str, str] = {
    "model": (
        "Hub id or local folder of a sentence-transformers model (LangChain alias: model_name); with no embedder "
        "either: sentence-transformers/all-MiniLM-L6-v2 (its bundled copy offline)."
    ),
    "embedder": "An already loaded FairEmbedder to share.",
    "calibration": _option_doc("calibration") + _WITH_EMBEDDER,
    **{name: _option_doc(name, loading_note=True) for name in EmbedderOptions.names() if name != "calibration"},
    "embed_batch_size": "Texts per call into the embedder; when a model is loaded here also: "
    + _option_doc("batch_size"),
    "model_kwargs": _option_doc("model_kwargs", loading_note=True)
    + " As in HuggingFaceEmbeddings, the `SentenceTransformer` keywords among them (device, prompts, revision, "
    "token, cache_folder, …) are read as sentence-transformers reads them.",
    "query_instruction": "Text put before every query (the model's query prompt); None: the model's own.",
    "text_instruction": "Text put before every document (the model's document prompt); None: the model's own.",
    "encode_kwargs": "sentence-transformers `encode` keywords for documents (and for queries when "
    "query_encode_kwargs is empty), as in HuggingFaceEmbeddings: prompt, prompt_name, batch_size, "
    "show_progress_bar, device; normalize_embeddings=True.",
    "query_encode_kwargs": "sentence-transformers `encode` keywords for queries (as encode_kwargs).",
    "cache_folder": "Where sentence-transformers downloads the model to (None: the Hugging Face cache).",
    "multi_process": "As in HuggingFaceEmbeddings; only False (calibration runs in this process).",
    "normalize": "As in HuggingFaceEmbedding; vectors are always L2-normalised here, so False is only taken for a "
    "model whose vectors are normalised anyway (one that ends in a Normalize module, as all-MiniLM-L6-v2).",
    "trust_remote_code": "As in HuggingFaceEmbedding; only False, because calibration needs a model whose "
    "attention runs through transformers' own code.",
    "parallel_process": "As in HuggingFaceEmbedding; only False (calibration runs in this process's model: use "
    "IngestionPipeline(num_workers=N), which pickles the embedding object, instead).",
    "target_devices": "As in HuggingFaceEmbedding; only None (see parallel_process).",
}
"""What each field and keyword of the adapters means: the `FairEmbedder` options (their `EmbedderOptions`
documentation, with the note on loading-only options) and the anchors' keywords; docs/guides/langchain.md and
docs/guides/llamaindex.md show them as tables."""

LANGCHAIN_ALIASES = {"model_name": "model", "show_progress": "show_progress_bar"}
"""HuggingFaceEmbeddings' names for FairEmbeddings' fields."""


def valid_keywords(function: Callable[..., Any], others: Iterable[str]) -> list[str]:
    """Every keyword a constructor accepts: the named parameters of `function`, then `others` (the keywords it
    takes through **kwargs), each once, for "did you mean" messages."""
    parameters = inspect.signature(function).parameters
    named = [name for name, p in parameters.items() if name != "self" and p.kind is not p.VAR_KEYWORD]
    return [*named, *dict.fromkeys(name for name in others if name not in named)]


@dataclass(frozen=True)
class LlamaIndexKeywords:
    """What `FairEmbedding`'s keywords made (`llamaindex_keywords`).

    Attributes:
        embedder: the embedder, loaded or shared.
        fields: the values of FairEmbedding's fields, for LlamaIndex's own constructor: the model as the user named
            it (`model_name`: a Hub id stays a Hub id even when a local copy was loaded, so that `to_dict()` /
            `from_dict()` load the same model elsewhere; a shared embedder's own name otherwise), the option values
            of the embedder (`embedder_values`), and the `BaseEmbedding` fields passed through.
        recipe: what a pickled copy loads again.
    """

    embedder: FairEmbedder
    fields: dict[str, Any]
    recipe: EmbedderRecipe


def llamaindex_keywords(
    arguments: Mapping[str, Any], constructor: Callable[..., Any], base_fields: Iterable[str]
) -> LlamaIndexKeywords:
    """Read `FairEmbedding`'s constructor keywords, with llama-index `HuggingFaceEmbedding`'s meaning, and build.

    Args:
        arguments: the constructor's parameters by name, as called (an option left out is `INSTANCE_DEFAULT`), with
            the other keywords under "kwargs".
        constructor: FairEmbedding's `__init__`, whose parameters (`valid_keywords`), with the base fields it does
            not name and the `SentenceTransformer` keywords (`ST_KEYWORDS`), are the keywords it accepts.
        base_fields: the fields of LlamaIndex's `BaseEmbedding`; those the constructor does not name (model_name,
            num_workers, embeddings_cache: `to_dict()` writes them, so `from_dict()` gives them back) are passed
            through to LlamaIndex as they are; `model_name` is also the model's name.

    Raises:
        ValueError: for an unknown option (the message lists the valid ones and suggests the closest), an option
            value `EmbedderOptions` refuses (with its message), a `HuggingFaceEmbedding` value that cannot be
            honoured (with the reason), if both `model` and `embedder` are given (neither: the default model,
            `adapter_model`), or loading options
            or instructions come with an `embedder`.
        TypeError: if `embedder` is not a FairEmbedder, `calibration` not a Calibration, dict or None, an option of
            the wrong type (as `EmbedderOptions`), or an instruction not a str or None.
    """
    owner = "FairEmbedding"
    kwargs = dict(arguments["kwargs"])
    passed_through = sorted(set(base_fields) - set(valid_keywords(constructor, ())))
    base = {name: kwargs.pop(name) for name in list(kwargs) if name in passed_through}
    reader = KeywordReader(owner)
    unknown = reader.read_sentence_transformers(kwargs, "", others="unknown")
    refuse_unknown(owner, unknown, valid_keywords(constructor, [*passed_through, *ST_KEYWORDS]))
    for name in OPTION_PARAMETERS:
        if arguments[name] is not INSTANCE_DEFAULT:
            reader.set(name, arguments[name], name)
    embedder, batch_size = arguments["embedder"], arguments["embed_batch_size"]
    # embed_batch_size also sizes LlamaIndex's own batches, so it may come with a ready embedder.
    if batch_size is not INSTANCE_DEFAULT and embedder is None:
        reader.set("batch_size", batch_size, "embed_batch_size")
    for name in ("trust_remote_code", "parallel_process", "target_devices"):
        check_refused(owner, name, arguments[name])
    if arguments["normalize"] is not True:  # taken for a model whose vectors are normalised anyway (checked on load)
        reader.set("normalize_embeddings", arguments["normalize"], "normalize")
    reader.set("cache_folder", arguments["cache_folder"], "cache_folder")
    _read_instructions(reader, arguments["query_instruction"], arguments["text_instruction"], embedder)
    model = adapter_model(_model_argument(arguments["model"], base.pop("model_name", None)), embedder)
    settings = AdapterSettings.of(reader.given)
    built = settings.embedder(owner, model, embedder)
    fields = {
        "model_name": str(model) if model is not None else built.model_name,
        "embed_batch_size": DEFAULTS.batch_size if batch_size is INSTANCE_DEFAULT else batch_size,
        **embedder_values(built, settings.options),
        "query_instruction": arguments["query_instruction"],
        "text_instruction": arguments["text_instruction"],
        **({} if arguments["callback_manager"] is None else {"callback_manager": arguments["callback_manager"]}),
        **base,
    }
    return LlamaIndexKeywords(built, fields, EmbedderRecipe.of(owner, model, reader.given, built))


def _read_instructions(
    reader: KeywordReader, query_instruction: object, text_instruction: object, embedder: FairEmbedder | None
) -> None:
    """The instructions as the model's query and document prompts ("" = none; None = the model's own)."""
    for argument, value in (("query_instruction", query_instruction), ("text_instruction", text_instruction)):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{argument} must be a str or None, got {type(value).__name__}.")
    if embedder is not None and (query_instruction is not None or text_instruction is not None):
        raise ValueError(
            "FairEmbedding: query_instruction and text_instruction set the model's prompts, which a FairEmbedder "
            "reads when it is built; pass model= to load the model here with them, or build the FairEmbedder "
            "from a SentenceTransformer whose prompts you set (model.prompts = {'query': ..., 'document': ...})."
        )
    if query_instruction is not None:
        reader.set("query_prompt", query_instruction, "query_instruction")
    if text_instruction is not None:
        reader.set("document_prompt", text_instruction, "text_instruction")


def _model_argument(model: str | None, model_name: str | None) -> str | None:
    """`model`, or `model_name` (the field name LlamaIndex uses in `to_dict()`), but not two different ones."""
    if model_name is None:
        return model
    if model is not None and str(model) != str(model_name):
        raise ValueError(f"model={model!r} and model_name={model_name!r} disagree; pass only model.")
    return model_name


def langchain_renamed(data: Mapping[str, Any], fields: Iterable[str]) -> dict[str, Any]:
    """`FairEmbeddings`' keywords by field name, checked: `langchain_settings`' first half."""
    return langchain_settings(data, fields)[0]


def langchain_settings(data: Mapping[str, Any], fields: Iterable[str]) -> tuple[dict[str, Any], AdapterSettings]:
    """`FairEmbeddings`' keywords by field name and the settings they make, read once per construction:
    HuggingFaceEmbeddings' names (`LANGCHAIN_ALIASES`) renamed, an unknown keyword refused with the closest valid
    name, and the values checked (`langchain_keywords`, `AdapterSettings.of`), before pydantic converts or checks
    them its own way, so a bad value gets the message every other surface gives.

    Raises:
        ValueError: an alias and its field both given with different values, an unknown keyword (with the closest
            valid name), or as `langchain_keywords`; when the embedder is built (`AdapterSettings.embedder`): both
            of `model` and `embedder` (neither: the default model, `adapter_model`), or loading options (pooling,
            max_length, device, precision, model_kwargs, …) together with `embedder`.
        TypeError: for an option of the wrong type, as `EmbedderOptions` raises it (e.g. a calibration that is not a
            Calibration, a dict or None).
    """
    renamed = dict(data)
    for alias, name in LANGCHAIN_ALIASES.items():
        if alias in renamed:
            value = renamed.pop(alias)
            if name in renamed and renamed[name] != value:
                raise ValueError(
                    f"FairEmbeddings: {alias}={value!r} and {name}={renamed[name]!r} disagree; pass {name}."
                )
            renamed[name] = value
    fields = list(fields)
    refuse_unknown("FairEmbeddings", [k for k in renamed if k not in fields], [*fields, *LANGCHAIN_ALIASES])
    given = {name: value for name, value in renamed.items() if name != "embedder"}
    return renamed, AdapterSettings.of(langchain_keywords(given))


def langchain_keywords(given: Mapping[str, Any]) -> dict[str, Any]:
    """The settings `FairEmbeddings`' keywords `given` (by field name, only those passed: the one rule for
    "given") make, read with langchain-huggingface `HuggingFaceEmbeddings`' meaning, for `AdapterSettings.of`.

    Raises:
        ValueError: for a refused value or two keywords that set one thing differently.
        TypeError: for a model_kwargs that is not a dict, or encode keywords that are not a dict.
    """
    reader = KeywordReader("FairEmbeddings")
    if "multi_process" in given:
        check_refused("FairEmbeddings", "multi_process", given["multi_process"])
    model_kwargs = given.get("model_kwargs")
    if model_kwargs is not None:
        if not isinstance(model_kwargs, dict):
            raise TypeError(f"model_kwargs must be a dict or None, got {type(model_kwargs).__name__}.")
        reader.read_sentence_transformers(model_kwargs, "model_kwargs", others="model_kwargs")
    if "model_kwargs" in given:  # passed, so given (with a ready embedder it is refused, as every loading option)
        reader.given.setdefault("model_kwargs", None)
    for name in EmbedderOptions.names():
        if name in given and name != "model_kwargs":
            reader.set(name, given[name], name)
    query_kwargs = given.get("query_encode_kwargs") or {}
    reader.read_encode(
        given.get("encode_kwargs") or {}, ("document",) if query_kwargs else ("document", "query"), "encode_kwargs"
    )
    reader.read_encode(query_kwargs, ("query",), "query_encode_kwargs")
    for name, key in (("query_instruction", "query_prompt"), ("text_instruction", "document_prompt")):
        if given.get(name) is not None:
            reader.set(key, given[name], name)
    if given.get("cache_folder") is not None:
        reader.set("cache_folder", given["cache_folder"], "cache_folder")
    return reader.given


def embedder_values(embedder: FairEmbedder, options: EmbedderOptions) -> dict[str, Any]:
    """The option values an adapter's fields show for `embedder`: what the embedder resolved (a default of None
    becomes the model's own), and `options`' precision and show_progress_bar (the embedder keeps no copy)."""
    return {
        **resolved_options(embedder),
        "precision": options.precision,
        "show_progress_bar": options.show_progress_bar,
    }


@dataclass(frozen=True)
class EmbedderRecipe:
    """What a pickled adapter loads again in the process that unpickles it: the model by name and its settings.

    Why: a loaded model does not pickle (locks, hooks), and a worker process (LlamaIndex's
    `IngestionPipeline(num_workers=N)`, a LangChain worker pool) loads its own copy anyway.
    """

    owner: str
    model: str | None
    settings: Mapping[str, Any]

    @classmethod
    def of(
        cls, owner: str, model: str | os.PathLike[str] | None, settings: Mapping[str, Any], embedder: FairEmbedder
    ) -> EmbedderRecipe:
        """The recipe of an adapter that loaded `model` with `settings` (what its keywords said) or, with `model`
        None, that shares `embedder`: that embedder's model by name and the settings that give the same vectors
        (calibration, window, pooling, prompts)."""
        if model is not None:
            return cls(owner, str(model), dict(settings))
        return cls(owner, *_shared_recipe(embedder))

    def load(self) -> FairEmbedder:
        """The embedder this recipe describes, loaded here.

        Raises:
            ValueError, TypeError: as `AdapterSettings.embedder`.
        """
        return AdapterSettings.of(self.settings).embedder(self.owner, self.model, None)


def langchain_recipe(model: str | None, given: Mapping[str, Any], embedder: FairEmbedder) -> EmbedderRecipe:
    """What a pickled `FairEmbeddings` loads again: `model` with the settings its keywords `given` make
    (`langchain_keywords`), or, with `model` None (it was given a ready embedder), `embedder`'s model and settings
    (`EmbedderRecipe.of`)."""
    return EmbedderRecipe.of("FairEmbeddings", model, langchain_keywords(given), embedder)


def recalibrated(embedder: FairEmbedder, calibration: Any) -> tuple[Calibration | None, FairEmbedder]:
    """A calibration set on an adapter after it was built (a `Calibration`, its dict form or None), checked, and
    the view of `embedder` that uses it (sharing its loaded model): what the adapter keeps in its field and uses.

    Raises:
        TypeError: for a calibration that is not a Calibration, a dict or None.
    """
    value = as_calibration(calibration)
    return value, with_calibration(embedder, value)


@dataclass(frozen=True)
class SplitterPlan:
    """How a framework's text splitter feeding `embedder` is set up (`SplitterPlan.of`).

    Attributes:
        size: model tokens per chunk.
        overlap: model tokens consecutive chunks share.
        tokens: the model's token ids of a text, special tokens excluded (what the splitter counts).
    """

    size: int
    overlap: int
    tokens: Callable[[str], list[int]]

    @classmethod
    def of(cls, embedder: FairEmbedder, chunk_size: int | None, chunk_overlap: int | None) -> SplitterPlan:
        """Chunks of one window by default (`embedder.window_content_tokens`: what the model reads, nothing cut or
        windowed), an eighth of the chunk overlapping (`chunk_plan`), measured in the model's own tokens.

        Raises:
            ValueError: for a chunk size < 1 or an overlap outside [0, chunk size).
        """
        size, overlap = chunk_plan(embedder.window_content_tokens, chunk_size, chunk_overlap)
        tokenizer = embedder.tokenizer

        def tokens(text: str) -> list[int]:
            return tokenizer.encode(text, add_special_tokens=False, verbose=False)  # type: ignore[no-any-return]

        return cls(size, overlap, tokens)


def chunk_starts(text: str, chunks: Iterable[str]) -> list[int]:
    """The character offset of each chunk of `text` (-1 for one not found), chunks given in order of start.

    Each is searched from just after the previous chunk's start, a valid lower bound for chunks in order. Why:
    LangChain's `create_documents` searches from "previous start + previous length − chunk_overlap", which with an
    overlap counted in tokens (and offsets in characters) starts past the chunk, so about every other chunk got -1.
    """
    starts = []
    search_from = 0
    for chunk in chunks:
        start = text.find(chunk, search_from)
        starts.append(start)
        search_from = start + 1 if start >= 0 else search_from
    return starts
