"""BM25 as sparse vectors with the engine's IDF (Qdrant's `Modifier.IDF`) scores as `LexicalIndex` (bm25s) does."""

from __future__ import annotations

import pytest

from fair_retrieval.lexical import LexicalIndex, LexicalSettings
from fair_retrieval.lexical.lexical_tokens import LexicalTokenizer
from fair_retrieval.lexical.sparse_bm25 import (
    average_length,
    check_sparse_settings,
    document_vector,
    query_vector,
    word_index,
)

pytest.importorskip("bm25s")
qdrant_client = pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient, models  # noqa: E402

TEXTS = [
    "The ferry leaves the harbour at nine every morning, the ferry is late.",
    "A bakery sells rye bread and cheese.",
    "Bread, bread and more bread: the baker bakes bread all night long in the bakery.",
    "Trains to the city run every hour.",
    "The the the.",
    "Cheese from the farm, sold at the market with apples and bread.",
]
QUERIES = ["ferry harbour", "bread bread cheese", "bakery", "city trains hour", "nothing matches zebra"]


def test_word_indices_are_stable_32_bit_hashes() -> None:
    assert word_index("ferry") == word_index("ferry") != word_index("ferri")
    assert 0 <= word_index("ünïcode") < 2**32
    assert word_index("bread") == 405186124  # the same in every process and release


@pytest.mark.parametrize(
    "settings", [LexicalSettings(), LexicalSettings(k1=0.9, b=0.4), LexicalSettings(language=None)]
)
def test_engine_scores_equal_bm25s(settings: LexicalSettings) -> None:
    tokenizer = LexicalTokenizer(settings.language)
    tokens = [tokenizer.tokens(text) for text in TEXTS]
    avgdl = average_length(tokens)
    client = QdrantClient(":memory:")
    client.create_collection(
        "bm25", vectors_config={}, sparse_vectors_config={"s": models.SparseVectorParams(modifier=models.Modifier.IDF)}
    )
    points = []
    for i, words in enumerate(tokens):
        indices, values = document_vector(words, avgdl, settings.k1, settings.b)
        points.append(models.PointStruct(id=i, vector={"s": models.SparseVector(indices=indices, values=values)}))
    client.upsert("bm25", points)
    index = LexicalIndex(settings, lambda text: text)
    records = dict(enumerate(TEXTS))
    for query in QUERIES:
        expected = index.search(records, 0, query, 10)
        indices, values = query_vector(tokenizer.tokens(query))
        if not indices:
            assert expected == []
            continue
        found = client.query_points("bm25", query=models.SparseVector(indices=indices, values=values), using="s")
        got = [(int(p.id), p.score) for p in found.points if p.score > 0]
        assert [i for i, _ in got] == [i for i, _ in expected], query
        assert [s for _, s in got] == pytest.approx([s for _, s in expected], rel=1e-5), query


def test_settings_the_engine_cannot_score_are_refused() -> None:
    check_sparse_settings(LexicalSettings(), "S")
    with pytest.raises(ValueError, match="Lucene's variant only"):
        check_sparse_settings(LexicalSettings(method="bm25l"), "S")
    with pytest.raises(ValueError, match="windows=True"):
        check_sparse_settings(LexicalSettings(windows=True), "S")
