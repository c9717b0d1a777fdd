"""The per-question split by calibrated relevant document."""

from __future__ import annotations

import pytest

from fair_retrieval.evaluation.split import calibrated_split


def test_questions_are_split_by_their_relevant_documents() -> None:
    plain = {"q1": 0.5, "q2": 1.0, "q3": 0.0, "q4": 0.2}
    run = {"q1": 0.7, "q2": 0.9, "q3": 0.0, "q4": 0.6}
    qrels = {"q1": {"a": 1}, "q2": {"b": 1}, "q3": {"b": 1, "c": 0}, "q4": {"b": 1, "a": 1}}
    split = calibrated_split(plain, run, qrels, {"a": True, "b": False, "c": True})
    # q1 and q4 (one of its relevant documents calibrated); c is judged irrelevant, so q3 is plain
    assert split["calibrated"].questions == 2 and split["calibrated"].delta == pytest.approx((0.2 + 0.4) / 2)
    assert split["plain"].questions == 2 and split["plain"].delta == pytest.approx((-0.1 + 0.0) / 2)
    empty = calibrated_split(plain, run, qrels, {"a": False, "b": False, "c": False})
    assert empty["calibrated"].to_dict() == {"questions": 0, "delta": None}


def test_mismatched_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="same questions"):
        calibrated_split({"q1": 0.1}, {"q2": 0.1}, {"q1": {"a": 1}}, {"a": True})
    with pytest.raises(ValueError, match="not in `calibrated`"):
        calibrated_split({"q1": 0.1}, {"q1": 0.2}, {"q1": {"z": 1}}, {"a": True})
