"""FairEmbedding: a LlamaIndex embedding model whose document vectors are position-fair.

All the work is done by `fair_retrieval.FairEmbedder`; this class only translates between LlamaIndex's
`BaseEmbedding` interface and it. Nodes (documents) are embedded with attention calibration, so a chunk whose
relevant sentence sits at its end is represented as well as one where it sits at its start; queries stay plain.
The keywords of llama-index's `HuggingFaceEmbedding` mean the same here (docs/guides/llamaindex.md has the table);
how they are read, taken or refused, is `fair_retrieval.adapters.llamaindex_keywords`'.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from llama_index.core.base.embeddings.base import BaseEmbedding, Embedding
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.callbacks import CallbackManager
from llama_index.core.node_parser import SentenceSplitter

from fair_retrieval import (
    DEFAULTS,
    Calibration,
    DocumentWindows,
    FairEmbedder,
    LongDocuments,
    Pooling,
    Precision,
    WindowBoundaries,
)
from fair_retrieval.adapters import (
    ADAPTER_FIELDS,
    INSTANCE_DEFAULT,
    EmbedderRecipe,
    SplitterPlan,
    llamaindex_keywords,
    one_summary,
    readable_texts,
    recalibrated,
)

DEFAULT_EMBED_BATCH_SIZE = DEFAULTS.batch_size  # also the forward-pass batch size of a model loaded here


class FairEmbedding(BaseEmbedding):
    """Embed nodes with attention calibration and queries plainly, through `fair_retrieval.FairEmbedder`.

    Give either a model (Hub id or local folder), which is loaded here, or a ready `FairEmbedder`, to share one loaded
    model between several embedding objects (e.g. a calibrated and a plain one for comparison); neither loads
    sentence-transformers/all-MiniLM-L6-v2 (its bundled copy offline), as `HuggingFaceEmbedding()` loads its
    default. The `FairEmbedder`
    options (calibration, pooling, max_length, long_documents, window_overlap, window_boundaries, window_tokens, device,
    precision, show_progress_bar, model_kwargs; `embed_batch_size` for batch_size) take their defaults, allowed values,
    checks and documentation (the fields' descriptions) from their one declaration, `EmbedderOptions`. All but
    calibration and show_progress_bar only act when a model is loaded here; calibration defaults to the embedder's own
    when given one. An option counts as given when its keyword is passed. The keywords of llama-index's
    `HuggingFaceEmbedding` (query_instruction, text_instruction, normalize, cache_folder, trust_remote_code,
    parallel_process, target_devices) keep their meaning where it can be honoured and are refused with the reason
    where not: `fair_retrieval.adapters.ADAPTER_FIELDS` words each, docs/guides/llamaindex.md has the table.

    Args:
        model: Hub id or local folder of a sentence-transformers model. Mutually exclusive with `embedder`.
        embedder: an already loaded `FairEmbedder`.
        callback_manager: LlamaIndex callback manager.
        **kwargs: other `BaseEmbedding` fields (model_name, what `to_dict()` calls the model; num_workers;
            embeddings_cache), and the `SentenceTransformer` keywords `HuggingFaceEmbedding` passes on (revision,
            token, local_files_only, processor_kwargs, config_kwargs, prompts, default_prompt_name; backend,
            truncate_dim, … only with the value that changes nothing). Any other name is refused.

    Raises:
        ValueError, TypeError: as `fair_retrieval.adapters.llamaindex_keywords` says: an unknown option (with the
            closest valid one), a value that is refused (with the reason), both `model` and `embedder`, loading
            options or instructions with `embedder`, an option of the wrong type.
    """

    # The FairEmbedder options: defaults and descriptions from their one declaration (`EmbedderOptions`).
    embed_batch_size: int = Field(DEFAULTS.batch_size, description=ADAPTER_FIELDS["embed_batch_size"], gt=0)
    calibration: Calibration | None = Field(DEFAULTS.calibration, description=ADAPTER_FIELDS["calibration"])
    pooling: Pooling | None = Field(DEFAULTS.pooling, description=ADAPTER_FIELDS["pooling"])
    max_length: int | None = Field(DEFAULTS.max_length, description=ADAPTER_FIELDS["max_length"])
    long_documents: LongDocuments = Field(DEFAULTS.long_documents, description=ADAPTER_FIELDS["long_documents"])
    window_overlap: int | None = Field(DEFAULTS.window_overlap, description=ADAPTER_FIELDS["window_overlap"])
    window_boundaries: WindowBoundaries = Field(
        DEFAULTS.window_boundaries, description=ADAPTER_FIELDS["window_boundaries"]
    )
    window_tokens: int | None = Field(DEFAULTS.window_tokens, description=ADAPTER_FIELDS["window_tokens"])
    device: str | None = Field(None, description=ADAPTER_FIELDS["device"])
    precision: Precision = Field(DEFAULTS.precision, description=ADAPTER_FIELDS["precision"])
    show_progress_bar: bool = Field(DEFAULTS.show_progress_bar, description=ADAPTER_FIELDS["show_progress_bar"])
    query_instruction: str | None = Field(None, description=ADAPTER_FIELDS["query_instruction"])
    text_instruction: str | None = Field(None, description=ADAPTER_FIELDS["text_instruction"])

    _embedder: FairEmbedder = PrivateAttr()
    _recipe: EmbedderRecipe = PrivateAttr()  # what a pickled copy loads

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
        read = llamaindex_keywords(arguments, FairEmbedding.__init__, BaseEmbedding.model_fields)
        super().__init__(**read.fields)
        self._embedder = read.embedder
        self._recipe = read.recipe

    def __setattr__(self, name: str, value: Any) -> None:
        """Setting `calibration` later hands the new one to the embedder (a view sharing its loaded model)."""
        if name == "calibration":
            value, self._embedder = recalibrated(self._embedder, value)
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
        """A LlamaIndex `SentenceSplitter` that counts this model's tokens, with chunks of one window by default
        (`fair_retrieval.adapters.SplitterPlan`; LlamaIndex's default, 1024 tiktoken tokens, is four windows of a
        256-token model).

        Args:
            chunk_size: model tokens per chunk; None = one window (`embedder.window_content_tokens`).
            chunk_overlap: model tokens consecutive chunks share; None = an eighth of the chunk.
            **kwargs: other `SentenceSplitter` arguments (e.g. `paragraph_separator`).
        """
        plan = SplitterPlan.of(self._embedder, chunk_size, chunk_overlap)
        return SentenceSplitter(chunk_size=plan.size, chunk_overlap=plan.overlap, tokenizer=plan.tokens, **kwargs)

    def get_text_embedding_batch(self, texts: list[str], show_progress: bool = False, **kwargs: Any) -> list[Embedding]:
        """LlamaIndex's batched text embedding (one embedder call per `embed_batch_size` texts), with one INFO log
        line for the whole call instead of one per batch (those are DEBUG). Every text is checked first
        (`readable_texts`), so no batch is embedded before one that would fail."""
        readable_texts(texts)
        with one_summary():
            return super().get_text_embedding_batch(texts, show_progress=show_progress, **kwargs)

    async def aget_text_embedding_batch(
        self, texts: list[str], show_progress: bool = False, **kwargs: Any
    ) -> list[Embedding]:
        """`get_text_embedding_batch` for async callers, with its one log line per call (texts checked first)."""
        readable_texts(texts)
        with one_summary():
            return await super().aget_text_embedding_batch(texts, show_progress=show_progress, **kwargs)

    def get_agg_embedding_from_queries(
        self, queries: list[str], agg_fn: Callable[..., Embedding] | None = None
    ) -> Embedding:
        """LlamaIndex's aggregate of several query embeddings, every query checked first (`readable_texts`)."""
        readable_texts(queries, "queries")
        return super().get_agg_embedding_from_queries(queries, agg_fn)

    async def aget_agg_embedding_from_queries(
        self, queries: list[str], agg_fn: Callable[..., Embedding] | None = None
    ) -> Embedding:
        """`get_agg_embedding_from_queries` for async callers (every query checked first)."""
        readable_texts(queries, "queries")
        return await super().aget_agg_embedding_from_queries(queries, agg_fn)

    def __getstate__(self) -> dict[Any, Any]:
        """The state to pickle (worker pools: `IngestionPipeline(num_workers=N)`), without the loaded model: the
        unpickled copy loads it again from its recipe, so nothing is dropped with a warning."""
        state = BaseModel.__getstate__(self)
        private = dict(state.get("__pydantic_private__") or {})
        private.pop("_embedder", None)
        return {**state, "__pydantic_private__": private}

    def __setstate__(self, state: dict[Any, Any]) -> None:
        """Restore a pickled FairEmbedding: load its model again from the recipe it was built with."""
        BaseModel.__setstate__(self, state)
        self._embedder = self._recipe.load()

    # Queries: plain.
    def _get_query_embedding(self, query: str) -> Embedding:
        return self._embedder.embed_query(query).tolist()  # type: ignore[no-any-return]

    async def _aget_query_embedding(self, query: str) -> Embedding:
        return await asyncio.to_thread(self._get_query_embedding, query)

    # Documents: calibrated, one batched call per LlamaIndex batch (never text by text).
    def _get_text_embedding(self, text: str) -> Embedding:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        # the pooled part of this model's own windows; nothing is kept (a multi-vector store asks for its windows)
        return self.embed_document_windows(texts).pooled.tolist()  # type: ignore[no-any-return]

    def embed_document_windows(
        self, texts: list[str], window_tokens: int | None = None, window_boundaries: WindowBoundaries | None = None
    ) -> DocumentWindows:
        """Embed documents as LlamaIndex's text embeddings are, keeping every window's vector.

        `result.pooled` is what `get_text_embedding_batch` returns; see
        `fair_retrieval.FairEmbedder.embed_document_windows` (`window_tokens` and `window_boundaries`: windows of
        another shape, as a multi-vector store asks). Text embeddings are always made of this model's own windows,
        whatever store they feed; nothing of a call is kept.
        """
        return self._embedder.embed_document_windows(
            texts,
            show_progress_bar=self.show_progress_bar,
            window_tokens=window_tokens,
            window_boundaries=window_boundaries,
        )

    async def _aget_text_embedding(self, text: str) -> Embedding:
        return await asyncio.to_thread(self._get_text_embedding, text)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[Embedding]:
        return await asyncio.to_thread(self._get_text_embeddings, texts)
