"""The LPES genetic search on synthetic objectives with known optima: budget, cache, determinism, elitism."""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Callable
from pathlib import Path

import pytest

from fair_retrieval import PositionalScaling
from fair_retrieval.tuning.genetic import GenerationRecord, GeneticConfig, GeneticSearchResult, genetic_search

TARGET_POINTS = (1.2, 1.8, 1.4)
TARGET = PositionalScaling.bezier(TARGET_POINTS, 8)


class Recorder:
    """A synthetic objective, −max_ℓ |s_ℓ − target_ℓ| (optimum 0 at the target curve), that logs its calls."""

    def __init__(self) -> None:
        self.calls: list[tuple[float, ...]] = []

    def __call__(self, scaling: PositionalScaling) -> float:
        assert scaling.control_points is not None
        self.calls.append(scaling.control_points)
        return -max(abs(a - b) for a, b in zip(scaling.factors, TARGET.factors, strict=True))


def search(
    objective: Recorder,
    show_progress_bar: bool = False,
    on_generation: Callable[[GenerationRecord], None] | None = None,
    **overrides: object,
) -> GeneticSearchResult:
    settings: dict[str, object] = dict(num_control_points=3, population=16, generations=25, seed=0, max_evaluations=300)
    settings.update(overrides)
    config = GeneticConfig(**settings)  # type: ignore[arg-type]
    return genetic_search(objective, 8, config, show_progress_bar=show_progress_bar, on_generation=on_generation)


def test_finds_the_known_optimum_within_its_budget() -> None:
    objective = Recorder()
    result = search(objective)
    assert len(objective.calls) <= 300 and result.evaluations == len(objective.calls)
    best = result.best
    assert best.control_points == pytest.approx(TARGET_POINTS, abs=0.02)
    assert best.factors == pytest.approx(TARGET.factors, abs=0.02)
    assert result.best_fitness == objective(best) > -0.02
    # It improved on its starting point (the identity curve scores −0.8 here) step by step.
    history = result.history
    assert history[0].best_fitness < -0.1 < history[-1].best_fitness
    assert all(a.best_fitness <= b.best_fitness for a, b in itertools.pairwise(history))


def test_same_seed_same_search_other_seed_other_search() -> None:
    first, again, other = Recorder(), Recorder(), Recorder()
    a = search(first, max_evaluations=80)
    b = search(again, max_evaluations=80)
    search(other, max_evaluations=80, seed=1)
    assert first.calls == again.calls and a.history == b.history and a.best == b.best
    assert first.calls != other.calls


def test_every_genome_is_evaluated_once() -> None:
    objective = Recorder()
    search(objective, max_evaluations=200)
    assert len(set(objective.calls)) == len(objective.calls)
    # A search space of three genomes (K = 1, genes on a 0.1 grid in [1.0, 1.2]) costs three evaluations at most.
    small = Recorder()
    result = search(small, num_control_points=1, bounds=(1.0, 1.2), decimals=1, population=10, generations=6)
    assert len(small.calls) <= 3 and set(small.calls) <= {(1.0,), (1.1,), (1.2,)}
    assert len(result.history) == 6


def test_budget_can_end_a_generation_early() -> None:
    objective = Recorder()
    result = search(objective, population=4, generations=10, max_evaluations=6, include_identity=False)
    assert len(objective.calls) == 6
    assert [record.evaluations for record in result.history] == [4, 6]


def test_identity_is_the_first_candidate_and_wins_when_best() -> None:
    calls: list[tuple[float, ...]] = []

    def prefers_plain(scaling: PositionalScaling) -> float:
        calls.append(scaling.factors)
        return -sum((f - 1.0) ** 2 for f in scaling.factors)

    result = genetic_search(prefers_plain, 5, GeneticConfig(bounds=(1.0, 3.0), population=6, generations=3, seed=3))
    assert calls[0] == (1.0,) * 5
    assert result.best.is_identity and result.best_fitness == 0.0
    with_plain_outside = genetic_search(prefers_plain, 5, GeneticConfig(bounds=(1.5, 3.0), population=6, generations=2))
    assert min(min(factors) for factors in calls[len(calls) - with_plain_outside.evaluations :]) >= 1.5


def test_elitism_keeps_each_generations_best() -> None:
    objective = Recorder()
    records: list[GenerationRecord] = []
    search(objective, mutation_scale=0.5, max_evaluations=150, on_generation=records.append)
    bests = [record.generation_best for record in records]
    assert len(records) >= 2 and all(a <= b for a, b in itertools.pairwise(bests))
    assert all(
        math.isfinite(record.mean_fitness) and record.mean_fitness <= record.generation_best for record in records
    )


def test_progress_bar(capsys: pytest.CaptureFixture[str]) -> None:
    search(Recorder(), max_evaluations=10, show_progress_bar=True)
    assert "LPES genetic search" in capsys.readouterr().err
    search(Recorder(), max_evaluations=10)
    assert "LPES genetic search" not in capsys.readouterr().err


@pytest.mark.parametrize(
    ("overrides", "error", "fragment"),
    [
        ({"bounds": (0.0, 2.0)}, ValueError, "0 < s_min < s_max"),
        ({"bounds": (2.0, 1.0)}, ValueError, "0 < s_min < s_max"),
        ({"bounds": (1.0,)}, TypeError, "pair"),
        ({"population": 1}, ValueError, "population"),
        ({"elitism": 16}, ValueError, "elitism"),
        ({"max_evaluations": 0}, ValueError, "max_evaluations"),
        ({"crossover_rate": 1.5}, ValueError, "crossover_rate"),
        ({"num_control_points": 0}, ValueError, "num_control_points"),
        ({"generations": 2.5}, TypeError, "generations"),
    ],
)
def test_invalid_settings(overrides: dict[str, object], error: type[Exception], fragment: str) -> None:
    with pytest.raises(error, match=fragment):
        search(Recorder(), **overrides)


def test_a_config_of_another_type_is_refused() -> None:
    with pytest.raises(TypeError, match="config must be a GeneticConfig"):
        genetic_search(Recorder(), 8, {"population": 16})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="num_layers"):
        genetic_search(Recorder(), 0)


def test_bad_objective_values_are_reported() -> None:
    with pytest.raises(ValueError, match="finite"):
        genetic_search(lambda s: float("nan"), num_layers=4)
    with pytest.raises(TypeError, match="must return a number"):
        genetic_search(lambda s: "0.5", num_layers=4)  # type: ignore[arg-type, return-value]


# -------------------------------------------------------------------------- the tune runner, end to end


@pytest.fixture(scope="module")
def tiny_rope_and_bert(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    from tests.models import build_tiny_model

    root = tmp_path_factory.mktemp("lpes-tune")
    return {
        "qwen3": build_tiny_model("qwen3", "lasttoken", root / "qwen3"),
        "bert": build_tiny_model("bert", "cls", root / "bert"),
    }


def tune_args(model: str, output: Path, *extra: str) -> list[str]:
    return [
        "tune",
        "--method",
        "lpes",
        "--model",
        model,
        "--data",
        "needle",
        "--max-tokens",
        "128",
        "--no-calibration",
        "--output",
        str(output),
        *extra,
    ]


def test_tune_command_searches_and_saves_the_best_factors(
    tiny_rope_and_bert: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fair_retrieval.cli import main

    output = tmp_path / "lpes.json"
    cache = str(tmp_path / "cache")
    argv = tune_args(tiny_rope_and_bert["qwen3"], output, "--population", "3", "--generations", "2")
    assert main([*argv, "--cache-dir", cache]) == 0
    printed = capsys.readouterr().out
    assert "generation 0:" in printed and "generation 1:" in printed and "best factors per layer" in printed
    scaling = PositionalScaling.load(output)
    assert scaling.num_layers == 4 and all(1.0 <= f <= 2.0 for f in scaling.factors)
    saved = json.loads(output.read_text(encoding="utf-8"))
    assert saved["calibration"] is None and saved["grouping"] == "thirds"
    assert saved["plain"]["harmonic_mean"] <= saved["best"]["harmonic_mean"]  # the identity was a candidate
    assert saved["search"]["evaluations"] <= 6 and len(saved["history"]) == 2
    assert saved["best"]["harmonic_mean"] == pytest.approx(saved["history"][-1]["best_fitness"])


def test_tune_command_refuses_models_without_rope(
    tiny_rope_and_bert: dict[str, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from fair_retrieval.cli import main

    assert main(tune_args(tiny_rope_and_bert["bert"], tmp_path / "x.json")) == 2
    assert "no rotary position embeddings" in capsys.readouterr().err
    assert not (tmp_path / "x.json").exists()
