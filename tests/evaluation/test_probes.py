"""Label-free probes: depths by construction, determinism, no verbatim leak, clear errors, and tuning on them."""

import random
import re

import pytest

from fair_retrieval.evaluation.data.needle import haystack_sentences
from fair_retrieval.evaluation.groups import THIRDS, position_bin, position_thirds
from fair_retrieval.evaluation.probes import (
    LEAK_NGRAM,
    MIN_SENTENCE_WORDS,
    build_probe_task,
    leaks,
    perturb,
    probe_task_for,
    sentence_spans,
)
from fair_retrieval.tuning.calibration_search import SearchSpace, tune_unlabelled


def corpus(count: int = 30, sentences: int = 12, seed: int = 0) -> dict[str, str]:
    pool = haystack_sentences()
    rng = random.Random(seed)
    return {f"doc{i}": " ".join(rng.sample(pool, sentences)) for i in range(count)}


def words(text: str) -> list[str]:
    return re.findall(r"\w+(?:['’]\w+)*", text.lower())


def test_sentence_spans_are_exact_offsets():
    text = "  First one here.  Second: a question? Third line\nFourth!"
    spans = sentence_spans(text)
    assert [text[a:b] for a, b in spans] == ["First one here.", "Second: a question?", "Third line", "Fourth!"]


def test_probes_sit_at_their_labelled_depth_in_their_document():
    docs = corpus()
    task = build_probe_task(docs, max_probes=90, seed=3)
    groups = position_thirds(task)
    assert {g: len(ids) for g, ids in groups.items()} == {t: 30 for t in THIRDS}
    for group, ids in groups.items():
        for qid in ids:
            (doc_id,) = task.qrels[qid]
            position = task.positions[qid]
            sentence = docs[doc_id][position.char_start : position.char_end]
            assert len(sentence.split()) >= MIN_SENTENCE_WORDS
            assert THIRDS[position_bin(position.char_start / len(docs[doc_id]), 3)] == group
            assert set(words(task.queries[qid])) <= set(words(sentence))  # the probe comes from that sentence
    assert task.corpus == docs  # every document stays a candidate


def test_no_probe_is_a_verbatim_copy_of_its_document():
    docs = corpus()
    task = build_probe_task(docs, max_probes=150, seed=1)
    for qid, probe in task.queries.items():
        (doc_id,) = task.qrels[qid]
        assert probe not in docs[doc_id].lower()
        assert not leaks(probe, docs[doc_id], LEAK_NGRAM)


def test_leak_check_detects_a_copied_run():
    assert leaks("the quick brown fox", "I saw The Quick Brown dog")
    assert not leaks("brown quick the", "I saw the quick brown dog")


def test_perturb_gives_up_on_sentences_too_short_to_hide():
    rng = random.Random(0)
    assert perturb("Tiny sentence here.", "Tiny sentence here.", rng) is None


def test_same_seed_same_probes_other_seed_other_probes():
    docs = corpus()
    a, b = build_probe_task(docs, seed=7, max_probes=60), build_probe_task(docs, seed=7, max_probes=60)
    assert a.queries == b.queries and a.positions == b.positions and a.qrels == b.qrels
    c = build_probe_task(docs, seed=8, max_probes=60)
    assert c.queries != a.queries


def test_token_depths_use_the_counter_without_special_tokens():
    docs = corpus(count=12, sentences=10)

    def count(texts):  # two special tokens + one token per whitespace word
        return [2 + len(t.split()) for t in texts]

    task = build_probe_task(docs, max_probes=30, seed=0, count_tokens=count)
    for qid, position in task.positions.items():
        (doc_id,) = task.qrels[qid]
        text = docs[doc_id]
        assert position.token_start == len(text[: position.char_start].split())
        assert position.doc_tokens == len(text.split())
    assert task.info["depth_unit"] == "tokens"


def test_too_few_documents_is_a_clear_error():
    with pytest.raises(ValueError, match="at least 10"):
        build_probe_task(corpus(count=5), max_probes=30)


def test_documents_too_short_to_probe_is_a_clear_error():
    short = {f"d{i}": f"Just one short line number {i}." for i in range(40)}
    with pytest.raises(ValueError, match="Too few probes"):
        build_probe_task(short, max_probes=30)


@pytest.mark.parametrize("bad", [{"max_probes": 5}, {"drop": 1.0}])
def test_bad_settings_are_refused(bad):
    with pytest.raises(ValueError):
        build_probe_task(corpus(), **bad)


def test_probe_task_for_accepts_lists_and_refuses_other_types():
    task = probe_task_for(list(corpus().values()), None, max_probes=30)
    assert set(task.corpus) == {str(i) for i in range(30)}
    with pytest.raises(TypeError):
        probe_task_for("one string", None)
    with pytest.raises(TypeError):
        probe_task_for({"a": 1}, None)


def test_tune_unlabelled_runs_the_search_on_probes(fake_embedder):
    docs = corpus()
    space = SearchSpace(
        strength=(0.5, 1.0),
        basket_size=(128,),
        layers=(0.5,),
        isolated=("preserve",),
        partial_basket=("equal",),
        special_tokens=("content",),
        min_full_baskets=(1,),
    )
    result = tune_unlabelled(docs, fake_embedder, max_probes=60, space=space, strategy="grid", show_progress_bar=False)
    labels = {t.label for t in result.trials}
    assert "plain" in labels and len(result.trials) == 3
    assert result.plain.harmonic_mean is not None and set(result.plain.groups) == set(THIRDS)
    assert result.best in result.trials
