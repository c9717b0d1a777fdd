"""`RetrievalTask.from_answer_spans`: the one construction the position benchmarks (SQuAD, needle, SQuAD-PosQ) share."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from fair_retrieval.evaluation.data.task import AnswerPosition, RetrievalTask


def count_words(texts: Sequence[str]) -> list[int]:
    """A token counter with two special tokens: one token per word."""
    return [len(text.split()) + 2 for text in texts]


CORPUS = {"d1": "alpha beta gamma delta", "d2": "one two three"}
QUERIES = {"q1": "where is gamma", "q2": "where is two", "q3": "not answerable"}
ANSWERS = {"q2": ("d2", 4, 7), "q1": ("d1", 11, 16)}


def test_token_positions_and_one_relevant_document_per_answered_query() -> None:
    task = RetrievalTask.from_answer_spans("tiny", CORPUS, QUERIES, ANSWERS, count_words, {"source": "test"})
    assert list(task.queries) == ["q2", "q1"]  # in answer order; q3 has no answer and is left out
    assert task.qrels == {"q2": {"d2": 1}, "q1": {"d1": 1}}
    assert task.doc_tokens == {"d1": 6, "d2": 5}  # special tokens included, every document
    assert task.positions["q1"] == AnswerPosition(11, 16, 22, token_start=2, doc_tokens=4)  # specials excluded
    assert task.positions["q2"] == AnswerPosition(4, 7, 13, token_start=1, doc_tokens=3)
    assert task.info == {"source": "test"}


def test_without_a_counter_positions_are_in_characters_only() -> None:
    task = RetrievalTask.from_answer_spans("tiny", CORPUS, QUERIES, ANSWERS, None, {})
    assert task.doc_tokens == {}
    assert task.positions["q1"] == AnswerPosition(11, 16, 22)
    assert task.positions["q1"].relative == pytest.approx(11 / 22)


def test_an_answer_in_an_unknown_document_is_refused() -> None:
    with pytest.raises(ValueError, match="not in the corpus"):
        RetrievalTask.from_answer_spans("tiny", CORPUS, QUERIES, {"q1": ("d9", 0, 1)}, None, {})
