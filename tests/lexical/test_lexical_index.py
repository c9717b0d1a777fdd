"""LexicalIndex against bm25s itself (the same tokens scored by the library directly), its filters and limits, how it
follows the records it is given through their revisions, its memory, and LexicalSettings saved and refused."""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import NamedTuple

import bm25s
import numpy as np
import pytest

from fair_retrieval.lexical import LEXICAL_KEY, LEXICAL_METHODS, LexicalIndex, LexicalSettings, LexicalTokenizer


class Doc(NamedTuple):
    text: str


TEXTS = {
    3: "The ferry leaves the harbour at dawn and crosses the bay.",
    7: "The night train runs north through the mountains to the harbour.",
    8: "Bake the bread slowly in a stone oven.",
    12: "Fishing boats fill the old harbour every evening; the harbour smells of fish.",
    20: "A stone oven keeps its heat for hours, a stone wall for days.",
    21: "Harbour, harbour, harbour: the ferry again.",
    30: "Mountains of bread and a ferry of stone.",
}
QUERIES = ["harbour", "stone oven", "ferry harbour bread", "mountains train night", "fish"]


def _records(texts: Mapping[int, str] = TEXTS) -> dict[int, Doc]:
    return {int_id: Doc(text) for int_id, text in texts.items()}


def _index(settings: LexicalSettings | None = None) -> LexicalIndex:
    return LexicalIndex(settings or LexicalSettings(), lambda doc: doc.text)


def _oracle(records: Mapping[int, Doc], query: str, k: int, settings: LexicalSettings) -> list[tuple[int, float]]:
    """bm25s directly on the same tokens: its scores of the documents holding a query word, positive ones, best
    first (ties by int id), k of them."""
    tokenizer = LexicalTokenizer(settings.language)
    ids = sorted(records)
    tokens = [tokenizer.tokens(records[i].text) for i in ids]
    bm25 = bm25s.BM25(k1=settings.k1, b=settings.b, method=settings.method)
    bm25.index(tokens, show_progress=False)
    query_tokens = [t for t in tokenizer.tokens(query) if t in bm25.vocab_dict]
    if not query_tokens:
        return []
    scores = bm25.get_scores(query_tokens)
    holding = [bool(set(query_tokens) & set(words)) for words in tokens]
    ranked = sorted(
        ((ids[row], float(s)) for row, s in enumerate(scores) if s > 0 and holding[row]), key=lambda p: (-p[1], p[0])
    )
    return ranked[:k]


def _same(found: list[tuple[int, float]], expected: list[tuple[int, float]]) -> bool:
    return [i for i, _ in found] == [i for i, _ in expected] and all(
        s == pytest.approx(e, rel=1e-5) for (_, s), (_, e) in zip(found, expected, strict=True)
    )


@pytest.mark.parametrize("method", LEXICAL_METHODS)
@pytest.mark.parametrize(("k1", "b"), [(1.5, 0.75), (0.9, 0.3), (2.0, 1.0)])
def test_search_is_bm25s_ranking_of_the_same_tokens(method: str, k1: float, b: float) -> None:
    settings = LexicalSettings(k1=k1, b=b, method=method)
    index, records = _index(settings), _records()
    found_any = False
    for query in QUERIES:
        found = index.search(records, 0, query, 10)
        found_any = found_any or bool(found)
        assert _same(found, _oracle(records, query, 10, settings)), (query, found)
    assert found_any  # (robertson's idf is 0 for a word in half the documents or more: "harbour" finds nothing)


def test_results_are_best_first_positive_and_only_documents_sharing_a_word() -> None:
    index, records = _index(), _records()
    found = index.search(records, 0, "stone oven", 10)
    assert sorted(i for i, _ in found) == [8, 20, 30]  # 8 and 20 have both words, 30 "stone"
    assert found[-1][0] == 30
    scores = [s for _, s in found]
    assert scores == sorted(scores, reverse=True) and all(s > 0 for s in scores)
    assert all(isinstance(i, int) and isinstance(s, float) for i, s in found)


@pytest.mark.parametrize(
    "method",
    [
        *LEXICAL_METHODS,
    ],
)
def test_no_method_finds_a_document_sharing_no_word_with_the_query(method: str) -> None:
    # bm25l and bm25+ give every document a positive score for a word of the vocabulary (bm25s's non-occurrence
    # array), so documents without the word pass the `scores > 0` test: against the documented "only documents
    # sharing at least one word with the query"
    records = _records()
    found = LexicalIndex(LexicalSettings(method=method), lambda doc: doc.text).search(records, 0, "fish", 10)
    assert [i for i, _ in found] == [12]


def test_the_settings_language_reads_documents_and_queries() -> None:
    records = {1: Doc("Die Häuser stehen am Fluss."), 2: Doc("Der Zug fährt nachts."), 3: Doc("地铁站在城市中心。")}
    german = _index(LexicalSettings(language="german"))
    assert [i for i, _ in german.search(records, 0, "Haus", 5)] == [1]
    assert [i for i, _ in german.search(records, 0, "Züge fahren", 5)] == [2]
    assert [i for i, _ in german.search(records, 0, "地铁", 5)] == [3]
    assert _index(LexicalSettings(language=None)).search(records, 0, "Haus", 5) == []  # no stemming: häuser


@pytest.mark.parametrize("k", [1, 2, 3])
def test_k_keeps_the_best(k: int) -> None:
    index, records = _index(), _records()
    full = index.search(records, 0, "harbour", 100)
    assert len(full) == 4
    assert index.search(records, 0, "harbour", k) == full[:k]


def test_k_keeps_the_lowest_int_ids_among_documents_tied_at_the_cut() -> None:
    # results tied on score are listed by int id, but the k kept are chosen by np.argpartition among all the tied
    # rows, so search(k) is not the first k of search(k + n): the same query pages inconsistently
    records = {i: Doc(["stone oven", "stone", "stone stone oven bread", "bread"][i % 4]) for i in range(60)}
    index = _index()
    full = index.search(records, 0, "stone", 60)
    assert all(index.search(records, 0, "stone", k) == full[:k] for k in range(1, 46))


def test_ties_are_listed_by_int_id() -> None:
    records = {9: Doc("stone oven"), 2: Doc("stone oven"), 5: Doc("stone oven"), 4: Doc("bread")}
    found = _index().search(records, 0, "stone", 10)
    assert [i for i, _ in found] == [2, 5, 9] and len({s for _, s in found}) == 1


def test_among_restricts_to_those_int_ids_without_rescoring() -> None:
    index, records = _index(), _records()
    full = dict(index.search(records, 0, "harbour ferry", 10))
    found = index.search(records, 0, "harbour ferry", 10, among=[30, 3, 999, -4, 12, 3])  # unknown ids, duplicates
    assert [i for i, _ in found] == sorted((3, 12, 30), key=lambda i: (-full[i], i))
    assert all(s == full[i] for i, s in found)  # the corpus statistics stay those of all records
    assert index.search(records, 0, "harbour ferry", 1, among=np.array([12, 30])) == [
        max(((i, full[i]) for i in (12, 30)), key=lambda p: p[1])
    ]
    assert index.search(records, 0, "harbour ferry", 10, among=[]) == []
    assert index.search(records, 0, "harbour ferry", 10, among=[8, 20]) == []  # among, none shares a word
    assert index.search(records, 0, "harbour ferry", 10, among=[10_000]) == []  # past the last int id
    assert index.search(records, 0, "harbour ferry", 10, among=[-1, 4, 11, 13]) == []  # between the int ids


@pytest.mark.parametrize("query", ["", "   ", "?!", "the of and", "zebra", "zebra giraffe", "x"])
def test_a_query_without_a_known_word_finds_nothing(query: str) -> None:
    assert _index().search(_records(), 0, query, 5) == []


def test_an_empty_store_finds_nothing() -> None:
    assert _index().search({}, 0, "harbour", 5) == []


def test_documents_without_words_are_kept_but_never_found() -> None:
    records = {**_records(), 40: Doc("The and of."), 41: Doc("?!")}
    index = _index()
    assert _same(index.search(records, 0, "stone oven", 10), _oracle(records, "stone oven", 10, LexicalSettings()))
    assert index.search(records, 0, "the", 10) == []


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_records_none_of_which_has_a_word_find_nothing() -> None:
    # every record only stop words or punctuation: _rebuild hands bm25s a Tokenized with an empty vocab and
    # bm25s.BM25.index raises "max() arg is an empty sequence" (a store's sparse and hybrid searches too)
    records = {1: Doc("The and of."), 2: Doc("?!")}
    assert _index().search(records, 0, "harbour", 5) == []


class Counting:
    """A record's text, counting the calls (what the index tokenizes)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def __call__(self, doc: Doc) -> str:
        self.calls.append(doc.text)
        return doc.text


def test_a_revision_seen_before_reuses_the_index_and_a_new_one_tokenizes_only_new_records() -> None:
    text_of = Counting()
    index = LexicalIndex(LexicalSettings(), text_of)
    records = _records()
    first = index.search(records, 1, "harbour", 10)
    assert len(text_of.calls) == len(records)
    assert index.search(records, 1, "harbour", 10) == first and len(text_of.calls) == len(records)
    assert index.search(records, 2, "harbour", 10) == first and len(text_of.calls) == len(records)  # same records
    records[50] = Doc("A harbour of stone.")
    index.search(records, 3, "harbour", 10)
    assert text_of.calls[len(TEXTS) :] == ["A harbour of stone."]


def test_the_revision_is_what_says_the_records_changed() -> None:
    index, records = _index(), _records()
    before = index.search(records, 5, "harbour", 10)
    del records[21]
    assert index.search(records, 5, "harbour", 10) == before  # same revision: the records are taken as unchanged
    assert 21 not in [i for i, _ in index.search(records, 6, "harbour", 10)]


def test_the_index_follows_records_added_replaced_and_removed() -> None:
    index, records = _index(), _records()
    revision = 0
    steps = [
        lambda r: r.update({60: Doc("Cheese from the valley."), 61: Doc("A harbour for cheese boats.")}),
        lambda r: r.pop(8),  # "bread" stays in 30
        lambda r: r.update({20: Doc("Fresh bread every morning.")}),  # replaced: its old words go
        lambda r: [r.pop(i) for i in (3, 7, 12, 21)],
        lambda r: r.update({3: Doc("The ferry is back.")}),  # an int id used again
    ]
    queries = [*QUERIES, "cheese", "stone oven heat", "bread morning", "valley"]
    for step in steps:
        step(records)
        revision += 1
        fresh = _index()
        for query in queries:
            found = index.search(records, revision, query, 10)
            assert found == fresh.search(records, 0, query, 10), (revision, query)
            assert _same(found, _oracle(records, query, 10, LexicalSettings())), (revision, query)
    assert index.search(records, revision, "heat hours wall", 10) == []  # 20's old text is gone
    assert [i for i, _ in index.search(records, revision, "ferry", 10)] == [3, 30]
    assert index.search({}, revision + 1, "ferry", 10) == []  # all removed
    assert index.search(records, revision + 2, "ferry", 10) != []  # and back


def test_a_replaced_record_is_tokenized_again_even_with_the_same_text() -> None:
    text_of = Counting()
    index = LexicalIndex(LexicalSettings(), text_of)
    records = {1: Doc("stone oven"), 2: Doc("bread")}
    index.search(records, 0, "stone", 5)
    records[1] = Doc("stone oven")  # another record object under the same int id
    index.search(records, 1, "stone", 5)
    assert text_of.calls == ["stone oven", "bread", "stone oven"]


def test_memory_grows_with_the_corpus_and_token_count_counts_the_tokens() -> None:
    index = _index()
    assert index.memory_bytes() == 0 and index.token_count() == 0
    small = _records()
    index.search(small, 0, "harbour", 5)
    tokenizer = LexicalTokenizer()
    assert index.token_count() == sum(len(tokenizer.tokens(d.text)) for d in small.values())
    small_bytes = index.memory_bytes()
    assert small_bytes > 0
    large = {**small, **{100 + i: Doc(f"word{i} harbour number{i} stone{i} oven") for i in range(200)}}
    index.search(large, 1, "harbour", 5)
    assert index.token_count() == sum(len(tokenizer.tokens(d.text)) for d in large.values())
    assert index.memory_bytes() > small_bytes + 200 * 3 * 8  # at least the new token ids
    large_bytes = index.memory_bytes()
    index.search(small, 2, "harbour", 5)
    assert index.token_count() == sum(len(tokenizer.tokens(d.text)) for d in small.values())
    assert index.memory_bytes() < large_bytes  # the removed documents' token ids and scores are let go


def test_memory_after_removals_is_that_of_the_records_left() -> None:
    # _sync forgets removed records' token ids but never their words: `_vocabulary` (and `_compact`, one int64 per
    # word ever seen, rebuilt on each sync) only grow, so a store whose records churn (upserts with new words)
    # grows without bound although its corpus does not
    index, small = _index(), _records()
    large = {**small, **{100 + i: Doc(f"word{i} harbour number{i} stone{i} oven") for i in range(200)}}
    index.search(large, 0, "harbour", 5)
    index.search(small, 1, "harbour", 5)
    fresh = _index()
    fresh.search(small, 0, "harbour", 5)
    # the same arrays and words; Python objects shared differently (small ints) may differ by a few bytes
    assert index.memory_bytes() == pytest.approx(fresh.memory_bytes(), rel=0.02)


def test_default_settings_are_lucene_bm25_in_english_and_save_nothing() -> None:
    default = LexicalSettings()
    assert (default.language, default.k1, default.b, default.method) == ("english", 1.5, 0.75, "lucene")
    assert default.settings() == {}
    assert LexicalSettings(language="English").settings() == {}  # the same settings, spelt otherwise
    assert LexicalSettings.saved({}, "f") == default
    assert LexicalSettings.saved({LEXICAL_KEY: None}, "f") == default
    assert LexicalSettings.saved({LEXICAL_KEY: {}}, "f") == default


@pytest.mark.parametrize(
    "settings",
    [
        LexicalSettings(language="german"),
        LexicalSettings(language=None),
        LexicalSettings(k1=0.0, b=0.0),
        LexicalSettings(k1=10, b=1),
        LexicalSettings(language="russian", k1=1.2, b=0.5, method="bm25+"),
    ],
)
def test_settings_round_trip_through_a_store_file(settings: LexicalSettings) -> None:
    state = json.loads(json.dumps(settings.settings()))
    assert list(state) == [LEXICAL_KEY]
    assert LexicalSettings.saved(state, "store.json") == settings


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"language": "klingon"}, "language must be one of"),
        ({"language": 3}, "language must be one of"),
        ({"k1": -0.1}, "LexicalSettings.k1 must be a number in"),
        ({"k1": 10.5}, "LexicalSettings.k1 must be a number in"),
        ({"k1": True}, "LexicalSettings.k1 must be a number in"),
        ({"k1": "1.5"}, "LexicalSettings.k1 must be a number in"),
        ({"b": 1.01}, "LexicalSettings.b must be a number in"),
        ({"b": None}, "LexicalSettings.b must be a number in"),
        ({"method": "bm99"}, "LexicalSettings.method must be one of"),
        ({"method": "Lucene"}, "LexicalSettings.method must be one of"),
    ],
)
def test_bad_settings_are_refused(fields: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        LexicalSettings(**fields)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^shelf/store\.json records lexical settings this release cannot use") as e:
        LexicalSettings.saved({LEXICAL_KEY: fields}, "shelf/store.json")
    assert message in str(e.value)


@pytest.mark.parametrize(
    "raw",
    [["english"], "english", 1.5, {"language": "english", "stemmer": "porter"}, {"k": 1.5}],
)
def test_malformed_saved_settings_are_refused_naming_where(raw: object) -> None:
    with pytest.raises(ValueError, match=r"^shelf/store\.json records malformed lexical settings"):
        LexicalSettings.saved({LEXICAL_KEY: raw}, "shelf/store.json")


def test_settings_are_frozen_and_compared_by_value() -> None:
    settings = LexicalSettings(language="German", k1=1.2)
    assert settings == LexicalSettings(language="german", k1=1.2) and settings.language == "german"
    assert settings != LexicalSettings(language="german")
    with pytest.raises(AttributeError):
        settings.k1 = 2.0  # type: ignore[misc]


# ---------------------------------------------------------------------------------------------------- windows


def _windows(texts: Mapping[int, str]) -> dict[int, list[tuple[int, int]]]:
    """Each text cut at its sentence ends and commas: the spans a store's windows might have."""
    spans: dict[int, list[tuple[int, int]]] = {}
    for int_id, text in texts.items():
        cuts = [0] + [i + 1 for i, c in enumerate(text) if c in ".,;:"] + [len(text)]
        spans[int_id] = [(a, b) for a, b in itertools.pairwise(cuts) if text[a:b].strip()]
    return spans


def _window_oracle(
    records: Mapping[int, Doc], spans: Mapping[int, list[tuple[int, int]]], query: str, k: int
) -> list[tuple[int, float]]:
    """bm25s directly over every window's text, a record scored by its best window holding a query word."""
    tokenizer = LexicalTokenizer(LexicalSettings().language)
    rows = [(i, records[i].text[a:b]) for i in sorted(records) for a, b in spans[i]]
    tokens = [tokenizer.tokens(text) for _, text in rows]
    bm25 = bm25s.BM25()
    bm25.index(tokens, show_progress=False)
    query_tokens = [t for t in tokenizer.tokens(query) if t in bm25.vocab_dict]
    if not query_tokens:
        return []
    best: dict[int, float] = {}
    for (int_id, _), words, score in zip(rows, tokens, bm25.get_scores(query_tokens), strict=True):
        if score > 0 and set(query_tokens) & set(words):
            best[int_id] = max(best.get(int_id, 0.0), float(score))
    return sorted(best.items(), key=lambda p: (-p[1], p[0]))[:k]


def test_with_windows_a_record_is_scored_by_its_best_window() -> None:
    records, spans = _records(), _windows(TEXTS)
    assert any(len(s) > 1 for s in spans.values())
    index = LexicalIndex(LexicalSettings(), lambda doc: doc.text, spans.__getitem__)
    for query in [*QUERIES, "stone wall days", "harbour ferry"]:
        found = index.search(records, 0, query, 10)
        assert _same(found, _window_oracle(records, spans, query, 10)), (query, found)
    # a record's windows are scored apart: "stone wall" is in the second window of 20 only
    whole = _index().search(records, 0, "stone wall days", 10)
    windowed = index.search(records, 0, "stone wall days", 10)
    assert whole[0][0] == windowed[0][0] == 20 and whole[0][1] != windowed[0][1]


def test_with_windows_among_k_and_records_without_windows() -> None:
    records, spans = _records(), _windows(TEXTS)
    spans[8] = []  # no windows: the whole text is the record's one window
    index = LexicalIndex(LexicalSettings(), lambda doc: doc.text, spans.__getitem__)
    assert [i for i, _ in index.search(records, 0, "bread oven", 10, among=[8, 30])] == [8, 30]
    full = index.search(records, 0, "harbour", 100)
    assert [i for i, _ in full] == [i for i, _ in _window_oracle(records, {**spans, 8: [(0, 38)]}, "harbour", 100)]
    assert all(index.search(records, 0, "harbour", k) == full[:k] for k in range(1, len(full) + 1))
    assert index.token_count() == sum(len(LexicalTokenizer("english").tokens(t)) for t in TEXTS.values())


def test_with_windows_a_replaced_record_is_read_with_its_new_windows() -> None:
    texts = dict(TEXTS)
    spans = _windows(texts)
    index = LexicalIndex(LexicalSettings(), lambda doc: doc.text, lambda i: spans[i])
    records = _records(texts)
    assert [i for i, _ in index.search(records, 0, "violin", 10)] == []
    texts[8] = "A violin in the attic, a cello in the cellar."
    spans[8] = [(0, 22), (22, len(texts[8]))]
    records = {**records, 8: Doc(texts[8])}
    assert [i for i, _ in index.search(records, 1, "violin", 10)] == [8]
    assert _same(index.search(records, 1, "cellar", 10), _window_oracle(records, spans, "cellar", 10))
    del records[8]
    assert index.search(records, 2, "violin", 10) == []


def _traced_bytes(records: Mapping[int, Doc]) -> tuple[int, LexicalIndex]:
    """The bytes tracemalloc sees a LexicalIndex keep after indexing `records` (bm25s imported and every cache warm
    before, so only what the index holds is counted), and the index."""
    import gc
    import tracemalloc

    _index().search({0: Doc("warm ferry")}, 0, "ferry", 1)
    index = _index(LexicalSettings(language=None))
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        index.search(records, 0, "ferry", 1)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - before, index
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("corpus", ["english", "cjk"])
def test_memory_bytes_is_what_tracemalloc_sees_the_index_hold(corpus: str) -> None:
    rng = np.random.default_rng(0)
    if corpus == "cjk":  # random ideographs: nearly every character pair is a word of its own
        records = {0: Doc("".join(chr(int(c)) for c in rng.integers(0x4E00, 0x9FFF, 20_000)))}
    else:
        words = [f"w{i}" for i in range(3000)] + ["ferry", "harbour", "stone", "oven"]
        records = {i: Doc(" ".join(rng.choice(words, 40))) for i in range(500)}
    traced, index = _traced_bytes(records)
    assert 0.8 * traced <= index.memory_bytes() <= 1.25 * traced  # within 25%: allocator rounding, small caches


def test_a_one_character_cjk_query_finds_the_runs_holding_it() -> None:
    records = {1: Doc("东京塔很高"), 2: Doc("北京的天气"), 3: Doc("ferry harbour")}
    index = _index()
    assert [int_id for int_id, _ in index.search(records, 0, "京", 5)] == [1, 2]
    assert next(int_id for int_id, _ in index.search(records, 0, "东京", 5)) == 1  # the pair ranks its run first


def test_a_query_finds_documents_written_in_another_unicode_form() -> None:
    records = {1: Doc("cafe\u0301 au lait"), 2: Doc("co\u00adoperation"), 3: Doc("ｆｅｒｒｙ ﬁsh"), 4: Doc("ｶﾀｶﾅ")}
    index = _index()
    for query, found in [("café", 1), ("cooperation", 2), ("ferry", 3), ("fish", 3), ("カタカナ", 4)]:
        assert [int_id for int_id, _ in index.search(records, 0, query, 5)] == [found], query
