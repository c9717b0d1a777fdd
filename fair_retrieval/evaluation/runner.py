"""Run a retrieval task with one model, plainly and with calibrations, and score every run the same way.

Queries are embedded once (they are always plain); documents once per configuration. All runs of one `Evaluator`
share the queries, the corpus and the grouping, so their numbers are directly comparable.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.groups import Grouping, default_grouping, make_grouping, position_bins
from fair_retrieval.evaluation.metrics import (
    Run,
    harmonic_mean,
    mean_metrics,
    per_query_metrics,
    position_sensitivity_index,
)
from fair_retrieval.evaluation.retrieval import ranked_ids

logger = logging.getLogger(__name__)

PRIMARY = "ndcg@10"


@dataclass
class RunResult:
    """The scores of one configuration on one task.

    Attributes:
        label: "plain", "calibrated", or a name given by the caller.
        calibration: the configuration (None for plain embeddings).
        overall: metric → mean over all queries (and "count").
        groups: group → metric → mean over the group's queries (and "count").
        bins: finer position bins → metric → mean (for plots); empty without positions.
        psi: 1 − min/max of the groups' nDCG@10; None with fewer than two groups.
        harmonic_mean: harmonic mean of the groups' nDCG@10; None without groups.
        seconds: time spent embedding the documents (0 when loaded from the cache).
        per_query: query → metric → value.
        calibrated_documents: how many documents the calibration changed (the others were too short for it);
            None for plain runs or embedders that cannot tell.
    """

    label: str
    calibration: Calibration | None
    overall: dict[str, float]
    groups: dict[str, dict[str, float]]
    bins: dict[str, dict[str, float]]
    psi: float | None
    harmonic_mean: float | None
    seconds: float
    per_query: dict[str, dict[str, float]] = field(repr=False, default_factory=dict)
    calibrated_documents: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form (without per-query scores), as stored in the report's `runs`."""
        return {
            "label": self.label,
            "calibration": None if self.calibration is None else self.calibration.to_dict(),
            "overall": self.overall,
            "groups": self.groups,
            "bins": self.bins,
            "psi": self.psi,
            "harmonic_mean": self.harmonic_mean,
            "seconds": round(self.seconds, 3),
            "calibrated_documents": self.calibrated_documents,
        }


class Evaluator:
    """Scores document embeddings of one model on one task.

    Args:
        embedder: a `FairEmbedder` (anything with embed_documents/embed_queries, model_name, pooling, max_length).
        task: the benchmark.
        grouping: name of the position grouping (see `groups.GROUPINGS`), "none", or None for the task's default.
        n_bins: number of finer position bins kept for plots.
        cache: embedding cache; None computes everything in memory.
        ndcg_k, recall_k: cut-offs of the reported metrics.
        show_progress_bar: tqdm bars while embedding.
    """

    def __init__(
        self,
        embedder: Any,
        task: RetrievalTask,
        grouping: str | None = None,
        n_bins: int = 10,
        cache: EmbeddingCache | None = None,
        ndcg_k: tuple[int, ...] = (10,),
        recall_k: tuple[int, ...] = (10, 100),
        show_progress_bar: bool = False,
    ) -> None:
        self.embedder = embedder
        self.task = task
        self.grouping_name = grouping or default_grouping(task)
        self.grouping: Grouping = make_grouping(task, self.grouping_name)
        self.bins: Grouping = position_bins(task, n_bins) if task.positions else {}
        self.cache = cache
        self.ndcg_k = ndcg_k
        self.recall_k = recall_k
        self.show_progress_bar = show_progress_bar
        self._queries: np.ndarray | None = None
        self._depth = max(max(ndcg_k), max(recall_k))

    # ---------------------------------------------------------------------------------------------- embeddings

    def _describe(self, kind: str, calibration: Calibration | None, extra: dict[str, Any] | None) -> dict[str, Any]:
        fingerprint = self.task.fingerprint() if kind == "documents" else self.task.query_fingerprint()
        return {
            "kind": kind,
            "model": str(getattr(self.embedder, "model_name", type(self.embedder).__name__)),
            "pooling": getattr(self.embedder, "pooling", None),
            "max_length": getattr(self.embedder, "max_length", None),
            # how documents longer than max_length are embedded (windows pooled, or truncated) changes their vectors
            **(
                {"long_documents": self.embedder.long_documents, "window_overlap": self.embedder.window_overlap}
                if kind == "documents" and hasattr(self.embedder, "long_documents")
                else {}
            ),
            "texts": fingerprint,
            "count": len(self.task.corpus) if kind == "documents" else len(self.task.queries),
            "calibration": None if calibration is None else calibration.to_dict(),
            **(extra or {}),
        }

    def query_embeddings(self) -> np.ndarray:
        """Plain query embeddings, computed once (and cached on disk when a cache is set)."""
        if self._queries is None:
            description = self._describe("queries", None, None)
            cached = self.cache.load(description) if self.cache else None
            if cached is None:
                cached = self.embedder.embed_queries(
                    list(self.task.queries.values()), show_progress_bar=self.show_progress_bar
                )
                if self.cache:
                    self.cache.save(description, cached)
            self._queries = cached
        return self._queries

    def cached_document_embeddings(
        self, calibration: Calibration | None, extra: dict[str, Any] | None = None
    ) -> np.ndarray | None:
        """Document embeddings for `calibration` if the cache holds them, else None (nothing is computed)."""
        return self.cache.load(self._describe("documents", calibration, extra)) if self.cache else None

    def document_embeddings(
        self, calibration: Calibration | None, extra: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, float]:
        """Document embeddings for `calibration` (None = plain) and the seconds spent computing them (0 if cached).

        `extra` distinguishes embeddings that differ for reasons outside the calibration (e.g. another method's
        settings) in the cache key.
        """
        description = self._describe("documents", calibration, extra)
        cached = self.cache.load(description) if self.cache else None
        if cached is not None:
            return cached, 0.0
        start = time.perf_counter()
        array = self.embedder.embed_documents(
            list(self.task.corpus.values()), calibration=calibration, show_progress_bar=self.show_progress_bar
        )
        seconds = time.perf_counter() - start
        if self.cache:
            self.cache.save(description, array)
        return array, seconds

    # ---------------------------------------------------------------------------------------------- scoring

    def score(
        self, label: str, documents: np.ndarray, calibration: Calibration | None = None, seconds: float = 0.0
    ) -> RunResult:
        """Score precomputed document embeddings against the task's (plain) queries."""
        run = ranked_ids(self.task.query_ids, self.task.doc_ids, self.query_embeddings(), documents, self._depth)
        return self.score_ranking(label, run, calibration, seconds)

    def score_ranking(
        self, label: str, run: Run, calibration: Calibration | None = None, seconds: float = 0.0
    ) -> RunResult:
        """Score a ranking made elsewhere (query id → document ids, best first; e.g. a store's searches) exactly as
        `score` scores embeddings: the same metrics, groups and bins, so its run sits beside the others in one
        report. A query missing from `run` retrieved nothing and scores 0.

        Args:
            label: the run's name in reports.
            run: the ranking, at least as deep as the deepest cut-off to be meaningful.
            calibration: the configuration the run's documents were embedded with, if any (None: none, or not
                one of this evaluator's embedder).
            seconds: time spent making the run's document representation.
        """
        per_query = per_query_metrics(run, self.task.qrels, self.ndcg_k, self.recall_k)
        groups = {name: mean_metrics(per_query, ids) for name, ids in self.grouping.items()}
        bins = {name: mean_metrics(per_query, ids) for name, ids in self.bins.items()}
        scores = [g[PRIMARY] for g in groups.values()] if PRIMARY in next(iter(per_query.values())) else []
        return RunResult(
            label=label,
            calibration=calibration,
            overall=mean_metrics(per_query),
            groups=groups,
            bins=bins,
            psi=position_sensitivity_index(scores) if len(scores) >= 2 else None,
            harmonic_mean=harmonic_mean(scores) if scores else None,
            seconds=seconds,
            per_query=per_query,
            calibrated_documents=self._calibrated_documents(calibration),
        )

    def _calibrated_documents(self, calibration: Calibration | None) -> int | None:
        """How many of the task's documents `calibration` changes (None if plain or the embedder cannot say)."""
        if calibration is None or not hasattr(self.embedder, "calibrated_texts"):
            return None
        return sum(self.embedder.calibrated_texts(list(self.task.corpus.values()), calibration))

    def run(self, label: str, calibration: Calibration | None) -> RunResult:
        """Embed the corpus with `calibration` (None = plain) and score it."""
        documents, seconds = self.document_embeddings(calibration)
        result = self.score(label, documents, calibration, seconds)
        logger.info(
            "%s on %s: nDCG@10 %.4f, PSI %s", label, self.task.name, result.overall[PRIMARY], format_score(result.psi)
        )
        return result


def format_score(value: float | None) -> str:
    """A score for tables and logs: four decimals, or "n/a" where it is undefined (e.g. PSI with one group)."""
    return "n/a" if value is None else f"{value:.4f}"
