"""What callers pass as vectors and ids, checked once for every FaissIndex method, and the stored id set.

The checks turn any array-like into the exact arrays faiss takes (C-contiguous float32 (n, dim) vectors, int64
ids ≥ 0) or raise a TypeError / ValueError that says what to change.

Stored ids are kept in numpy arrays, not Python objects (`SortedRuns`: a few sorted int64 runs, 8 bytes an id plus
8 per value kept with it), so 100M ids take 800 MB where a Python set of ints took about 6 GB, and a loaded index
can keep them memory-mapped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from fair_retrieval.validate import is_int

INT64_MAX = int(np.iinfo(np.int64).max)
RUN_GROWTH = 2
"""A run is merged into the one before it once that one holds at most `RUN_GROWTH` times as many ids."""


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of a 1-D array, ascending (as `np.unique(values)`).

    A sort and a comparison of neighbours: `np.unique` without return values takes a hash-table path in NumPy 2.3+
    that measured 100 to 300 times slower than this on 1M int64 ids (3.0 s against 0.01 s), which made loading and
    removing millions of window ids take seconds.
    """
    ordered = np.sort(values)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if ordered.size else ordered


class SortedRuns:
    """Distinct int64 keys, each with `width` int64 values, in sorted runs whose sizes shrink geometrically.

    The logarithmic method (Bentley and Saxe): an insert of m keys adds one sorted run of m, then merges the last
    two runs while the earlier is at most `RUN_GROWTH` times the later, so there are O(log n) runs, a key is
    merged O(log n) times (amortised O(log n) per key inserted, however small the batches), and a lookup of m keys
    costs O(m log² n) (`np.searchsorted` in every run), never O(n). Removing keys rewrites the runs that hold them
    (O(n), as faiss' own removal). A run may be a read-only memory map (a loaded index): it is only read until a
    merge or a removal replaces it with a new array.

    Args:
        keys: sorted, distinct int64 keys (an initial run), or None.
        values: int64 (width, len(keys)), the values of each key by column, or None for none.
        width: how many values each key has.
    """

    def __init__(self, keys: np.ndarray | None = None, values: np.ndarray | None = None, width: int = 0) -> None:
        self._width = width
        self._runs: list[tuple[np.ndarray, np.ndarray]] = []  # (keys, values (width, n)), largest first
        self._count = 0
        if keys is not None and keys.size:
            self._runs.append((keys, values if values is not None else np.zeros((width, keys.size), np.int64)))
            self._count = int(keys.size)

    def __len__(self) -> int:
        return self._count

    @property
    def largest(self) -> int:
        """The largest key (-1 when empty)."""
        return max((int(keys[-1]) for keys, _ in self._runs), default=-1)

    def find(self, keys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(found, values): which of `keys` (int64) are stored, and their values, int64 (width, len(keys)) (0 for
        keys not stored)."""
        found = np.zeros(keys.size, dtype=bool)
        values = np.zeros((self._width, keys.size), dtype=np.int64)
        for run, run_values in self._runs:
            at = np.minimum(np.searchsorted(run, keys), run.size - 1)
            hit = run[at] == keys
            found |= hit
            values[:, hit] = run_values[:, at[hit]]
        return found, values

    def insert(self, keys: np.ndarray, values: np.ndarray | None = None) -> None:
        """Store `keys` (int64, distinct, none stored: the caller checked) with `values` (width, len(keys))."""
        if not keys.size:
            return
        order = np.argsort(keys, kind="stable")
        given = values if values is not None else np.zeros((self._width, keys.size), np.int64)
        self._runs.append((keys[order], given[:, order]))
        self._count += int(keys.size)
        while len(self._runs) > 1 and self._runs[-2][0].size <= RUN_GROWTH * self._runs[-1][0].size:
            later = self._runs.pop()
            self._runs[-1] = _merged(self._runs[-1], later)

    def remove(self, keys: np.ndarray) -> None:
        """Forget `keys` (int64; keys not stored are ignored)."""
        kept = []
        for run, run_values in self._runs:
            at = np.minimum(np.searchsorted(run, keys), run.size - 1)
            drop = distinct(at[run[at] == keys])
            if drop.size:
                run, run_values = np.delete(run, drop), np.delete(run_values, drop, axis=1)
                self._count -= int(drop.size)
            if run.size:
                kept.append((run, run_values))
        self._runs = kept

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys, values): every key, ascending, with its values (width, n); the runs become this one run, so
        later lookups search it alone."""
        while len(self._runs) > 1:
            later = self._runs.pop()
            self._runs[-1] = _merged(self._runs[-1], later)
        if not self._runs:
            return np.zeros(0, dtype=np.int64), np.zeros((self._width, 0), dtype=np.int64)
        return self._runs[0]


Run = tuple[np.ndarray, np.ndarray]
"""Sorted keys and their values, (width, n)."""


def _merged(first: Run, second: Run) -> Run:
    """Two runs as one sorted run (a stable sort of two sorted runs is one merge pass: timsort)."""
    keys = np.concatenate([first[0], second[0]])
    order = np.argsort(keys, kind="stable")
    return keys[order], np.concatenate([first[1], second[1]], axis=1)[:, order]


class IdSet:
    """The stored ids, with membership checks that cost O(batch) lookups (`SortedRuns`), not O(stored).

    `lookups` counts the ids looked up (so tests can check the cost by counting); `ids()` merges the runs into one
    sorted array, kept until the next change.
    """

    def __init__(self, ids: np.ndarray | Iterable[int] = ()) -> None:
        given = np.asarray(ids if isinstance(ids, np.ndarray) else list(ids), dtype=np.int64)
        ascending = given.size < 2 or bool((given[1:] > given[:-1]).all())  # a loaded index's ids already are
        self._runs = SortedRuns(given if ascending else distinct(given))
        self._sorted: np.ndarray | None = None
        self.lookups = 0

    def __len__(self) -> int:
        return len(self._runs)

    def __contains__(self, id_: int) -> bool:
        self.lookups += 1
        if not 0 <= id_ <= INT64_MAX:
            return False
        return bool(self._runs.find(np.asarray([id_], dtype=np.int64))[0][0])

    def present(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of `ids` are stored."""
        self.lookups += int(ids.size)
        return self._runs.find(ids.astype(np.int64, copy=False))[0]

    def add(self, ids: np.ndarray) -> None:
        """Store `ids` (already checked to be new)."""
        self._runs.insert(ids.astype(np.int64, copy=False))
        self._sorted = None

    def discard(self, ids: np.ndarray) -> None:
        """Forget `ids` (already checked to be stored)."""
        self._runs.remove(ids.astype(np.int64, copy=False))
        self._sorted = None

    def new_ids(self, ids: Any, count: int) -> np.ndarray:
        """`ids` checked to be `count` unique ids none of which is stored, or (ids=None) the next `count` ids after
        the largest stored one; O(count).

        Raises:
            TypeError: ids that are not integers (`as_ids`).
            ValueError: another number of ids than vectors, an id repeated within the call, or one already stored.
        """
        if ids is None:
            start = self.largest + 1
            return np.arange(start, start + count, dtype=np.int64)
        new_ids = as_ids(ids, "ids")
        if new_ids.size != count:
            raise ValueError(f"Got {count} vectors but {new_ids.size} ids; pass one id per vector.")
        unique, counts = np.unique(new_ids, return_counts=True)
        if unique.size != new_ids.size:
            raise ValueError(f"ids repeat within this call: {some(unique[counts > 1])}; every id must be unique.")
        clash = new_ids[self.present(new_ids)]
        if clash.size:
            raise ValueError(
                f"ids already in the index: {some(clash)}. Remove them first to replace their vectors, "
                "or pass ids=None for new ones."
            )
        return new_ids

    def require_known(self, unique_ids: np.ndarray) -> None:
        """Raise a ValueError naming the ids of `unique_ids` that are not stored."""
        unknown = unique_ids[~self.present(unique_ids)]
        if unknown.size:
            raise ValueError(f"{unknown.size} id(s) are not in the index: {some(unknown)}.")

    @property
    def largest(self) -> int:
        """The largest stored id (-1 when empty)."""
        return self._runs.largest

    def ids(self) -> np.ndarray:
        """All stored ids, int64, ascending (read-only)."""
        if self._sorted is None:
            self._sorted = self._runs.merged()[0]
            self._sorted.flags.writeable = False
        return self._sorted


def as_vectors(data: Any, name: str, dim: int) -> np.ndarray:
    """`data` as a C-contiguous float32 (n, dim) array with finite values, or a clear error."""
    try:
        array = np.asarray(data)
    except (TypeError, ValueError) as error:
        raise TypeError(f"{name} must be a numeric array of shape (n, {dim}): {error}") from error
    if array.ndim == 1 and array.size == 0:
        return np.zeros((0, dim), dtype=np.float32)
    numeric = np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    if array.dtype == bool or not numeric:
        raise TypeError(f"{name} must hold real numbers (float32 preferred), got dtype {array.dtype}.")
    if array.ndim != 2:
        hint = f"; for one vector use {name}[None, :]" if array.ndim == 1 else ""
        raise ValueError(f"{name} must be 2-D (n, {dim}), got shape {array.shape}{hint}.")
    if array.shape[1] != dim:
        raise ValueError(f"{name} have dimension {array.shape[1]}, but this index holds {dim}-d vectors.")
    with np.errstate(over="ignore"):  # float64 beyond float32's range becomes inf, reported below
        matrix = np.ascontiguousarray(array, dtype=np.float32)
    if not np.isfinite(matrix).all():
        bad = np.flatnonzero(~np.isfinite(matrix).all(axis=1))
        raise ValueError(
            f"{name} contain NaN or infinite values (rows {bad[:5].tolist()}"
            + (f" and {bad.size - 5} more" if bad.size > 5 else "")
            + "); clean them before indexing."
        )
    return matrix


def as_ids(data: Any, name: str) -> np.ndarray:
    """`data` as a 1-D int64 array of non-negative ids, or a clear error."""
    if is_int(data, numpy=True):
        raise TypeError(f"{name} must be a list or array of ints; wrap a single id in a list: [{data}].")
    array = np.asarray(list(data) if isinstance(data, Iterable) and not isinstance(data, np.ndarray) else data)
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype == bool or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must be integers (int64), got dtype {array.dtype}.")
    if array.ndim != 1:
        raise ValueError(f"{name} must be 1-D, got shape {array.shape}.")
    if np.issubdtype(array.dtype, np.unsignedinteger) and (array > np.iinfo(np.int64).max).any():
        raise ValueError(f"{name} must fit in int64.")
    if (array < 0).any():
        negative = array[array < 0][:5].tolist()
        raise ValueError(f"{name} must be ≥ 0 (faiss uses -1 for 'no result'), got {negative}.")
    return array.astype(np.int64)


def some(items: Sequence[Any] | np.ndarray, limit: int = 5, show: Callable[[Any], str] = str) -> str:
    """The first `limit` items for an error message, e.g. "3, 7, 9 … (12 more)"; `show` writes one (repr for
    string ids)."""
    shown = ", ".join(show(item) for item in items[:limit])
    return shown + (f" … ({len(items) - limit} more)" if len(items) > limit else "")
