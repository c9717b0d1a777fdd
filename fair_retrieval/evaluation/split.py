"""The per-question change split by whether a question's relevant document was calibrated.

A corpus where only some documents are long enough to be calibrated holds two populations of vectors. A change in
overall nDCG@10 can then come from inside the calibrated documents (their own questions gain or lose) or from between
the populations (calibrated documents crowd plain ones out of the top 10, or the reverse). Splitting the questions
by whether their relevant document was calibrated tells the two apart.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class SplitChange:
    """The mean per-question change of one side of the split.

    Attributes:
        questions: how many questions fall on this side.
        delta: their mean change (run − plain); None when there are none.
    """

    questions: int
    delta: float | None

    def to_dict(self) -> dict[str, float | int | None]:
        """JSON-compatible form."""
        return {"questions": self.questions, "delta": self.delta}


def calibrated_split(
    plain: Mapping[str, float],
    run: Mapping[str, float],
    qrels: Mapping[str, Mapping[str, int]],
    calibrated: Mapping[str, bool] | Iterable[tuple[str, bool]],
) -> dict[str, SplitChange]:
    """Mean change of the questions whose relevant document was calibrated, and of the others.

    Args:
        plain: question id → metric with plain document vectors.
        run: question id → the same metric with the run compared (the same questions).
        qrels: question id → {document id: relevance}; a question with several relevant documents counts as
            "calibrated" when any of them was.
        calibrated: document id → whether the run calibrated it (e.g. zip of the corpus ids and
            `FairEmbedder.calibrated_texts`).

    Returns:
        {"calibrated": …, "plain": …}.

    Raises:
        ValueError: if the two runs cover different questions, or a relevant document is not in `calibrated`.
    """
    flags = dict(calibrated)
    if set(plain) != set(run):
        raise ValueError("plain and run must score the same questions; compare runs of one task.")
    sides: dict[str, list[float]] = {"calibrated": [], "plain": []}
    for qid, before in plain.items():
        relevant = [doc for doc, rel in qrels.get(qid, {}).items() if rel > 0]
        missing = [doc for doc in relevant if doc not in flags]
        if missing:
            raise ValueError(f"Question {qid!r}: relevant document {missing[0]!r} is not in `calibrated`.")
        side = "calibrated" if any(flags[doc] for doc in relevant) else "plain"
        sides[side].append(run[qid] - before)
    return {
        name: SplitChange(len(values), sum(values) / len(values) if values else None) for name, values in sides.items()
    }
