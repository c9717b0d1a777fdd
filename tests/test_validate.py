"""The shared value checks: a bool is never a number, bounds are inclusive, None only where allowed, and each
message names the argument, what it must be and what it got."""

from __future__ import annotations

import math
import re
from typing import Any, Literal, get_args

import numpy as np
import pytest

from fair_retrieval import validate

Mode = Literal["fast", "exact"]


@pytest.mark.parametrize(
    ("value", "as_int", "as_number"),
    [(3, True, True), (0, True, True), (-2, True, True), (True, False, False), (False, False, False),
     (2.0, False, True), (math.nan, False, True), ("3", False, False), (None, False, False)],
)  # fmt: skip
def test_predicates_refuse_bools(value: Any, as_int: bool, as_number: bool) -> None:
    assert validate.is_int(value) is as_int
    assert validate.is_number(value) is as_number


def test_numpy_integers_count_only_when_asked() -> None:
    assert not validate.is_int(np.int64(3)) and validate.is_int(np.int64(3), numpy=True)
    assert not validate.is_int(np.bool_(True), numpy=True)
    assert validate.positive_int(np.int32(4), "n", numpy=True) == 4
    with pytest.raises(ValueError, match="n must be a positive int, got"):
        validate.positive_int(np.int32(4), "n")


@pytest.mark.parametrize("value", [1, 7, 10**12])
def test_positive_int_returns_what_it_accepts(value: int) -> None:
    assert validate.positive_int(value, "batch_size") is value
    assert validate.is_positive_int(value)


@pytest.mark.parametrize("value", [0, -1, True, 1.0, "2", None])
def test_positive_int_refuses_with_the_argument_named(value: Any) -> None:
    assert not validate.is_positive_int(value)
    with pytest.raises(ValueError, match=re.escape(f"batch_size must be a positive int, got {value!r}.")):
        validate.positive_int(value, "batch_size")


def test_positive_int_or_none_and_a_note() -> None:
    assert validate.positive_int(None, "max_length", or_none=True) is None
    message = "max_length must be a positive int or None (the model's own), got 0."
    with pytest.raises(ValueError, match=re.escape(message)):
        validate.positive_int(0, "max_length", or_none=True, note="the model's own")


def test_int_at_least() -> None:
    assert validate.int_at_least(0, "overlap", 0) == 0
    assert validate.int_at_least(None, "overlap", 0, or_none=True) is None
    for bad in (-1, True, 0.5, None):
        with pytest.raises(ValueError, match=re.escape(f"overlap must be an int ≥ 0, got {bad!r}.")):
            validate.int_at_least(bad, "overlap", 0)


def test_number_in_includes_its_bounds_and_refuses_nan_and_bools() -> None:
    assert validate.number_in(0, "strength", 0.0, 1.0) == 0
    assert validate.number_in(1.0, "strength", 0.0, 1.0) == 1.0
    for bad in (-0.1, 1.5, math.nan, True, "0.5"):
        with pytest.raises(ValueError, match=re.escape(f"strength must be a number in [0, 1], got {bad!r}.")):
            validate.number_in(bad, "strength", 0.0, 1.0)


def test_number_in_without_an_upper_bound() -> None:
    assert validate.number_in(1e9, "cpus", 0.0) == 1e9
    assert validate.number_in(math.inf, "cpus", 0.0) == math.inf
    with pytest.raises(ValueError, match=re.escape("cpus must be a number ≥ 0.5 (per worker), got 0.25.")):
        validate.number_in(0.25, "cpus", 0.5, note="per worker")


def test_one_of_a_literals_values() -> None:
    allowed = get_args(Mode)
    assert validate.one_of("exact", "mode", allowed) == "exact"
    with pytest.raises(ValueError, match=re.escape("mode must be one of ('fast', 'exact'), got 'slow'.")):
        validate.one_of("slow", "mode", allowed)
    with pytest.raises(ValueError, match=re.escape("mode must be 'fast' or 'exact' (a Mode), got 'FAST'.")):
        validate.one_of("FAST", "mode", allowed, words=True, note="a Mode")


def test_one_of_tells_bools_from_ints() -> None:
    assert validate.one_of(1, "level", (0, 1)) == 1
    with pytest.raises(ValueError, match="level must be one of"):
        validate.one_of(True, "level", (0, 1))
    assert validate.one_of(True, "gpu", ("auto", True, False)) is True
    with pytest.raises(ValueError, match="gpu must be one of"):
        validate.one_of(1, "gpu", ("auto", True, False))


def test_in_words() -> None:
    assert validate.in_words(["a"]) == "'a'"
    assert validate.in_words(("cls", "mean", "last")) == "'cls', 'mean' or 'last'"
    assert validate.in_words([]) == ""


def test_an_absurd_value_is_shown_cut_not_echoed_whole() -> None:
    huge = 10**4000
    with pytest.raises(ValueError) as raised:
        validate.positive_int(-huge, "batch_size")
    assert "an int of 4,002 digits (-10000000000…)" in str(raised.value) and len(str(raised.value)) < 200
    assert validate.shown("x" * 500) == repr("x" * 500)[:80] + "… (502 characters)"
    assert validate.shown((3, 4)) == "(3, 4)"


@pytest.mark.parametrize("make", ["FaissIndex", "MultiVectorIndex", "RerankedIndex", "FloatRows"])
@pytest.mark.parametrize("dim", [10**4000, 2**31, 0, True, 3.0])
def test_every_index_refuses_a_dimension_faiss_cannot_hold_by_name(make: str, dim: Any) -> None:
    pytest.importorskip("faiss")
    from fair_retrieval.index import FaissIndex, MultiVectorIndex
    from fair_retrieval.index.exact_rerank import RerankedIndex
    from fair_retrieval.index.float_rows import FloatRows

    maker = {"FaissIndex": FaissIndex, "MultiVectorIndex": MultiVectorIndex, "RerankedIndex": RerankedIndex}.get(make)
    with pytest.raises(ValueError, match=r"dim must be a positive int up to 2,147,483,647") as raised:
        FloatRows(dim) if maker is None else maker(dim, gpu=False) if make != "RerankedIndex" else maker(dim)
    assert len(str(raised.value)) < 200
    assert validate.dimension(384) == 384
