"""Plain vs calibrated on one task, as a report: the one routine behind `eval` and `diagnose`.

`position_report` embeds the task's corpus plainly (and with a calibration, when given), retrieves with the same plain
queries and returns the JSON report of `fair_retrieval.evaluation.evaluation_report`. `diagnose_corpus` does the same on
label-free probes built from a user's own documents, so position bias can be measured without any labelled query.

Both also measure the embedder a user runs today: a LlamaIndex `BaseEmbedding`, a LangChain `Embeddings` or a
`SentenceTransformer` (see `fair_retrieval.evaluation.external_embedders`), alone or as the `baseline` run next to a
FairEmbedder, and every run says which share of the documents' tokens it never embedded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.evaluation_report import build_report
from fair_retrieval.evaluation.external_embedders import ForeignEmbedder, evaluated_embedder, token_coverage
from fair_retrieval.evaluation.metrics import metric_names
from fair_retrieval.evaluation.probes import probe_task_for
from fair_retrieval.evaluation.runner import Evaluator, RunResult


def position_report(
    embedder: Any,
    task: RetrievalTask,
    calibration: Calibration | None,
    *,
    grouping: str | None = None,
    n_bins: int = 10,
    cache: EmbeddingCache | None = None,
    show_progress_bar: bool = True,
    baseline: Any = None,
) -> dict[str, Any]:
    """Evaluate plain (and `calibration`, unless None) documents on `task`; return the JSON report.

    Args:
        embedder: a `FairEmbedder`, or the embedder run today (a LlamaIndex `BaseEmbedding`, a LangChain
            `Embeddings`, a `SentenceTransformer`), measured as it is: its run is labelled with its class name.
        task: the benchmark (labelled, or probes from `build_probe_task`).
        calibration: the configuration compared with plain; None reports plain only. Must be None for an embedder
            that is not a FairEmbedder.
        grouping: position grouping (None: the task's default).
        n_bins: finer position bins kept for the plot.
        cache: embedding cache, so re-runs reuse embeddings.
        show_progress_bar: tqdm bars while embedding.
        baseline: another embedder (any kind `embedder` accepts), e.g. `foreign.huggingface_anchor(model)`: run
            first, plainly, on the same task, so the report's comparison is baseline → the last run of `embedder`.

    Raises:
        TypeError: if `embedder` or `baseline` is of no accepted kind (the message lists them).
        ValueError: if a calibration is given for an embedder that cannot be calibrated.
    """
    measured = _measured(embedder, calibration)
    texts = list(task.corpus.values())
    runs: list[RunResult] = []
    coverage: list[dict[str, Any] | None] = []
    options: dict[str, Any] = {"grouping": grouping, "n_bins": n_bins, "show_progress_bar": show_progress_bar}
    if baseline is not None:
        anchor = evaluated_embedder(baseline)
        label = anchor.label if isinstance(anchor, ForeignEmbedder) else "baseline"
        label = f"{label} (baseline)" if label in ("plain", "calibrated", _label(measured)) else label
        runs.append(Evaluator(anchor, task, cache=_scoped(cache, anchor), **options).run(label, None))
        coverage.append(_coverage_of(anchor, texts))
    evaluator = Evaluator(measured, task, cache=_scoped(cache, measured), **options)
    runs.append(evaluator.run(_label(measured), None))
    coverage.append(_coverage_of(measured, texts))
    if calibration is not None:
        runs.append(evaluator.run("calibrated", calibration))
        coverage.append(coverage[-1])  # same documents, same window: calibration changes no token count
    return build_report(measured, task, evaluator.grouping_name, runs, metric_names(), coverage=coverage)


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
    baseline: Any = None,
) -> dict[str, Any]:
    """A position-bias report of a corpus with no labels: probe nDCG@10 by depth, PSI, harmonic mean.

    Why: to see how much the pipeline in use loses on the end of long documents, on one's own documents, before
    (and after) switching. Each run also reports the share of document tokens it never embedded.

    Args:
        documents: document id → text, or a list of texts.
        embedder: a `FairEmbedder`; or the embedder run today, measured as it is: a LlamaIndex `BaseEmbedding`
            (e.g. `HuggingFaceEmbedding`), a LangChain `Embeddings` (e.g. `HuggingFaceEmbeddings`) or a
            `SentenceTransformer`. Probe depths are measured in its tokens (in characters when it exposes no
            tokenizer).
        calibration: compared with plain (None: plain only); must be None for an embedder that is not a FairEmbedder.
        max_probes: the probe budget.
        seed: seeds the probes.
        n_bins: finer depth bins for the plot.
        cache: embedding cache.
        show_progress_bar: tqdm bars.
        baseline: an embedder measured first, plainly, on the same probes (e.g. your HuggingFaceEmbedding next to
            a FairEmbedder); the report's comparison is baseline → the last run.

    Raises:
        TypeError: if `embedder` or `baseline` is of no accepted kind (the message lists them).
        ValueError: if the corpus is too small or too short to probe (the message says what is needed), or a
            calibration is given for an embedder that cannot be calibrated.
    """
    measured = _measured(embedder, calibration)
    task = probe_task_for(documents, measured, max_probes=max_probes, seed=seed)
    return position_report(
        measured,
        task,
        calibration,
        n_bins=n_bins,
        cache=cache,
        show_progress_bar=show_progress_bar,
        baseline=baseline,
    )


def _measured(embedder: Any, calibration: Calibration | None) -> Any:
    """`embedder` as the Evaluator needs it; a calibration for one that cannot be calibrated fails here, early."""
    measured = evaluated_embedder(embedder)
    if calibration is not None and isinstance(measured, ForeignEmbedder):
        raise ValueError(
            f"{measured.label} cannot be calibrated, so there is no calibrated run to report: pass calibration=None "
            "to measure it as it is, or pass a FairEmbedder (and your embedder as baseline=) to compare both."
        )
    return measured


def _label(embedder: Any) -> str:
    return embedder.label if isinstance(embedder, ForeignEmbedder) else "plain"


def _coverage_of(embedder: Any, texts: list[str]) -> dict[str, Any] | None:
    measured = token_coverage(embedder, texts)
    return None if measured is None else measured.to_dict()


def _scoped(cache: EmbeddingCache | None, embedder: Any) -> EmbeddingCache | None:
    """The cache, keyed also by a foreign embedder's class and settings (two stacks must never share entries)."""
    if cache is None or not isinstance(embedder, ForeignEmbedder):
        return cache
    return _ScopedCache(cache.folder, embedder.cache_scope)


class _ScopedCache(EmbeddingCache):
    """An `EmbeddingCache` whose entries also carry `scope` in their description (and so in their key)."""

    def __init__(self, folder: Any, scope: dict[str, Any]) -> None:
        super().__init__(folder)
        self.scope = scope

    def load(self, description: dict[str, Any]) -> np.ndarray | None:
        return super().load({**description, "embedder": self.scope})

    def save(self, description: dict[str, Any], array: np.ndarray) -> None:
        super().save({**description, "embedder": self.scope}, array)

    def __contains__(self, description: dict[str, Any]) -> bool:
        return super().__contains__({**description, "embedder": self.scope})
