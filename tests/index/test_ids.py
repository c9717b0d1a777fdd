"""The stored-id structures: `SortedRuns` agrees with a Python set and dict under random inserts and removals in
small batches (its runs staying logarithmic in number), and `IdSet` answers membership, the largest id and the
sorted ids as the set would."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fair_retrieval.index.ids import IdSet, SortedRuns, distinct


@pytest.mark.parametrize("seed", range(3))
def test_sorted_runs_agree_with_a_dict_under_random_inserts_and_removals(seed: int) -> None:
    rng = np.random.default_rng(seed)
    runs, model = SortedRuns(width=2), dict[int, tuple[int, int]]()
    for _ in range(300):
        if model and rng.random() < 0.2:
            gone = rng.choice(list(model), size=min(len(model), int(rng.integers(1, 20))), replace=False)
            runs.remove(np.concatenate([gone, [10**9]]).astype(np.int64))  # one key never stored: ignored
            for key in gone.tolist():
                del model[key]
        else:
            fresh = np.setdiff1d(rng.integers(0, 5000, size=int(rng.integers(1, 40))), list(model))
            fresh = rng.permutation(fresh).astype(np.int64)
            values = np.stack([fresh * 2, fresh + 7])
            runs.insert(fresh, values)
            model.update({key: (key * 2, key + 7) for key in fresh.tolist()})
        assert len(runs) == len(model) and runs.largest == max(model, default=-1)
        assert len(runs._runs) <= 2 * math.log2(len(model) + 2) + 2  # O(log n) runs, however small the batches
        asked = rng.integers(-3, 5003, size=50).astype(np.int64)
        found, values = runs.find(asked)
        assert found.tolist() == [key in model for key in asked.tolist()]
        assert [tuple(pair) for pair in values[:, found].T.tolist()] == [model[k] for k in asked[found].tolist()]
    keys, values = runs.merged()
    assert keys.tolist() == sorted(model) and [tuple(pair) for pair in values.T.tolist()] == [model[k] for k in keys]
    assert len(runs._runs) == 1


def test_an_empty_structure_answers_no_and_minus_one() -> None:
    runs = SortedRuns(width=1)
    found, values = runs.find(np.asarray([0, 5], dtype=np.int64))
    assert not found.any() and values.shape == (1, 2) and runs.largest == -1
    keys, values = runs.merged()
    assert keys.size == 0 and values.shape == (1, 0)
    runs.remove(np.asarray([3], dtype=np.int64))
    assert len(runs) == 0


def test_id_set_membership_largest_and_sorted_ids() -> None:
    ids = IdSet(np.asarray([9, 3, 7], dtype=np.int64))
    assert 3 in ids and 4 not in ids and -1 not in ids and 2**64 not in ids and ids.largest == 9
    ids.add(np.asarray([12, 1], dtype=np.int64))
    assert ids.ids().tolist() == [1, 3, 7, 9, 12] and not ids.ids().flags.writeable
    ids.discard(np.asarray([12, 3], dtype=np.int64))
    assert ids.ids().tolist() == [1, 7, 9] and ids.largest == 9 and len(ids) == 3
    assert ids.present(np.asarray([1, 2, 9], dtype=np.int64)).tolist() == [True, False, True]
    assert ids.new_ids(None, 2).tolist() == [10, 11]
    with pytest.raises(ValueError, match="ids already in the index: 7"):
        ids.new_ids([7, 8], 2)


@pytest.mark.parametrize("size", [0, 1, 7, 1000])
def test_distinct_is_np_unique(size: int) -> None:
    values = np.random.default_rng(size).integers(-5, 50, size=size).astype(np.int64)
    assert distinct(values).tolist() == np.unique(values).tolist()
