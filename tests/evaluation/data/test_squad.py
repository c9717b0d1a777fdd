"""SQuAD-format position benchmark: offsets land on the answers, budgets hold, labels and determinism."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from fair_retrieval.evaluation.data.squad import build_position_benchmark, read_squad
from tests.evaluation.conftest import shared_data_or_skip


def answers_by_id(path: Path) -> dict[str, str]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        qa["id"]: qa["answers"][0]["text"]
        for article in data["data"]
        for paragraph in article["paragraphs"]
        for qa in paragraph["qas"]
        if qa.get("answers")
    }


def test_offsets_land_on_the_answer_and_labels_are_consistent(count_tokens, fixtures: Path) -> None:
    path = fixtures / "squad_tiny.json"
    task = build_position_benchmark(path, count_tokens, max_tokens=128, name="tiny")
    answers = answers_by_id(path)
    assert task.name == "tiny@128"
    assert "q4" not in task.queries  # unanswerable
    assert set(task.queries) == {"q1", "q2", "q3", "q5", "q6", "q7"}
    for qid, position in task.positions.items():
        doc = next(iter(task.qrels[qid]))
        text = task.corpus[doc]
        assert text[position.char_start : position.char_end] == answers[qid]
        # token_start counts the content tokens before the answer, as the tokenizer sees the prefix
        assert position.token_start == count_tokens([text[: position.char_start]])[0] - 2
        assert position.doc_tokens == task.doc_tokens[doc] - 2
        assert 0.0 <= position.relative <= 1.0


def test_paragraphs_are_joined_within_an_article_up_to_the_budget(count_tokens, fixtures: Path) -> None:
    path = fixtures / "squad_tiny.json"
    small = build_position_benchmark(path, count_tokens, max_tokens=64)
    large = build_position_benchmark(path, count_tokens, max_tokens=512)
    # 512 tokens hold each article whole; articles are never mixed
    assert len(large.corpus) == 2
    assert all(n <= 512 for n in large.doc_tokens.values())
    assert large.qrels["q1"] == large.qrels["q5"] != large.qrels["q6"]
    # a later paragraph's answer moves deep into the joined document
    assert large.positions["q5"].relative > 0.6 and large.positions["q1"].relative < 0.2
    assert len(small.corpus) == 5  # every paragraph alone (each exceeds half the budget)
    assert small.info["dropped_beyond_budget"] == 0


def test_answers_beyond_the_budget_are_dropped(count_tokens) -> None:
    context = "word " * 300 + "The secret answer is here."
    articles = [
        {
            "title": "t",
            "paragraphs": [
                {
                    "context": context,
                    "qas": [
                        {"id": "early", "question": "first word?", "answers": [{"text": "word", "answer_start": 0}]},
                        {
                            "id": "late",
                            "question": "secret?",
                            "answers": [{"text": "secret answer", "answer_start": context.index("secret answer")}],
                        },
                    ],
                }
            ],
        }
    ]
    task = build_position_benchmark(articles, count_tokens, max_tokens=128)
    assert set(task.queries) == {"early"} and task.info["dropped_beyond_budget"] == 1


def test_deterministic(count_tokens, fixtures: Path) -> None:
    a = build_position_benchmark(fixtures / "squad_tiny.json", count_tokens, 128)
    b = build_position_benchmark(fixtures / "squad_tiny.json", count_tokens, 128)
    assert a == b and a.fingerprint() == b.fingerprint()


def test_errors(count_tokens, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        read_squad(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text('{"rows": []}', encoding="utf-8")
    with pytest.raises(ValueError, match="not SQuAD-format"):
        read_squad(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="leaves no room"):
        build_position_benchmark([], count_tokens, max_tokens=2)


def test_squad_v2_dev_at_512_tokens(count_tokens) -> None:
    path = shared_data_or_skip("squad-v2-dev", "dev-v2.0.json")
    task = build_position_benchmark(path, count_tokens, 512, "squad-v2")
    answers = answers_by_id(path)
    assert task.info["articles"] == 16
    assert len(task.queries) + task.info["dropped_beyond_budget"] == 2910  # every answerable question
    for qid, position in task.positions.items():
        text = task.corpus[next(iter(task.qrels[qid]))]
        assert text[position.char_start : position.char_end] == answers[qid]
    # documents are long: most near the budget (only the tail of an article, or one long paragraph, differ)
    lengths = sorted(task.doc_tokens.values())
    assert lengths[len(lengths) // 2] > 350


def test_xquad_german_offsets(count_tokens) -> None:
    path = shared_data_or_skip("xquad", "xquad.de.json")
    task = build_position_benchmark(path, count_tokens, 512, "xquad:de")
    answers = answers_by_id(path)
    assert len(task.queries) + task.info["dropped_beyond_budget"] == 1190
    assert all(
        task.corpus[next(iter(task.qrels[q]))][p.char_start : p.char_end] == answers[q]
        for q, p in task.positions.items()
    )
