"""FairEmbedding: a LlamaIndex embedding model whose document vectors are position-fair.

All the work is done by `fair_retrieval.FairEmbedder`; this class only translates between LlamaIndex's
`BaseEmbedding` interface and it. Nodes (documents) are embedded with attention calibration, so a chunk whose
relevant sentence sits at its end is represented as well as one where it sits at its start; queries stay plain.

Options are checked strictly, as `FairEmbeddings` (LangChain) checks them: an unknown keyword is a ValueError that
lists the valid ones and suggests the closest, instead of being dropped. The arguments of llama-index's
`HuggingFaceEmbedding` mean the same here (docs/guides/llamaindex.md has the table): `query_instruction` /
`text_instruction` become the model's query and document prompts, `cache_folder` and the `SentenceTransformer`
keywords it passes on (revision, token, local_files_only, prompts, …) load the model as sentence-transformers
loads it, and those this class cannot honour (normalize=False, trust_remote_code=True, backend='onnx',
truncate_dim, parallel_process, …) are refused with the reason and what to do instead
(`fair_retrieval.embedding.keywords`). An option counts as given when its keyword is passed, whatever its value.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
from collections.abc import Mapping
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.node_parser import SentenceSplitter

from fair_retrieval import (
    DEFAULTS,
    INSTANCE_DEFAULT,
    ST_KEYWORDS,
    AdapterSettings,
    Calibration,
    DocumentWindows,
    EmbedderOptions,
    FairEmbedder,
    KeywordReader,
    LongDocuments,
    Pooling,
    Precision,
    WindowBoundaries,
    as_calibration,
    check_refused,
    chunk_plan,
    one_summary,
    option_doc,
    refuse_unknown,
    shared_recipe,
    with_calibration,
)
from fair_retrieval.stores import WindowCache, check_query

logger = logging.getLogger(__name__)

DEFAULT_EMBED_BATCH_SIZE = DEFAULTS.batch_size  # also the forward-pass batch size of a model loaded here
# BaseEmbedding fields that are not parameters of FairEmbedding.__init__, passed on through **kwargs (to_dict()
# writes them, so from_dict() gives them back): model_name, num_workers, embeddings_cache, …
_BASE_FIELDS = tuple(sorted(set(BaseEmbedding.model_fields) - {"embed_batch_size", "callback_manager"}))


class FairEmbedding(BaseEmbedding):
    """Embed nodes with attention calibration and queries plainly, through `fair_retrieval.FairEmbedder`.

    Give either a model (Hub id or local folder), which is loaded here, or a ready `FairEmbedder`, to share one
    loaded model between several embedding objects (e.g. a calibrated and a plain one for comparison). The
    `FairEmbedder` options (calibration, pooling, max_length, long_documents, window_overlap, window_boundaries,
    window_tokens, device, precision, show_progress_bar, model_kwargs; `embed_batch_size` for batch_size) are documented
    where they are declared (`EmbedderOptions`; the fields' descriptions are that text) and take their defaults, allowed
    values and checks from there. All but calibration and show_progress_bar only act when a model is loaded here;
    calibration defaults to the embedder's own when given one.

    Args:
        model: Hub id or local folder of a sentence-transformers model. Mutually exclusive with `embedder`.
        embedder: an already loaded `FairEmbedder`.
        embed_batch_size: texts per call into the embedder; when loading a model also its forward-pass batch size.
        query_instruction: text put before every query, as in llama-index's `HuggingFaceEmbedding`: the model's
            "query" prompt (sentence-transformers' prompts). None keeps the model's own; "" means none (loading
            only).
        text_instruction: text put before every node (before every window of a long one): the model's "document"
            prompt. None keeps the model's own; "" means none (loading only).
        normalize: as in `HuggingFaceEmbedding`; vectors are always L2-normalised here, so False is only taken for a
            model whose vectors are normalised anyway (one that ends in a Normalize module, as all-MiniLM-L6-v2).
        cache_folder: where sentence-transformers downloads the model to, as in `HuggingFaceEmbedding` (None: the
            Hugging Face cache).
        trust_remote_code: as in `HuggingFaceEmbedding`; only False, because calibration needs a model whose
            attention runs through transformers' own code.
        parallel_process: as in `HuggingFaceEmbedding`; only False (calibration runs in this process's model: use
            `IngestionPipeline(num_workers=N)`, which pickles this class, instead).
        target_devices: as in `HuggingFaceEmbedding`; only None (see parallel_process).
        callback_manager: LlamaIndex callback manager.
        **kwargs: other `BaseEmbedding` fields (model_name, what `to_dict()` calls the model; num_workers;
            embeddings_cache), and the `SentenceTransformer` keywords `HuggingFaceEmbedding` passes on (revision,
            token, local_files_only, processor_kwargs, config_kwargs, prompts, default_prompt_name; backend,
            truncate_dim, … only with the value that changes nothing). Any other name is refused.

    Raises:
        ValueError: for an unknown option (the message lists the valid ones and suggests the closest), an option
            value `EmbedderOptions` refuses (with its message), a `HuggingFaceEmbedding` value that cannot be
            honoured (with the reason), if both or neither of `model` and `embedder` are given, or loading options
            or instructions come with an `embedder`.
        TypeError: if `embedder` is not a FairEmbedder, `calibration` not a Calibration, dict or None, an option of
            the wrong type (as `EmbedderOptions`), or an instruction not a str or None.
    """

    # The FairEmbedder options: defaults and descriptions from their one declaration (`EmbedderOptions`).
    embed_batch_size: int = Field(
        default=DEFAULTS.batch_size,
        gt=0,
        description="Texts per call into the embedder; when a model is loaded here also: " + option_doc("batch_size"),
    )
    calibration: Calibration | None = Field(
        default=DEFAULTS.calibration,
        description=option_doc("calibration") + " With `embedder` and no value given: the embedder's own.",
    )
    pooling: Pooling | None = Field(default=DEFAULTS.pooling, description=option_doc("pooling", loading_note=True))
    max_length: int | None = Field(default=DEFAULTS.max_length, description=option_doc("max_length", loading_note=True))
    long_documents: LongDocuments = Field(
        default=DEFAULTS.long_documents, description=option_doc("long_documents", loading_note=True)
    )
    window_overlap: int | None = Field(
        default=DEFAULTS.window_overlap, description=option_doc("window_overlap", loading_note=True)
    )
    window_boundaries: WindowBoundaries = Field(
        default=DEFAULTS.window_boundaries, description=option_doc("window_boundaries", loading_note=True)
    )
    window_tokens: int | None = Field(
        default=DEFAULTS.window_tokens, description=option_doc("window_tokens", loading_note=True)
    )
    device: str | None = Field(default=None, description=option_doc("device", loading_note=True))
    precision: Precision = Field(default=DEFAULTS.precision, description=option_doc("precision", loading_note=True))
    show_progress_bar: bool = Field(default=DEFAULTS.show_progress_bar, description=option_doc("show_progress_bar"))
    query_instruction: str | None = Field(
        default=None, description="Text put before every query (the model's query prompt); None: the model's own."
    )
    text_instruction: str | None = Field(
        default=None, description="Text put before every node (the model's document prompt); None: the model's own."
    )

    _embedder: FairEmbedder = PrivateAttr()
    _windows: WindowCache = PrivateAttr(default_factory=WindowCache)
    _recipe: tuple[str | None, dict[str, Any]] = PrivateAttr()  # (model, settings): what a pickled copy loads

    def __init__(
        self,
        model: str | None = None,
        *,
        embedder: FairEmbedder | None = None,
        calibration: Calibration | dict[str, Any] | None = INSTANCE_DEFAULT,
        pooling: Pooling | None = INSTANCE_DEFAULT,
        max_length: int | None = INSTANCE_DEFAULT,
        long_documents: LongDocuments = INSTANCE_DEFAULT,
        window_overlap: int | None = INSTANCE_DEFAULT,
        window_boundaries: WindowBoundaries = INSTANCE_DEFAULT,
        window_tokens: int | None = INSTANCE_DEFAULT,
        device: str | None = INSTANCE_DEFAULT,
        precision: Precision = INSTANCE_DEFAULT,
        embed_batch_size: int = INSTANCE_DEFAULT,
        show_progress_bar: bool = INSTANCE_DEFAULT,
        model_kwargs: Mapping[str, Any] | None = INSTANCE_DEFAULT,
        query_instruction: str | None = None,
        text_instruction: str | None = None,
        normalize: bool = True,
        cache_folder: str | None = None,
        trust_remote_code: bool = False,
        parallel_process: bool = False,
        target_devices: list[str] | None = None,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        arguments = dict(locals())  # first, before any local is assigned: the keywords as given, by name
        base = {name: kwargs.pop(name) for name in list(kwargs) if name in _BASE_FIELDS}
        reader = KeywordReader("FairEmbedding")
        refuse_unknown("FairEmbedding", reader.read_sentence_transformers(kwargs, "", others="unknown"), _valid())
        for name in _OPTION_PARAMETERS:
            if arguments[name] is not INSTANCE_DEFAULT:
                reader.set(name, arguments[name], name)
        # embed_batch_size also sizes LlamaIndex's own batches, so it may come with a ready embedder.
        if embed_batch_size is not INSTANCE_DEFAULT and embedder is None:
            reader.set("batch_size", embed_batch_size, "embed_batch_size")
        checked = (("trust_remote_code", trust_remote_code), ("parallel_process", parallel_process))
        for name, value in (*checked, ("target_devices", target_devices)):
            check_refused("FairEmbedding", name, value)
        if normalize is not True:  # taken for a model whose vectors are normalised anyway (checked once loaded)
            reader.set("normalize_embeddings", normalize, "normalize")
        reader.set("cache_folder", cache_folder, "cache_folder")
        _read_instructions(reader, query_instruction, text_instruction, embedder)
        model = _model_argument(model, base.pop("model_name", None))
        settings = AdapterSettings.of(reader.given)
        embedder = settings.embedder("FairEmbedding", model, embedder)
        fields: dict[str, Any] = {
            # The model as the user named it (a Hub id stays a Hub id even when it was loaded from a local copy),
            # so that to_dict() / from_dict() load the same model elsewhere; a shared embedder's own name otherwise.
            "model_name": str(model) if model is not None else embedder.model_name,
            "embed_batch_size": DEFAULTS.batch_size if embed_batch_size is INSTANCE_DEFAULT else embed_batch_size,
            "calibration": embedder.calibration,
            "pooling": embedder.pooling,
            "max_length": embedder.max_length,
            "long_documents": embedder.long_documents,
            "window_overlap": embedder.window_overlap,
            "window_boundaries": embedder.window_boundaries,
            "window_tokens": embedder.window_tokens,
            "device": str(embedder.device),
            "precision": settings.options.precision,
            "show_progress_bar": settings.options.show_progress_bar,
            "query_instruction": query_instruction,
            "text_instruction": text_instruction,
        }
        if callback_manager is not None:
            fields["callback_manager"] = callback_manager
        super().__init__(**fields, **base)
        self._embedder = embedder
        self._recipe = (str(model), dict(reader.given)) if model is not None else shared_recipe(embedder)

    def __setattr__(self, name: str, value: Any) -> None:
        """Setting `calibration` later hands the new one to the embedder (a view sharing its loaded model)."""
        if name == "calibration":
            value = as_calibration(value)
            self._embedder = with_calibration(self._embedder, value)
        super().__setattr__(name, value)

    @classmethod
    def class_name(cls) -> str:
        """Name LlamaIndex uses to (de)serialise this component."""
        return "FairEmbedding"

    @property
    def embedder(self) -> FairEmbedder:
        """The underlying `FairEmbedder` (to share its loaded model)."""
        return self._embedder

    @property
    def fair_embedder(self) -> FairEmbedder:
        """The underlying `FairEmbedder`, under the name LangChain's `FairEmbeddings` gives it (same as `embedder`)."""
        return self._embedder

    def text_splitter(
        self, chunk_size: int | None = None, chunk_overlap: int | None = None, **kwargs: Any
    ) -> SentenceSplitter:
        """A LlamaIndex `SentenceSplitter` that counts this model's tokens, with chunks of one window by default.

        LlamaIndex's default splitter counts tiktoken tokens in chunks of 1024, four windows of a 256-token model;
        this one counts the model's own tokens (special tokens excluded), so a chunk is what the model reads.

        Args:
            chunk_size: model tokens per chunk; None = one window (`embedder.window_content_tokens`).
            chunk_overlap: model tokens consecutive chunks share; None = an eighth of the chunk.
            **kwargs: other `SentenceSplitter` arguments (e.g. `paragraph_separator`).
        """
        size, overlap = chunk_plan(self._embedder.window_content_tokens, chunk_size, chunk_overlap)
        tokenizer = self._embedder.tokenizer
        return SentenceSplitter(
            chunk_size=size,
            chunk_overlap=overlap,
            tokenizer=lambda text: tokenizer.encode(text, add_special_tokens=False, verbose=False),
            **kwargs,
        )

    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> list[Embedding]:
        """LlamaIndex's batched text embedding (one embedder call per `embed_batch_size` texts), with one INFO log
        line for the whole call instead of one per batch (those are DEBUG)."""
        with one_summary():
            return super().get_text_embedding_batch(texts, show_progress=show_progress, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        """`get_text_embedding_batch` for async callers, with its one log line per call."""
        with one_summary():
            return await super().aget_text_embedding_batch(texts, show_progress=show_progress, **kwargs)

    def __getstate__(self) -> dict[Any, Any]:
        """The state to pickle (worker pools: `IngestionPipeline(num_workers=N)`), without the loaded model: the
        unpickled copy loads it again from its recipe, so nothing is dropped with a warning."""
        state = BaseModel.__getstate__(self)
        private = dict(state.get("__pydantic_private__") or {})
        private.pop("_embedder", None)
        private.pop("_windows", None)
        return {**state, "__pydantic_private__": private}

    def __setstate__(self, state: dict[Any, Any]) -> None:
        """Restore a pickled FairEmbedding: load its model again from the recipe it was built with."""
        BaseModel.__setstate__(self, state)
        model, given = self._recipe
        self._embedder = AdapterSettings.of(given).embedder("FairEmbedding", model, None)
        self._windows = WindowCache()

    # Queries: plain.
    def _get_query_embedding(self, query: str) -> Embedding:
        if isinstance(query, str) and any("\ud800" <= character <= "\udfff" for character in query):  # else obscure
            check_query(query)  # raises, naming the problem (an empty query stays LlamaIndex's to give)
        return self._embedder.embed_query(query).tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    # Documents: calibrated, one batched call per LlamaIndex batch (never text by text).
    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        # the windows a multi-vector store fed by this model keeps (its shape), taken from this pass (no second one)
        windows = self._windows.embed(self, texts)
        return windows.pooled.tolist()  # type: ignore[no-any-return]

    def embed_document_windows(
        self, texts: list[str], window_tokens: int | None = None, window_boundaries: WindowBoundaries | None = None
    ) -> DocumentWindows:
        """Embed documents as LlamaIndex's text embeddings are, keeping every window's vector.

        `result.pooled` is what `get_text_embedding_batch` returns; see
        `fair_retrieval.FairEmbedder.embed_document_windows` (`window_tokens` and `window_boundaries`: windows of
        another shape, as a multi-vector store asks). A multi-vector store this model feeds sets the shape of the
        windows its text embeddings are made from (`window_cache.shape`): their pooled vectors are then the mean of
        those windows.
        """
        return self._embedder.embed_document_windows(
            texts,
            show_progress_bar=self.show_progress_bar,
            window_tokens=window_tokens,
            window_boundaries=window_boundaries,
        )

    @property
    def window_cache(self) -> WindowCache:
        """The windows of the texts embedded last, by text (what a multi-vector `FairFaissVectorStore` takes)."""
        return self._windows

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


# The FairEmbedder options FairEmbedding takes under their own names, from their one declaration (batch_size is
# embed_batch_size here; the adapters expose no LPES).
_OPTION_PARAMETERS = tuple(name for name in EmbedderOptions.names() if name not in ("batch_size", "positional_scaling"))


def _valid() -> list[str]:
    """Every keyword FairEmbedding accepts: its parameters, the BaseEmbedding fields passed through, and the
    `SentenceTransformer` keywords `HuggingFaceEmbedding` passes on."""
    parameters = inspect.signature(FairEmbedding.__init__).parameters
    named = [name for name, p in parameters.items() if name != "self" and p.kind is not p.VAR_KEYWORD]
    others = [*_BASE_FIELDS, *ST_KEYWORDS]
    return [*named, *dict.fromkeys(name for name in others if name not in named)]


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
