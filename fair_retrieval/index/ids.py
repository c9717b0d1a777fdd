"""What callers pass as vectors and ids, checked once for every FaissIndex method, and the stored id set.

The checks turn any array-like into the exact arrays faiss takes (C-contiguous float32 (n, dim) vectors, int64
ids ≥ 0) or raise a TypeError / ValueError that says what to change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from fair_retrieval.validate import is_int


class IdSet:
    """The stored ids, with membership checks that cost O(batch) (a hash set), not O(stored).

    `lookups` counts the ids looked up (so tests can check the cost by counting); `ids()` is sorted on demand and
    cached until the next change.
    """

    def __init__(self, ids: Iterable[int] = ()) -> None:
        self._set: set[int] = set(int(i) for i in ids)
        self._largest = max(self._set, default=-1)
        self._sorted: np.ndarray | None = None
        self.lookups = 0

    def __len__(self) -> int:
        return len(self._set)

    def __contains__(self, id_: int) -> bool:
        self.lookups += 1
        return id_ in self._set

    def present(self, ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of `ids` are stored."""
        self.lookups += int(ids.size)
        members = self._set
        return np.fromiter((int(i) in members for i in ids.tolist()), dtype=bool, count=ids.size)

    def add(self, ids: np.ndarray) -> None:
        """Store `ids` (already checked to be new)."""
        values = ids.tolist()
        self._set.update(values)
        if values:
            self._largest = max(self._largest, max(values))
        self._sorted = None

    def discard(self, ids: np.ndarray) -> None:
        """Forget `ids` (already checked to be stored)."""
        values = ids.tolist()
        self._set.difference_update(values)
        if self._largest in values:
            self._largest = max(self._set, default=-1)
        self._sorted = None

    def new_ids(self, ids: Any, count: int) -> np.ndarray:
        """`ids` checked to be `count` unique ids none of which is stored, or (ids=None) the next `count` ids after
        the largest stored one; O(count).

        Raises:
            TypeError: ids that are not integers (`as_ids`).
            ValueError: another number of ids than vectors, an id repeated within the call, or one already stored.
        """
        if ids is None:
            start = self._largest + 1
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
        return self._largest

    def ids(self) -> np.ndarray:
        """All stored ids, int64, ascending."""
        if self._sorted is None:
            self._sorted = np.sort(np.fromiter(self._set, dtype=np.int64, count=len(self._set)))
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
