"""The stores' filter grammar as Qdrant filters: the engine keeps exactly what `compile_filter` keeps, on metadata
of every kind of value, except the documented differences, and refuses what it cannot evaluate by name."""

from __future__ import annotations

from typing import Any

import pytest

from fair_retrieval.stores.filters import compile_filter
from fair_retrieval.stores.qdrant_filters import METADATA_FIELD, qdrant_filter

pytest.importorskip("qdrant_client")
from qdrant_client import QdrantClient, models

METADATA: list[dict[str, Any]] = [
    {
        "year": 2020,
        "lang": "en",
        "score": 0.5,
        "draft": False,
        "tags": ["a", "b"],
        "date": "2024-01-05",
        "at": "2024-05-01T10:00:00+05:00",
    },  # 05:00 UTC: later as a string than 06:00+00:00, earlier in time
    {
        "year": 2021,
        "lang": "de",
        "score": 1.0,
        "draft": True,
        "tags": ["b"],
        "date": "2023-12-31",
        "at": "2024-05-01T12:00:00+05:00",
    },  # 07:00 UTC
    {"year": 2024, "lang": "en", "score": 2, "tags": [], "note": None, "at": "2024-05-01T06:30:00Z"},
    {"year": 2024.0, "lang": "fr", "draft": False, "a b": 1, "x.y": "p", "z[0]": 2},  # names Qdrant reads quoted
    {"lang": "EN", "score": -3},
    {},
]
FILTERS: list[dict[str, Any]] = [
    {"lang": "en"},
    {"year": 2024},  # 2024 and 2024.0 alike
    {"score": 1},  # 1.0
    {"draft": False},
    {"draft": {"$ne": True}},  # a missing field passes $ne
    {"lang": ["en", "fr"]},
    {"year": {"$in": [2020, 2021]}},
    {"lang": {"$nin": ["en"]}},
    {"year": {"$gte": 2021, "$lt": 2024}},
    {"score": {"$gt": 0}},
    {"date": {"$gte": "2024-01-01"}},
    {"at": {"$gt": "2024-05-01T06:00:00+00:00"}},  # time order across time zones
    {"at": {"$lte": "2024-05-01T06:00:00+00:00"}},
    {"at": {"$lt": "2024-05-01T12:00:00+05:00"}},
    {"year": {"$exists": True}},
    {"year": {"$exists": False}},
    {"year": {"$not": {"$gt": 2020}}},
    {"tags": {"$contains": "b"}},
    {"tags": {"$any": ["a", "z"]}},
    {"tags": {"$all": ["a", "b"]}},
    {"$or": [{"lang": "de"}, {"score": {"$lt": 0}}]},
    {"$and": [{"lang": "en"}, {"year": {"$gte": 2021}}]},
    {"$not": {"lang": "en"}},
    {"year": 2024, "lang": "en"},
    {"lang": {"$in": []}},
    {"lang": {"$eq": "en"}},
    {"a b": 1},
    {"x.y": {"$in": ["p", "q"]}},
    {"z[0]": {"$not": {"$gt": 1}}},
]


@pytest.fixture(scope="module")
def client() -> QdrantClient:
    client = QdrantClient(":memory:")
    client.create_collection("f", vectors_config={"v": models.VectorParams(size=2, distance=models.Distance.DOT)})
    points = [
        models.PointStruct(id=i, vector={"v": [1.0, 0.0]}, payload={METADATA_FIELD: metadata})
        for i, metadata in enumerate(METADATA)
    ]
    client.upsert("f", points)
    return client


def kept(client: QdrantClient, spec: dict[str, Any]) -> set[int]:
    points, _ = client.scroll("f", scroll_filter=qdrant_filter(spec), limit=100)
    return {int(point.id) for point in points}


@pytest.mark.parametrize("spec", FILTERS, ids=str)
def test_the_engine_keeps_what_the_grammar_keeps(client: QdrantClient, spec: dict[str, Any]) -> None:
    predicate = compile_filter(spec)
    assert kept(client, spec) == {i for i, metadata in enumerate(METADATA) if predicate(metadata)}


def test_documented_differences(client: QdrantClient) -> None:
    # $exists counts a null as absent in Qdrant (the grammar: present)
    assert 2 not in kept(client, {"note": {"$exists": True}})
    assert compile_filter({"note": {"$exists": True}})(METADATA[2])
    # equality on a list field holds when one element matches in Qdrant (the grammar compares the whole list)
    assert 1 in kept(client, {"tags": "b"})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"lang": {"$text_match": "e"}}, "matches part of a string"),
        ({"lang": {"$gt": "b"}}, "orders numbers and dates only"),
        ({"": 1}, "cannot filter a metadata field named ''"),
        ({'say "hi"': 1}, "holding a double quote"),
        ({"tags": {"$eq": ["a", "b"]}}, "not a list"),
    ],
)
def test_what_the_engine_cannot_evaluate_is_refused(spec: dict[str, Any], message: str) -> None:
    compile_filter(spec)  # the grammar takes it
    with pytest.raises(ValueError, match=message):
        qdrant_filter(spec)


def test_no_filter_is_none() -> None:
    assert qdrant_filter(None) is None and qdrant_filter({}) is None
