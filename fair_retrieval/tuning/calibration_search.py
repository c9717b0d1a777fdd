"""Choosing a configuration for a model on a dev set.

The calibration search, and running it on a task: a labelled position benchmark or label-free probes built from
the corpus itself (`tune_unlabelled`). The objective: maximise the
harmonic mean of nDCG@10 over answer-position groups (high only when every position is served well), among the
configurations whose overall nDCG@10 is not below plain embeddings. Plain is always a candidate (strength 0), so
the search never recommends something worse than doing nothing.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from tqdm.auto import tqdm

from fair_retrieval.engine.calibration import (
    Calibration,
    IsolatedMode,
    LayerSpec,
    PartialBasketMode,
    SpecialTokensMode,
)
from fair_retrieval.tuning.genetic import genetic_search as genetic_search  # the LPES search, re-exported

logger = logging.getLogger(__name__)

# ==================================================================================================================
# Calibration search
# ==================================================================================================================

SearchStrategy = Literal["trusted", "coordinate", "grid"]
# The Calibration fields the search varies (all but the strength ramp), in the order the coordinate search visits
# them: Calibration's own.
SEARCH_FIELDS: tuple[str, ...] = tuple(field.name for field in fields(Calibration) if field.name != "strength_ramp")


# The trust region: the configurations labelled dev sets support — every configuration that lost at most 0.002
# nDCG@10 against real questions on each position set of both evaluation models (all-MiniLM-L6-v2 read at 512 tokens:
# SQuAD-v2 dev, SQuADShifts reddit, the needle set, XQuAD-en; multilingual-e5-small in its native 512-token window:
# the same and XQuAD in 12 languages; benchmarks/calibration_study.py, docs/second_model_study.md). Label-free tuning
# chooses inside it: probes measure position bias but cannot see the accuracy a configuration costs, and over the
# whole space they chose configurations that cost real questions 0.0155 nDCG@10 (docs/guides/cli.md, "On your own
# corpus"). λ = 0.5, the default before the two-model study, cost e5-small 0.0071 on SQuAD-v2 and left the region.
TRUST_REGION: tuple[Calibration, ...] = (
    Calibration(strength=0.25),
    Calibration(strength=0.1),
    Calibration(strength=0.05),
)


@dataclass(frozen=True)
class SearchSpace:
    """The values tried for each Calibration field. Layer values are fractions so a space fits any model depth."""

    strength: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0)
    basket_size: tuple[int, ...] = (32, 64, 128, 192, 256)
    layers: tuple[LayerSpec, ...] = (0.25, 0.5, 0.75, 1.0)
    isolated: tuple[str, ...] = get_args(IsolatedMode)
    partial_basket: tuple[str, ...] = get_args(PartialBasketMode)
    special_tokens: tuple[str, ...] = get_args(SpecialTokensMode)
    min_full_baskets: tuple[int, ...] = (1, 2, 3)

    def __post_init__(self) -> None:
        for name in SEARCH_FIELDS:
            values = getattr(self, name)
            if not isinstance(values, tuple) or not values:
                raise ValueError(f"SearchSpace.{name} must be a non-empty tuple of values, got {values!r}.")
        for candidate in self.grid():  # validate every value once, with Calibration's own messages
            del candidate

    def values(self, name: str) -> tuple[Any, ...]:
        """The values tried for field `name`."""
        return tuple(getattr(self, name))

    def grid(self) -> Iterable[Calibration]:
        """Every combination of the values (the full grid; its size is `size`)."""
        for combo in itertools.product(*(self.values(name) for name in SEARCH_FIELDS)):
            yield Calibration(**dict(zip(SEARCH_FIELDS, combo, strict=True)))

    @property
    def size(self) -> int:
        """Number of configurations in the full grid."""
        total = 1
        for name in SEARCH_FIELDS:
            total *= len(self.values(name))
        return total


@dataclass(frozen=True)
class Trial:
    """The dev-set scores of one configuration (None = plain embeddings).

    Attributes:
        calibration: the configuration tried.
        ndcg: overall nDCG@10.
        harmonic_mean: harmonic mean of nDCG@10 over the position groups (None without groups).
        psi: Position Sensitivity Index (None with fewer than two groups).
        groups: group → nDCG@10.
    """

    calibration: Calibration | None
    ndcg: float
    harmonic_mean: float | None
    psi: float | None
    groups: dict[str, float] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """A compact description (`describe`): "plain", "paper" or the fields that differ from the paper's."""
        return describe(self.calibration)

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        return {
            "label": self.label,
            "calibration": None if self.calibration is None else self.calibration.to_dict(),
            "ndcg@10": self.ndcg,
            "harmonic_mean": self.harmonic_mean,
            "psi": self.psi,
            "groups": self.groups,
        }


@dataclass
class SearchResult:
    """Everything a calibration search found.

    Attributes:
        plain: the plain baseline.
        trials: every configuration evaluated, in evaluation order (plain first).
        frontier: the Pareto frontier of (overall nDCG@10, harmonic mean), best nDCG first.
        best: the chosen trial: the highest harmonic mean among trials with nDCG@10 ≥ plain − tolerance.
        tolerance: the allowed nDCG@10 loss used for feasibility.
        strategy: the search strategy that ran.
    """

    plain: Trial
    trials: list[Trial]
    frontier: list[Trial]
    best: Trial
    tolerance: float
    strategy: SearchStrategy = "coordinate"

    @property
    def improved(self) -> bool:
        """True when the chosen configuration is not plain (it improves the objective within the constraint)."""
        return self.best.calibration is not None and self.best.calibration.strength > 0

    def to_dict(self) -> dict[str, Any]:
        """JSON-compatible form."""
        return {
            "strategy": self.strategy,
            "tolerance": self.tolerance,
            "plain": self.plain.to_dict(),
            "best": self.best.to_dict(),
            "improved": self.improved,
            "frontier": [t.to_dict() for t in self.frontier],
            "trials": [t.to_dict() for t in self.trials],
        }


def describe(calibration: Calibration | None) -> str:
    """A compact, unique label: "plain", "paper", or the fields that differ from the paper's configuration
    ("strength=0.05 basket_size=192 …"; index lists as "[4,5]").

    Why the paper and not the library default: the paper's configuration never changes, so labels written into
    reports and tables keep their meaning when the default does.
    """
    if calibration is None:
        return "plain"
    paper = Calibration.paper().to_dict()
    changed = [f"{k}={_compact(v)}" for k, v in calibration.to_dict().items() if paper.get(k) != v]
    return " ".join(changed) if changed else "paper"


def _compact(value: Any) -> str:
    return "[" + ",".join(map(str, value)) + "]" if isinstance(value, list | tuple) else str(value)


def feasible(trial: Trial, plain: Trial, tolerance: float = 0.0) -> bool:
    """True when the trial's overall nDCG@10 is not below plain's by more than `tolerance`."""
    return trial.ndcg >= plain.ndcg - tolerance


def objective(trial: Trial) -> tuple[float, float]:
    """Sort key of the search: harmonic mean over groups (overall nDCG@10 when there are no groups), then nDCG."""
    primary = trial.harmonic_mean if trial.harmonic_mean is not None else trial.ndcg
    return (primary, trial.ndcg)


def select_best(trials: Sequence[Trial], plain: Trial, tolerance: float = 0.0) -> Trial:
    """The feasible trial with the best `objective`; plain itself when nothing else is feasible."""
    candidates = [t for t in trials if feasible(t, plain, tolerance)] or [plain]
    return max(candidates, key=objective)


def pareto_frontier(trials: Sequence[Trial]) -> list[Trial]:
    """Trials not dominated in (overall nDCG@10, harmonic mean), sorted by nDCG@10 descending."""

    def key(t: Trial) -> tuple[float, float]:
        return (t.ndcg, t.harmonic_mean if t.harmonic_mean is not None else t.ndcg)

    frontier: list[Trial] = []
    for trial in trials:
        a = key(trial)
        dominated = any(
            (b := key(other))[0] >= a[0] and b[1] >= a[1] and b != a for other in trials if other is not trial
        )
        if not dominated and all(key(f) != a for f in frontier):
            frontier.append(trial)
    return sorted(frontier, key=lambda t: -t.ndcg)


def calibration_search(
    evaluate: Callable[[Calibration | None], Trial],
    space: SearchSpace | None = None,
    strategy: SearchStrategy = "coordinate",
    start: Calibration | None = None,
    tolerance: float = 0.0,
    max_rounds: int = 3,
    show_progress_bar: bool = True,
) -> SearchResult:
    """Search calibration settings on a dev set.

    Args:
        evaluate: scores one configuration (None = plain) on the dev set; called once per distinct configuration.
        space: the values to try; the default covers strength, basket size, layer share and the three variants.
        strategy: "grid" tries every combination (`space.size` evaluations); "coordinate" starts from `start` and
            changes one field at a time, keeping the best feasible value, for up to `max_rounds` passes — far
            fewer evaluations, usually the same winner because the fields interact weakly; "trusted" tries only
            the configurations labelled dev sets support (`TRUST_REGION`; `space` and `start` are not used):
            what label-free tuning uses, since probes cannot see the accuracy a configuration outside it costs.
        start: first configuration of the coordinate search (default: the library default, `Calibration()`).
        tolerance: nDCG@10 loss allowed relative to plain (0 = "not below plain").
        max_rounds: passes of the coordinate search.
        show_progress_bar: a tqdm bar over evaluations.

    Returns:
        A `SearchResult`; its `best` is plain when no configuration is feasible and better.
    """
    from fair_retrieval.evaluation.runner import format_score

    space = space or SearchSpace()
    if strategy not in get_args(SearchStrategy):
        raise ValueError(f"strategy must be one of {', '.join(get_args(SearchStrategy))}; got {strategy!r}.")
    if tolerance < 0:
        raise ValueError(f"tolerance is an allowed nDCG@10 loss and must be ≥ 0, got {tolerance}.")
    memo: dict[str, Trial] = {}
    total = space.size + 1 if strategy == "grid" else len(TRUST_REGION) + 1 if strategy == "trusted" else None
    bar = tqdm(total=total, desc="Calibration search", unit="config", disable=not show_progress_bar)

    def run(calibration: Calibration | None) -> Trial:
        key = "plain" if calibration is None else calibration.to_json()
        if key not in memo:
            memo[key] = evaluate(calibration)
            bar.update(1)
            bar.set_postfix_str(f"{describe(calibration)}: HM {format_score(memo[key].harmonic_mean)}")
        return memo[key]

    try:
        plain = run(None)
        if strategy == "grid":
            for calibration in space.grid():
                run(calibration)
        elif strategy == "trusted":
            for calibration in TRUST_REGION:
                run(calibration)
        else:
            current = start or Calibration()
            best = run(current)
            for _ in range(max_rounds):
                changed = False
                for name in SEARCH_FIELDS:
                    for value in space.values(name):
                        candidate = dataclasses.replace(current, **{name: value})
                        trial = run(candidate)
                        if _better(trial, best, plain, tolerance):
                            best, current, changed = trial, candidate, True
                if not changed:
                    break
    finally:
        bar.close()
    trials = list(memo.values())
    return SearchResult(
        plain=plain,
        trials=trials,
        frontier=pareto_frontier(trials),
        best=select_best(trials, plain, tolerance),
        tolerance=tolerance,
        strategy=strategy,
    )


def _better(trial: Trial, incumbent: Trial, plain: Trial, tolerance: float) -> bool:
    """Feasible beats infeasible; among equals in feasibility, the higher objective wins."""
    a, b = feasible(trial, plain, tolerance), feasible(incumbent, plain, tolerance)
    if a != b:
        return a
    if not a:  # both infeasible: prefer the smaller loss, so the search walks towards feasibility
        return trial.ndcg > incumbent.ndcg
    return objective(trial) > objective(incumbent)


# ==================================================================================================================
# Searching on a task: labelled (a position benchmark) or label-free (probes built from the user's own corpus)
# ==================================================================================================================


def trial_from_run(result: Any) -> Trial:
    """The `Trial` of an `Evaluator` run (a `RunResult`): its configuration and scores on the primary metric."""
    from fair_retrieval.evaluation.runner import PRIMARY

    return Trial(
        calibration=result.calibration,
        ndcg=result.overall[PRIMARY],
        harmonic_mean=result.harmonic_mean,
        psi=result.psi,
        groups={g: m[PRIMARY] for g, m in result.groups.items()},
    )


def tune_on_task(
    embedder: Any,
    task: Any,
    *,
    space: SearchSpace | None = None,
    strategy: SearchStrategy | None = None,
    start: Calibration | None = None,
    tolerance: float = 0.0,
    max_rounds: int = 2,
    grouping: str | None = None,
    cache: Any = None,
    show_progress_bar: bool = True,
) -> SearchResult:
    """Run `calibration_search` on a `RetrievalTask`, scoring each configuration with an `Evaluator`.

    Args:
        embedder: a `FairEmbedder`.
        task: a `fair_retrieval.evaluation.RetrievalTask` with answer positions (labelled or probes).
        strategy: as in `calibration_search`; None chooses by task (`task_strategy`): "trusted" on probes,
            "coordinate" on labelled questions.
        space, start, tolerance, max_rounds: as in `calibration_search`.
        grouping: position grouping name (None: the task's default, the thirds).
        cache: an `EmbeddingCache`, so re-runs and wider searches reuse embeddings.
        show_progress_bar: tqdm bars.

    Returns:
        The `SearchResult`; its `best` is plain when nothing beats plain within the constraint.
    """
    from fair_retrieval.evaluation.runner import Evaluator

    evaluator = Evaluator(embedder, task, grouping=grouping, cache=cache, show_progress_bar=show_progress_bar)
    if not evaluator.grouping:
        logger.warning("%s has no position groups; the search maximises overall nDCG@10 only.", task.name)

    def evaluate(calibration: Calibration | None) -> Trial:
        return trial_from_run(evaluator.run("plain" if calibration is None else "candidate", calibration))

    return calibration_search(
        evaluate,
        space,
        strategy=task_strategy(task, strategy),
        start=start,
        tolerance=tolerance,
        max_rounds=max_rounds,
        show_progress_bar=show_progress_bar,
    )


def tune_unlabelled(
    documents: Any,
    embedder: Any,
    *,
    max_probes: int = 600,
    seed: int = 0,
    **search: Any,
) -> SearchResult:
    """Choose a calibration for `embedder` on a corpus with no queries, from probes at known depths.

    Builds `probe_task_for(documents, embedder, ...)` and runs `tune_on_task` on it, with the same objective and
    constraint as labelled tuning (highest harmonic mean of nDCG@10 over depth thirds among configurations whose
    overall nDCG@10 is not below plain by more than `tolerance`), inside the trust region (`TRUST_REGION`) unless
    another `strategy` is passed.

    Args:
        documents: document id → text, or a list of texts: the corpus you will index.
        embedder: a `FairEmbedder`.
        max_probes: the probe budget.
        seed: seeds the probes (the search itself is deterministic).
        **search: keyword arguments of `tune_on_task` (strategy — default "trusted" —, space, start, tolerance,
            max_rounds, cache, …).

    Returns:
        The `SearchResult`.
    """
    from fair_retrieval.evaluation.probes import probe_task_for

    task = probe_task_for(documents, embedder, max_probes=max_probes, seed=seed)
    return tune_on_task(embedder, task, **search)


def task_strategy(task: Any, strategy: SearchStrategy | None = None) -> SearchStrategy:
    """The search strategy `tune_on_task` runs on `task`: `label_free_strategy` on a label-free (probe) task,
    else `strategy` ("coordinate" when None)."""
    from fair_retrieval.evaluation.probes import is_label_free

    if is_label_free(task):
        return label_free_strategy(strategy)
    return strategy or "coordinate"


def label_free_strategy(strategy: SearchStrategy | None) -> SearchStrategy:
    """The search strategy of a label-free (probe) task: "trusted" unless another is asked for, which is logged.

    Why: probes measure position bias but cannot see the accuracy a configuration costs; over the whole space they
    chose configurations that cost real questions 0.016–0.020 nDCG@10, so a wider search on probes runs only with a
    warning.
    """
    if strategy is None or strategy == "trusted":
        return "trusted"
    logger.warning(
        "Label-free tuning outside the trust region (strategy=%r): probes measure position bias but cannot see the "
        "accuracy a configuration costs, and over the whole space they chose configurations that cost real "
        "questions 0.016–0.020 nDCG@10. Validate the choice on labelled questions before you use it "
        "(strategy='trusted' stays inside what labelled dev sets support).",
        strategy,
    )
    return strategy
