"""Grouping by answer position (thirds, bins, SQuAD-PosQ buckets) and by document length (PosIR)."""

from __future__ import annotations

import pytest

from fair_retrieval.evaluation.data.task import AnswerPosition, RetrievalTask
from fair_retrieval.evaluation.groups import (
    bin_centers,
    char_offset_buckets,
    default_grouping,
    length_by_position,
    length_quartiles,
    make_grouping,
    position_bins,
    position_thirds,
    preset_labels,
)


def make_task(relatives: list[float], lengths: list[int] | None = None) -> RetrievalTask:
    lengths = lengths or [100] * len(relatives)
    corpus = {f"d{i}": "x" * 10 for i in range(len(relatives))}
    positions = {
        f"q{i}": AnswerPosition(char_start=i, char_end=i + 1, doc_chars=10, token_start=round(r * n), doc_tokens=n)
        for i, (r, n) in enumerate(zip(relatives, lengths, strict=True))
    }
    return RetrievalTask(
        name="t",
        corpus=corpus,
        queries={f"q{i}": "?" for i in range(len(relatives))},
        qrels={f"q{i}": {f"d{i}": 1} for i in range(len(relatives))},
        positions=positions,
        doc_tokens={f"d{i}": n for i, n in enumerate(lengths)},
    )


def test_thirds_and_bins() -> None:
    task = make_task([0.0, 0.2, 0.34, 0.5, 0.66, 0.67, 0.99, 1.0])
    assert position_thirds(task) == {"begin": ["q0", "q1"], "middle": ["q2", "q3", "q4"], "end": ["q5", "q6", "q7"]}
    bins = position_bins(task, 10)
    assert bins["0.0-0.1"] == ["q0"] and bins["0.9-1.0"] == ["q6", "q7"]  # 1.0 falls in the last bin
    assert "0.1-0.2" not in bins  # empty bins are left out
    assert bin_centers({"0.0-0.1": [], "0.9-1.0": []}) == pytest.approx([0.05, 0.95])
    assert list(position_bins(task, 3)) == ["0.00-0.33", "0.33-0.67", "0.67-1.00"]
    with pytest.raises(ValueError, match="n_bins"):
        position_bins(task, 0)


def test_length_quartiles_and_length_by_position() -> None:
    lengths = [100, 100, 200, 200, 300, 300, 400, 400]
    task = make_task([0.1, 0.9, 0.1, 0.9, 0.1, 0.5, 0.1, 0.9], lengths)
    quartiles = length_quartiles(task)
    assert quartiles == {"Q1": ["q0", "q1"], "Q2": ["q2", "q3"], "Q3": ["q4", "q5"], "Q4": ["q6", "q7"]}
    combined = length_by_position(task)
    assert combined["Q1/begin"] == ["q0"] and combined["Q1/end"] == ["q1"] and combined["Q3/middle"] == ["q5"]
    assert "Q2/middle" not in combined


def test_fixed_length_edges_from_the_dataset() -> None:
    task = make_task([0.1, 0.5, 0.9], [300, 900, 2000])
    task.info["length_edges"] = [512, 1024, 1536]
    assert length_quartiles(task) == {"Q1": ["q0"], "Q2": ["q1"], "Q4": ["q2"]}


def test_squad_posq_char_buckets_and_labels() -> None:
    task = make_task([0.1, 0.2, 0.3])
    object.__setattr__(
        task,
        "positions",
        {
            "q0": AnswerPosition(50, 55, 4000),
            "q1": AnswerPosition(150, 160, 4000),
            "q2": AnswerPosition(3120, 3125, 4000),
        },
    )
    assert char_offset_buckets(task) == {"0-100": ["q0"], "100-200": ["q1"], "500-3120": ["q2"]}
    labelled = RetrievalTask(
        name="l",
        corpus={"d": "x"},
        queries={"a": "?", "b": "?"},
        qrels={"a": {"d": 1}, "b": {"d": 1}},
        labels={"a": ("end", "middle"), "b": ("beginning",)},
        info={"grouping": "labels"},
    )
    assert preset_labels(labelled) == {"beginning": ["b"], "middle": ["a"], "end": ["a"]}
    assert position_thirds(labelled) == preset_labels(labelled)  # no positions: the dataset's own labels
    assert default_grouping(labelled) == "labels"


def test_make_grouping_errors() -> None:
    plain = RetrievalTask(name="p", corpus={"d": "x"}, queries={"a": "?"}, qrels={"a": {"d": 1}})
    assert default_grouping(plain) == "none" and make_grouping(plain, "none") == {}
    with pytest.raises(ValueError, match="no answer positions"):
        make_grouping(plain, "thirds")
    with pytest.raises(ValueError, match="Unknown grouping"):
        make_grouping(plain, "quintiles")
