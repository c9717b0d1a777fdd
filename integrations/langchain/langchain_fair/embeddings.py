"""FairEmbeddings: LangChain embeddings whose document vectors are position-fair.

All the work is done by `fair_retrieval.FairEmbedder`; this class only translates between LangChain's
`Embeddings` interface and it. Documents are embedded with attention calibration, so a passage whose relevant
sentence sits at its end is represented as well as one where it sits at its start; queries stay plain.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator
from typing_extensions import Self

from fair_retrieval import (
    DEFAULTS,
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

if TYPE_CHECKING:
    from langchain_fair.splitters import ModelTokenSplitter

logger = logging.getLogger(__name__)


class FairEmbeddings(BaseModel, Embeddings):
    """Calibrated document embeddings and plain query embeddings from one model, for LangChain.

    Give either `model` (a Hub id or local folder, loaded here) or `embedder` (a ready `FairEmbedder`, to share
    one loaded model between several objects, e.g. a calibrated and a plain one for comparison). The other fields
    are `FairEmbedder` options of the same names: their defaults, allowed values and checks are `EmbedderOptions`'.

    Example:
        .. code-block:: python

            from langchain_fair import FairEmbeddings

            embeddings = FairEmbeddings(model="sentence-transformers/all-MiniLM-L6-v2", max_length=512)
            vectors = embeddings.embed_documents(["a long passage ...", "another one ..."])
            query = embeddings.embed_query("what is said at the end?")

    Raises:
        pydantic.ValidationError (a ValueError): unknown arguments, an option value `EmbedderOptions` refuses (with
            its message), both or neither of `model` and `embedder`, or loading options (pooling, max_length,
            device, precision, model_kwargs, …) together with `embedder`.
        TypeError: for an option of the wrong type, as `EmbedderOptions` raises it (e.g. a calibration that is not a
            Calibration, a dict or None).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())

    model: str | None = Field(default=None, description="Hub id or local folder of a sentence-transformers model.")
    embedder: FairEmbedder | None = Field(
        default=None, exclude=True, repr=False, description="An already loaded FairEmbedder to share."
    )
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
    batch_size: int = Field(default=DEFAULTS.batch_size, description=option_doc("batch_size", loading_note=True))
    device: str | None = Field(default=None, description=option_doc("device", loading_note=True))
    precision: Precision = Field(default=DEFAULTS.precision, description=option_doc("precision", loading_note=True))
    show_progress_bar: bool = Field(default=DEFAULTS.show_progress_bar, description=option_doc("show_progress_bar"))
    model_kwargs: dict[str, Any] | None = Field(default=None, description=option_doc("model_kwargs", loading_note=True))

    _embedder: FairEmbedder = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _check_options(cls, data: Any) -> Any:
        """Check the option values as `EmbedderOptions` does, before pydantic converts or checks them its own way,
        so a bad value is refused here with the same message as by every other surface (FairEmbedder, …)."""
        if isinstance(data, dict):
            if "calibration" in data:  # a dict (from Calibration.to_dict()) becomes a Calibration
                data = {**data, "calibration": as_calibration(data["calibration"])}
            EmbedderOptions.from_arguments(data)
        return data

    @model_validator(mode="after")
    def _load_embedder(self) -> Self:
        options = EmbedderOptions.from_arguments(dict(self))
        self._embedder = resolve_embedder(
            "FairEmbeddings",
            model=self.model,
            embedder=self.embedder,
            options=options,
            explicitly_set=self.model_fields_set,
        )
        if self.embedder is not None and "calibration" not in self.model_fields_set:
            self.calibration = self.embedder.calibration
        return self

    @property
    def fair_embedder(self) -> FairEmbedder:
        """The underlying `FairEmbedder` (to share its loaded model)."""
        return self._embedder

    def text_splitter(
        self, chunk_size: int | None = None, chunk_overlap: int | None = None, **kwargs: Any
    ) -> ModelTokenSplitter:
        """A `RecursiveCharacterTextSplitter` that counts this model's tokens, with chunks of one window by default.

        LangChain's default splitter makes chunks of 4,000 characters, about four windows of a 256-token model;
        this one measures length with the model's tokenizer (no special tokens) and sets `add_start_index=True`: chunks
        are what the model reads and keep their character offset in the metadata (`ModelTokenSplitter`, whose
        offsets stay right with an overlap counted in tokens).

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
        size, overlap = chunk_plan(self._embedder.window_content_tokens, chunk_size, chunk_overlap)
        kwargs.setdefault("add_start_index", True)
        tokenizer = self._embedder.tokenizer
        return ModelTokenSplitter(
            chunk_size=size,
            chunk_overlap=overlap,
            length_function=lambda text: len(tokenizer.encode(text, add_special_tokens=False, verbose=False)),
            **kwargs,
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents with calibration; L2-normalised vectors, one per text, in input order.

        Raises:
            TypeError: if `texts` is a single string or holds a non-string (the message gives its index).
        """
        vectors = self._embedder.embed_documents(
            texts, calibration=self.calibration, show_progress_bar=self.show_progress_bar
        )
        return vectors.tolist()  # type: ignore[no-any-return]

    def embed_document_windows(self, texts: list[str]) -> DocumentWindows:
        """Embed documents as `embed_documents` does, keeping every window's vector (for `multivector=True` stores).

        `result.pooled` is what `embed_documents` returns; see `fair_retrieval.FairEmbedder.embed_document_windows`.
        """
        return self._embedder.embed_document_windows(
            texts, calibration=self.calibration, show_progress_bar=self.show_progress_bar
        )

    def embed_query(self, text: str) -> list[float]:
        """Embed a query plainly (queries are never calibrated); an L2-normalised vector.

        Raises:
            TypeError: if `text` is not a string.
        """
        return self._embedder.embed_query(text).tolist()  # type: ignore[no-any-return]

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """`embed_documents` in a worker thread, so the event loop stays free."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """`embed_query` in a worker thread, so the event loop stays free."""
        return await asyncio.to_thread(self.embed_query, text)
