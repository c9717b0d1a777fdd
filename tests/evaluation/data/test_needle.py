"""The synthetic needle benchmark: facts land where the labels say, within the budget, deterministically."""

from __future__ import annotations

import pytest

from fair_retrieval.evaluation.data.needle import build_needle_benchmark, haystack_sentences, make_needles
from fair_retrieval.evaluation.groups import position_thirds


def test_needles_sit_where_their_labels_say(count_tokens) -> None:
    task = build_needle_benchmark(count_tokens, max_tokens=256, num_documents=18)
    assert len(task.corpus) == len(task.queries) == 18
    needles = make_needles(18)
    for index, qid in enumerate(task.query_ids):
        doc = next(iter(task.qrels[qid]))
        position = task.positions[qid]
        assert task.corpus[doc][position.char_start : position.char_end] == needles[index].fact
        assert task.queries[qid] == needles[index].question
        assert task.doc_tokens[doc] <= 256
        assert position.token_start == count_tokens([task.corpus[doc][: position.char_start]])[0] - 2
    # the nine default depths put a third of the questions in each third of the documents (±1 for rounding)
    groups = position_thirds(task)
    assert set(groups) == {"begin", "middle", "end"}
    assert all(5 <= len(ids) <= 7 for ids in groups.values())


def test_controlled_depths_and_determinism(count_tokens) -> None:
    early = build_needle_benchmark(count_tokens, 256, num_documents=6, depths=[0.0])
    late = build_needle_benchmark(count_tokens, 256, num_documents=6, depths=[1.0])
    assert all(p.relative == 0.0 for p in early.positions.values())
    assert all(p.relative > 0.85 for p in late.positions.values())
    assert build_needle_benchmark(count_tokens, 256, num_documents=6, seed=3) == build_needle_benchmark(
        count_tokens, 256, num_documents=6, seed=3
    )
    assert make_needles(5, seed=1) != make_needles(5, seed=2)


def test_needles_are_unique_and_prose_is_real() -> None:
    needles = make_needles(200)
    assert len({n.fact for n in needles}) == 200 and len({n.question for n in needles}) == 200
    sentences = haystack_sentences()
    assert len(sentences) > 500
    assert all(s[-1] in ".!?:" or s[-1].isalnum() or s[-1] in "\"')" for s in sentences[:50])


def test_errors(count_tokens) -> None:
    with pytest.raises(ValueError, match="too small"):
        build_needle_benchmark(count_tokens, max_tokens=64)
    with pytest.raises(ValueError, match="at most"):
        build_needle_benchmark(count_tokens, max_tokens=512, num_documents=10_000)
    with pytest.raises(ValueError, match="depths"):
        build_needle_benchmark(count_tokens, 256, num_documents=3, depths=[1.5])
