"""FairEmbeddings: LangChain embeddings whose document vectors are position-fair.

All the work is done by `fair_retrieval.FairEmbedder`; this class only translates between LangChain's
`Embeddings` interface and it. Documents are embedded with attention calibration, so a passage whose relevant
sentence sits at its end is represented as well as one where it sits at its start; queries stay plain.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Literal

from langchain_core.embeddings import Embeddings
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator
from typing_extensions import Self

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedder_options import EmbedderOptions, as_calibration, resolve_embedder

logger = logging.getLogger(__name__)

# The fields that are FairEmbedder options (same names), passed on through EmbedderOptions.
_OPTION_FIELDS = (
    "calibration",
    "pooling",
    "max_length",
    "batch_size",
    "device",
    "precision",
    "show_progress_bar",
    "model_kwargs",
)


class FairEmbeddings(BaseModel, Embeddings):
    """Calibrated document embeddings and plain query embeddings from one model, for LangChain.

    Give either `model` (a Hub id or local folder, loaded here) or `embedder` (a ready `FairEmbedder`, to share
    one loaded model between several objects, e.g. a calibrated and a plain one for comparison).

    Example:
        .. code-block:: python

            from langchain_fair import FairEmbeddings

            embeddings = FairEmbeddings(model="sentence-transformers/all-MiniLM-L6-v2", max_length=512)
            vectors = embeddings.embed_documents(["a long passage ...", "another one ..."])
            query = embeddings.embed_query("what is said at the end?")

    Raises:
        pydantic.ValidationError (a ValueError): unknown arguments, both or neither of `model` and `embedder`,
            or loading options (pooling, max_length, device, precision, model_kwargs) together with `embedder`.
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())

    model: str | None = Field(default=None, description="Hub id or local folder of a sentence-transformers model.")
    embedder: FairEmbedder | None = Field(
        default=None, exclude=True, repr=False, description="An already loaded FairEmbedder to share."
    )
    calibration: Calibration | None = Field(
        default_factory=Calibration,
        description="How documents are calibrated; None embeds them plainly. With `embedder` and no value given, "
        "the embedder's own calibration.",
    )
    pooling: Literal["cls", "mean", "last"] | None = Field(
        default=None, description="Token pooling; None takes it from the model (loading only)."
    )
    max_length: int | None = Field(
        default=None,
        description="Token limit per text; None uses the model's (loading only). Longer texts are "
        "truncated with a logged warning.",
    )
    batch_size: int = Field(default=32, ge=1, description="Texts per forward pass (loading only).")
    device: str | None = Field(default=None, description="cpu, cuda, mps…; None picks the best (loading only).")
    precision: Literal["auto", "float32", "float16", "bfloat16"] = Field(
        default="auto", description="Weight precision (loading only)."
    )
    show_progress_bar: bool = Field(default=False, description="Show a progress bar while embedding documents.")
    model_kwargs: dict[str, Any] | None = Field(
        default=None, description="Extra keyword arguments for the transformers model (loading only)."
    )

    _embedder: FairEmbedder = PrivateAttr()

    @field_validator("calibration", mode="before")
    @classmethod
    def _calibration_from_dict(cls, value: Any) -> Any:
        return as_calibration(value)

    @model_validator(mode="after")
    def _load_embedder(self) -> Self:
        options = EmbedderOptions(**{name: getattr(self, name) for name in _OPTION_FIELDS})
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

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        """Embed documents with calibration; L2-normalised vectors, one per text, in input order.

        Raises:
            TypeError: if `texts` is a single string or holds a non-string (the message gives its index).
        """
        vectors = self._embedder.embed_documents(
            texts, calibration=self.calibration, show_progress_bar=self.show_progress_bar
        )
        return vectors.tolist()  # type: ignore[no-any-return]

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
