"""FairEmbedding: a LlamaIndex embedding model whose document vectors are position-fair.

All the work is done by `fair_retrieval.FairEmbedder`; this class only translates between LlamaIndex's
`BaseEmbedding` interface and it. Nodes (documents) are embedded with attention calibration, so a chunk whose
relevant sentence sits at its end is represented as well as one where it sits at its start; queries stay plain.

Options are checked strictly, as `FairEmbeddings` (LangChain) checks them: an unknown keyword is a ValueError that
lists the valid ones and suggests the closest, instead of being dropped. The arguments of llama-index's
`HuggingFaceEmbedding` mean the same here: `query_instruction`/`text_instruction` become the model's query and
document prompts; `normalize`, `cache_folder` and `trust_remote_code` are accepted with the only values this class
can honour (True, None, False) and refused with the reason otherwise.
"""

from __future__ import annotations

import asyncio
import difflib
import inspect
import logging
from collections.abc import Mapping
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.node_parser import SentenceSplitter

from fair_retrieval import (
    DEFAULTS,
    INSTANCE_DEFAULT,
    Calibration,
    DocumentWindows,
    EmbedderOptions,
    FairEmbedder,
    LongDocuments,
    Pooling,
    Precision,
    WindowBoundaries,
    as_calibration,
    chunk_plan,
    option_doc,
    resolve_embedder,
)
from fair_retrieval.stores import WindowCache

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
        normalize: accepted for compatibility with `HuggingFaceEmbedding`; vectors are always L2-normalised here,
            so only True is accepted.
        cache_folder: accepted for compatibility with `HuggingFaceEmbedding`; only None (the Hugging Face cache,
            chosen with the HF_HOME or HF_HUB_CACHE environment variable) is accepted.
        trust_remote_code: accepted for compatibility with `HuggingFaceEmbedding`; only False, because calibration
            needs a model whose attention runs through transformers' own code.
        callback_manager: LlamaIndex callback manager.
        **kwargs: other `BaseEmbedding` fields: model_name (what `to_dict()` calls the model), num_workers,
            embeddings_cache. Any other name is refused.

    Raises:
        ValueError: for an unknown option (the message lists the valid ones and suggests the closest), an option
            value `EmbedderOptions` refuses (with its message), for normalize=False, a cache_folder or
            trust_remote_code=True, if both or neither of `model` and `embedder` are given, or loading options or
            instructions come with an `embedder`.
        TypeError: if `embedder` is not a FairEmbedder, `calibration` not a Calibration, dict or None, an option of
            the wrong type (as `EmbedderOptions`), or an instruction not a str or None.
    """

    # The FairEmbedder options: defaults and descriptions from their one declaration (`EmbedderOptions`).
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

    def __init__(
        self,
        model: str | None = None,
        *,
        embedder: FairEmbedder | None = None,
        calibration: Calibration | dict[str, Any] | None = INSTANCE_DEFAULT,
        pooling: Pooling | None = DEFAULTS.pooling,
        max_length: int | None = DEFAULTS.max_length,
        long_documents: LongDocuments = DEFAULTS.long_documents,
        window_overlap: int | None = DEFAULTS.window_overlap,
        window_boundaries: WindowBoundaries = DEFAULTS.window_boundaries,
        window_tokens: int | None = DEFAULTS.window_tokens,
        device: str | None = None,  # DEFAULTS.device, typed as a str here (it is stored as one)
        precision: Precision = DEFAULTS.precision,
        embed_batch_size: int = DEFAULT_EMBED_BATCH_SIZE,
        show_progress_bar: bool = DEFAULTS.show_progress_bar,
        model_kwargs: Mapping[str, Any] | None = DEFAULTS.model_kwargs,
        query_instruction: str | None = None,
        text_instruction: str | None = None,
        normalize: bool = True,
        cache_folder: str | None = None,
        trust_remote_code: bool = False,
        callback_manager: CallbackManager | None = None,
        **kwargs: Any,
    ) -> None:
        arguments = dict(locals())  # first, before any local is assigned: the options as given, by name
        _refuse_unknown(kwargs)
        _refuse_unsupported(normalize, cache_folder, trust_remote_code)
        prompts = _prompts(query_instruction, text_instruction)
        if prompts is not None and embedder is not None:
            raise ValueError(
                "FairEmbedding: query_instruction and text_instruction set the model's prompts, which a FairEmbedder "
                "reads when it is built; pass model= to load the model here with them, or build the FairEmbedder "
                "from a SentenceTransformer whose prompts you set (model.prompts = {'query': ..., 'document': ...})."
            )
        model = _model_argument(model, kwargs.pop("model_name", None))
        if calibration is not INSTANCE_DEFAULT:  # a dict (from to_dict()) becomes a Calibration
            arguments["calibration"] = calibration = as_calibration(calibration)
        options = EmbedderOptions.from_arguments(arguments, renamed={"batch_size": "embed_batch_size"})
        # embed_batch_size also sizes LlamaIndex's own batches, so it may come with a ready embedder.
        loading = options.non_default() - {"batch_size"}
        embedder = resolve_embedder(
            "FairEmbedding", model=model, embedder=embedder, options=options, explicitly_set=loading, prompts=prompts
        )
        if calibration is INSTANCE_DEFAULT:
            calibration = embedder.calibration
        fields: dict[str, Any] = {
            # The model as the user named it (a Hub id stays a Hub id even when it was loaded from a local copy),
            # so that to_dict() / from_dict() load the same model elsewhere; a shared embedder's own name otherwise.
            "model_name": str(model) if model is not None else embedder.model_name,
            "embed_batch_size": embed_batch_size,
            "calibration": calibration,
            "pooling": embedder.pooling,
            "max_length": embedder.max_length,
            "long_documents": embedder.long_documents,
            "window_overlap": embedder.window_overlap,
            "window_boundaries": embedder.window_boundaries,
            "window_tokens": embedder.window_tokens,
            "device": str(embedder.device),
            "precision": precision,
            "show_progress_bar": show_progress_bar,
            "query_instruction": query_instruction,
            "text_instruction": text_instruction,
        }
        if callback_manager is not None:
            fields["callback_manager"] = callback_manager
        super().__init__(**fields, **kwargs)
        self._embedder = embedder

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

    # Queries: plain.
    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embedder.embed_query(query).tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    # Documents: calibrated, one batched call per LlamaIndex batch (never text by text).
    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        windows = self.embed_document_windows(texts)
        self._windows.remember(texts, windows)  # a multi-vector store takes them from this pass (no second one)
        return windows.pooled.tolist()  # type: ignore[no-any-return]

    def embed_document_windows(self, texts: list[str]) -> DocumentWindows:
        """Embed documents as LlamaIndex's text embeddings are, keeping every window's vector.

        `result.pooled` is what `get_text_embedding_batch` returns; see
        `fair_retrieval.FairEmbedder.embed_document_windows`.
        """
        return self._embedder.embed_document_windows(
            texts, calibration=self.calibration, show_progress_bar=self.show_progress_bar
        )

    @property
    def window_cache(self) -> WindowCache:
        """The windows of the texts embedded last, by text (what a multi-vector `FairFaissVectorStore` takes)."""
        return self._windows

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)


def _valid_options() -> list[str]:
    """Every keyword FairEmbedding accepts: its parameters and the BaseEmbedding fields passed through."""
    parameters = inspect.signature(FairEmbedding.__init__).parameters
    named = [name for name, p in parameters.items() if name != "self" and p.kind is not p.VAR_KEYWORD]
    return [*named, *(name for name in _BASE_FIELDS if name not in named)]


def _refuse_unknown(kwargs: dict[str, Any]) -> None:
    """Raise a ValueError for keywords that are neither parameters nor BaseEmbedding fields (a typo is not dropped).

    LlamaIndex's BaseEmbedding would accept and ignore them; FairEmbeddings (LangChain) forbids them, and so does
    this class, with the closest valid name for each.
    """
    unknown = [name for name in kwargs if name not in _BASE_FIELDS]
    if not unknown:
        return
    valid = _valid_options()
    described = []
    for name in unknown:
        close = difflib.get_close_matches(name, valid, n=1)
        described.append(f"{name!r}" + (f" (did you mean {close[0]!r}?)" if close else ""))
    raise ValueError(
        f"FairEmbedding got unknown option{'s' if len(unknown) > 1 else ''} {', '.join(described)}. "
        f"Valid options: {', '.join(valid)}."
    )


def _refuse_unsupported(normalize: object, cache_folder: object, trust_remote_code: object) -> None:
    """Refuse the `HuggingFaceEmbedding` arguments that this class cannot honour, saying why and what to do."""
    if normalize is not True:
        raise ValueError(
            f"FairEmbedding always returns L2-normalised vectors (calibration and the pooling of windows are defined "
            f"for them), so normalize={normalize!r} cannot be honoured; drop normalize."
        )
    if cache_folder is not None:
        raise ValueError(
            f"FairEmbedding loads models through the Hugging Face cache, so cache_folder={cache_folder!r} cannot be "
            "honoured: set the HF_HOME (or HF_HUB_CACHE) environment variable to use another cache, or download the "
            "model into a folder and pass that folder as model=."
        )
    if trust_remote_code is not False:
        raise ValueError(
            f"trust_remote_code={trust_remote_code!r}: FairEmbedding calibrates attention through transformers' own "
            "model code, which a model's remote code bypasses, so remote-code models are not supported; drop "
            "trust_remote_code (models that transformers implements, e.g. BERT, XLM-R, ModernBERT, Qwen3, load "
            "without it)."
        )


def _prompts(query_instruction: object, text_instruction: object) -> dict[str, str] | None:
    """The model prompts the instructions set ({"query": …, "document": …}), or None when neither is given."""
    prompts: dict[str, str] = {}
    for name, prompt, argument in (
        ("query", query_instruction, "query_instruction"),
        ("document", text_instruction, "text_instruction"),
    ):
        if prompt is None:
            continue
        if not isinstance(prompt, str):
            raise TypeError(f"{argument} must be a str or None, got {type(prompt).__name__}.")
        prompts[name] = prompt
    return prompts or None


def _model_argument(model: str | None, model_name: str | None) -> str | None:
    """`model`, or `model_name` (the field name LlamaIndex uses in `to_dict()`), but not two different ones."""
    if model_name is None:
        return model
    if model is not None and str(model) != str(model_name):
        raise ValueError(f"model={model!r} and model_name={model_name!r} disagree; pass only model.")
    return model_name
