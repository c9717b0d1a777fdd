"""Full-precision vectors kept on disk: float32 rows in append-only files, memory-mapped, one row per id.

A compressed index (`fair_retrieval.index.exact_rerank.RerankedIndex`) keeps only compact codes in memory and reads
the exact vectors of its few candidates from here. The rows live in files of two kinds:

- the *segments*: immutable files of a saved folder (raw float32 rows in ascending id order, then their int64 ids),
  mapped read-only (`np.memmap`) and never written: each belongs to the commits that list it. A save writes the
  rows added since the last save as a new segment and keeps the others (`write_rows` from `segment_starts`), so
  it writes what changed, not the whole store;
- the *tail*: a working file in a temporary folder (`spill_dir`, else the system's), where adds append; it grows by
  doubling (a sparse file on the file systems that have them) and is deleted when the rows are written elsewhere or
  the object is collected.

Ids only grow (each add's ids exceed every live id, as a `MultiVectorIndex`'s window ids do; the dead rows of
removed largest ids are dropped when their ids are given again), so the id of each row is a sorted int64 array (8
bytes a row, looked up by binary search) with a live flag (1 byte a row): no per-id Python objects. A removed id's
row stays until the rows are compacted (`compact`, which writes the live rows into a new working file, or a save
that rewrites the segment holding it): the files are append-only in between.
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from fair_retrieval.index.ids import some
from fair_retrieval.validate import dimension

logger = logging.getLogger(__name__)

ROW_DTYPE = np.dtype("<f4")
"""The segments' rows: little-endian float32, whatever the machine."""
ID_DTYPE = np.dtype("<i8")
"""The segments' ids, after their rows: little-endian int64."""
BLOCK_ROWS = 1 << 14
"""Rows read or written at a time when rows are copied (16,384 rows: 24 MiB at 384-d)."""
FIRST_CAPACITY = 1 << 10
"""Rows the working file is first sized for (it doubles when full)."""


class Writable(Protocol):
    """Where `FloatRows.write_rows` writes: a binary file, or anything with its `write`."""

    def write(self, data: bytes, /) -> int: ...


class FloatRows:
    """float32 rows by int64 id, on disk (see the module docstring).

    Args:
        dim: vector size.
        spill_dir: the folder of the working file (None: the system's temporary folder); it should be on a local
            disk with room for every vector added before the next save (4 × dim bytes each).

    Raises:
        ValueError: a dim that is not a positive int.
    """

    def __init__(self, dim: int, spill_dir: str | os.PathLike[str] | None = None) -> None:
        dimension(dim)
        self._dim = dim
        self._spill_dir = None if spill_dir is None else Path(spill_dir)
        self._ids = np.zeros(FIRST_CAPACITY, dtype=np.int64)  # row → id, ascending (first `_rows` entries)
        self._live = np.zeros(FIRST_CAPACITY, dtype=bool)  # row → not removed
        self._rows = 0
        self._dead = 0
        self._segments: list[tuple[str, np.ndarray]] = []  # (file name, read-only rows) of saved segments, in order
        self._starts = np.zeros(0, dtype=np.int64)  # the first row of each segment
        self._base_rows = 0  # rows held by the segments (the tail's rows come after them)
        self._tail: np.memmap | None = None  # the working file's rows (capacity rows; the first few used)
        self._tail_path: Path | None = None
        self._cleanup: weakref.finalize | None = None

    # ------------------------------------------------------------------------------------------------ properties

    @property
    def dim(self) -> int:
        """Vector size."""
        return self._dim

    @property
    def row_bytes(self) -> int:
        """Bytes of one row on disk (4 × dim)."""
        return self._dim * ROW_DTYPE.itemsize

    @property
    def dead(self) -> int:
        """Rows of removed ids still on disk (until the next compaction)."""
        return self._dead

    @property
    def rows(self) -> int:
        """Rows on disk, live and dead."""
        return self._rows

    @property
    def memory_bytes(self) -> int:
        """Bytes this object keeps in memory: the row ids and live flags (the vectors stay on disk)."""
        return int(self._ids.nbytes + self._live.nbytes)

    def __len__(self) -> int:
        return self._rows - self._dead

    @property
    def segments(self) -> list[tuple[str, int]]:
        """(file name, rows) of the saved segments the first rows live in, in row order."""
        return [(name, int(rows.shape[0])) for name, rows in self._segments]

    @property
    def segment_starts(self) -> list[int]:
        """The first row of each segment, then the first row of the tail (`rows` past the segments)."""
        return [*self._starts.tolist(), self._base_rows]

    def live_from(self, row: int) -> int:
        """Live rows at or after row `row`."""
        return int(np.count_nonzero(self._live[row : self._rows]))

    @property
    def live_ids(self) -> np.ndarray:
        """The ids of the live rows, ascending (a copy)."""
        return self._ids[: self._rows][self._live[: self._rows]].copy()

    # ------------------------------------------------------------------------------------------------ changing

    def append(self, ids: np.ndarray, vectors: np.ndarray) -> None:
        """Append `vectors` (n, dim) under `ids`, which must ascend and exceed every live id (the largest id
        stored, as a save and a load keep them). Dead rows of ids from `ids[0]` on are dropped first: an id whose
        row was removed may be given again.

        Raises:
            ValueError: ids that do not ascend past the largest live id, or a count or shape that does not match.
        """
        ids = np.asarray(ids, dtype=np.int64)
        count = int(ids.size)
        if vectors.shape != (count, self._dim):
            raise ValueError(f"Got {vectors.shape[0]} vectors of {vectors.shape[1:]} for {count} ids of {self._dim}-d.")
        if count == 0:
            return
        stored = self._ids[: self._rows]
        cut = int(np.searchsorted(stored, ids[0]))  # the rows of ids from ids[0] on
        later_live = np.flatnonzero(self._live[cut : self._rows])
        if later_live.size or (count > 1 and not bool(np.all(np.diff(ids) > 0))):
            live = np.flatnonzero(self._live[: self._rows])
            last = int(stored[live[-1]]) if live.size else -1
            raise ValueError(
                f"The ids of an append must ascend past the largest id stored ({last}); got {some(ids.tolist())}. "
                "Give new vectors new, larger ids (a MultiVectorIndex's window counter does)."
            )
        if cut < self._rows:
            self._drop_rows_from(cut)
        tail = self._tail_for(self._rows - self._base_rows + count)
        start = self._rows - self._base_rows
        tail[start : start + count] = vectors
        self._grow_table(self._rows + count)
        self._ids[self._rows : self._rows + count] = ids
        self._live[self._rows : self._rows + count] = True
        self._rows += count

    def discard(self, ids: np.ndarray) -> None:
        """Mark the rows of `ids` (live ones) dead; their bytes stay on disk until the next compaction.

        Raises:
            ValueError: ids without a live row.
        """
        rows = self.positions(ids)
        self._live[rows] = False
        self._dead += int(np.unique(rows).size)

    def compact(self) -> None:
        """Write the live rows into a new working file and drop the old files (their dead rows go)."""
        live_rows = np.flatnonzero(self._live[: self._rows])
        ids = self._ids[live_rows]
        tail, path = _working_file(self._spill_dir, max(FIRST_CAPACITY, live_rows.size), self._dim)
        try:
            for start in range(0, live_rows.size, BLOCK_ROWS):
                block = live_rows[start : start + BLOCK_ROWS]
                tail[start : start + block.size] = self._read(block)
        except BaseException:
            _unlink(path)
            raise
        if self._cleanup is not None:
            self._cleanup()
        self._segments, self._starts, self._base_rows = [], np.zeros(0, dtype=np.int64), 0
        self._adopt_tail(tail, path)
        self._set_rows(ids)
        logger.debug("Compacted the float rows: %d live rows kept.", ids.size)

    # ------------------------------------------------------------------------------------------------ reading

    def positions(self, ids: Any) -> np.ndarray:
        """The rows of `ids` (live), int64, in the order given.

        Raises:
            ValueError: ids without a live row (the message lists some).
        """
        wanted = np.asarray(ids, dtype=np.int64).reshape(-1)
        stored = self._ids[: self._rows]
        rows = np.searchsorted(stored, wanted)
        clipped = np.minimum(rows, max(self._rows - 1, 0))
        found = (rows < self._rows) & (stored[clipped] == wanted) if self._rows else np.zeros(wanted.size, bool)
        found &= self._live[clipped]
        if not bool(np.all(found)):
            raise ValueError(f"{int((~found).sum())} id(s) have no stored vector: {some(wanted[~found].tolist())}.")
        return clipped.astype(np.int64)

    def get(self, ids: Any) -> np.ndarray:
        """The float32 vectors of `ids`, (n, dim), in the order given, read from disk.

        Raises:
            ValueError: ids without a live row.
        """
        return self._read(self.positions(ids))

    def sample(self, count: int, seed: int = 0) -> np.ndarray:
        """`count` live rows drawn at random without replacement (all of them when there are fewer), float32."""
        live_rows = np.flatnonzero(self._live[: self._rows])
        if live_rows.size > count:
            live_rows = np.sort(np.random.default_rng(seed).choice(live_rows, size=count, replace=False))
        return self._read(live_rows)

    def blocks(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """The live rows as (ids, vectors) blocks of at most `BLOCK_ROWS`, in id order."""
        live_rows = np.flatnonzero(self._live[: self._rows])
        for start in range(0, live_rows.size, BLOCK_ROWS):
            block = live_rows[start : start + BLOCK_ROWS]
            yield self._ids[block], self._read(block)

    # ------------------------------------------------------------------------------------------------ files

    def write_rows(self, handle: Writable, start: int = 0) -> np.ndarray:
        """Write the live rows from row `start` on, in id order, to the open binary file `handle` as a segment:
        their raw little-endian float32 vectors, then their ids (int64, little-endian); returns the ids."""
        live_rows = np.flatnonzero(self._live[start : self._rows]) + start
        for first in range(0, live_rows.size, BLOCK_ROWS):
            block = live_rows[first : first + BLOCK_ROWS]
            handle.write(np.ascontiguousarray(self._read(block), dtype=ROW_DTYPE).tobytes())
        ids = self._ids[live_rows]
        handle.write(ids.astype(ID_DTYPE).tobytes())
        return ids

    def rebase(self, segments: list[tuple[str, np.ndarray]], ids: np.ndarray, live: np.ndarray | None = None) -> None:
        """Make `segments` ((file name, read-only memory map of its rows), in row order) the rows of `ids` (every
        row's id, ascending; `live` flags them, None: all live), dropping the working file: what a load ends with.

        Raises:
            ValueError: if the segments do not hold one row per id.
        """
        sizes = [int(rows.shape[0]) for _, rows in segments]
        if sum(sizes) != ids.size or any(rows.shape[1:] != (self._dim,) for _, rows in segments):
            raise ValueError(f"The segments hold {sum(sizes)} rows for {ids.size} ids.")
        if self._cleanup is not None:
            self._cleanup()
        self._tail, self._tail_path, self._cleanup = None, None, None
        self._segments = list(segments)
        self._starts = np.cumsum([0, *sizes[:-1]], dtype=np.int64) if sizes else np.zeros(0, dtype=np.int64)
        self._base_rows = sum(sizes)
        self._set_rows(ids)
        if live is not None:
            self._live[: ids.size] = live
            self._dead = int(ids.size - np.count_nonzero(live))

    def replace_segments(self, kept: int, added: list[tuple[str, np.ndarray | None]], ids: np.ndarray) -> None:
        """After a save that kept the first `kept` segments and wrote every live row after them (`write_rows` from
        `segment_starts[kept]`) as the segments `added` ((file name, read-only map of its rows), in order; none when
        there were no such rows) under `ids`: the rows are those segments, the working file is dropped."""
        end = self.segment_starts[kept]
        self.rebase(
            self._segments[:kept] + [(name, rows) for name, rows in added if rows is not None],
            np.concatenate([self._ids[:end], ids]),
            np.concatenate([self._live[:end], np.ones(ids.size, dtype=bool)]),
        )

    # ------------------------------------------------------------------------------------------------ internals

    def _drop_rows_from(self, cut: int) -> None:
        """Forget rows `cut` and after (all dead): their tail bytes are written over by the next appends; rows of
        the read-only base are dropped by compacting."""
        if cut < self._base_rows:
            self.compact()  # segments are never written; the live rows (all before `cut`) move to a working file
            return
        self._dead -= self._rows - cut
        self._rows = cut

    def _set_rows(self, ids: np.ndarray) -> None:
        self._ids = np.zeros(max(FIRST_CAPACITY, ids.size), dtype=np.int64)
        self._live = np.zeros(self._ids.size, dtype=bool)
        self._ids[: ids.size], self._live[: ids.size] = ids, True
        self._rows, self._dead = int(ids.size), 0

    def _grow_table(self, rows: int) -> None:
        if rows <= self._ids.size:
            return
        capacity = max(rows, 2 * self._ids.size)
        self._ids = np.concatenate([self._ids, np.zeros(capacity - self._ids.size, dtype=np.int64)])
        self._live = np.concatenate([self._live, np.zeros(capacity - self._live.size, dtype=bool)])

    def _tail_for(self, rows: int) -> np.memmap:
        """The working file's rows, grown (doubling) to hold `rows`."""
        if self._tail is None:
            return self._new_tail(max(FIRST_CAPACITY, rows))
        if rows <= self._tail.shape[0]:
            return self._tail
        capacity = max(rows, 2 * self._tail.shape[0])
        assert self._tail_path is not None
        self._tail.flush()
        with open(self._tail_path, "r+b") as handle:
            handle.truncate(capacity * self.row_bytes)
        self._tail = np.memmap(self._tail_path, dtype=ROW_DTYPE, mode="r+", shape=(capacity, self._dim))
        return self._tail

    def _new_tail(self, capacity: int) -> np.memmap:
        """A new working file of `capacity` rows (deleted when this object is collected or the rows move)."""
        tail, path = _working_file(self._spill_dir, capacity, self._dim)
        return self._adopt_tail(tail, path)

    def _adopt_tail(self, tail: np.memmap, path: Path) -> np.memmap:
        self._tail, self._tail_path = tail, path
        self._cleanup = weakref.finalize(self, _unlink, path)
        return tail

    def _read(self, rows: np.ndarray) -> np.ndarray:
        """The float32 vectors of `rows` (positions), read in ascending order for locality, returned as asked."""
        out = np.empty((rows.size, self._dim), dtype=np.float32)
        if rows.size == 0:
            return out
        order = np.argsort(rows, kind="stable")
        ordered = rows[order]
        in_base = ordered < self._base_rows
        if bool(in_base.any()):
            base = ordered[in_base]
            where = order[in_base]
            owners = np.searchsorted(self._starts, base, side="right") - 1  # the segment of each row
            for segment in np.unique(owners):
                mine = owners == segment
                out[where[mine]] = self._segments[segment][1][base[mine] - self._starts[segment]]
        if not bool(in_base.all()):
            assert self._tail is not None
            out[order[~in_base]] = self._tail[ordered[~in_base] - self._base_rows]
        return out


def _working_file(spill_dir: Path | None, capacity: int, dim: int) -> tuple[np.memmap, Path]:
    """A new working file of `capacity` rows in `spill_dir` (None: the system's temporary folder), mapped."""
    if spill_dir is not None:
        spill_dir.mkdir(parents=True, exist_ok=True)
    descriptor, name = tempfile.mkstemp(prefix="fair-retrieval-rows-", suffix=".f32", dir=spill_dir)
    with os.fdopen(descriptor, "r+b") as handle:
        handle.truncate(capacity * dim * ROW_DTYPE.itemsize)
    path = Path(name)
    return np.memmap(path, dtype=ROW_DTYPE, mode="r+", shape=(capacity, dim)), path


def _unlink(path: Path) -> None:
    """Delete a working file (the memory map may still be open: POSIX keeps its pages until it closes)."""
    with contextlib.suppress(FileNotFoundError):
        path.unlink()
