"""Plain vs calibrated on one task, as a report: the one routine behind `eval` and `diagnose`.

`position_report` embeds the task's corpus plainly (and with a calibration, when given), retrieves with the same
plain queries and returns the JSON report of `fair_retrieval.evaluation.report`. `diagnose_corpus` does the same on
label-free probes built from a user's own documents, so position bias can be measured without any labelled query.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from fair_retrieval.calibration import Calibration
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.metrics import metric_names
from fair_retrieval.evaluation.probes import probe_task_for
from fair_retrieval.evaluation.report import build_report
from fair_retrieval.evaluation.runner import Evaluator
from fair_retrieval.evaluation.task import RetrievalTask


def position_report(
    embedder: Any,
    task: RetrievalTask,
    calibration: Calibration | None,
    *,
    grouping: str | None = None,
    n_bins: int = 10,
    cache: EmbeddingCache | None = None,
    show_progress_bar: bool = True,
) -> dict[str, Any]:
    """Evaluate plain (and `calibration`, unless None) documents on `task`; return the JSON report.

    Args:
        embedder: a `FairEmbedder`.
        task: the benchmark (labelled, or probes from `build_probe_task`).
        calibration: the configuration compared with plain; None reports plain only.
        grouping: position grouping (None: the task's default).
        n_bins: finer position bins kept for the plot.
        cache: embedding cache, so re-runs reuse embeddings.
        show_progress_bar: tqdm bars while embedding.
    """
    evaluator = Evaluator(
        embedder, task, grouping=grouping, n_bins=n_bins, cache=cache, show_progress_bar=show_progress_bar
    )
    runs = [evaluator.run("plain", None)]
    if calibration is not None:
        runs.append(evaluator.run("calibrated", calibration))
    return build_report(embedder, task, evaluator.grouping_name, runs, metric_names())


def diagnose_corpus(
    documents: Mapping[str, str] | Sequence[str],
    embedder: Any,
    calibration: Calibration | None,
    *,
    max_probes: int = 600,
    seed: int = 0,
    n_bins: int = 10,
    cache: EmbeddingCache | None = None,
    show_progress_bar: bool = True,
) -> dict[str, Any]:
    """A position-bias report of a corpus with no labels: probe nDCG@10 by depth, PSI, harmonic mean.

    Args:
        documents: document id → text, or a list of texts.
        embedder: a `FairEmbedder`.
        calibration: compared with plain (None: plain only).
        max_probes: the probe budget.
        seed: seeds the probes.
        n_bins: finer depth bins for the plot.
        cache: embedding cache.
        show_progress_bar: tqdm bars.

    Raises:
        ValueError: if the corpus is too small or too short to probe (the message says what is needed).
    """
    task = probe_task_for(documents, embedder, max_probes=max_probes, seed=seed)
    return position_report(embedder, task, calibration, n_bins=n_bins, cache=cache, show_progress_bar=show_progress_bar)
