"""Measure the embedder a user runs today: LlamaIndex, LangChain and sentence-transformers objects for the Evaluator.

Why: before switching to `FairEmbedder`, a user should see the position bias and the truncation loss of their current
pipeline on their own documents, measured exactly like ours. `ForeignEmbedder` wraps
- a LlamaIndex `BaseEmbedding` (e.g. `HuggingFaceEmbedding`): documents via `get_text_embedding_batch`, queries via
  `get_query_embedding`;
- a LangChain `Embeddings` (e.g. `HuggingFaceEmbeddings`): documents via `embed_documents`, queries via `embed_query`;
- a `sentence_transformers.SentenceTransformer`: `encode` with the prompts `encode_document` / `encode_query` use;
into what `Evaluator` needs: `embed_documents` / `embed_queries` returning float32, L2-normalised (n, d) arrays,
`model_name`, `pooling` (None: the wrapped object pools as it pleases) and `max_length` (None when it cannot be read).

Objects are recognised by their methods (duck typing), so neither llama_index nor langchain is imported here.
A foreign embedder has no calibration: it is measured as it is. `token_coverage` says how many document tokens an
embedder never embeds (the end of a document past its window), read from its own tokenizer and max length, or None
("unknown") when the wrapped object does not expose them, rather than a guess.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from tqdm.auto import tqdm

from fair_retrieval.inputs import ensure_text_list
from fair_retrieval.validate import is_positive_int, positive_int

logger = logging.getLogger(__name__)

FOREIGN = (
    "a LlamaIndex BaseEmbedding (e.g. HuggingFaceEmbedding), a LangChain Embeddings (e.g. HuggingFaceEmbeddings) "
    "or a sentence_transformers.SentenceTransformer"
)
ACCEPTED = f"a FairEmbedder, {FOREIGN}"
# Where LlamaIndex's HuggingFaceEmbedding and LangChain's HuggingFaceEmbeddings keep their SentenceTransformer.
_MODEL_ATTRIBUTES = ("_model", "_client", "client", "model")


@dataclass(frozen=True)
class TokenCoverage:
    """How much of a corpus an embedder reads: the document tokens past its window are never embedded.

    Attributes:
        documents: documents measured.
        truncated: documents longer than the window, whose end is cut off.
        tokens: tokens of all documents as the model sees them (prompt and special tokens included).
        cut_tokens: tokens never embedded.
        max_length: the window, in tokens.
    """

    documents: int
    truncated: int
    tokens: int
    cut_tokens: int
    max_length: int

    @property
    def share(self) -> float:
        """Share of all tokens never embedded (0 when every token is read)."""
        return self.cut_tokens / max(1, self.tokens)

    def to_dict(self) -> dict[str, Any]:
        """The form stored in a report run's `tokens_never_embedded`."""
        return {
            "documents": self.documents,
            "truncated_documents": self.truncated,
            "tokens": self.tokens,
            "cut_tokens": self.cut_tokens,
            "share": self.share,
            "max_length": self.max_length,
        }


class ForeignEmbedder:
    """A LlamaIndex, LangChain or sentence-transformers embedder, measured as it is (no calibration).

    Args:
        wrapped: the embedding object (see the module docstring for what is accepted).
        label: the name of its run in reports; None uses its class name (e.g. "HuggingFaceEmbedding").
        model_name: the model in reports; None reads it from the object (`model_name`, else its model card).
        batch_size: texts per `encode` call (SentenceTransformer only; the others batch as configured).

    Raises:
        TypeError: if `wrapped` is none of the accepted kinds (the message lists them).
    """

    pooling: str | None = None

    def __init__(
        self, wrapped: Any, *, label: str | None = None, model_name: str | None = None, batch_size: int = 32
    ) -> None:
        self.kind = foreign_kind(wrapped)
        if self.kind is None:
            raise TypeError(
                f"ForeignEmbedder cannot wrap an object of type {type(wrapped).__name__}: "
                f"pass {FOREIGN}{_hint(wrapped)}."
            )
        self.wrapped = wrapped
        self.label = label or type(wrapped).__name__
        self.batch_size = batch_size
        self._fair = _fair_embedder_inside(wrapped)
        self._model = wrapped if self.kind == "sentence-transformers" else _sentence_transformer_inside(wrapped)
        self.model_name = model_name or _model_name(wrapped, self._model)
        self.max_length = self._max_length()

    @property
    def tokenizer(self) -> Any:
        """The wrapped model's tokenizer (probe depths are measured in its tokens), or None when not exposed."""
        source = self._fair or self._model
        return getattr(source, "tokenizer", None) if source is not None else None

    @property
    def cache_scope(self) -> dict[str, Any]:
        """What, besides model name and max length, tells this embedder's vectors apart in an embedding cache."""
        cls = type(self.wrapped)
        settings: Any = None
        if hasattr(self.wrapped, "model_dump"):  # pydantic: HuggingFaceEmbedding, HuggingFaceEmbeddings, ours
            try:
                settings = self.wrapped.model_dump(mode="json")
            except Exception:  # a field that is not JSON-able: the class alone keys the cache
                settings = None
        elif self.kind == "sentence-transformers":
            settings = {"prompts": getattr(self.wrapped, "prompts", None)}
        return {"class": f"{cls.__module__}.{cls.__qualname__}", "settings": settings}

    def embed_documents(
        self, texts: Sequence[str], calibration: Any = None, show_progress_bar: bool | None = None
    ) -> np.ndarray:
        """Embed documents as the wrapped object does; float32 (n, d), L2-normalised, in input order.

        Raises:
            ValueError: if a calibration is asked for (a foreign embedder is measured as it is).
        """
        if calibration is not None:
            raise ValueError(
                f"{self.label} cannot be calibrated: it is measured as it is. Pass calibration=None, or a "
                "FairEmbedder to measure calibrated documents."
            )
        texts = ensure_text_list(texts)
        show = bool(show_progress_bar)
        if self.kind == "sentence-transformers":
            from fair_retrieval.embedding.loading import document_prompt

            vectors: Any = self._encode(texts, document_prompt(self.wrapped), show)
        elif self.kind == "llamaindex":
            vectors = self.wrapped.get_text_embedding_batch(texts, show_progress=show)
        else:
            vectors = self.wrapped.embed_documents(texts)
        return _normalised(vectors, len(texts))

    def embed_queries(self, texts: Sequence[str], show_progress_bar: bool | None = None) -> np.ndarray:
        """Embed queries one by one as the wrapped object does (neither stack has a batch query call), or in
        batches for a SentenceTransformer; float32 (n, d), L2-normalised, in input order."""
        texts = ensure_text_list(texts)
        show = bool(show_progress_bar)
        if self.kind == "sentence-transformers":
            from fair_retrieval.embedding.loading import query_prompt

            return _normalised(self._encode(texts, query_prompt(self.wrapped), show), len(texts))
        embed_one = self.wrapped.get_query_embedding if self.kind == "llamaindex" else self.wrapped.embed_query
        vectors = [embed_one(text) for text in tqdm(texts, desc="Embedding queries", disable=not show, unit="query")]
        return _normalised(vectors, len(texts))

    def token_coverage(self, texts: Sequence[str]) -> TokenCoverage | None:
        """Document tokens this embedder never embeds, or None when its tokenizer or max length is not exposed."""
        texts = ensure_text_list(texts)
        if self._fair is not None:
            return token_coverage(self._fair, texts)
        if self._model is None or self.tokenizer is None or self.max_length is None:
            logger.info(
                "%s does not expose its tokenizer and max length, so the share of tokens it never embeds is unknown.",
                self.label,
            )
            return None
        if self.kind == "langchain" and type(self.wrapped).__name__ == "HuggingFaceEmbeddings":
            texts = [t.replace("\n", " ") for t in texts]  # what HuggingFaceEmbeddings embeds
        prompt = self._document_prompt() or ""
        encoded = self.tokenizer([prompt + t for t in texts], add_special_tokens=True, truncation=False, verbose=False)
        lengths = [len(ids) for ids in encoded["input_ids"]]
        return _coverage(lengths, [max(0, n - self.max_length) for n in lengths], self.max_length)

    def __repr__(self) -> str:
        kind = type(self.wrapped).__name__
        return f"ForeignEmbedder({kind}, model={self.model_name!r}, max_length={self.max_length})"

    # ------------------------------------------------------------------------------------------------ internals

    def _encode(self, texts: list[str], prompt: str | None, show: bool) -> Any:
        return self.wrapped.encode(
            texts,
            prompt=prompt,
            batch_size=self.batch_size,
            show_progress_bar=show,
            normalize_embeddings=True,
            convert_to_numpy=True,
        )

    def _max_length(self) -> int | None:
        """The window: the FairEmbedder's, the SentenceTransformer's max_seq_length, else an int `max_length`."""
        for value in (
            getattr(self._fair, "max_length", None),
            getattr(self._model, "max_seq_length", None),
            getattr(self.wrapped, "max_length", None),
        ):
            if is_positive_int(value):
                return value
        return None

    def _document_prompt(self) -> str | None:
        """The prompt the wrapped object puts before each document, resolved as sentence-transformers does."""
        from fair_retrieval.embedding.loading import document_prompt

        prompts = getattr(self._model, "prompts", None) or {}
        if self.kind == "llamaindex":
            return prompts.get("text")  # HuggingFaceEmbedding encodes documents with prompt_name="text"
        if self.kind == "langchain":
            kwargs = getattr(self.wrapped, "encode_kwargs", None) or {}
            if kwargs.get("prompt") is not None:
                return str(kwargs["prompt"])
            name = kwargs.get("prompt_name") or getattr(self._model, "default_prompt_name", None)
            return prompts.get(name) if name is not None else None
        return document_prompt(self._model)


def foreign_kind(embedder: Any) -> str | None:
    """Which kind of foreign embedder this is: "sentence-transformers", "llamaindex", "langchain", or None for
    anything else (a FairEmbedder included)."""
    from sentence_transformers import SentenceTransformer

    if isinstance(embedder, SentenceTransformer):
        return "sentence-transformers"
    if _has_methods(embedder, "get_text_embedding_batch", "get_query_embedding"):
        return "llamaindex"
    if _has_methods(embedder, "embed_documents", "embed_query") and not _has_methods(embedder, "embed_queries"):
        return "langchain"
    return None


def evaluated_embedder(embedder: Any) -> Any:
    """`embedder` as the Evaluator needs it: as is when it has embed_documents and embed_queries (a FairEmbedder, a
    `ForeignEmbedder`), else wrapped in a `ForeignEmbedder`.

    Raises:
        TypeError: for an object of none of the accepted kinds (the message lists them).
    """
    if _has_methods(embedder, "embed_documents", "embed_queries"):
        return embedder
    if foreign_kind(embedder) is None:
        raise TypeError(
            f"Cannot measure an object of type {type(embedder).__name__}: pass {ACCEPTED}{_hint(embedder)}."
        )
    return ForeignEmbedder(embedder)


def token_coverage(embedder: Any, texts: Sequence[str]) -> TokenCoverage | None:
    """Document tokens `embedder` never embeds on `texts`: from a FairEmbedder's plan (`plan_documents`, 0 with
    long_documents="windows"), a `ForeignEmbedder`'s tokenizer and max length, else None (unknown)."""
    if isinstance(embedder, ForeignEmbedder):
        return embedder.token_coverage(texts)
    if not hasattr(embedder, "plan_documents") or not isinstance(getattr(embedder, "max_length", None), int):
        return None
    plan = embedder.plan_documents(ensure_text_list(texts))
    return _coverage(list(plan.tokens), list(plan.cut_tokens), int(embedder.max_length))


def huggingface_anchor(
    model: str, *, max_length: int | None = None, device: str | None = None, batch_size: int = 32
) -> ForeignEmbedder:
    """Plain sentence-transformers, truncating at the window, as HuggingFaceEmbedding / HuggingFaceEmbeddings run it.

    Why: this is what most pipelines run today; measured next to a FairEmbedder on the same probes it shows what
    switching changes. The model is loaded again (in its own precision, without fair-retrieval's hooks), with the
    same model resolution as FairEmbedder, and encoded with the document and query prompts FairEmbedder uses.

    Args:
        model: Hub id or local folder (the default model's id falls back to the bundled copy offline).
        max_length: the window; None keeps the model's max_seq_length (what both stacks use by default).
        device: "cpu", "cuda", …; None picks the best available.
        batch_size: texts per forward pass.

    Raises:
        ValueError: if the model cannot be loaded, or max_length is not a positive int.
    """
    from fair_retrieval.embedding.loading import load_sentence_transformer, pick_device, resolve_model

    positive_int(max_length, "max_length", or_none=True, note="the model's own")
    name = resolve_model(model)
    loaded = load_sentence_transformer(name, pick_device(device), None)
    if max_length is not None:
        loaded.max_seq_length = max_length
    return ForeignEmbedder(loaded, label="huggingface", model_name=name, batch_size=batch_size)


def _coverage(lengths: list[int], cut: list[int], max_length: int) -> TokenCoverage:
    return TokenCoverage(
        documents=len(lengths),
        truncated=sum(n > 0 for n in cut),
        tokens=sum(lengths),
        cut_tokens=sum(cut),
        max_length=max_length,
    )


def _hint(obj: Any) -> str:
    """What to do with a model reference given where an embedder was expected."""
    if isinstance(obj, str) or hasattr(obj, "__fspath__"):
        return (
            " (a model id or folder: load it with FairEmbedder(model), or huggingface_anchor(model) for plain "
            "sentence-transformers)"
        )
    return ""


def _has_methods(obj: Any, *names: str) -> bool:
    return all(callable(getattr(obj, name, None)) for name in names)


def _fair_embedder_inside(wrapped: Any) -> Any:
    """The FairEmbedder behind fair-retrieval's own LlamaIndex / LangChain adapters, else None."""
    from fair_retrieval.embedding.embedder import FairEmbedder

    inside = getattr(wrapped, "fair_embedder", None)
    return inside if isinstance(inside, FairEmbedder) else None


def _sentence_transformer_inside(wrapped: Any) -> Any:
    """The SentenceTransformer-like model (a tokenizer and a max_seq_length) an embedding object keeps, else None."""
    for attribute in _MODEL_ATTRIBUTES:
        model = getattr(wrapped, attribute, None)
        if model is not None and hasattr(model, "tokenizer") and hasattr(model, "max_seq_length"):
            return model
    return None


def _model_name(wrapped: Any, model: Any) -> str:
    name = getattr(wrapped, "model_name", None) or getattr(wrapped, "model", None)
    if isinstance(name, str) and name:
        return name
    card = getattr(model, "model_card_data", None)
    for field in ("base_model", "model_id", "model_name"):
        value = getattr(card, field, None)
        if isinstance(value, str) and value:
            return value
    return type(wrapped).__name__


def _normalised(vectors: Any, count: int) -> np.ndarray:
    """(count, d) float32 rows of unit length (an all-zero row stays zero)."""
    array = np.asarray(vectors, dtype=np.float32).reshape(count, -1)
    norms = np.linalg.norm(array, axis=1, keepdims=True)
    return np.divide(array, norms, out=np.zeros_like(array), where=norms > 0)
