"""IndexedRecords: the id map, insertion order, groups, upserts, deletes and restricted searches over a FaissIndex."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from fair_retrieval import FaissIndex
from fair_retrieval.stores.indexed_records import IndexedRecords

pytest.importorskip("faiss")

DIM = 8


class Item(NamedTuple):
    key: str
    group: str
    text: str


def _store(*, move_to_end: bool = True, grouped: bool = False) -> IndexedRecords[Item]:
    return IndexedRecords(
        lambda dim: FaissIndex(dim, gpu=False),
        replaced_move_to_end=move_to_end,
        group_of=(lambda item: item.group) if grouped else None,
    )


def _unit(count: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)  # type: ignore[no-any-return]


def _items(*keys: str, group: str = "g", text: str = "t") -> list[Item]:
    return [Item(key, group, text) for key in keys]


def test_new_keys_take_fresh_int_ids_and_an_upsert_keeps_its_int_id() -> None:
    store = _store()
    assert store.index is None and len(store) == 0
    assert store.upsert(_items("a", "b", "c"), _unit(3)) == [0, 1, 2]
    assert store.index is not None and store.index.dim == DIM  # made on the first upsert
    assert store.upsert(_items("b", "d", text="new"), _unit(2, seed=1)) == [1, 3]
    assert dict(store.int_ids) == {"a": 0, "b": 1, "c": 2, "d": 3}
    assert store.records[1].text == "new"
    np.testing.assert_allclose(store.vectors([1]), _unit(2, seed=1)[:1], atol=1e-6)  # the new vector, same int id
    assert store.next_int_id == 4 and len(store.index) == 4


@pytest.mark.parametrize(("move_to_end", "order"), [(True, ["a", "c", "b"]), (False, ["a", "b", "c"])])
def test_a_replaced_record_moves_to_the_end_or_keeps_its_place(move_to_end: bool, order: list[str]) -> None:
    store = _store(move_to_end=move_to_end)
    store.upsert(_items("a", "b", "c"), _unit(3))
    store.upsert(_items("b"), _unit(1, seed=2))
    assert store.keys == order


def test_int_ids_are_not_handed_out_again_after_a_delete() -> None:
    store = _store()
    store.upsert(_items("a", "b"), _unit(2))
    store.remove([store.int_ids["b"]])
    assert "b" not in store and store.keys == ["a"] and store.index is not None and len(store.index) == 1
    assert store.upsert(_items("b"), _unit(1)) == [2]


def test_groups_follow_upserts_and_deletes() -> None:
    store = _store(grouped=True, move_to_end=False)
    store.upsert([Item("n1", "doc1", ""), Item("n2", "doc1", ""), Item("n3", "doc2", "")], _unit(3))
    assert store.group("doc1") == {0, 1} and store.group("doc2") == {2} and store.group("nope") == set()
    store.upsert([Item("n2", "doc2", "")], _unit(1))  # moved to another document
    assert store.group("doc1") == {0} and store.group("doc2") == {1, 2}
    store.remove(sorted(store.group("doc2")))
    assert store.keys == ["n1"] and store.group("doc2") == set()
    store.group("doc1").add(99)  # a copy: the store is not changed through it
    assert store.group("doc1") == {0}


@pytest.mark.parametrize(
    ("items", "vectors", "message"),
    [
        (_items("a", "a"), _unit(2), "repeat within one upsert: 'a'"),
        (_items("x"), _unit(2), "1 records but vectors of shape"),
        (_items("x", "y"), np.vstack([_unit(1), np.full((1, DIM), np.nan, np.float32)]), r"positions \[1\].*NaN"),
        (_items("x"), np.ones((1, DIM + 1), np.float32), "Got 9-d vectors, but this store holds 8-d"),
    ],
)
def test_a_failed_upsert_changes_nothing(items: list[Item], vectors: np.ndarray, message: str) -> None:
    store = _store()
    store.upsert(_items("a", "b"), _unit(2))
    with pytest.raises(ValueError, match=message):
        store.upsert(items, vectors)
    assert store.keys == ["a", "b"] and store.next_int_id == 2 and store.index is not None and len(store.index) == 2


def test_search_is_restricted_inside_the_index_and_returns_min_k_candidates() -> None:
    store = _store()
    vectors = _unit(20)
    store.upsert(_items(*(f"k{i}" for i in range(20))), vectors)
    best = store.search_hits(vectors[:1], 3)
    assert best[0][0] == 0 and best[0][1] == pytest.approx(1.0, abs=1e-5) and len(best) == 3
    assert all(window is None for _, _, window in best)  # a pooled store's hits have no window
    among = [5, 7, 9]
    assert {int_id for int_id, _, _ in store.search_hits(vectors[:1], 10, among)} == set(among)  # min(k, candidates)
    assert store.search_hits(vectors[:1], 3, []) == []
    assert _store().search_hits(vectors[:1], 3) == []  # no index yet


def test_matching_keeps_the_order_of_the_pool() -> None:
    store = _store()
    store.upsert([Item("a", "", "x"), Item("b", "", "y"), Item("c", "", "x")], _unit(3))
    assert store.matching(lambda item: item.text == "x") == [0, 2]
    assert store.matching(lambda item: item.text == "x", [2, 1, 0]) == [2, 0]


def test_clear_keeps_the_index_and_restarts_the_int_ids() -> None:
    store = _store()
    store.upsert(_items("a", "b"), _unit(2))
    index = store.index
    store.clear()
    assert store.index is index and index is not None and len(index) == 0 and len(store) == 0
    assert store.upsert(_items("c"), _unit(1)) == [0]


def test_restore_and_the_consistency_check() -> None:
    source = _store()
    source.upsert(_items("a", "b"), _unit(2))
    restored = _store()
    restored.restore(source.index, list(source.records.items()), source.next_int_id)
    assert restored.index_mismatch() is None and restored.keys == ["a", "b"] and restored.next_int_id == 2
    with pytest.raises(ValueError, match="fills an empty store"):
        restored.restore(None, [], 0)

    short = _store()
    short.restore(source.index, [(0, Item("a", "g", "t"))], 2)  # the index holds a vector no record has
    assert short.index_mismatch() == 2
    doubled = _store()
    doubled.restore(source.index, [(0, Item("a", "g", "t")), (1, Item("a", "g", "t"))], 2)  # one key, two ids
    assert doubled.index_mismatch() == 2
    assert _store().index_mismatch() is None  # no index, no records


def test_changed_since_names_what_changed_until_the_journal_lets_go_or_a_clear() -> None:
    store = _store()
    store.upsert(_items("a", "b", "c"), _unit(3))
    start = store.revision
    assert store.changed_since(start) == set()
    store.upsert(_items("b", "d"), _unit(2, seed=1))  # b replaced, d added
    store.remove([store.int_ids["a"]])
    assert store.changed_since(start) == {0, 1, 3}
    assert store.changed_since(start + 2) == {0}  # only the removal since then
    assert store.changed_since(store.revision + 1) is None  # a revision this store never had
    for round_ in range(5000):  # more steps than the journal keeps for 4 records
        store.upsert(_items("d"), _unit(1, seed=round_))
    assert store.changed_since(start) is None and store.changed_since(store.revision - 1) == {3}
    before = store.revision
    store.clear()
    assert store.changed_since(before) is None  # every record changed
