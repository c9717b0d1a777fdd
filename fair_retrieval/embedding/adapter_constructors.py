"""What the two embeddings adapters do with their constructors' keywords, free of either framework.

The LlamaIndex `FairEmbedding` takes the keywords of llama-index's `HuggingFaceEmbedding`, the LangChain
`FairEmbeddings` those of langchain-huggingface's `HuggingFaceEmbeddings`, each beside the `FairEmbedder` options.
Each adapter hands what it was given to one function here (`llamaindex_keywords`, `langchain_keywords`), which reads
it with a `KeywordReader` (`fair_retrieval.embedding.keywords`: the anchors' keywords taken or refused with the
reason, an unknown one refused with the closest valid name) into the settings `AdapterSettings` validates and builds
from. The rest of what both adapters share is here too:

- `ADAPTER_FIELDS`: the documentation (and default) of each adapter field, options and anchor keywords alike, as
  data: `field_spec(name)` is what a pydantic field declaration takes (so `python -OO` keeps it);
- `OPTION_PARAMETERS`: the options an adapter takes under their own names;
- `embedder_values(embedder, options)`: the option values of a built embedder, what the adapter's fields show;
- `EmbedderRecipe`: what a pickled adapter loads again in the process that unpickles it (a loaded model does not
  pickle);
- `SplitterPlan`: the chunk size, overlap and token counter of a text splitter feeding the embedder;
- `chunk_starts`: each chunk's character offset in its text, for a splitter whose overlap is counted in tokens.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fair_retrieval.embedding.embedder import FairEmbedder
from fair_retrieval.embedding.embedder_options import DEFAULTS, INSTANCE_DEFAULT, EmbedderOptions
from fair_retrieval.embedding.embedder_options import option_doc as _option_doc
from fair_retrieval.embedding.keywords import AdapterSettings, KeywordReader, check_refused, refuse_unknown
from fair_retrieval.embedding.keywords import shared_recipe as _shared_recipe
from fair_retrieval.embedding.windows import chunk_plan

__all__ = [
    "ADAPTER_FIELDS",
    "LANGCHAIN_ALIASES",
    "OPTION_PARAMETERS",
    "EmbedderRecipe",
    "LlamaIndexKeywords",
    "SplitterPlan",
    "chunk_starts",
    "embedder_values",
    "field_spec",
    "langchain_keywords",
    "langchain_renamed",
    "llamaindex_keywords",
    "valid_keywords",
]

OPTION_PARAMETERS = tuple(name for name in EmbedderOptions.names() if name not in ("batch_size", "positional_scaling"))
"""The `FairEmbedder` options both adapters take under their own names (LlamaIndex calls batch_size
embed_batch_size; the adapters expose no LPES)."""

_WITH_EMBEDDER = " With `embedder` and no value given: the embedder's own."
ADAPTER_FIELDS: Mapping[str, str] = {
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

_FIELD_DEFAULTS: Mapping[str, Any] = {
    **{name: getattr(DEFAULTS, name) for name in EmbedderOptions.names()},
    "device": None,  # the device is chosen when the model loads
    "model_kwargs": None,
    "embed_batch_size": DEFAULTS.batch_size,
    "query_instruction": None,
    "text_instruction": None,
    "cache_folder": None,
    "multi_process": False,
}
_FIELD_FACTORIES: Mapping[str, Callable[[], Any]] = {"encode_kwargs": dict, "query_encode_kwargs": dict}

LANGCHAIN_ALIASES = {"model_name": "model", "show_progress": "show_progress_bar"}
"""HuggingFaceEmbeddings' names for FairEmbeddings' fields."""


def field_spec(name: str, note: str = "") -> dict[str, Any]:
    """The default and description (with `note` after it) of the adapter field `name`, as a pydantic
    `Field(**field_spec(name))` takes them.

    Raises:
        ValueError: for a name that is no adapter field.
    """
    if name in _FIELD_FACTORIES:
        return {"default_factory": _FIELD_FACTORIES[name], "description": ADAPTER_FIELDS[name] + note}
    if name not in _FIELD_DEFAULTS:
        raise ValueError(f"{name!r} is not an adapter field; the fields are {', '.join(ADAPTER_FIELDS)}.")
    return {"default": _FIELD_DEFAULTS[name], "description": ADAPTER_FIELDS[name] + note}


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
        settings: the validated settings it was built from.
        given: the settings as read, what a pickled copy loads again with (`EmbedderRecipe`).
        model: the model as named (`model` or LlamaIndex's `model_name`), None with a shared embedder.
        passed_through: the `BaseEmbedding` fields given, for the framework's own constructor.
    """

    embedder: FairEmbedder
    settings: AdapterSettings
    given: dict[str, Any]
    model: str | None
    passed_through: dict[str, Any]


def llamaindex_keywords(
    arguments: Mapping[str, Any], passed_through: Iterable[str], valid: Sequence[str]
) -> LlamaIndexKeywords:
    """Read `FairEmbedding`'s constructor keywords, with llama-index `HuggingFaceEmbedding`'s meaning, and build.

    Args:
        arguments: the constructor's parameters by name, as called (an option left out is `INSTANCE_DEFAULT`), with
            the other keywords under "kwargs".
        passed_through: the `BaseEmbedding` fields FairEmbedding hands to LlamaIndex as they are (model_name,
            num_workers, …); `model_name` is also the model's name.
        valid: every keyword FairEmbedding accepts (`valid_keywords`), for the message of an unknown one.

    Raises:
        ValueError, TypeError: as `FairEmbedding` documents them.
    """
    owner = "FairEmbedding"
    kwargs = dict(arguments["kwargs"])
    base = {name: kwargs.pop(name) for name in list(kwargs) if name in set(passed_through)}
    reader = KeywordReader(owner)
    refuse_unknown(owner, reader.read_sentence_transformers(kwargs, "", others="unknown"), valid)
    for name in OPTION_PARAMETERS:
        if arguments[name] is not INSTANCE_DEFAULT:
            reader.set(name, arguments[name], name)
    embedder = arguments["embedder"]
    # embed_batch_size also sizes LlamaIndex's own batches, so it may come with a ready embedder.
    if arguments["embed_batch_size"] is not INSTANCE_DEFAULT and embedder is None:
        reader.set("batch_size", arguments["embed_batch_size"], "embed_batch_size")
    for name in ("trust_remote_code", "parallel_process", "target_devices"):
        check_refused(owner, name, arguments[name])
    if (
        arguments["normalize"] is not True
    ):  # taken for a model whose vectors are normalised anyway (checked once loaded)
        reader.set("normalize_embeddings", arguments["normalize"], "normalize")
    reader.set("cache_folder", arguments["cache_folder"], "cache_folder")
    _read_instructions(reader, arguments["query_instruction"], arguments["text_instruction"], embedder)
    model = _model_argument(arguments["model"], base.pop("model_name", None))
    settings = AdapterSettings.of(reader.given)
    built = settings.embedder(owner, model, embedder)
    return LlamaIndexKeywords(built, settings, dict(reader.given), model, base)


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
    """`FairEmbeddings`' keywords by field name: HuggingFaceEmbeddings' names (`LANGCHAIN_ALIASES`) renamed, an
    unknown keyword refused with the closest valid name, and the values checked (`langchain_keywords`), before
    pydantic converts or checks them its own way, so a bad value gets the message every other surface gives.

    Raises:
        ValueError: an alias and its field both given with different values, an unknown keyword, or as
            `langchain_keywords`.
        TypeError: as `langchain_keywords`.
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
    AdapterSettings.of(langchain_keywords(renamed))
    return renamed


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
        "calibration": embedder.calibration,
        "pooling": embedder.pooling,
        "max_length": embedder.max_length,
        "long_documents": embedder.long_documents,
        "window_overlap": embedder.window_overlap,
        "window_boundaries": embedder.window_boundaries,
        "window_tokens": embedder.window_tokens,
        "device": str(embedder.device),
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
