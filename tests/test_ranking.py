"""The tests' ranking comparison (tests/ranking.py): ties and last-bit rounding pass, anything else fails."""

from __future__ import annotations

import pytest

from tests.ranking import assert_same_ranking


def test_last_bit_rounding_and_reordered_ties_are_one_ranking() -> None:
    expected = [("a", 0.9), ("b", 0.87710), ("c", 0.87710), ("d", 0.5)]
    got = [("a", 0.90000004), ("c", 0.877101), ("b", 0.87710), ("d", 0.49999)]
    assert_same_ranking(got, expected)


def test_a_tie_at_the_cut_may_let_another_hit_in() -> None:
    assert_same_ranking([("a", 0.9), ("x", 0.3)], [("a", 0.9), ("y", 0.30001)])


@pytest.mark.parametrize(
    "got",
    [
        [("b", 0.8), ("a", 0.9)],  # another order without a tie
        [("a", 0.9), ("b", 0.7)],  # another score
        [("a", 0.9)],  # a hit missing
        [("z", 0.9), ("b", 0.8)],  # another hit above the cut
        [("a", 0.9), ("z", 0.8), ("b", 0.8)],  # a hit too many
    ],
)
def test_anything_else_is_another_ranking(got: list[tuple[str, float]]) -> None:
    with pytest.raises(AssertionError):
        assert_same_ranking(got, [("a", 0.9), ("b", 0.8)])


def test_a_payload_must_match() -> None:
    with pytest.raises(AssertionError, match="against"):
        assert_same_ranking([("a", 0.9, {"start": 0})], [("a", 0.9, {"start": 4})])
