"""What a `FairEmbedder` tells its user about a call: the report and the log lines.

`EmbeddingReport` says what one `embed_documents` call did to its documents (windowed, truncated, calibrated), and
the functions below write the one INFO line per call and the warnings a user must see: truncated queries, truncated
documents, and a calibration that changed nothing. A caller that embeds in batches (LlamaIndex's
`get_text_embedding_batch` calls the embedder once per `embed_batch_size` texts) wraps its call in
`one_summary()`: the per-batch lines become DEBUG, and one INFO line sums them up. Every line goes to the
`fair_retrieval.embedding.embedder` logger, the name users configure for what the embedder says.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, fields

import numpy as np

from fair_retrieval.embedding.embedder_options import active_calibration
from fair_retrieval.embedding.windows import DocumentPlan, LongDocuments
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.text_checks import LONG_TEXT_CHARACTERS

# FairEmbedder's own logger: these lines are what it says.
logger = logging.getLogger("fair_retrieval.embedding.embedder")

__all__ = [
    "EmbeddingReport",
    "announce_long_texts",
    "log_documents_call",
    "one_summary",
    "warn_if_never_calibrated",
    "warn_truncated_queries",
]


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

    @classmethod
    def of(cls, plan: DocumentPlan, calibrated_pieces: np.ndarray) -> EmbeddingReport:
        """The report of embedding `plan`, given which of its pieces were calibrated ((pieces,) bool)."""
        documents = np.zeros(len(plan.tokens), dtype=bool)
        np.logical_or.at(documents, np.asarray(plan.owners, dtype=np.int64), calibrated_pieces)
        return cls(
            documents=len(plan.tokens),
            windowed=plan.windowed,
            windows=len(plan.pieces),
            truncated=plan.truncated,
            calibrated=int(documents.sum()),
            calibrated_windows=int(calibrated_pieces.sum()),
            tokens=sum(plan.tokens),
            cut_tokens=sum(plan.cut_tokens),
        )

    @classmethod
    def total(cls, reports: Sequence[EmbeddingReport]) -> EmbeddingReport:
        """The report of several calls together (every count summed)."""
        return cls(**{f.name: sum(getattr(report, f.name) for report in reports) for f in fields(cls)})

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


# The reports of the calls inside `one_summary()`, or None outside it.
_BATCHES: ContextVar[list[EmbeddingReport] | None] = ContextVar("fair_retrieval_embedding_batches", default=None)


@contextlib.contextmanager
def one_summary() -> Iterator[list[EmbeddingReport]]:
    """Within this context, each `embed_documents` call logs its line at DEBUG, and leaving it logs one INFO line
    for all of them. Why: a framework that embeds one batch per call would otherwise log one INFO line per batch.

    Threads started with `asyncio.to_thread` inside the context share it (it is a context variable).

    Yields:
        The reports of the calls made so far.
    """
    outer = _BATCHES.get()
    if outer is not None:  # nested: the outer context gives the summary
        yield outer
        return
    reports: list[EmbeddingReport] = []
    token = _BATCHES.set(reports)
    try:
        yield reports
    finally:
        _BATCHES.reset(token)
    if reports:
        batches = f" in {len(reports)} batches" if len(reports) > 1 else ""
        logger.info("Embedded %s%s.", EmbeddingReport.total(reports).summary(), batches)


def announce_long_texts(texts: Sequence[str], owners: Sequence[int], batch_size: int) -> bool:
    """Warn, before the model runs, about the texts longer than `LONG_TEXT_CHARACTERS`, with their cost in windows
    and forward passes; whether there were any (the call then shows a progress bar).

    Args:
        texts: the documents of one call.
        owners: the document each planned window belongs to (`DocumentPlan.owners`), so the count is exact.
        batch_size: windows per forward pass.
    """
    long = [i for i, text in enumerate(texts) if len(text) > LONG_TEXT_CHARACTERS]
    if not long:
        return False
    windows = np.bincount(np.asarray(owners, dtype=np.int64), minlength=len(texts))
    logger.warning(
        "%d text%s longer than %d characters (longest: %d) will be embedded as %d windows, %d forward passes of up "
        "to %d windows for the whole call (%d windows); a progress bar shows it. Split such texts into chunks first "
        "if they should be found by their parts.",
        len(long),
        "s" if len(long) > 1 else "",
        LONG_TEXT_CHARACTERS,
        max(len(texts[i]) for i in long),
        int(windows[long].sum()),
        -(-len(owners) // max(1, batch_size)),
        batch_size,
        len(owners),
    )
    return True


def warn_truncated_queries(lengths: list[int], max_length: int) -> None:
    """Warn when queries of `lengths` tokens exceed the window: queries are never windowed, so their ends are lost."""
    too_long = [n for n in lengths if n > max_length]
    if too_long:
        logger.warning(
            "%d of %d queries exceed max_length=%d tokens (longest: %d tokens) and were truncated; their ends "
            "are not embedded.",
            len(too_long),
            len(lengths),
            max_length,
            max(too_long),
        )


def log_documents_call(
    report: EmbeddingReport,
    calibration: Calibration | None,
    longest: int,
    *,
    max_length: int,
    model_limit: object,
    long_documents: LongDocuments,
    warn_uncalibrated: bool,
) -> bool:
    """One log line per `embed_documents` call: INFO normally; WARNING when documents were truncated, or when a
    calibration was asked for and nothing was calibrated (only while `warn_uncalibrated`).

    Args:
        report: what the call did.
        calibration: the calibration that was applied, or None for a plain call (or one of strength 0).
        longest: tokens of the call's longest document.
        max_length: the embedder's window.
        model_limit: the model's `max_position_embeddings`, or words saying it is unknown.
        long_documents: the embedder's policy for documents longer than the window.
        warn_uncalibrated: whether the "nothing was calibrated" warning may still be shown (once per embedder).

    Returns:
        True if the "nothing was calibrated" warning was shown now.
    """
    batches = _BATCHES.get()
    if batches is None:
        logger.info("Embedded %s.", report.summary())
    else:
        batches.append(report)
        logger.debug("Embedded %s (one batch).", report.summary())
    if report.truncated:
        logger.warning(
            "%d of %d documents exceed max_length=%d tokens (longest: %d tokens) and were truncated; "
            "%d tokens (%.0f%%) are not embedded. Use long_documents='windows' (the default) so every token "
            "counts, split documents into chunks, or raise max_length (the model allows %s).",
            report.truncated,
            report.documents,
            max_length,
            longest,
            report.cut_tokens,
            100.0 * report.cut_tokens / max(1, report.tokens),
            model_limit,
        )
    if calibration is None or report.calibrated or not warn_uncalibrated:
        return False
    logger.warning(
        "None of these %d documents has a %s with the %d content tokens (min_full_baskets=%d × basket_size=%d) "
        "that the calibration needs, so they were embedded plainly. For short chunks use a smaller basket_size "
        "or min_full_baskets=1 (docs/method.md), or let `fair-retrieval tune` choose. Shown once per embedder.",
        report.documents,
        "window" if long_documents == "windows" else "text",
        calibration.min_content_tokens,
        calibration.min_full_baskets,
        calibration.basket_size,
    )
    return True


def warn_if_never_calibrated(
    calibration: Calibration | None,
    *,
    model_name: str,
    max_length: int,
    window_content_tokens: int,
    model_limit: object,
    long_documents: LongDocuments,
) -> bool:
    """Say at construction when no text can ever be calibrated: the window is smaller than the calibration.

    Returns:
        True if the warning was shown (the per-call "nothing was calibrated" warning would only repeat it).
    """
    calibration = active_calibration(calibration)
    if calibration is None or window_content_tokens >= calibration.min_content_tokens:
        return False
    logger.warning(
        "%s: a window of max_length=%d tokens holds at most %d content tokens, fewer than the %d "
        "(min_full_baskets=%d × basket_size=%d) this calibration needs, so no document will be calibrated%s. "
        "To calibrate, raise max_length (the model allows %s) or use a smaller basket_size or "
        "min_full_baskets (docs/method.md).",
        model_name,
        max_length,
        window_content_tokens,
        calibration.min_content_tokens,
        calibration.min_full_baskets,
        calibration.basket_size,
        "; long documents are still split into windows and pooled" if long_documents == "windows" else "",
        model_limit,
    )
    return True
