"""Calibration search: search space, feasibility, frontier, coordinate and grid search on a synthetic objective."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.tuning.calibration_search import (
    TRUST_REGION,
    SearchSpace,
    Trial,
    calibration_search,
    describe,
    pareto_frontier,
    select_best,
    task_strategy,
)


def synthetic(calibration: Calibration | None) -> Trial:
    """A made-up dev set: strength 0.75 with basket 64 on the last half is best; strength 1 costs nDCG."""
    if calibration is None:
        return Trial(None, ndcg=0.70, harmonic_mean=0.60, psi=0.20)
    hm = 0.60 + 0.1 * calibration.strength - 0.05 * abs(calibration.basket_size - 64) / 64
    hm += 0.02 if calibration.partial_basket == "proportional" else 0.0
    ndcg = 0.70 + 0.01 * calibration.strength - (0.05 if calibration.strength == 1.0 else 0.0)
    ndcg -= 0.02 if calibration.special_tokens == "preserve" else 0.0
    return Trial(calibration, ndcg=ndcg, harmonic_mean=hm, psi=0.2 - 0.1 * calibration.strength)


def test_search_space_grid_and_validation() -> None:
    space = SearchSpace(
        strength=(0.5, 1.0),
        basket_size=(64,),
        layers=(0.5,),
        isolated=("preserve",),
        partial_basket=("equal", "proportional"),
        special_tokens=("content",),
        min_full_baskets=(1,),
    )
    grid = list(space.grid())
    assert space.size == len(grid) == 4
    assert {c.strength for c in grid} == {0.5, 1.0}
    with pytest.raises(ValueError, match="non-empty tuple"):
        SearchSpace(strength=())
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        SearchSpace(strength=(2.0,))


def test_select_best_respects_the_ndcg_constraint() -> None:
    plain = Trial(None, 0.70, 0.60, 0.2)
    worse = Trial(Calibration(strength=1.0), 0.69, 0.80, 0.05)
    fine = Trial(Calibration(strength=0.5), 0.70, 0.65, 0.1)
    assert select_best([plain, worse, fine], plain) is fine
    assert select_best([plain, worse, fine], plain, tolerance=0.02) is worse
    assert select_best([plain, worse], plain) is plain  # nothing feasible beats doing nothing


def test_pareto_frontier() -> None:
    a = Trial(None, 0.70, 0.60, None)
    b = Trial(Calibration(strength=0.25), 0.72, 0.62, None)  # dominates a
    c = Trial(Calibration(strength=0.75), 0.65, 0.70, None)
    d = Trial(Calibration(strength=1.0), 0.64, 0.69, None)  # dominated by c
    assert pareto_frontier([a, b, c, d]) == [b, c]


def test_coordinate_search_finds_the_best_feasible_configuration() -> None:
    calls: list[Calibration | None] = []

    def evaluate(calibration: Calibration | None) -> Trial:
        calls.append(calibration)
        return synthetic(calibration)

    result = calibration_search(evaluate, SearchSpace(), strategy="coordinate", show_progress_bar=False)
    best = result.best.calibration
    assert best is not None and result.improved
    assert (best.strength, best.basket_size, best.partial_basket, best.special_tokens) == (
        0.75,
        64,
        "proportional",
        "content",
    )
    assert calls[0] is None  # plain first
    keys = ["plain" if c is None else c.to_json() for c in calls]
    assert len(keys) == len(set(keys))  # every configuration evaluated once
    assert len(calls) < SearchSpace().size // 4  # far cheaper than the grid
    assert all(t.ndcg >= result.plain.ndcg for t in [result.best])
    assert result.frontier and result.frontier == sorted(result.frontier, key=lambda t: -t.ndcg)


def test_grid_search_agrees_and_reports_everything() -> None:
    space = SearchSpace(
        strength=(0.25, 0.75, 1.0),
        basket_size=(32, 64),
        layers=(0.5,),
        isolated=("preserve",),
        partial_basket=("equal", "proportional"),
        special_tokens=("content", "preserve"),
        min_full_baskets=(1,),
    )
    result = calibration_search(synthetic, space, strategy="grid", show_progress_bar=False)
    assert len(result.trials) == space.size + 1
    best = result.best.calibration
    assert best is not None and (best.strength, best.basket_size) == (0.75, 64)
    data = result.to_dict()
    assert data["improved"] and data["best"]["calibration"]["strength"] == 0.75
    assert len(data["trials"]) == space.size + 1


def test_search_returns_plain_when_nothing_is_feasible() -> None:
    def hurts(calibration: Calibration | None) -> Trial:
        trial = synthetic(calibration)
        return trial if calibration is None else dataclasses.replace(trial, ndcg=0.5)

    space = SearchSpace(
        strength=(0.5,),
        basket_size=(64,),
        layers=(0.5,),
        isolated=("preserve",),
        partial_basket=("equal",),
        special_tokens=("content",),
        min_full_baskets=(1,),
    )
    result = calibration_search(hurts, space, show_progress_bar=False)
    assert result.best is result.plain and not result.improved


def test_trusted_search_tries_plain_and_the_trust_region_only() -> None:
    seen: list[Calibration | None] = []

    def record(calibration: Calibration | None) -> Trial:
        seen.append(calibration)
        return synthetic(calibration)

    region = list(TRUST_REGION)
    assert Calibration() in region and Calibration(strength=0.5) not in region  # λ 0.5 cost e5-small 0.0071
    start = Calibration(basket_size=64)  # a start outside the region does not widen it
    result = calibration_search(record, SearchSpace(), strategy="trusted", start=start, show_progress_bar=False)
    assert seen == [None, *region]  # the wide space is not searched, whatever it holds
    assert result.best.calibration in [None, *region]
    assert result.best == select_best(result.trials, result.plain)
    assert result.strategy == "trusted" and result.to_dict()["strategy"] == "trusted"


def test_the_strategy_follows_the_task_unless_asked(caplog: pytest.LogCaptureFixture) -> None:
    from types import SimpleNamespace

    from fair_retrieval.evaluation.probes import LABEL_FREE_SOURCE

    probes = SimpleNamespace(info={"source": LABEL_FREE_SOURCE})
    labelled = SimpleNamespace(info={"source": "squad-v2"})
    assert task_strategy(probes) == "trusted" and task_strategy(labelled) == "coordinate"
    assert task_strategy(labelled, "grid") == "grid" and not caplog.records
    with caplog.at_level(logging.WARNING, logger="fair_retrieval.tuning.calibration_search"):
        assert task_strategy(probes, "coordinate") == "coordinate"  # runs, with the warning
    assert "outside the trust region" in caplog.text


def test_errors_and_labels() -> None:
    with pytest.raises(ValueError, match="strategy"):
        calibration_search(synthetic, strategy="random", show_progress_bar=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="tolerance"):
        calibration_search(synthetic, tolerance=-0.1, show_progress_bar=False)
    assert describe(None) == "plain"
    assert describe(Calibration.paper()) == "paper"
    assert describe(Calibration()) == "strength=0.05 basket_size=192 special_tokens=preserve min_full_baskets=2"
    assert (
        describe(Calibration(layers=(4, 5)))
        == "strength=0.05 basket_size=192 layers=[4,5] special_tokens=preserve min_full_baskets=2"
    )
    assert (
        describe(dataclasses.replace(Calibration.paper(), strength=0.75, basket_size=64))
        == "strength=0.75 basket_size=64"
    )
