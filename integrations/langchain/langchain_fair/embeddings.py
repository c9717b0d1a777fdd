"""FairEmbeddings: LangChain embeddings whose document vectors are position-fair.

All the work is done by `fair_retrieval.FairEmbedder`; this class only translates between LangChain's
`Embeddings` interface and it. Documents are embedded with attention calibration, so a passage whose relevant
sentence sits at its end is represented as well as one where it sits at its start; queries stay plain.

The constructor takes the keywords of langchain-huggingface's `HuggingFaceEmbeddings` with their meaning there
(docs/guides/langchain.md has the table): `model_name` for `model`, `model_kwargs` as `SentenceTransformer`
keywords (device, prompts, revision, …; others go to the transformers model, as they always have here),
`encode_kwargs` / `query_encode_kwargs` as `encode` keywords (prompt, prompt_name, batch_size, …), `cache_folder`,
`show_progress`; what this class cannot honour (normalize_embeddings=False, multi_process=True, …) is refused with
the reason (`fair_retrieval.embedding.keywords`), and a misspelt keyword with the closest valid one. An option counts
as given when its keyword is passed, whatever its value.
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
    option_doc,
    refuse_unknown,
    shared_recipe,
    with_calibration,
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
        pydantic.ValidationError (a ValueError): unknown arguments (with the closest valid name), an option value
            `EmbedderOptions` refuses (with its message), a `HuggingFaceEmbeddings` value that cannot be honoured
            (with the reason), two keywords that set one thing differently, both or neither of `model` and
            `embedder`, or loading options (pooling, max_length, device, precision, model_kwargs, …) together with
            `embedder`.
        TypeError: for an option of the wrong type, as `EmbedderOptions` raises it (e.g. a calibration that is not a
            Calibration, a dict or None).
    """

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, protected_namespaces=())

    model: str | None = Field(
        default=None, description="Hub id or local folder of a sentence-transformers model (alias: model_name)."
    )
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
    show_progress_bar: bool = Field(
        default=DEFAULTS.show_progress_bar, description=option_doc("show_progress_bar") + " (alias: show_progress)."
    )
    model_kwargs: dict[str, Any] | None = Field(
        default=None,
        description=option_doc("model_kwargs", loading_note=True)
        + " As in HuggingFaceEmbeddings, the `SentenceTransformer` keywords among them (device, prompts, revision, "
        "token, cache_folder, …) are read as sentence-transformers reads them.",
    )
    # HuggingFaceEmbeddings' keywords (docs/guides/langchain.md).
    encode_kwargs: dict[str, Any] = Field(
        default_factory=dict,
        description="sentence-transformers `encode` keywords for documents (and for queries when "
        "query_encode_kwargs is empty), as in HuggingFaceEmbeddings: prompt, prompt_name, batch_size, "
        "show_progress_bar, device; normalize_embeddings=True.",
    )
    query_encode_kwargs: dict[str, Any] = Field(
        default_factory=dict, description="sentence-transformers `encode` keywords for queries (as encode_kwargs)."
    )
    cache_folder: str | None = Field(
        default=None, description="Where sentence-transformers downloads the model to (None: the Hugging Face cache)."
    )
    multi_process: bool = Field(
        default=False, description="As in HuggingFaceEmbeddings; only False (calibration runs in this process)."
    )
    query_instruction: str | None = Field(
        default=None, description="Text put before every query (the model's query prompt); None: the model's own."
    )
    text_instruction: str | None = Field(
        default=None,
        description="Text put before every document (the model's document prompt); None: the model's own.",
    )

    _embedder: FairEmbedder = PrivateAttr()

    @model_validator(mode="before")
    @classmethod
    def _check_options(cls, data: Any) -> Any:
        """Read the keywords as given (the aliases of `HuggingFaceEmbeddings` renamed), refusing unknown ones with
        the closest valid name, and check every value as `EmbedderOptions` does, before pydantic converts or checks
        them its own way, so a bad value is refused here with the same message as by every other surface."""
        if isinstance(data, dict):
            data = _renamed(data)
            refuse_unknown("FairEmbeddings", [k for k in data if k not in cls.model_fields], _valid(cls))
            _settings(data)
        return data

    @model_validator(mode="after")
    def _load_embedder(self) -> Self:
        settings = _settings({name: getattr(self, name) for name in self.model_fields_set})
        self._embedder = settings.embedder("FairEmbeddings", self.model, self.embedder)
        object.__setattr__(self, "calibration", self._embedder.calibration)  # the embedder's, once
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        """Setting `calibration` later hands the new one to the embedder (a view sharing its loaded model)."""
        if name == "calibration":
            value = as_calibration(value)
            self._embedder = with_calibration(self._embedder, value)
        super().__setattr__(name, value)

    def __getstate__(self) -> dict[Any, Any]:
        """The state to pickle (worker pools), without the loaded model: the unpickled copy loads it again."""
        state = super().__getstate__()
        private = {k: v for k, v in (state.get("__pydantic_private__") or {}).items() if k != "_embedder"}
        fields = {**state["__dict__"], "embedder": None}
        if self.embedder is None:
            recipe: tuple[str | None, dict[str, Any], bool] = (None, {}, False)
        else:
            model, settings = shared_recipe(self._embedder)  # the view: with this object's calibration
            recipe = (model, settings, True)
        return {**state, "__dict__": fields, "__pydantic_private__": {**private, "_recipe": recipe}}

    def __setstate__(self, state: dict[Any, Any]) -> None:
        """Restore a pickled FairEmbeddings: load its model again (by name, with the settings it was built with)."""
        private = dict(state.get("__pydantic_private__") or {})
        model, settings, shared = private.pop("_recipe", (None, {}, False))
        super().__setstate__({**state, "__pydantic_private__": private})
        if shared:
            self._embedder = AdapterSettings.of(settings).embedder("FairEmbeddings", model, None)
        else:
            given = {name: getattr(self, name) for name in self.model_fields_set if name != "embedder"}
            self._embedder = _settings(given).embedder("FairEmbeddings", self.model, None)

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

    async def aembed_documents(self, texts: list[str]) -> list[list[float]]:
        """`embed_documents` in a worker thread, so the event loop stays free."""
        return await asyncio.to_thread(self.embed_documents, texts)

    async def aembed_query(self, text: str) -> list[float]:
        """`embed_query` in a worker thread, so the event loop stays free."""
        return await asyncio.to_thread(self.embed_query, text)


# HuggingFaceEmbeddings' names for FairEmbeddings' fields.
_ALIASES = {"model_name": "model", "show_progress": "show_progress_bar"}


def _valid(cls: type[BaseModel]) -> list[str]:
    """Every keyword FairEmbeddings accepts: its fields and the aliases."""
    return [*cls.model_fields, *_ALIASES]


def _renamed(data: dict[str, Any]) -> dict[str, Any]:
    """`data` with HuggingFaceEmbeddings' names (`_ALIASES`) renamed; an alias and its field both given with
    different values are refused."""
    renamed = dict(data)
    for alias, name in _ALIASES.items():
        if alias in renamed:
            value = renamed.pop(alias)
            if name in renamed and renamed[name] != value:
                raise ValueError(
                    f"FairEmbeddings: {alias}={value!r} and {name}={renamed[name]!r} disagree; pass {name}."
                )
            renamed[name] = value
    return renamed


def _settings(given: dict[str, Any]) -> AdapterSettings:
    """The settings the keywords `given` (by field name) make, validated (the one rule: given = passed)."""
    reader = KeywordReader("FairEmbeddings")
    for name in ("multi_process",):
        if name in given:
            check_refused("FairEmbeddings", name, given[name])
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
    return AdapterSettings.of(reader.given)
