"""What a `FairEmbedder` tells its user about a call: the report and the log lines.

`EmbeddingReport` says what one `embed_documents` call did to its documents (windowed, truncated, calibrated), and
the functions below write the one INFO line per call and the warnings a user must see: truncated queries, truncated
documents, and a calibration that changed nothing. A caller that embeds in batches (LlamaIndex's
`get_text_embedding_batch` calls the embedder once per `embed_batch_size` texts) wraps its call in
`one_summary()`: the per-batch lines become DEBUG, and one INFO line sums them up. A multi-vector store asks for
its windows in one pass per window size over the same documents, inside `window_passes()`: one INFO line counts
each document once and says how many passes read it. Every line goes to the
`fair_retrieval.embedding.embedder` logger, the name users configure for what the embedder says.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field, fields

import numpy as np

from fair_retrieval.embedding.embedder_options import active_calibration
from fair_retrieval.embedding.windows import DocumentPlan, LongDocuments
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.text_checks import LONG_TEXT_CHARACTERS

# FairEmbedder's own logger: these lines are what it says.
logger = logging.getLogger("fair_retrieval.embedding.embedder")

__all__ = [
    "EmbeddingReport",
    "WindowPasses",
    "announce_long_texts",
    "calibrated_documents",
    "current_passes",
    "log_documents_call",
    "one_summary",
    "warn_if_never_calibrated",
    "warn_nothing_calibrated",
    "warn_truncated_queries",
    "window_passes",
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
        documents = calibrated_documents(plan, calibrated_pieces)
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
        return f"{_documents(self.documents)}, {self.details()}"

    def details(self) -> str:
        """The summary without the document count: how many were windowed, truncated and calibrated."""
        parts = []
        if self.windowed:
            parts.append(f"{self.windowed} windowed into {self.windows} windows in all")
        if self.truncated:
            share = self.cut_tokens / max(1, self.tokens)
            parts.append(f"{self.truncated} truncated ({share:.0%} of all tokens never embedded)")
        parts.append(f"{self.calibrated} calibrated")
        return ", ".join(parts)


def calibrated_documents(plan: DocumentPlan, calibrated_pieces: np.ndarray) -> np.ndarray:
    """Which documents of `plan` have at least one calibrated piece ((documents,) bool)."""
    documents = np.zeros(len(plan.tokens), dtype=bool)
    np.logical_or.at(documents, np.asarray(plan.owners, dtype=np.int64), calibrated_pieces)
    return documents


def _documents(count: int) -> str:
    return f"{count} document{'s' if count != 1 else ''}"


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


@dataclass
class WindowPasses:
    """The window passes of one `window_passes()` context.

    Attributes:
        documents: how many distinct documents the passes read (set it before the context ends; 0: the most one
            pass read).
        reports: the report of each pass.
        calibrated: which documents a pass calibrated, over passes of the same documents (None: none yet, or
            passes over different subsets, which are counted by the pass that calibrated most).
        nothing_calibrated: shows the "nothing was calibrated" warning for a count of documents; set by an
            embedder whose calibration was asked for and may still warn, called when the context ends only if no
            pass calibrated anything.
        label: what the pass running now embeds ("whole windows", "half windows"), named in its progress bar.
    """

    documents: int = 0
    reports: list[EmbeddingReport] = field(default_factory=list)
    calibrated: np.ndarray | None = None
    nothing_calibrated: Callable[[int], None] | None = None
    label: str | None = None

    def add(self, report: EmbeddingReport, calibrated: np.ndarray) -> EmbeddingReport:
        """Count one pass (`calibrated`: which of its documents it calibrated); returns the report of every pass so
        far (`total`)."""
        if not self.reports:
            self.calibrated = calibrated.copy()
        elif self.calibrated is not None and len(self.calibrated) == len(calibrated):
            self.calibrated |= calibrated
        else:
            self.calibrated = None
        self.reports.append(report)
        return self.total()

    def total(self) -> EmbeddingReport:
        """One report for every pass: each document counted once (windowed, truncated, calibrated: in any pass),
        the windows and calibrated windows of all passes added up."""
        reports = self.reports
        calibrated = int(self.calibrated.sum()) if self.calibrated is not None else max(r.calibrated for r in reports)
        return EmbeddingReport(
            documents=self.documents or max(r.documents for r in reports),
            windowed=max(r.windowed for r in reports),
            windows=sum(r.windows for r in reports),
            truncated=max(r.truncated for r in reports),
            calibrated=calibrated,
            calibrated_windows=sum(r.calibrated_windows for r in reports),
            tokens=max(r.tokens for r in reports),
            cut_tokens=max(r.cut_tokens for r in reports),
        )


# The passes of the `window_passes()` context, or None outside one.
_PASSES: ContextVar[WindowPasses | None] = ContextVar("fair_retrieval_window_passes", default=None)


@contextlib.contextmanager
def window_passes(documents: int = 0) -> Iterator[WindowPasses]:
    """Within this context the embed calls are window passes over the same documents (a multi-vector store's window
    sizes, one call each): each logs its line at DEBUG, and leaving the context logs one INFO line counting each
    document once, "Embedded 8 documents (2 window passes; ...)", not the documents of every pass added up. The
    embedder's `last_report` is the report of every pass (`WindowPasses.total`), and its "nothing was calibrated"
    warning is shown when the context ends, only if no pass calibrated anything.

    Args:
        documents: how many distinct documents the passes read (or set `documents` on what is yielded; 0: the
            most one pass read).
    """
    passes = WindowPasses(documents)
    token = _PASSES.set(passes)
    try:
        yield passes
    finally:
        _PASSES.reset(token)
    if passes.reports:
        total = passes.total()
        plural = "es" if len(passes.reports) != 1 else ""
        logger.info(
            "Embedded %s (%d window pass%s; in all %s).",
            _documents(total.documents),
            len(passes.reports),
            plural,
            total.details(),
        )
        if total.calibrated == 0 and passes.nothing_calibrated is not None:
            passes.nothing_calibrated(total.documents)


def current_passes() -> WindowPasses | None:
    """The passes of the `window_passes()` context this call runs in, or None outside one."""
    return _PASSES.get()


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
        True if the "nothing was calibrated" warning was shown now (never inside `window_passes()`: the passes
        say it when they end, `WindowPasses.nothing_calibrated`).
    """
    batches = _BATCHES.get()
    passes = _PASSES.get()
    if passes is not None:  # counted by the embedder (`WindowPasses.add`), which keeps the report of every pass
        logger.debug("Embedded %s (one window pass).", report.summary())
    elif batches is None:
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
    if passes is not None or calibration is None or report.calibrated or not warn_uncalibrated:
        return False  # in window passes: said when they end, only if none calibrated anything
    warn_nothing_calibrated(report.documents, calibration, long_documents)
    return True


def warn_nothing_calibrated(documents: int, calibration: Calibration, long_documents: LongDocuments) -> None:
    """The warning that a call (or every window pass of a store's add) calibrated none of its `documents`."""
    logger.warning(
        "None of these %d documents has a %s with the %d content tokens (min_full_baskets=%d × basket_size=%d) "
        "that the calibration needs, so they were embedded plainly. For short chunks use a smaller basket_size "
        "or min_full_baskets=1 (docs/method.md), or let `fair-retrieval tune` choose. Shown once per embedder.",
        documents,
        "window" if long_documents == "windows" else "text",
        calibration.min_content_tokens,
        calibration.min_full_baskets,
        calibration.basket_size,
    )


_NEVER_CALIBRATED_SAID: set[tuple[str, int, int]] = set()
"""The (model, max_length, content tokens needed) that `warn_if_never_calibrated` has spoken of in this process."""


def warn_if_never_calibrated(
    calibration: Calibration | None,
    *,
    model_name: str,
    max_length: int,
    window_content_tokens: int,
    model_limit: object,
    long_documents: LongDocuments,
) -> bool:
    """Say at construction when no text can ever be calibrated: the window is smaller than the calibration. Said
    at INFO, once per process for a model, window and calibration: the default model's window is such a case, so a
    WARNING on every embedder (and every CLI run, and every search, whose queries are never calibrated anyway) would
    be noise; a call that asked for calibration and got none still warns (`log_documents_call`).

    Returns:
        True if the warning was shown (the per-call "nothing was calibrated" warning would only repeat it).
    """
    calibration = active_calibration(calibration)
    if calibration is None or window_content_tokens >= calibration.min_content_tokens:
        return False
    said = (model_name, max_length, calibration.min_content_tokens)
    if said in _NEVER_CALIBRATED_SAID:
        return True
    _NEVER_CALIBRATED_SAID.add(said)
    logger.info(
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
