"""FairEmbeddings: LangChain embeddings whose document vectors are position-fair.

All the work is done by `fair_retrieval.FairEmbedder`; this class only translates between LangChain's
`Embeddings` interface and it. Documents are embedded with attention calibration, so a passage whose relevant
sentence sits at its end is represented as well as one where it sits at its start; queries stay plain.
The keywords of langchain-huggingface's `HuggingFaceEmbeddings` mean the same here (docs/guides/langchain.md has the
table); how they are read, taken or refused, is `fair_retrieval.adapters.langchain_keywords`'.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    field_validator,
    model_validator,
)
from typing_extensions import Self

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
    SplitterPlan,
    adapter_model,
    langchain_recipe,
    langchain_settings,
    recalibrated,
)

if TYPE_CHECKING:
    from langchain_fair.splitters import ModelTokenSplitter


class FairEmbeddings(BaseModel, Embeddings):
    """Calibrated document embeddings and plain query embeddings from one model, for LangChain.

    Give either `model` (a Hub id or local folder, loaded here) or `embedder` (a ready `FairEmbedder`, to share
    one loaded model between several objects, e.g. a calibrated and a plain one for comparison); neither loads
    sentence-transformers/all-MiniLM-L6-v2 (its bundled copy offline), as `HuggingFaceEmbeddings()` loads its
    default. The other fields
    are `FairEmbedder` options of the same names (their defaults, allowed values and checks are `EmbedderOptions`')
    and the keywords of `HuggingFaceEmbeddings` (model_name, show_progress, model_kwargs, encode_kwargs,
    query_encode_kwargs, cache_folder, multi_process); each field's description says what it means. An option
    counts as given when its keyword is passed, whatever its value.

    Example:
        .. code-block:: python

            from langchain_fair import FairEmbeddings

            embeddings = FairEmbeddings(model="sentence-transformers/all-MiniLM-L6-v2", max_length=512)
            vectors = embeddings.embed_documents(["a long passage ...", "another one ..."])
            query = embeddings.embed_query("what is said at the end?")

    Raises:
        pydantic.ValidationError (a ValueError), TypeError: as `fair_retrieval.adapters.langchain_settings` says: an
            unknown keyword (with the closest valid name), a value that is refused (with the reason), both `model`
            and `embedder`, loading options with `embedder`, an option of the wrong type.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())

    model: str | None = Field(None, description=ADAPTER_FIELDS["model"])
    embedder: FairEmbedder | None = Field(None, exclude=True, repr=False, description=ADAPTER_FIELDS["embedder"])
    # The FairEmbedder options and HuggingFaceEmbeddings' keywords, documented where they are declared.
    calibration: Calibration | None = Field(DEFAULTS.calibration, description=ADAPTER_FIELDS["calibration"])
    pooling: Pooling | None = Field(DEFAULTS.pooling, description=ADAPTER_FIELDS["pooling"])
    max_length: int | None = Field(DEFAULTS.max_length, description=ADAPTER_FIELDS["max_length"])
    long_documents: LongDocuments = Field(DEFAULTS.long_documents, description=ADAPTER_FIELDS["long_documents"])
    window_overlap: int | None = Field(DEFAULTS.window_overlap, description=ADAPTER_FIELDS["window_overlap"])
    window_boundaries: WindowBoundaries = Field(
        DEFAULTS.window_boundaries, description=ADAPTER_FIELDS["window_boundaries"]
    )
    window_tokens: int | None = Field(DEFAULTS.window_tokens, description=ADAPTER_FIELDS["window_tokens"])
    batch_size: int = Field(DEFAULTS.batch_size, description=ADAPTER_FIELDS["batch_size"])
    device: str | None = Field(None, description=ADAPTER_FIELDS["device"])
    precision: Precision = Field(DEFAULTS.precision, description=ADAPTER_FIELDS["precision"])
    show_progress_bar: bool = Field(
        DEFAULTS.show_progress_bar, description=ADAPTER_FIELDS["show_progress_bar"] + " (alias: show_progress)."
    )
    model_kwargs: dict[str, Any] | None = Field(None, description=ADAPTER_FIELDS["model_kwargs"])
    encode_kwargs: dict[str, Any] = Field(default_factory=dict, description=ADAPTER_FIELDS["encode_kwargs"])
    query_encode_kwargs: dict[str, Any] = Field(default_factory=dict, description=ADAPTER_FIELDS["query_encode_kwargs"])
    cache_folder: str | None = Field(None, description=ADAPTER_FIELDS["cache_folder"])
    multi_process: bool = Field(False, description=ADAPTER_FIELDS["multi_process"])
    query_instruction: str | None = Field(None, description=ADAPTER_FIELDS["query_instruction"])
    text_instruction: str | None = Field(None, description=ADAPTER_FIELDS["text_instruction"])

    _embedder: FairEmbedder = PrivateAttr()

    @field_validator("model", "cache_folder", mode="before")
    @classmethod
    def _folder_as_text(cls, value: Any) -> Any:
        """A local folder given as a path (`pathlib.Path`, as `FairEmbedding` takes it) is kept as its text."""
        return os.fspath(value) if isinstance(value, os.PathLike) else value

    @model_validator(mode="wrap")
    @classmethod
    def _load_embedder(cls, data: Any, handler: ModelWrapValidatorHandler[Self]) -> Self:
        """Read the keywords once, as given, before pydantic converts or checks them (`langchain_settings`), then
        build the embedder from what they said."""
        if not isinstance(data, dict):
            return handler(data)
        renamed, settings = langchain_settings(data, cls.model_fields)
        self = handler(renamed)
        self._embedder = settings.embedder("FairEmbeddings", self.model, self.embedder)
        object.__setattr__(self, "model", adapter_model(self.model, self.embedder))  # the default model, if loaded
        object.__setattr__(self, "calibration", self._embedder.calibration)  # the embedder's, once
        return self

    def _given(self) -> dict[str, Any]:
        """The keywords passed (the fields set; the one rule for "given"), the embedder aside."""
        return {name: getattr(self, name) for name in self.model_fields_set if name != "embedder"}

    def __setattr__(self, name: str, value: Any) -> None:
        """Setting `calibration` later hands the new one to the embedder (a view sharing its loaded model)."""
        if name == "calibration":
            value, self._embedder = recalibrated(self._embedder, value)
        super().__setattr__(name, value)

    def __getstate__(self) -> dict[Any, Any]:
        """The state to pickle (worker pools), without the loaded model: the unpickled copy loads it again."""
        state = super().__getstate__()
        private = {k: v for k, v in (state.get("__pydantic_private__") or {}).items() if k != "_embedder"}
        model = self.model if self.embedder is None else None  # None: a shared embedder's (this calibration's) own
        recipe = langchain_recipe(model, self._given(), self._embedder)
        fields = {**state["__dict__"], "embedder": None}
        return {**state, "__dict__": fields, "__pydantic_private__": {**private, "_recipe": recipe}}

    def __setstate__(self, state: dict[Any, Any]) -> None:
        """Restore a pickled FairEmbeddings: load its model again (by name, with the settings it was built with)."""
        private = dict(state.get("__pydantic_private__") or {})
        recipe = private.pop("_recipe")
        super().__setstate__({**state, "__pydantic_private__": private})
        self._embedder = recipe.load()

    @property
    def fair_embedder(self) -> FairEmbedder:
        """The underlying `FairEmbedder` (to share its loaded model)."""
        return self._embedder

    def text_splitter(
        self, chunk_size: int | None = None, chunk_overlap: int | None = None, **kwargs: Any
    ) -> ModelTokenSplitter:
        """A `RecursiveCharacterTextSplitter` that counts this model's tokens, with chunks of one window by default
        (`fair_retrieval.adapters.SplitterPlan`; LangChain's default, 4,000 characters, is about four windows of a
        256-token model) and `add_start_index=True` (`ModelTokenSplitter`: offsets right with a token overlap).

        Args:
            chunk_size: model tokens per chunk; None = one window (`fair_embedder.window_content_tokens`).
            chunk_overlap: model tokens consecutive chunks share; None = an eighth of the chunk.
            **kwargs: other `RecursiveCharacterTextSplitter` arguments (e.g. `separators`).

        Raises:
            ImportError: without the langchain-text-splitters package.
        """
        try:
            from langchain_fair.splitters import ModelTokenSplitter
        except ImportError as error:  # pragma: no cover - depends on the environment
            raise ImportError(
                "FairEmbeddings.text_splitter needs langchain-text-splitters: pip install langchain-text-splitters"
            ) from error
        plan = SplitterPlan.of(self._embedder, chunk_size, chunk_overlap)
        kwargs.setdefault("add_start_index", True)
        return ModelTokenSplitter(
            chunk_size=plan.size,
            chunk_overlap=plan.overlap,
            length_function=lambda text: len(plan.tokens(text)),
            **kwargs,
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents with calibration; L2-normalised vectors, one per text, in input order.

        Raises:
            TypeError: if `texts` is a single string or holds a non-string (the message gives its index).
        """
        vectors = self._embedder.embed_documents(texts, show_progress_bar=self.show_progress_bar)
        return vectors.tolist()  # type: ignore[no-any-return]

    def embed_document_windows(
        self, texts: list[str], window_tokens: int | None = None, window_boundaries: WindowBoundaries | None = None
    ) -> DocumentWindows:
        """Embed documents as `embed_documents` does, keeping every window's vector (for `multivector=True` stores).

        `result.pooled` is what `embed_documents` returns; see `fair_retrieval.FairEmbedder.embed_document_windows`
        (`window_tokens` and `window_boundaries`: windows of another shape, as a multi-vector store asks).
        """
        return self._embedder.embed_document_windows(
            texts,
            show_progress_bar=self.show_progress_bar,
            window_tokens=window_tokens,
            window_boundaries=window_boundaries,
        )

    def embed_query(self, text: str) -> list[float]:
        """Embed a query plainly (queries are never calibrated); an L2-normalised vector.

        Raises:
            TypeError: if `text` is not a string.
        """
        return self._embedder.embed_query(text).tolist()  # type: ignore[no-any-return]

    # aembed_documents and aembed_query are LangChain's: the sync methods in a worker thread (the loop stays free).
