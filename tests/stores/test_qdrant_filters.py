"""The stores' filter grammar as Qdrant filters: the engine keeps exactly what `compile_filter` keeps, on metadata
of every kind of value (lists, nulls, empty lists, dicts, booleans, dates), over the whole grammar, and refuses what
it cannot evaluate by name; a collection written before the points carried their field markers keeps Qdrant's
reading, as documented."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from fair_retrieval.stores.filters import compile_filter
from fair_retrieval.stores.qdrant_filters import METADATA_FIELD, canonical_value, field_markers, qdrant_filter

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
    {"lang": ["en", "de"], "n": [None], "tags": "b", "year": [2020, 2024], "draft": 1, "at": "not a date"},
    {"lang": None, "tags": ["a", "b", "a"], "n": None, "d": {"k": 1, "j": [1, 2]}, "score": [0.5], "e": []},
    {"tags": ["b", "a"], "d": {"j": [1.0, 2], "k": 1.0}, "n": 0, "e": [[]], "draft": [True]},
    {"tags": [["a"]], "d": {"k": True}, "e": "", "year": "2024", "lang": ["en"]},
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


FIELDS = ("lang", "tags", "n", "e", "d", "year", "score", "draft", "at", "absent", "a b")
VALUES: list[Any] = ["en", "b", 1, 2024, 0.5, True, False, None, [], ["a", "b"], [None], {"k": 1, "j": [1, 2]}]
ORDERED: list[Any] = [0, 2021, 0.5, -3, "2024-01-01", "2024-05-01T06:00:00+00:00"]


def grammar() -> list[dict[str, Any]]:
    """Every field operator of the grammar on every field, with operands of every kind the engine can compare."""
    specs: list[dict[str, Any]] = []
    for field in FIELDS:
        for value in VALUES:
            specs += [{field: value}, {field: {"$eq": value}}, {field: {"$ne": value}}, {field: {"$not": value}}]
        for first, second in itertools.combinations(VALUES, 2):
            if (VALUES.index(first) + VALUES.index(second)) % 3 == 0:  # a third of the pairs keeps the run short
                specs += [
                    {field: [first, second]},
                    {field: {"$in": [first, second]}},
                    {field: {"$nin": [first, second]}},
                ]
        specs += [{field: {"$in": []}}, {field: {"$nin": []}}, {field: []}, {field: [["a", "b"]]}]
        for operand in ORDERED:
            specs += [{field: {name: operand}} for name in ("$gt", "$gte", "$lt", "$lte")]
        specs += [{field: {"$exists": True}}, {field: {"$exists": False}}]
        for element in ("a", "b", "en", 2020, None, True, 0.5):
            specs += [{field: {"$contains": element}}, {field: {"$not": {"$contains": element}}}]
        specs += [{field: {"$any": ["a", 2024]}}, {field: {"$any": []}}, {field: {"$all": ["a", "b"]}}]
        specs += [{field: {"$all": []}}, {field: {"$all": [None]}}, {field: {"$not": {"$all": []}}}]
    return specs


def upsert(client: QdrantClient, name: str, markers: bool) -> None:
    client.create_collection(name, vectors_config={"v": models.VectorParams(size=2, distance=models.Distance.DOT)})
    points = [
        models.PointStruct(
            id=i,
            vector={"v": [1.0, 0.0]},
            payload={METADATA_FIELD: metadata, **(field_markers(metadata) if markers else {})},
        )
        for i, metadata in enumerate(METADATA)
    ]
    client.upsert(name, points)


@pytest.fixture(scope="module")
def client() -> QdrantClient:
    client = QdrantClient(":memory:")
    upsert(client, "f", markers=True)
    upsert(client, "earlier", markers=False)  # a collection written before the points carried their markers
    return client


def kept(client: QdrantClient, spec: dict[str, Any], collection: str = "f") -> set[int]:
    exact = collection == "f"
    points, _ = client.scroll(collection, scroll_filter=qdrant_filter(spec, exact=exact), limit=100)
    return {int(point.id) for point in points}


def grammar_keeps(spec: dict[str, Any]) -> set[int]:
    predicate = compile_filter(spec)
    return {i for i, metadata in enumerate(METADATA) if predicate(metadata)}


@pytest.mark.parametrize("spec", FILTERS, ids=str)
def test_the_engine_keeps_what_the_grammar_keeps(client: QdrantClient, spec: dict[str, Any]) -> None:
    assert kept(client, spec) == grammar_keeps(spec)


def test_the_whole_grammar_keeps_the_same_documents_or_is_refused_by_name(client: QdrantClient) -> None:
    """Lists, nulls, empty lists, dicts, booleans and dates under every operator: the same documents, or a refusal
    that names why (a list or dict as a list's element, a string ordered that is no ISO date)."""
    specs = grammar()
    compared, refused, differ = 0, 0, []
    for spec in specs:
        try:
            translated = qdrant_filter(spec)
        except ValueError as error:
            assert "matches a list's elements" in str(error) or "orders numbers and dates only" in str(error), spec
            refused += 1
            continue
        points, _ = client.scroll("f", scroll_filter=translated, limit=100)
        if {int(point.id) for point in points} != grammar_keeps(spec):
            differ.append(spec)
        compared += 1
    assert not differ, differ[:10]
    assert compared > 1_500 and refused < compared // 10


def test_a_collection_written_before_the_markers_keeps_qdrants_reading(client: QdrantClient) -> None:
    # what docs/guides/qdrant.md lists: a null counts as absent for $exists, a list field matches by one element
    assert 2 not in kept(client, {"note": {"$exists": True}}, "earlier")
    assert compile_filter({"note": {"$exists": True}})(METADATA[2])
    assert 1 in kept(client, {"tags": "b"}, "earlier") and 1 not in kept(client, {"tags": "b"})
    assert 6 in kept(client, {"lang": "en"}, "earlier") and 6 not in kept(client, {"lang": "en"})
    # the rest holds there as here
    for spec in FILTERS[:12]:
        assert kept(client, spec, "earlier") - {6, 7, 8, 9} == grammar_keeps(spec) - {6, 7, 8, 9}, spec
    with pytest.raises(ValueError, match="written by an earlier release, cannot compare a field with a list"):
        qdrant_filter({"tags": {"$eq": ["a", "b"]}}, exact=False)


def test_canonical_values_are_equal_where_the_grammar_says_equal() -> None:
    pairs = [([1, 2.0], [1.0, 2]), ({"a": 1, "b": [True]}, {"b": [True], "a": 1.0}), ((1, "x"), [1, "x"])]
    for first, second in pairs:
        assert compile_filter({"f": {"$eq": first}})({"f": second})
        assert canonical_value(first) == canonical_value(second)
    for first, second in ([1, True], [1, 1]), (["0.5"], [0.5]), ([None], []), ({"a": 1}, {"a": 1, "b": None}):
        assert not compile_filter({"f": {"$eq": first}})({"f": second})
        assert canonical_value(first) != canonical_value(second)


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"lang": {"$text_match": "e"}}, "matches part of a string"),
        ({"lang": {"$gt": "b"}}, "orders numbers and dates only"),
        ({"": 1}, "cannot filter a metadata field named ''"),
        ({'say "hi"': 1}, "holding a double quote"),
        ({"tags": {"$contains": ["a"]}}, "matches a list's elements by a string, number, boolean or None"),
    ],
)
def test_what_the_engine_cannot_evaluate_is_refused(spec: dict[str, Any], message: str) -> None:
    compile_filter(spec)  # the grammar takes it
    with pytest.raises(ValueError, match=message):
        qdrant_filter(spec)


def test_no_filter_is_none() -> None:
    assert qdrant_filter(None) is None and qdrant_filter({}) is None


def test_a_long_in_of_numbers_is_two_conditions_not_one_a_value(client: QdrantClient) -> None:
    """A $in of 100,000 numbers: ints and floats of whole value matched by two MatchAny (the request stays about
    1 MB, and a server answers from its payload index); each other float by a range of its own."""

    def conditions(node: Any) -> int:
        if isinstance(node, models.Filter):
            return sum(conditions(part) for part in (*(node.must or []), *(node.should or []), *(node.must_not or [])))
        return 1

    many = list(range(100_000))
    assert conditions(qdrant_filter({"year": {"$in": many}})) == 3  # two MatchAny, beside the guard against lists
    assert conditions(qdrant_filter({"year": {"$in": [*many, 0.5, 2.5]}})) == 3 + 2 * 2
    assert kept(client, {"year": {"$in": many}}) == grammar_keeps({"year": {"$in": many}}) == {0, 1, 2, 3}


def test_qdrants_own_filter_is_refused_where_it_names_what_the_points_do_not_hold() -> None:
    from fair_retrieval.stores.qdrant_filters import check_engine_filter, renamed_keys

    def match(key: str) -> Any:
        return models.FieldCondition(key=key, match=models.MatchValue(value="x"))

    check_engine_filter(models.Filter(must=[match("metadata.topic"), match("metadata[0]")]))
    check_engine_filter(models.Filter(should=[match("fr_group")]), also=("fr_group",))
    for spec, named in (
        (models.Filter(must=[match("page_content")]), "'page_content' reads a payload key"),
        (models.Filter(must_not=[models.Filter(should=[match("topic")])]), r"must_not\[0\]\.should\[0\]"),
        (models.Filter(must=[models.IsNullCondition(is_null=models.PayloadField(key="x"))]), "'x' reads"),
        (models.Filter(must=[models.HasIdCondition(has_id=[1])]), "HasIdCondition names Qdrant point ids"),
        (
            models.Filter(min_should=models.MinShould(conditions=[match("metadata.a"), match("b")], min_count=1)),
            r"min_should\[1\]",
        ),
    ):
        with pytest.raises(ValueError, match=named):
            check_engine_filter(spec)
    given = models.Filter(
        must=[match("topic"), models.IsEmptyCondition(is_empty=models.PayloadField(key="tags"))],
        should=[models.Filter(must_not=[match("year")])],
    )
    renamed = renamed_keys(given, lambda key: f"metadata.{key}")
    check_engine_filter(renamed)
    assert [condition.key for condition in renamed.must[:1]] == ["metadata.topic"]
    assert renamed.must[1].is_empty.key == "metadata.tags" and renamed.should[0].must_not[0].key == "metadata.year"
    assert given.must[0].key == "topic"  # the caller's filter is not changed
