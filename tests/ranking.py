"""Comparing two rankings the way another CPU, thread count or engine may legitimately produce them.

Two engines (FAISS and Qdrant), or one engine on two CPUs, round the same float32 sums differently in the last bits:
a score may differ by ~1e-6, and hits of equal score may come back in either order. `assert_same_ranking` accepts
exactly that and nothing more: the same number of hits, scores equal within a tolerance rank by rank, every shared
hit with the same score and the same payload, hits in another order only where their scores tie within the
tolerance, and a hit found by one side only when it ties with the last one (a tie at the cut of k).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

__all__ = ["SCORE_TOLERANCE", "assert_same_ranking"]

SCORE_TOLERANCE = 1e-4
"""Scores closer than this are one score: float32 sums in another order differ by far less (~1e-6), and a
min-max scaled fused score can carry a dense score's difference a few times larger."""


def assert_same_ranking(
    got: Sequence[Sequence[Any]], expected: Sequence[Sequence[Any]], tol: float = SCORE_TOLERANCE
) -> None:
    """Assert two rankings of `(key, score, *payload)` rows, best first, are one ranking up to ties within `tol`.

    Raises:
        AssertionError: naming the first difference that is not a tie.
    """
    assert len(got) == len(expected), f"{len(got)} hits against {len(expected)}:\n{got}\n{expected}"
    for rank, (mine, theirs) in enumerate(zip(got, expected, strict=True)):
        assert math.isclose(mine[1], theirs[1], rel_tol=0.0, abs_tol=tol), f"rank {rank}: {mine} against {theirs}"
    where = {row[0]: rank for rank, row in enumerate(expected)}
    cut = min((row[1] for row in expected), default=0.0)
    for rank, row in enumerate(got):
        key = row[0]
        if key not in where:  # only a tie at the cut of k may let another hit in
            assert math.isclose(row[1], cut, rel_tol=0.0, abs_tol=tol), f"{row} is not among {expected}"
            continue
        theirs = expected[where[key]]
        assert tuple(row[2:]) == tuple(theirs[2:]), f"{key}: {row} against {theirs}"
        for later in got[rank + 1 :]:
            if later[0] in where and where[later[0]] < where[key]:  # the two are in the other order there
                assert math.isclose(row[1], later[1], rel_tol=0.0, abs_tol=tol), (
                    f"{key} and {later[0]} are in another order without a tie:\n{got}\n{expected}"
                )
    got_keys = {row[0] for row in got}
    for row in expected:
        if row[0] not in got_keys:
            assert math.isclose(row[1], cut, rel_tol=0.0, abs_tol=tol), f"{row} is missing from {got}"
