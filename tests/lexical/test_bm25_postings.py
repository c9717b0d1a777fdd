"""BM25Postings (Lucene's BM25 from postings at query time) and the LexicalIndex writes it makes cheap: the scores of
bm25s over any history of adds, replacements and removals, and a write that tokenizes only what it changed."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from typing import Any, NamedTuple

import bm25s
import numpy as np
import pytest

from fair_retrieval.lexical import LexicalIndex, LexicalSettings, LexicalTokenizer
from fair_retrieval.lexical.bm25_postings import BM25Postings
from fair_retrieval.stores.document_store import DocumentStore

WORDS = "harbour ferry stone oven bread night train bay boat fish cheese valley wall heat dawn mountain".split()


class Doc(NamedTuple):
    key: str
    text: str


def _oracle(texts: Mapping[int, str], query: str, k1: float = 1.5, b: float = 0.75) -> dict[int, float]:
    """bm25s's Lucene scores of the texts holding a query word, by int id."""
    tokenizer = LexicalTokenizer()
    ids = sorted(texts)
    tokens = [tokenizer.tokens(texts[i]) for i in ids]
    bm25 = bm25s.BM25(k1=k1, b=b, method="lucene")
    bm25.index(tokens, show_progress=False)
    asked = [t for t in tokenizer.tokens(query) if t in bm25.vocab_dict]
    if not asked:
        return {}
    scores = bm25.get_scores(asked)
    return {ids[row]: float(scores[row]) for row, words in enumerate(tokens) if set(asked) & set(words)}


def test_postings_score_as_bm25s_through_adds_and_removals() -> None:
    postings = BM25Postings(1.2, 0.6)
    rng = np.random.default_rng(3)
    texts = [rng.integers(0, 12, size=int(rng.integers(0, 9))) for _ in range(40)]
    rows = [postings.add(ids, owner=1000 + row) for row, ids in enumerate(texts)]
    for row in rows[::3]:
        postings.remove(row, texts[row])
    live = [row for row in rows if row % 3]
    bm25 = bm25s.BM25(k1=1.2, b=0.6, method="lucene")
    bm25.index([[str(i) for i in texts[row]] for row in live], show_progress=False)
    for query in ([1], [2, 5], [7, 7, 3]):
        owners, found = postings.scores(query)
        found_rows = owners - 1000
        asked = [str(i) for i in query if str(i) in bm25.vocab_dict]
        expected = bm25.get_scores(asked)
        by_row = dict(zip(found_rows.tolist(), found.tolist(), strict=True))
        for position, row in enumerate(live):
            if set(query) & set(texts[row].tolist()):
                assert by_row[row] == pytest.approx(float(expected[position]), rel=1e-5)
            else:
                assert row not in by_row


def test_any_history_of_writes_scores_as_a_fresh_bm25s_index() -> None:
    rng = random.Random(11)
    index = LexicalIndex(LexicalSettings(), lambda doc: doc.text)
    records: dict[int, Doc] = {}
    for revision in range(1, 120):
        int_id = rng.randrange(30)
        if int_id in records and rng.random() < 0.4:
            del records[int_id]
        else:
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randrange(0, 12)))
            records[int_id] = Doc(str(int_id), text)  # a new record, or one replaced
        query = " ".join(rng.sample(WORDS, 2))
        found = dict(index.search(records, revision, query, 100, changed_since=lambda _r, i=int_id: {i}))
        expected = {i: s for i, s in _oracle({i: d.text for i, d in records.items()}, query).items() if s > 0}
        assert set(found) == set(expected), revision
        assert all(found[i] == pytest.approx(expected[i], rel=1e-5) for i in found)


class Watched(Mapping[int, Doc]):
    """Records that count how often they are walked whole."""

    def __init__(self, records: dict[int, Doc]) -> None:
        self.records, self.walks = records, 0

    def __getitem__(self, int_id: int) -> Doc:
        return self.records[int_id]

    def __iter__(self) -> Iterator[int]:
        self.walks += 1
        return iter(self.records)

    def __len__(self) -> int:
        return len(self.records)


def test_a_write_reads_only_the_records_it_changed() -> None:
    calls: list[str] = []

    def text_of(doc: Doc) -> str:
        calls.append(doc.key)
        return doc.text

    index = LexicalIndex(LexicalSettings(), text_of)
    records = Watched({i: Doc(str(i), f"{WORDS[i % len(WORDS)]} number {i}") for i in range(2000)})
    index.search(records, 1, "harbour", 5)  # the first search reads every record once
    assert len(calls) == 2000
    calls.clear()
    records.walks = 0
    records.records[5000] = Doc("new", "a harbour of stone")
    del records.records[3]
    found = index.search(
        records, 3, "harbour stone", 3, changed_since=lambda revision: {5000, 3} if revision == 1 else None
    )
    assert calls == ["new"] and records.walks == 0  # neither a second read nor a walk of every record
    assert found[0][0] == 5000


def test_a_store_write_changes_its_lexical_side_by_what_it_wrote() -> None:
    calls: list[str] = []

    def text_of(doc: Any) -> str:
        calls.append(doc.key)
        return doc.text

    store: DocumentStore[Doc] = DocumentStore(gpu=False, text_of=text_of)
    docs = [Doc(f"d{i}", f"{WORDS[i % len(WORDS)]} text {i}") for i in range(500)]
    store.add(docs, np.random.default_rng(0).standard_normal((500, 8)).astype(np.float32))
    store.lexical_search("harbour", 3)
    calls.clear()
    store.add([Doc("d7", "cheese from the valley")], np.ones((1, 8), np.float32))  # an upsert
    store.remove([store.records.int_ids["d9"]])
    assert store.lexical_search("valley cheese from", 3)[0].record.key == "d7"  # the one holding every word
    assert calls == ["d7"]
    assert "d9" not in [hit.record.key for hit in store.lexical_search(docs[9].text, 500)]


def test_texts_added_at_once_score_as_texts_added_one_by_one() -> None:
    rng = np.random.default_rng(3)
    texts = [rng.integers(0, 40, size=int(rng.integers(0, 12))) for _ in range(60)]
    owners = [int(i) // 2 for i in range(60)]  # two texts a record
    one_by_one, at_once = BM25Postings(1.2, 0.75), BM25Postings(1.2, 0.75)
    rows = [one_by_one.add(text, owner) for text, owner in zip(texts, owners, strict=True)]
    np.testing.assert_array_equal(at_once.add_many(texts, owners), rows)
    for postings in (one_by_one, at_once):
        postings.remove(rows[7], texts[7])
        postings.add_many([], [])  # nothing to add: nothing changes
    for query in ([1, 2, 3], [5], [39, 39, 0], [41]):
        (owners_a, scores_a), (owners_b, scores_b) = one_by_one.scores(query), at_once.scores(query)
        np.testing.assert_array_equal(owners_a, owners_b)
        np.testing.assert_allclose(scores_a, scores_b, rtol=1e-12)
