"""Records under string keys with their vectors in a FaissIndex: the bookkeeping of every vector store here.

A framework names what it stores by strings (LangChain's document ids, LlamaIndex's node ids); a `FaissIndex`
stores vectors under int64 ids. `IndexedRecords` keeps the two in step, so that a store adapter only translates
between the framework's objects and its records:

- the id map, key → int id. A new key takes the next int id of a counter that only grows (and is saved with the
  store), so an int id is never handed out twice while a store lives; a key stored again (an upsert) keeps its int id.
- the records by int id, in insertion order. A replaced record keeps its place or moves to the end
  (`replaced_move_to_end`), whichever the framework's store promised.
- optionally, groups: the int ids of the records that share a group key (`group_of`; LlamaIndex: the nodes of one
  source document), so that a whole group is found, and deleted, at once.
- the index itself, created by `new_index(dim)` on the first upsert, when the vector size is known (unless given):
  a `FaissIndex` (one vector per record) or, in multi-vector mode, a `MultiVectorIndex` (a record is the vectors
  of its windows, upserted as `DocumentWindows`, and a search returns distinct records with their best window).

A call checks what it is given before it changes anything, so one that fails leaves the store as it was. Every
change and every read that walks the records or the index holds the store's lock (`fair_retrieval.stores.store_lock`),
so threads sharing the records see them whole.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

import numpy as np

from fair_retrieval.embedding.windows import DocumentWindows
from fair_retrieval.index import FaissIndex, MultiVectorIndex
from fair_retrieval.stores.arguments import preview, repeated
from fair_retrieval.stores.best_window import window_hits
from fair_retrieval.stores.store_lock import locked, new_store_lock
from fair_retrieval.stores.vectors import check_dimension, require_finite

logger = logging.getLogger(__name__)

__all__ = ["IndexedRecords", "Keyed", "StoreIndex"]

StoreIndex = FaissIndex | MultiVectorIndex
"""The index of a store: one vector per record, or (multi-vector mode) the vectors of each record's windows."""


class Keyed(Protocol):
    """A record that knows the key (the framework's id) it is stored under."""

    @property
    def key(self) -> str:
        """The framework's id of the record."""
        ...


R = TypeVar("R", bound=Keyed)


class IndexedRecords(Generic[R]):
    """Records by key, their vectors in a `FaissIndex` under int64 ids handed out here.

    Args:
        new_index: makes the index for vectors of a given size, on the first upsert when none was given.
        index: an empty index to use from the start, or None.
        replaced_move_to_end: whether a replaced record moves to the end of the insertion order (True) or keeps
            its place (False).
        group_of: the group key of a record (e.g. its source document's id), or None to keep no groups.
        lock: the store's lock (`store_lock.new_store_lock`), held by every change and every read that walks the
            records or the index; None: a lock of their own.
    """

    def __init__(
        self,
        new_index: Callable[[int], StoreIndex],
        *,
        index: StoreIndex | None = None,
        replaced_move_to_end: bool,
        group_of: Callable[[R], str] | None = None,
        lock: Any = None,
    ) -> None:
        self.lock = new_store_lock() if lock is None else lock
        self._new_index = new_index
        self._index = index
        self._move_to_end = replaced_move_to_end
        self._group_of = group_of
        self._int_ids: dict[str, int] = {}
        self._records: dict[int, R] = {}
        self._groups: dict[str, set[int]] = {}
        self._next_int_id = 0
        self._revision = 0
        # the int id each revision step changed, from revision `_journal_base` on (None: every record, a clear), so
        # a reader that was at a revision learns what changed since in time proportional to the change
        self._journal: list[int | None] = []
        self._journal_base = 0

    # ------------------------------------------------------------------------------------------------ reading

    @property
    def revision(self) -> int:
        """A counter that changes with every change of the records (what a lexical index compares to know whether
        it still equals them)."""
        return self._revision

    @locked
    def changed_since(self, revision: int) -> set[int] | None:
        """The int ids of the records added, replaced or removed since `revision`, or None when that is no longer
        known (a clear since, or a revision older than the journal keeps: compare every record then)."""
        if revision < self._journal_base or revision > self._revision:
            return None
        changed = self._journal[revision - self._journal_base :]
        return None if None in changed else set(changed)  # type: ignore[arg-type]

    @property
    def index(self) -> StoreIndex | None:
        """The index holding the vectors (None until the first upsert when none was given)."""
        return self._index

    @property
    def int_ids(self) -> Mapping[str, int]:
        """The id map: key → int id in the index (read-only by contract: change it through this class)."""
        return self._int_ids

    @property
    def records(self) -> Mapping[int, R]:
        """The records by int id, in insertion order (read-only by contract)."""
        return self._records

    @property
    def next_int_id(self) -> int:
        """The int id the next new key will take."""
        return self._next_int_id

    @property
    @locked
    def keys(self) -> list[str]:
        """The keys of the stored records, in insertion order."""
        return [record.key for record in self._records.values()]

    def __len__(self) -> int:
        return len(self._records)

    def __contains__(self, key: object) -> bool:
        return key in self._int_ids

    @locked
    def group(self, group_key: str) -> set[int]:
        """The int ids of the records of one group (a copy; empty for an unknown group or without groups)."""
        return set(self._groups.get(group_key, ()))

    @locked
    def matching(self, keep: Callable[[R], bool], among: Iterable[int] | None = None) -> list[int]:
        """The int ids (of `among`, else of every record, in that order) whose record `keep` accepts."""
        pool: Iterable[int] = self._records if among is None else among
        kept = [int_id for int_id in pool if keep(self._records[int_id])]
        logger.debug("The filter keeps %d of %d records.", len(kept), len(self._records))
        return kept

    @locked
    def vectors(self, int_ids: Sequence[int]) -> np.ndarray:
        """The stored vectors of `int_ids`, float32 (len(int_ids), dim), in that order (multi-vector mode: the
        pooled vectors, recomputed from the stored windows)."""
        if self._index is None:
            return np.zeros((0, 0), dtype=np.float32)
        return self._index.get_vectors(list(int_ids))

    @locked
    def search_hits(
        self, query: np.ndarray, k: int, among: Sequence[int] | np.ndarray | None = None
    ) -> list[tuple[int, float, dict[str, int] | None]]:
        """(int id, raw score, best window) of the k best matches of one query row, best first, optionally only among
        some ids; the best window (`window_hits`) in multi-vector mode, else None.

        In multi-vector mode the k hits are k distinct records ranked by the index's aggregate of their windows'
        scores (`MultiVectorIndex.search_documents`).

        Args:
            query: a float32 (1, dim) matrix, prepared as the stored vectors were (e.g. normalised).
            k: how many matches at most; fewer when fewer records (or `among` ids) are stored.
            among: restrict the search to these stored int ids (inside faiss: `FaissIndex.search(..., ids=...)`),
                or None for every record.

        Returns:
            Up to min(k, candidates) hits; scores as the index gives them (inner product or squared L2).
        """
        count = len(self._records) if among is None else len(among)
        if self._index is None or count == 0:
            return []
        if isinstance(self._index, MultiVectorIndex):
            hits = self._index.search_documents(query, min(k, count), ids=among)
            return window_hits(hits)
        scores, found = self._index.search(query, min(k, count), ids=among)
        return [
            (int_id, float(score), None)
            for score, int_id in zip(scores[0].tolist(), found[0].tolist(), strict=True)
            if int_id >= 0
        ]

    @locked
    def index_mismatch(self) -> int | None:
        """None when the index holds exactly the records' vectors (a loaded store is whole); else how many vectors
        it holds (the folder was modified or written partially)."""
        stored = set(self._index.ids.tolist()) if self._index is not None else set()
        if stored == set(self._records) and len(self._int_ids) == len(self._records):
            return None
        return len(stored)

    # ------------------------------------------------------------------------------------------------ changing

    @locked
    def upsert(self, records: Sequence[R], vectors: np.ndarray | DocumentWindows, source: str = "Got") -> list[int]:
        """Store records with their vectors; a key already stored is replaced (vector and record), keeping its int id.

        Args:
            records: the records, keys unique within the call.
            vectors: float32 (len(records), dim), prepared for the index; in multi-vector mode the records'
                `DocumentWindows` (a replaced record's windows are all replaced).
            source: what gave the vectors, leading the message of a size other than the index's.

        Returns:
            The int ids the records are stored under, in input order.

        Raises:
            ValueError: repeated keys, a vector count other than the record count, vectors of another size than
                the index's, or NaN / infinite values. Nothing is stored then.
        """
        keys = [record.key for record in records]
        doubled = repeated(keys)
        if doubled:
            raise ValueError(f"Keys repeat within one upsert: {preview(doubled)}; store each record once.")
        matrix = vectors.pooled if isinstance(vectors, DocumentWindows) else vectors
        if matrix.ndim != 2 or matrix.shape[0] != len(records):
            raise ValueError(f"Got {len(records)} records but vectors of shape {matrix.shape}; pass one row each.")
        require_finite(matrix)
        if isinstance(vectors, DocumentWindows):
            require_finite(vectors.vectors)
        index = self._index if self._index is not None else self._new_index(int(matrix.shape[1]))
        if isinstance(index, MultiVectorIndex) != isinstance(vectors, DocumentWindows):
            raise TypeError(
                "A multi-vector store takes DocumentWindows (the windows of each record) and a pooled store one "
                f"vector per record; got {type(vectors).__name__} for a store of {type(index).__name__}."
            )
        check_dimension(int(matrix.shape[1]), index.dim, source)
        replaced = [self._int_ids[key] for key in keys if key in self._int_ids]
        next_int_id = self._next_int_id
        int_ids = []
        for key in keys:
            int_id = self._int_ids.get(key)
            if int_id is None:
                int_id, next_int_id = next_int_id, next_int_id + 1
            int_ids.append(int_id)
        if replaced:
            index.remove(replaced)  # a replaced record's new vector goes in under its old int id
        index.add(vectors, ids=np.asarray(int_ids, dtype=np.int64))  # type: ignore[arg-type]  # matched above
        self._index, self._next_int_id = index, next_int_id
        for int_id, record in zip(int_ids, records, strict=True):
            self._remember(int_id, record)
        logger.debug("Stored %d records (%d replaced); %d in the store.", len(records), len(replaced), len(self))
        return int_ids

    @locked
    def remove(self, int_ids: Sequence[int]) -> None:
        """Remove stored records (vectors and records) by int id."""
        if not int_ids:
            return
        assert self._index is not None  # the store holds records
        self._index.remove(list(int_ids))
        for int_id in int_ids:
            self._forget(int_id)
        logger.debug("Removed %d records; %d in the store.", len(int_ids), len(self))

    @locked
    def clear(self) -> None:
        """Remove every record; the index keeps its dimension, training and device, and int ids start again at 0."""
        if self._index is not None and len(self._index):
            self._index.remove(self._index.ids)
        self._int_ids, self._records, self._groups, self._next_int_id = {}, {}, {}, 0
        self._step(None)

    @locked
    def restore(self, index: StoreIndex | None, entries: Iterable[tuple[int, R]], next_int_id: int) -> None:
        """Fill an empty instance with a saved store: its index, its (int id, record) entries and its counter.

        Check `index_mismatch()` afterwards: the entries are taken as they are.
        """
        if self._records:
            raise ValueError("restore() fills an empty store; this one holds records.")
        self._index = index
        for int_id, record in entries:
            self._remember(int_id, record)
        self._next_int_id = next_int_id

    # ------------------------------------------------------------------------------------------------ internals

    def _step(self, int_id: int | None) -> None:
        """One change of the records: the revision moves on and the journal says what changed. It keeps the last
        steps up to an eighth of the records (a few bytes a record at most); a reader further behind compares every
        record instead, which costs it about what that many changes would."""
        self._revision += 1
        self._journal.append(int_id)
        if len(self._journal) > len(self._records) // 8 + 4096:
            drop = len(self._journal) // 2
            del self._journal[:drop]
            self._journal_base += drop

    def _remember(self, int_id: int, record: R) -> None:
        self._step(int_id)
        previous = self._records.get(int_id)
        if previous is not None:
            self._leave_group(previous, int_id)
            if self._move_to_end:
                del self._records[int_id]
        self._int_ids[record.key] = int_id
        self._records[int_id] = record
        if self._group_of is not None:
            self._groups.setdefault(self._group_of(record), set()).add(int_id)

    def _forget(self, int_id: int) -> None:
        self._step(int_id)
        record = self._records.pop(int_id)
        del self._int_ids[record.key]
        self._leave_group(record, int_id)

    def _leave_group(self, record: R, int_id: int) -> None:
        if self._group_of is None:
            return
        group_key = self._group_of(record)
        members = self._groups[group_key]
        members.discard(int_id)
        if not members:
            del self._groups[group_key]
