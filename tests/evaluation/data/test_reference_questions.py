"""Questions in other words about the reference prose: judged on the one document holding their passage."""

from __future__ import annotations

from fair_retrieval.evaluation.data.needle import build_needle_benchmark
from fair_retrieval.evaluation.data.reference_questions import (
    QUESTION_PREFIX,
    REFERENCE_QUESTIONS,
    with_reference_questions,
)
from fair_retrieval.evaluation.data.task import RetrievalTask


def test_each_question_is_judged_on_the_document_holding_its_passage(count_tokens) -> None:
    needles = build_needle_benchmark(count_tokens, 512, num_documents=45)
    task = with_reference_questions(needles, count_tokens)
    added = [qid for qid in task.query_ids if qid.startswith(QUESTION_PREFIX)]
    assert task.query_ids[: len(needles.queries)] == needles.query_ids  # the needle questions first, unchanged
    assert all(task.positions[qid] == needles.positions[qid] for qid in needles.query_ids)
    assert len(added) >= 30 and task.info["reference_questions"] == len(added)  # the demo's documents hold most
    assert task.info["reference_left_out"] == len(REFERENCE_QUESTIONS) - len(added)
    for qid in added:
        question, passage = REFERENCE_QUESTIONS[int(qid.removeprefix(QUESTION_PREFIX))]
        (doc,) = task.qrels[qid]
        position = task.positions[qid]
        assert task.queries[qid] == question
        assert task.corpus[doc][position.char_start : position.char_end] == passage
        assert [d for d, text in task.corpus.items() if passage in text] == [doc]
        assert position.token_start == count_tokens([task.corpus[doc][: position.char_start]])[0] - 2


def test_a_passage_in_no_document_or_in_two_is_left_out() -> None:
    corpus = {"a": "One fact here. A shared line.", "b": "Another fact. A shared line.", "c": "Nothing."}
    base = RetrievalTask.from_answer_spans("t", corpus, {"q": "which?"}, {"q": ("c", 0, 8)}, None, {})
    questions = (("first?", "One fact"), ("shared?", "A shared line."), ("absent?", "not there"), ("b?", "Another"))
    task = with_reference_questions(base, None, questions)
    assert task.queries == {"q": "which?", f"{QUESTION_PREFIX}000": "first?", f"{QUESTION_PREFIX}003": "b?"}
    assert task.qrels[f"{QUESTION_PREFIX}003"] == {"b": 1} and task.positions[f"{QUESTION_PREFIX}003"].char_start == 0
    assert (task.info["reference_questions"], task.info["reference_left_out"]) == (2, 2)
    assert base.queries == {"q": "which?"}  # the task passed in is not changed
