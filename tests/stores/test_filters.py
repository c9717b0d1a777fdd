"""Metadata filters (`fair_retrieval.stores.filters`) and the id-restricted search they drive
(`FaissIndex.search(ids=)`).

The filter compiler is checked against an independent interpreter of the same grammar on random metadata and random
filters; the restricted search against brute force over the selected vectors, for every index kind and for
selections of 0.1 % to 90 % of the vectors.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from fair_retrieval.stores.filters import FILTER_OPERATORS, MAX_DEPTH, check_nesting, compile_filter, translated_filter

# ------------------------------------------------------------------------------------------------ compile_filter

DOCS: list[dict[str, Any]] = [
    {"year": 2024, "lang": "en", "tags": ["a", "b"], "score": 0.5, "draft": False},
    {"year": 2025, "lang": "fr", "tags": ["b"], "score": 2, "draft": True},
    {"year": "2026", "lang": "en", "score": None},
    {"lang": "de", "draft": 1},
    {},
]


def kept(spec: Any) -> list[int]:
    keep = compile_filter(spec)
    return [position for position, metadata in enumerate(DOCS) if keep(metadata)]


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, [0, 1, 2, 3, 4]),
        ({}, [0, 1, 2, 3, 4]),
        ({"lang": "en"}, [0, 2]),
        ({"lang": ["fr", "de"]}, [1, 3]),
        ({"tags": ["a", "b"]}, [0]),  # a list field equal to the whole list, as the store always matched
        ({"lang": ("fr",)}, [1]),
        ({"lang": "en", "year": 2024}, [0]),
        ({"year": {"$eq": 2025}}, [1]),
        ({"year": {"$ne": 2024}}, [1, 2, 3, 4]),  # a missing field is "not equal"
        ({"year": {"$neq": 2024}}, [1, 2, 3, 4]),  # langchain-community's spelling
        ({"year": {"$gte": 2025}}, [1]),  # "2026" is a string: not comparable with a number
        ({"year": {"$gt": "2025"}}, [2]),
        ({"year": {"$gte": 2024, "$lt": 2025}}, [0]),
        ({"score": {"$lte": 2}}, [0, 1]),  # None is not ordered
        ({"score": {"$gt": 0.1}}, [0, 1]),
        ({"year": {"$in": [2024, "2026"]}}, [0, 2]),
        ({"year": {"$nin": [2024, "2026"]}}, [1, 3, 4]),  # missing fields are in no list
        ({"year": {"$in": []}}, []),
        ({"score": None}, [2]),  # None equals a stored None only, not a missing field
        ({"score": {"$exists": True}}, [0, 1, 2]),
        ({"score": {"$exists": False}}, [3, 4]),
        ({"draft": True}, [1]),  # True is not 1
        ({"draft": 1}, [3]),
        ({"draft": {"$in": [1]}}, [3]),
        ({"year": {"$not": {"$gte": 2025}}}, [0, 2, 3, 4]),
        ({"lang": {"$not": "en"}}, [1, 3, 4]),
        ({"$not": {"lang": "en"}}, [1, 3, 4]),
        ({"$and": [{"lang": "en"}, {"score": {"$exists": True}}]}, [0, 2]),
        ({"$or": [{"lang": "de"}, {"year": {"$lt": 2025}}]}, [0, 3]),
        ({"$or": [{"lang": "de"}, {"year": 2025}], "draft": {"$exists": True}}, [1, 3]),
        ({"$not": {"$or": [{"lang": "en"}, {"lang": "fr"}]}}, [3, 4]),
        (lambda metadata: metadata.get("lang") == "fr", [1]),
        (lambda metadata: metadata.get("year"), [0, 1, 2]),  # any truth value
    ],
)
def test_filter_semantics(spec: Any, expected: list[int]) -> None:
    assert kept(spec) == expected


def test_values_compare_within_their_type_only_and_never_raise() -> None:
    odd = [{"x": value} for value in (1, 1.0, True, "1", None, [1], {"y": 1}, float("inf"))]
    for spec in ({"x": {"$gt": 0}}, {"x": {"$lt": "2"}}, {"x": 1}, {"x": {"$in": [1, "1"]}}, {"x": {"$ne": 1}}):
        keep = compile_filter(spec)
        [keep(metadata) for metadata in odd]  # no TypeError from "1" > 0, None < "2", …
    assert [compile_filter({"x": 1})(metadata) for metadata in odd] == [1, 1, 0, 0, 0, 0, 0, 0]
    assert [compile_filter({"x": {"$gte": 1}})(metadata) for metadata in odd] == [1, 1, 0, 0, 0, 0, 0, 1]
    assert [compile_filter({"x": {"$gt": "0"}})(metadata) for metadata in odd] == [0, 0, 0, 1, 0, 0, 0, 0]
    assert compile_filter({"x": {"y": 1}})({"x": {"y": 1}}) and not compile_filter({"x": {"y": 1}})({"x": {"y": 2}})
    assert compile_filter({"x": {}})({"x": {}})
    # inside lists and dicts too: True is not 1, 1 is 1.0 (Qdrant's translation compares whole values so)
    nested = [{"x": [1, True]}, {"x": [1, 1]}, {"x": [1.0, True]}, {"x": {"y": [True]}}, {"x": {"y": [1]}}]
    assert [compile_filter({"x": {"$eq": [1, True]}})(metadata) for metadata in nested] == [1, 0, 1, 0, 0]
    assert [compile_filter({"x": [1, 1]})(metadata) for metadata in nested] == [0, 1, 0, 0, 0]
    assert [compile_filter({"x": {"y": [1.0]}})(metadata) for metadata in nested] == [0, 0, 0, 0, 1]


def test_an_iso_date_orders_dates_only() -> None:
    """A date operand orders ISO dates by time; another string is not in its order (as Qdrant's DatetimeRange), where
    a string operand that is no date orders strings as strings."""
    values = ["2024-05-02", "2024-05-01T23:00:00-02:00", "not a date", "zzz", "2024", 20240502]
    after = compile_filter({"x": {"$gt": "2024-05-01T12:00:00+00:00"}})
    assert [after({"x": value}) for value in values] == [True, True, False, False, False, False]
    assert [compile_filter({"x": {"$gt": "a"}})({"x": value}) for value in values] == [0, 0, 1, 1, 0, 0]


def test_the_operator_list_is_complete() -> None:
    assert set(FILTER_OPERATORS) == {
        "$eq", "$ne", "$neq", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$not", "$and", "$or",
        "$contains", "$any", "$all", "$text_match", "$text_match_insensitive",
    }  # fmt: skip


def test_list_membership_and_text_match() -> None:
    rows = [{"tags": ["a", "b"]}, {"tags": ["b"]}, {"tags": "ab"}, {}, {"tags": [1, True]}, {"title": "Faiss Guide"}]

    def kept(spec: dict[str, object]) -> list[int]:
        keep = compile_filter(spec)
        return [position for position, metadata in enumerate(rows) if keep(metadata)]

    assert kept({"tags": {"$contains": "a"}}) == [0]  # a string field is no list: never a substring here
    assert kept({"tags": {"$any": ["a", "b"]}}) == [0, 1] and kept({"tags": {"$all": ["a", "b"]}}) == [0]
    assert kept({"tags": {"$contains": 1}}) == [4] and kept({"tags": {"$contains": False}}) == []
    assert kept({"title": {"$text_match": "Guide"}}) == [5] and kept({"title": {"$text_match": "guide"}}) == []
    assert kept({"title": {"$text_match_insensitive": "FAISS g"}}) == [5]
    with pytest.raises(ValueError, match=r"needs a list of values.*\$contains"):
        compile_filter({"tags": {"$any": "a"}})
    with pytest.raises(ValueError, match="needs a string"):
        compile_filter({"title": {"$text_match": 3}})


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"year": {"$regex": "x"}}, r"Unknown filter operator '\$regex' at filter\['year'\]\['\$regex'\]"),
        ({"$foo": 1}, r"Unknown filter operator '\$foo' at filter\['\$foo'\]"),
        ({"$or": [{"a": 1}, {"b": {"$bad": 1}}]}, r"'\$bad' at filter\['\$or'\]\[1\]\['b'\]\['\$bad'\]"),
        ({"year": {"$in": 2024}}, r"filter\['year'\]\['\$in'\] needs a list of values, got int"),
        ({"year": {"$nin": "abc"}}, r"\$nin'\] needs a list of values, got str"),
        ({"$and": {"a": 1}}, r"filter\['\$and'\] needs a non-empty list of filter dicts"),
        ({"$or": []}, r"filter\['\$or'\] needs a non-empty list"),
        ({"$and": [{"a": 1}, 2]}, r"filter\['\$and'\]\[1\] is int"),
        ({"$not": 3}, r"filter\['\$not'\] needs a filter dict to negate"),
        ({"year": {"$gt": None}}, r"\$gt needs a number or a string"),
        ({"year": {"$lte": [1]}}, r"\$lte needs a number or a string"),
        ({"year": {"$gte": True}}, r"\$gte needs a number or a string"),
        ({"year": {"$exists": 1}}, r"\$exists'\] needs True or False"),
        ({"$gte": 3}, r"\$gte compares a field, so it goes under a field name"),
        ({"year": {"$or": [{"$gt": 1}]}}, r"\$or combines whole filters, so it goes at the top"),
        ({"year": {"$gte": 1, "month": 2}}, r"mixes operators with plain keys \['month'\]"),
        ({3: "x"}, r"has the key 3 \(int\)"),
        ("year", r"filter must be a dict .* or a function of the metadata dict, got str"),
        ([{"a": 1}], r"got list"),
    ],
)
def test_malformed_filters_are_refused_when_compiled(spec: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message) as raised:
        compile_filter(spec)
    if "Unknown" in message:
        assert "$gte" in str(raised.value) and "$and" in str(raised.value)  # the valid operators are listed


# ------------------------------------------------------------------------------------------------ against a reference

_ABSENT = object()
FIELDS = ("a", "b", "c", "tags")
VALUES: tuple[Any, ...] = (-1, 0, 1, 2, 3, 0.5, 1.0, 2.5, "x", "y", "1", "", True, False, None, [1, 2], ["x"], {"k": 1})
ORDERABLE: tuple[Any, ...] = (-1, 0, 1, 2, 2.5, 0.5, "x", "y", "1", "")


def family(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    return type(value).__name__


def same(left: Any, right: Any) -> bool:
    return family(left) == family(right) and left == right


def reference(spec: Any, metadata: Mapping[str, Any]) -> bool:
    """The grammar read directly, one document at a time: every key of a filter dict must hold."""
    results = []
    for key, condition in spec.items():
        if key == "$and":
            results.append(all(reference(member, metadata) for member in condition))
        elif key == "$or":
            results.append(any(reference(member, metadata) for member in condition))
        elif key == "$not":
            results.append(not reference(condition, metadata))
        else:
            results.append(field_holds(metadata.get(key, _ABSENT), condition))
    return all(results)


def field_holds(value: Any, condition: Any) -> bool:
    if isinstance(condition, dict) and condition and all(key.startswith("$") for key in condition):
        return all(operator_holds(value, name, operand) for name, operand in condition.items())
    if isinstance(condition, list):
        if value is _ABSENT:
            return False
        return value == condition if isinstance(value, list) else any(same(value, item) for item in condition)
    return value is not _ABSENT and same(value, condition)


def operator_holds(value: Any, name: str, operand: Any) -> bool:
    present = value is not _ABSENT
    if name == "$eq":
        return present and same(value, operand)
    if name in ("$ne", "$neq"):
        return not (present and same(value, operand))
    if name in ("$gt", "$gte", "$lt", "$lte"):
        if not present or family(value) != family(operand) or family(value) not in ("number", "str"):
            return False
        return {"$gt": value > operand, "$gte": value >= operand, "$lt": value < operand, "$lte": value <= operand}[
            name
        ]
    if name == "$in":
        return present and any(same(value, item) for item in operand)
    if name == "$nin":
        return not (present and any(same(value, item) for item in operand))
    if name == "$exists":
        return present == operand
    assert name == "$not"
    return not field_holds(value, operand)


def random_metadata(rng: random.Random) -> dict[str, Any]:
    return {field: rng.choice(VALUES) for field in FIELDS if rng.random() < 0.7}


def random_condition(rng: random.Random, depth: int) -> Any:
    shape = rng.randrange(4)
    if shape == 0:
        return rng.choice(VALUES)
    if shape == 1:
        return rng.sample(VALUES, rng.randrange(1, 4))
    operators = {}
    for _ in range(rng.randrange(1, 3)):
        name = rng.choice(["$eq", "$ne", "$neq", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$not"])
        if name in ("$gt", "$gte", "$lt", "$lte"):
            operators[name] = rng.choice(ORDERABLE)
        elif name in ("$in", "$nin"):
            operators[name] = rng.sample(VALUES, rng.randrange(0, 4))
        elif name == "$exists":
            operators[name] = rng.random() < 0.5
        elif name == "$not":
            operators[name] = random_condition(rng, depth + 1) if depth < 2 else {"$exists": True}
        else:
            operators[name] = rng.choice(VALUES)
    return operators


def random_filter(rng: random.Random, depth: int = 0) -> dict[str, Any]:
    choice = rng.randrange(6) if depth < 3 else 0
    if choice in (0, 1):
        fields = rng.sample(FIELDS, rng.randrange(1, 3))
        return {field: random_condition(rng, depth) for field in fields}
    if choice == 2:
        return {"$and": [random_filter(rng, depth + 1) for _ in range(rng.randrange(1, 4))]}
    if choice == 3:
        return {"$or": [random_filter(rng, depth + 1) for _ in range(rng.randrange(1, 4))]}
    if choice == 4:
        return {"$not": random_filter(rng, depth + 1)}
    return {rng.choice(FIELDS): random_condition(rng, depth), "$or": [random_filter(rng, depth + 1)]}


def _nested_not(levels: int) -> dict[str, Any]:
    """A filter of `levels` combinations, each spelled in two grammar levels ($not of $or), around one condition."""
    spec: dict[str, Any] = {"n": 1}
    for _ in range(levels):
        spec = {"$not": {"$or": [spec]}}
    return spec


def test_a_translated_filter_counts_the_bound_in_the_frameworks_levels() -> None:
    check_nesting(MAX_DEPTH, "filters", "Combos")
    with pytest.raises(ValueError, match=f"filters…: Combos nest more than {MAX_DEPTH} levels deep; flatten"):
        check_nesting(MAX_DEPTH + 1, "filters…", "Combos")
    deep = _nested_not(MAX_DEPTH + 1)  # levels 0 to MAX_DEPTH, two grammar levels each
    with pytest.raises(ValueError, match="levels deep"):
        compile_filter(deep)  # the grammar's own bound refuses it
    keep = translated_filter(deep, levels_per_combination=2)
    assert keep is not None and keep({"n": 1}) is False and keep({"n": 2}) is True  # 65 $not: an odd count
    with pytest.raises(ValueError, match="levels deep"):
        translated_filter(_nested_not(MAX_DEPTH + 2), levels_per_combination=2)
    assert translated_filter({}, levels_per_combination=2) is None  # keeps every document


def test_compiled_filters_agree_with_a_direct_reading_of_the_grammar() -> None:
    rng = random.Random(20260501)
    documents = [random_metadata(rng) for _ in range(80)]
    outcomes = []
    for _ in range(600):
        spec = random_filter(rng)
        keep = compile_filter(spec)
        for metadata in documents:
            expected = reference(spec, metadata)
            assert keep(metadata) is expected, (spec, metadata)
            outcomes.append(expected)
    assert 0.15 < sum(outcomes) / len(outcomes) < 0.85  # the random filters are neither trivially true nor false


# ---------------------------------------------------------------------------------------- FaissIndex.search(ids=)

faiss = pytest.importorskip("faiss")

from fair_retrieval import FaissIndex  # noqa: E402
from fair_retrieval.index._synthetic import clustered_vectors  # noqa: E402

DIM = 16
COUNT = 3000
K = 10
INDEX_KINDS: dict[str, dict[str, Any]] = {
    "flat": {"kind": "flat"},
    "hnsw": {"kind": "hnsw", "M": 16, "ef_search": 32},
    "ivf": {"kind": "ivf", "nlist": 32, "nprobe": 4},
    "ivfpq": {"kind": "ivfpq", "nlist": 16, "nprobe": 4, "m": 4, "nbits": 6},
    "ivfpq-sized": {"kind": "ivfpq"},  # IDMap2 over IVF-PQ with a refinement stage
    "ivf-sq8": {"factory": "IVF16,SQ8", "search": "nprobe=4"},
    "hnsw-sq8": {"factory": "HNSW16,SQ8"},
    "pq (no selector)": {"factory": "PQ4x4"},
}
FRACTIONS = (0.001, 0.01, 0.1, 0.5, 0.9)
# recall@10 among the selected vectors; the coarse PQ4x6 codes of "ivfpq" reach only 0.64 without any filter
RECALL = {"hnsw": 0.9, "ivf": 0.9, "ivfpq": 0.5, "ivfpq-sized": 0.9, "ivf-sq8": 0.85, "hnsw-sq8": 0.85}


@pytest.fixture(scope="module", autouse=True)
def one_faiss_thread() -> Any:
    """Small indices on a busy 2-core runner: OpenMP threads only add contention."""
    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)


@pytest.fixture(scope="module")
def vectors() -> np.ndarray:
    return clustered_vectors(COUNT, DIM, clusters=30, seed=1)


@pytest.fixture(scope="module")
def external_ids() -> np.ndarray:
    return np.random.default_rng(2).choice(10**12, COUNT, replace=False).astype(np.int64)  # sparse, unordered


@pytest.fixture(scope="module")
def queries(vectors: np.ndarray) -> np.ndarray:
    rng = np.random.default_rng(3)
    noisy = vectors[rng.choice(COUNT, 12, replace=False)] + 0.1 * rng.standard_normal((12, DIM)).astype(np.float32)
    return noisy.astype(np.float32)


@pytest.fixture(scope="module")
def indices(vectors: np.ndarray, external_ids: np.ndarray) -> dict[str, FaissIndex]:
    built = {}
    for name, options in INDEX_KINDS.items():
        index = FaissIndex(DIM, gpu=False, **options)
        index.add(vectors, external_ids)
        built[name] = index
    return built


def exact_among(
    vectors: np.ndarray, ids: np.ndarray, selected: np.ndarray, queries: np.ndarray, k: int, metric: str = "ip"
) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isin(ids, selected)
    base, base_ids = vectors[keep].astype(np.float64), ids[keep]
    if metric == "ip":
        scores = queries.astype(np.float64) @ base.T
        order = np.argsort(-scores, axis=1, kind="stable")[:, :k]
    else:
        scores = ((queries[:, None, :].astype(np.float64) - base[None]) ** 2).sum(-1)
        order = np.argsort(scores, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(scores, order, axis=1), base_ids[order]


def check_restricted(
    found: np.ndarray, scores: np.ndarray, selected: np.ndarray, k: int, metric: str = "ip"
) -> np.ndarray:
    """Every row: exactly min(k, selected) hits, all selected, distinct, best first, padding after them."""
    expected = min(k, selected.size)
    assert found.shape == scores.shape == (found.shape[0], k)
    assert ((found >= 0).sum(axis=1) == expected).all()
    assert (found[:, :expected] >= 0).all() and (found[:, expected:] == -1).all()
    hits = found[:, :expected]
    assert np.isin(hits, selected).all()
    assert all(len(set(row)) == expected for row in hits.tolist())
    ordered = np.diff(scores[:, :expected], axis=1)
    assert (ordered <= 1e-5).all() if metric == "ip" else (ordered >= -1e-5).all()
    return hits


@pytest.mark.parametrize("fraction", FRACTIONS)
@pytest.mark.parametrize("name", list(INDEX_KINDS))
def test_restricted_search_finds_min_k_selected_vectors(
    indices: dict[str, FaissIndex],
    vectors: np.ndarray,
    external_ids: np.ndarray,
    queries: np.ndarray,
    name: str,
    fraction: float,
) -> None:
    rng = np.random.default_rng(int(fraction * 1000))
    selected = rng.choice(external_ids, max(3, int(COUNT * fraction)), replace=False)
    scores, found = indices[name].search(queries, K, ids=selected.tolist())
    hits = check_restricted(found, scores, selected, K)
    exact_scores, exact_ids = exact_among(vectors, external_ids, selected, queries, K)
    if name == "flat":
        np.testing.assert_array_equal(hits, exact_ids)
        np.testing.assert_allclose(scores[:, : hits.shape[1]], exact_scores, atol=1e-5)
    elif name in RECALL:
        recall = np.mean(
            [len(set(a) & set(b)) / len(b) for a, b in zip(hits.tolist(), exact_ids.tolist(), strict=True)]
        )
        assert recall >= RECALL[name], (name, fraction, recall)


def test_small_selections_are_scored_exactly_by_approximate_kinds(
    indices: dict[str, FaissIndex], vectors: np.ndarray, external_ids: np.ndarray, queries: np.ndarray
) -> None:
    selected = external_ids[::7][:200]
    exact_scores, exact_ids = exact_among(vectors, external_ids, selected, queries, K)
    for name in ("hnsw", "ivf"):
        scores, found = indices[name].search(queries, K, ids=selected)
        np.testing.assert_array_equal(found, exact_ids)
        np.testing.assert_allclose(scores, exact_scores, atol=1e-5)


def test_queries_left_short_by_few_probed_lists_are_searched_again(
    vectors: np.ndarray, external_ids: np.ndarray
) -> None:
    index = FaissIndex(DIM, kind="ivf", nlist=32, nprobe=1, gpu=False)
    index.add(vectors, external_ids)
    selected = external_ids[:1100]  # above the exhaustive size, larger a share than one list of 32
    queries = vectors[1500:1520]  # vectors outside the selection
    scores, found = index.search(queries, 200, ids=selected)
    check_restricted(found, scores, selected, 200)
    assert index.params["nprobe"] == 1  # the index's own setting is untouched


def test_fewer_selected_than_k_and_l2(vectors: np.ndarray, external_ids: np.ndarray) -> None:
    for kind in ("flat", "hnsw"):
        index = FaissIndex(DIM, metric="l2", kind=kind, gpu=False)  # type: ignore[arg-type]
        index.add(vectors, external_ids)
        selected = external_ids[[5, 50, 500]]
        scores, found = index.search(vectors[:4], 5, ids=selected)
        check_restricted(found, scores, selected, 5, metric="l2")
        exact_scores, exact_ids = exact_among(vectors, external_ids, selected, vectors[:4], 5, metric="l2")
        np.testing.assert_array_equal(found[:, :3], exact_ids)
        np.testing.assert_allclose(scores[:, :3], exact_scores, atol=1e-4)
        assert np.isinf(scores[:, 3:]).all() and (scores[:, 3:] > 0).all()


def test_restriction_edge_cases(indices: dict[str, FaissIndex], external_ids: np.ndarray, queries: np.ndarray) -> None:
    index = indices["flat"]
    scores, found = index.search(queries, 4, ids=[])
    assert (found == -1).all() and np.isneginf(scores).all()
    everything = index.search(queries, 4, ids=external_ids[::-1])
    unrestricted = index.search(queries, 4)
    np.testing.assert_array_equal(everything[1], unrestricted[1])
    repeated = index.search(queries, 4, ids=[int(external_ids[0])] * 3 + [int(external_ids[1])])
    assert ((repeated[1] >= 0).sum(axis=1) == 2).all()
    with pytest.raises(ValueError, match=r"2 id\(s\) to search among are not in the index: 1, 2"):
        index.search(queries, 4, ids=[1, 2, int(external_ids[0])])
    with pytest.raises(TypeError, match="wrap a single id in a list"):
        index.search(queries, 4, ids=int(external_ids[0]))
    with pytest.raises(ValueError, match="≥ 0"):
        index.search(queries, 4, ids=[-1])
    with pytest.raises(ValueError, match="k must be a positive int"):
        index.search(queries, 0, ids=external_ids[:3])


def test_restriction_follows_removes_and_new_ids(vectors: np.ndarray) -> None:
    for kind in ("flat", "hnsw", "ivf"):
        index = FaissIndex(DIM, kind=kind, gpu=False, **({"nlist": 8} if kind == "ivf" else {}))  # type: ignore[arg-type]
        index.add(vectors[:1000])  # ids 0..999
        index.remove(list(range(0, 1000, 2)))  # the even ids
        index.add(vectors[1000:1100])  # ids 1000..1099
        selected = np.arange(1, 1100, 3)
        selected = selected[np.isin(selected, index.ids)]
        scores, found = index.search(vectors[:5], K, ids=selected)
        check_restricted(found, scores, selected, K)
        with pytest.raises(ValueError, match="not in the index: 0"):
            index.search(vectors[:1], K, ids=[0, 1])


def test_an_ignored_selector_is_caught_and_the_search_still_restricted(
    monkeypatch: pytest.MonkeyPatch,
    indices: dict[str, FaissIndex],
    vectors: np.ndarray,
    external_ids: np.ndarray,
    queries: np.ndarray,
    caplog: pytest.LogCaptureFixture,
) -> None:
    import fair_retrieval.index.selection as selection

    monkeypatch.setattr(selection, "selector_params", lambda *args: faiss.SearchParameters())  # no selector
    selected = external_ids[100:1300:2]
    with caplog.at_level(logging.WARNING, logger="fair_retrieval.index"):
        _, found = indices["flat"].search(queries, K, ids=selected)
    assert "ignored the id selector" in caplog.text
    np.testing.assert_array_equal(found, exact_among(vectors, external_ids, selected, queries, K)[1])


class FakeGpu:
    """faiss' GPU functions stood in for by CPU clones (as in test_index.py), counting conversions to CPU."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.to_cpu = 0
        monkeypatch.setattr(faiss, "StandardGpuResources", lambda: object(), raising=False)
        monkeypatch.setattr(faiss, "get_num_gpus", lambda: 1, raising=False)
        monkeypatch.setattr(faiss, "GpuClonerOptions", lambda: type("Options", (), {})(), raising=False)
        monkeypatch.setattr(faiss, "GpuMultipleClonerOptions", lambda: type("Options", (), {})(), raising=False)
        monkeypatch.setattr(
            faiss,
            "index_cpu_to_gpu",
            lambda resources, device, index, options=None: faiss.clone_index(index),
            raising=False,
        )
        monkeypatch.setattr(
            faiss, "index_cpu_to_all_gpus", lambda index, co=None, ngpu=-1: faiss.clone_index(index), raising=False
        )
        monkeypatch.setattr(faiss, "index_gpu_to_cpu", self._to_cpu, raising=False)

    def _to_cpu(self, index: Any) -> Any:
        self.to_cpu += 1
        return faiss.clone_index(index)


def test_gpu_index_takes_the_selector_or_its_cpu_copy_is_searched(
    monkeypatch: pytest.MonkeyPatch, vectors: np.ndarray, external_ids: np.ndarray, queries: np.ndarray
) -> None:
    import fair_retrieval.index.selection as selection

    fake = FakeGpu(monkeypatch)
    index = FaissIndex(DIM)
    index.add(vectors, external_ids)
    assert index.on_gpu
    selected = external_ids[:40]
    expected = exact_among(vectors, external_ids, selected, queries, K)[1]
    np.testing.assert_array_equal(index.search(queries, K, ids=selected)[1], expected)
    assert fake.to_cpu == 0  # the live ("GPU") index took the selector

    real = selection.search_with_selector
    live = index._index

    def refused_on_gpu(faiss_module: Any, searched: Any, *args: Any) -> Any:
        return None if searched is live else real(faiss_module, searched, *args)

    monkeypatch.setattr(selection, "search_with_selector", refused_on_gpu)
    np.testing.assert_array_equal(index.search(queries, K, ids=selected)[1], expected)
    np.testing.assert_array_equal(index.search(queries, K, ids=selected)[1], expected)
    assert fake.to_cpu == 1  # searched on the CPU copy, converted once and kept until the next change


@pytest.mark.parametrize("combinator", ["$not", "$and", "$or"])
@pytest.mark.parametrize("depth", [100, 3000, 5000])
def test_a_deeply_nested_filter_is_a_clear_error_not_a_recursion_error(combinator: str, depth: int) -> None:
    spec: dict = {"lang": "en"}
    for _ in range(depth):
        spec = {combinator: spec if combinator == "$not" else [spec]}
    with pytest.raises(ValueError, match=r"nests \$and / \$or / \$not more than 64 levels deep; flatten it"):
        compile_filter(spec)


def test_a_filter_nested_64_levels_still_works() -> None:
    spec: dict = {"lang": "en"}
    for _ in range(32):
        spec = {"$not": {"$not": spec}}
    keep = compile_filter(spec)
    assert keep({"lang": "en"}) and not keep({"lang": "de"})


def field_nots(depth: int) -> dict[str, Any]:
    """``{"i": {"$not": {"$not": … {"$eq": 1}}}}`` with `depth` field negations."""
    condition: dict[str, Any] = {"$eq": 1}
    for _ in range(depth):
        condition = {"$not": condition}
    return {"i": condition}


@pytest.mark.parametrize("depth", [65, 100, 500, 5000])
def test_a_field_condition_nested_too_deep_is_a_clear_error_not_a_recursion_error(depth: int) -> None:
    with pytest.raises(ValueError, match=r"nests \$and / \$or / \$not more than 64 levels deep; flatten it"):
        compile_filter(field_nots(depth))


def test_a_field_condition_nested_64_levels_still_works() -> None:
    keep = compile_filter(field_nots(64))
    assert keep({"i": 1}) and not keep({"i": 2})
    assert compile_filter(field_nots(63))({"i": 2})


def test_the_nesting_bound_counts_combinators_and_field_negations_together() -> None:
    spec: dict[str, Any] = field_nots(32)
    for _ in range(32):
        spec = {"$or": [spec]}
    assert compile_filter(spec)({"i": 1})  # 32 + 32 levels
    with pytest.raises(ValueError, match="more than 64 levels deep"):
        compile_filter({"$not": spec})
