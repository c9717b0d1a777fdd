"""Genetic search over Bézier control points for LPES scaling factors (arXiv 2606.27705; docs/method.md).

A genome is K control points in [s_min, s_max]; it becomes a `PositionalScaling` through
`PositionalScaling.bezier(genome, num_layers)`, so K numbers (not N) are searched whatever the model's depth. The
search is a plain generational GA: tournament selection, blend crossover, Gaussian mutation and elitism, seeded so
that a seed always gives the same run. Objective values are cached per genome (genes are rounded, so re-visited
genomes are free) and the budget counts objective calls, which is what costs time: each one embeds a dev corpus.
"""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tqdm.auto import tqdm

from fair_retrieval.engine.lpes import PositionalScaling
from fair_retrieval.validate import is_int, is_number

logger = logging.getLogger(__name__)

Genome = tuple[float, ...]
Objective = Callable[[PositionalScaling], float]

# BLX-α: a child gene is drawn from the parents' interval widened by α of its length on each side.
_BLEND_ALPHA = 0.25


@dataclass(frozen=True)
class GenerationRecord:
    """What one generation of the search found.

    Attributes:
        generation: 0-based generation index.
        evaluations: objective calls made so far (cached genomes are not counted again).
        best_fitness: the best objective value seen so far, in any generation.
        best_control_points: the control points that reached it.
        generation_best: the best objective value among this generation's individuals (never falls when
            elitism ≥ 1).
        mean_fitness: mean objective value of this generation's evaluated individuals.
    """

    generation: int
    evaluations: int
    best_fitness: float
    best_control_points: Genome
    generation_best: float
    mean_fitness: float


@dataclass(frozen=True)
class GeneticSearchResult:
    """The outcome of `genetic_search`.

    Attributes:
        best: the best scaling found (its `control_points` are the winning genome).
        best_fitness: its objective value.
        history: one record per generation run.
        evaluated: every (control points, objective value) pair, in the order the objective was called.
    """

    best: PositionalScaling
    best_fitness: float
    history: tuple[GenerationRecord, ...]
    evaluated: tuple[tuple[Genome, float], ...]

    @property
    def evaluations(self) -> int:
        """Number of objective calls the search made."""
        return len(self.evaluated)


@dataclass(frozen=True)
class GeneticConfig:
    """Settings of `genetic_search`, checked when made.

    Attributes:
        num_control_points: K, genes per genome (1 = one factor for every layer).
        bounds: (s_min, s_max), the range of every control point and so of every factor. The default [1, 2] only
            interpolates positions (never shows a layer positions beyond those the model was trained on).
        population: individuals per generation.
        generations: maximum number of generations.
        seed: seeds every random choice; the same seed (and objective) gives the same search.
        max_evaluations: budget of objective calls (None: population × generations). The search stops when it is
            spent, even in the middle of a generation.
        tournament_size: individuals drawn (with replacement) per tournament; the fittest becomes a parent.
        crossover_rate: probability that a child blends two parents (else it copies the first).
        mutation_rate: probability that each gene mutates (None: 1/K).
        mutation_scale: standard deviation of a mutation, as a fraction of s_max − s_min.
        elitism: the best individuals copied unchanged into the next generation.
        decimals: genes are rounded to this many decimals, which makes re-visited genomes cache hits.
        include_identity: put the unmodified model (all control points 1, when 1 lies in `bounds`) in the first
            generation, so the result is never worse than no scaling on the objective.

    Raises:
        TypeError: a setting of the wrong type (e.g. a float number of generations, bounds that are not a pair).
        ValueError: a setting out of range (the message names it and says what is allowed).
    """

    num_control_points: int = 4
    bounds: tuple[float, float] = (1.0, 2.0)
    population: int = 12
    generations: int = 10
    seed: int = 0
    max_evaluations: int | None = None
    tournament_size: int = 3
    crossover_rate: float = 0.9
    mutation_rate: float | None = None
    mutation_scale: float = 0.1
    elitism: int = 2
    decimals: int = 3
    include_identity: bool = True

    def __post_init__(self) -> None:
        _check_bounds(self.bounds)
        _check_int("num_control_points", self.num_control_points, 1)
        _check_int("population", self.population, 2)
        _check_int("generations", self.generations, 1)
        _check_int("tournament_size", self.tournament_size, 1)
        _check_int("elitism", self.elitism, 0)
        _check_int("decimals", self.decimals, 0)
        _check_int("seed", self.seed, None)
        if self.elitism >= self.population:
            raise ValueError(f"elitism ({self.elitism}) must be smaller than population ({self.population}).")
        _check_int("max_evaluations", self.budget, 1)
        for name, value in (("crossover_rate", self.crossover_rate), ("mutation_rate", self.gene_mutation_rate)):
            if not is_number(value) or not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be a probability in [0, 1], got {value!r}.")
        scale = self.mutation_scale
        if not is_number(scale) or scale < 0:
            raise ValueError(f"mutation_scale must be ≥ 0 (a fraction of s_max − s_min), got {scale!r}.")

    @property
    def budget(self) -> int:
        """The objective calls the search may make: `max_evaluations`, or population × generations."""
        return self.population * self.generations if self.max_evaluations is None else self.max_evaluations

    @property
    def gene_mutation_rate(self) -> float:
        """The probability that a gene mutates: `mutation_rate`, or 1/K."""
        return 1.0 / self.num_control_points if self.mutation_rate is None else self.mutation_rate


def genetic_search(
    objective: Objective,
    num_layers: int,
    config: GeneticConfig | None = None,
    *,
    show_progress_bar: bool = False,
    on_generation: Callable[[GenerationRecord], None] | None = None,
) -> GeneticSearchResult:
    """Search Bézier control points whose per-layer scaling factors maximise `objective`.

    Args:
        objective: scores a `PositionalScaling` (higher is better), e.g. the harmonic mean of nDCG@10 over answer
            position groups on a dev set. Must return a finite number.
        num_layers: the model's number of layers N (each genome yields N factors).
        config: the search settings (None: `GeneticConfig()`, whose fields give the defaults).
        show_progress_bar: show a tqdm bar over the evaluation budget.
        on_generation: called with each generation's record (e.g. to print progress).

    Returns:
        The best scaling, its objective value, the per-generation history and every evaluation.

    Raises:
        TypeError: a `config` that is not a GeneticConfig, or an objective value that is not a number.
        ValueError: a bad `num_layers`, or an objective value that is not finite.
    """
    config = GeneticConfig() if config is None else config
    if not isinstance(config, GeneticConfig):
        raise TypeError(
            f"config must be a GeneticConfig, e.g. GeneticConfig(population=16, generations=20), got "
            f"{type(config).__name__}."
        )
    _check_int("num_layers", num_layers, 1)
    low, high = (float(bound) for bound in config.bounds)
    num_control_points, population, generations = config.num_control_points, config.population, config.generations
    budget, rate, decimals = config.budget, config.gene_mutation_rate, config.decimals
    elitism, tournament_size, crossover_rate = config.elitism, config.tournament_size, config.crossover_rate

    rng = random.Random(config.seed)
    sigma = config.mutation_scale * (high - low)

    def clip(gene: float) -> float:
        return round(min(high, max(low, gene)), decimals)

    def random_genome() -> Genome:
        return tuple(clip(rng.uniform(low, high)) for _ in range(num_control_points))

    cache: dict[Genome, float] = {}
    evaluated: list[tuple[Genome, float]] = []
    best: tuple[Genome, float] | None = None

    bar = tqdm(total=budget, desc="LPES genetic search", unit="eval", disable=not show_progress_bar)

    def fitness_of(genome: Genome) -> float | None:
        """The genome's objective value (cached), or None once the budget is spent."""
        nonlocal best
        if genome in cache:
            return cache[genome]
        if len(evaluated) >= budget:
            return None
        value = _call(objective, PositionalScaling.bezier(genome, num_layers), genome)
        cache[genome] = value
        evaluated.append((genome, value))
        if best is None or value > best[1]:
            best = (genome, value)
        bar.update(1)
        bar.set_postfix(best=f"{best[1]:.4f}")
        return value

    individuals = [random_genome() for _ in range(population)]
    if config.include_identity and low <= 1.0 <= high:
        individuals[0] = tuple(clip(1.0) for _ in range(num_control_points))

    history: list[GenerationRecord] = []
    try:
        for generation in range(generations):
            if len(evaluated) >= budget:
                break  # the budget was spent exactly by the previous generation
            scored = [(genome, fitness_of(genome)) for genome in individuals]
            ranked = [(genome, value) for genome, value in scored if value is not None]
            if not ranked or best is None:
                break
            record = GenerationRecord(
                generation=generation,
                evaluations=len(evaluated),
                best_fitness=best[1],
                best_control_points=best[0],
                generation_best=max(value for _, value in ranked),
                mean_fitness=math.fsum(value for _, value in ranked) / len(ranked),
            )
            history.append(record)
            logger.info(
                "LPES generation %d: best %.4f at %s, generation mean %.4f, %d/%d evaluations",
                generation,
                record.best_fitness,
                list(record.best_control_points),
                record.mean_fitness,
                record.evaluations,
                budget,
            )
            if on_generation is not None:
                on_generation(record)
            if len(ranked) < len(scored) or generation == generations - 1:
                break  # budget spent, or last generation
            ranked.sort(key=lambda item: -item[1])  # stable: ties keep their order
            individuals = [genome for genome, _ in ranked[:elitism]]
            while len(individuals) < population:
                first = _tournament(ranked, tournament_size, rng)
                child = first
                if rng.random() < crossover_rate:
                    second = _tournament(ranked, tournament_size, rng)
                    child = tuple(clip(_blend(a, b, rng)) for a, b in zip(first, second, strict=True))
                child = tuple(clip(g + rng.gauss(0.0, sigma)) if rng.random() < rate else g for g in child)
                individuals.append(child)
    finally:
        bar.close()

    if best is None:  # unreachable: the budget is ≥ 1 and the first individual is always evaluated
        raise RuntimeError("The genetic search evaluated nothing.")
    return GeneticSearchResult(
        best=PositionalScaling.bezier(best[0], num_layers),
        best_fitness=best[1],
        history=tuple(history),
        evaluated=tuple(evaluated),
    )


def _tournament(ranked: Sequence[tuple[Genome, float]], size: int, rng: random.Random) -> Genome:
    """The fittest of `size` individuals drawn with replacement (the earlier one wins a tie)."""
    picks = [rng.randrange(len(ranked)) for _ in range(size)]
    winner = min(picks, key=lambda index: (-ranked[index][1], index))
    return ranked[winner][0]


def _blend(a: float, b: float, rng: random.Random) -> float:
    """BLX-α crossover of one gene: uniform on [min − α·d, max + α·d] with d = |a − b|."""
    lo, hi = min(a, b), max(a, b)
    spread = _BLEND_ALPHA * (hi - lo)
    return rng.uniform(lo - spread, hi + spread)


def _call(objective: Objective, scaling: PositionalScaling, genome: Genome) -> float:
    value = objective(scaling)
    try:
        if isinstance(value, bool | str | bytes):
            raise TypeError
        number = float(value)  # Python and NumPy numbers alike
    except (TypeError, ValueError):
        raise TypeError(
            f"The objective must return a number, got {type(value).__name__} for control points {list(genome)}."
        ) from None
    if not math.isfinite(number):
        raise ValueError(f"The objective returned {number} for control points {list(genome)}; return a finite score.")
    return number


def _check_bounds(bounds: object) -> None:
    if not isinstance(bounds, Sequence) or isinstance(bounds, str) or len(bounds) != 2:
        raise TypeError(f"bounds must be a pair (s_min, s_max), got {bounds!r}.")
    low, high = bounds
    for value in (low, high):
        if not is_number(value) or not math.isfinite(value):
            raise TypeError(f"bounds must hold two finite numbers, got {bounds!r}.")
    if not 0.0 < low < high:
        raise ValueError(f"bounds must satisfy 0 < s_min < s_max (scaling factors are positive), got {bounds!r}.")


def _check_int(name: str, value: object, minimum: int | None) -> None:
    if not is_int(value):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}.")
    if minimum is not None and value < minimum:
        raise ValueError(f"{name} must be ≥ {minimum}, got {value}.")
