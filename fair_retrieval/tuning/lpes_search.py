"""LPES on a position benchmark: the genetic search of `fair_retrieval.tuning.genetic` with a position-fairness
objective.

The objective is the harmonic mean of nDCG@10 over the answer-position groups of a position benchmark (high only
when answers at the start, middle *and* end of documents are all found). Queries are embedded once, plainly, by the
`Evaluator`; every candidate re-embeds the dev corpus with its factors (and the documents' calibration), which is
what a search evaluation costs. The unmodified model is the first candidate, so the result never scores below it
on the dev set. `fair-retrieval tune --method lpes` parses its options into these calls and prints the outcome.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.engine.lpes import PositionalScaling
from fair_retrieval.evaluation.runner import Evaluator, RunResult
from fair_retrieval.tuning.genetic import GenerationRecord, GeneticConfig, GeneticSearchResult, genetic_search

if TYPE_CHECKING:  # the embedder module loads torch; this one is imported by the CLI at start-up
    from fair_retrieval.embedding.embedder import FairEmbedder

OBJECTIVE = "harmonic mean of nDCG@10 over position groups"


@dataclass(frozen=True)
class LpesTuning:
    """The outcome of `tune_lpes`.

    Attributes:
        search: the genetic search's result (best scaling, history, every evaluation).
        plain: the unmodified model's run on the dev set (documents with the calibration only).
        tuned: the run of the best factors.
        config: the search settings used.
        seconds: wall time of the search.
    """

    search: GeneticSearchResult
    plain: RunResult
    tuned: RunResult
    config: GeneticConfig
    seconds: float

    @property
    def best(self) -> PositionalScaling:
        """The best scaling found."""
        return self.search.best

    def to_dict(self, evaluator: Evaluator, calibration: Calibration | None) -> dict[str, Any]:
        """The JSON record of the tuning (`PositionalScaling.load` reads it), with the task and model it ran on."""
        config = self.config
        return {
            "method": "lpes",
            "positional_scaling": self.best.to_dict(),
            "model": evaluator.embedder.model_name,
            "calibration": None if calibration is None else calibration.to_dict(),
            "task": evaluator.task.summary(),
            "grouping": evaluator.grouping_name,
            "objective": OBJECTIVE,
            "search": {
                "control_points": config.num_control_points,
                "bounds": list(config.bounds),
                "population": config.population,
                "generations": config.generations,
                "max_evaluations": config.max_evaluations,
                "seed": config.seed,
                "evaluations": self.search.evaluations,
                "seconds": round(self.seconds, 2),
            },
            "plain": self.plain.to_dict(),
            "best": self.tuned.to_dict(),
            "history": [asdict(record) for record in self.search.history],
        }


def check_position_task(evaluator: Evaluator) -> None:
    """Refuse a task whose grouping has fewer than two position groups (the objective compares groups).

    Raises:
        ValueError: with what to use instead.
    """
    if len(evaluator.grouping) < 2:
        raise ValueError(
            f"{evaluator.task.name} gives {len(evaluator.grouping)} position group(s); the LPES objective compares at "
            "least two. Use a position benchmark (needle, squad-v2, xquad:LANG, …) and a position grouping."
        )


def tune_lpes(
    embedder: FairEmbedder,
    evaluator: Evaluator,
    calibration: Calibration | None,
    config: GeneticConfig | None = None,
    *,
    show_progress_bar: bool = False,
    on_generation: Callable[[GenerationRecord], None] | None = None,
) -> LpesTuning:
    """Search per-layer RoPE scaling factors that maximise position fairness on `evaluator`'s dev set.

    Args:
        embedder: a model with rotary position embeddings, with positional scaling installed
            (`fair_retrieval.engine.lpes.install_positional_scaling`).
        evaluator: the dev set (a position benchmark) with its queries embedded once.
        calibration: the documents' calibration, applied with every candidate's factors (as `FairEmbedder` will
            embed documents); None tunes the factors alone.
        config: the genetic search's settings (None: `GeneticConfig()`).
        show_progress_bar: show a tqdm bar over the evaluation budget.
        on_generation: called with each generation's record (e.g. to print progress).

    Raises:
        ValueError: a task with fewer than two position groups, or invalid settings.
    """
    check_position_task(evaluator)
    config = GeneticConfig() if config is None else config
    documents = list(evaluator.task.corpus.values())
    runs: dict[tuple[float, ...], RunResult] = {}

    def objective(scaling: PositionalScaling) -> float:
        embeddings = embedder.embed_documents(documents, calibration=calibration, positional_scaling=scaling)
        result = evaluator.score("lpes", embeddings, calibration)
        runs[scaling.factors] = result
        return float(result.harmonic_mean or 0.0)

    start = time.perf_counter()
    search = genetic_search(
        objective,
        embedder.num_layers,
        config,
        show_progress_bar=show_progress_bar,
        on_generation=on_generation,
    )
    seconds = time.perf_counter() - start
    plain = runs.get(PositionalScaling.identity(embedder.num_layers).factors)
    if plain is None:  # 1.0 lay outside the bounds, so the search never scored the unmodified model
        plain = evaluator.score("plain", embedder.embed_documents(documents, calibration=calibration), calibration)
    return LpesTuning(search=search, plain=plain, tuned=runs[search.best.factors], config=config, seconds=seconds)
