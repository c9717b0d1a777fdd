"""The window table of a `MultiVectorIndex`: which document owns each window, where the window sits in it and what
it weighs, kept in numpy arrays, and its files (`windows.json` with two `.npy` arrays beside the windows index).

Window ids are int64 handed out by a counter that only grows (a removed window keeps its slot, owner −1), and the
windows of one document are one run of consecutive ids (a document's windows are added together). So the table is
two arrays, with no Python object per window or per document:

- per window id, int64 (4, next_window): its owner (the document id, −1 once removed), its character span
  (start, end) and its weight (content tokens);
- per document, sorted by document id: its first window id and its number of windows, kept in sorted runs
  (`fair_retrieval.index.ids.SortedRuns`) so that many small adds stay cheap.

The order documents were first added in is the order of their first windows.

Files (format version 2): `windows.json`, a small header (the index settings, the counter `next_window`, how many
windows and documents are listed), `windows.npy` (the per-window array, every slot) and `document_windows.npy`
(int64 (3, documents): document ids ascending, first windows, counts). `MultiVectorIndex.save` publishes the three
with the windows index in one commit; loading verifies their sizes and CRC-32s (`jsonio.Snapshot`), checks every
shape against the header before mapping anything, memory-maps the arrays (copy-on-write: a removal after loading
writes private pages), and checks their content against the windows index in bounded chunks. Format version 1
(`windows.json` listing every live window in JSON, written by earlier releases) is still read (`from_json`); the
next save writes version 2.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import numpy as np

from fair_retrieval.index.aggregates import AGGREGATES
from fair_retrieval.index.ids import INT64_MAX, SortedRuns
from fair_retrieval.index.persistence import DOCUMENT_WINDOWS_FILE, WINDOW_ROWS_FILE, WINDOWS_FILE
from fair_retrieval.jsonio import ChangedWhileReadingError, DamagedFileError, Snapshot, json_bytes
from fair_retrieval.validate import is_int, is_positive_int

FORMAT = "fair-retrieval-multivector"
VERSION = 2
REMEDY = "Rebuild the index and save it again (or restore the folder from a backup)."
MAX_REMOVED_PER_WINDOW = 64
"""How many slots of removed windows a saved table may keep per window it lists, beyond `REMOVED_SLACK` (the
counter `next_window` sizes the table's arrays, 32 bytes a slot: about one 512-d vector per window listed)."""
REMOVED_SLACK = 1 << 20
"""How many slots of removed windows a saved table may keep whatever it lists (32 MiB of arrays)."""
OWNER, START, END, WEIGHT = range(4)
"""The rows of the per-window array."""
CHECK_CHUNK = 1 << 20
"""How many windows (or documents) a load checks at a time: its temporary arrays stay a few tens of MiB."""
_INT64 = np.dtype("<i8")


class WindowTable:
    """Per window id: its document (owner, −1 once removed), character span and weight; per document id: its
    first window id and window count (see the module docstring).

    Args:
        columns: int64 (4, capacity): owner, start, end, weight by window id; the first `size` are in use.
        size: the next window id.
        documents: document id → (first window id, window count).
    """

    def __init__(self, columns: np.ndarray | None = None, size: int = 0, documents: SortedRuns | None = None) -> None:
        self._columns = columns if columns is not None else np.zeros((4, 0), dtype=np.int64)
        self._size = size
        self._documents = documents if documents is not None else SortedRuns(width=2)
        self._live = 0 if documents is None else int(documents.merged()[1][1].sum())
        self._order: np.ndarray | None = None  # document ids in the order first added, until the next change

    # ------------------------------------------------------------------------------------------------ reading

    def __len__(self) -> int:
        return len(self._documents)

    @property
    def size(self) -> int:
        """The next window id (every slot, removed ones included)."""
        return self._size

    @property
    def live(self) -> int:
        """How many windows the stored documents have."""
        return self._live

    @property
    def owner(self) -> np.ndarray:
        """The document of each window id (−1 once removed), a read-only view."""
        view = self._columns[OWNER, : self._size]
        view.flags.writeable = False
        return view

    @property
    def largest_document(self) -> int:
        """The largest stored document id (−1 when none)."""
        return self._documents.largest

    def contains(self, doc_ids: np.ndarray) -> np.ndarray:
        """Boolean mask: which of `doc_ids` (int64) are stored."""
        return self._documents.find(doc_ids)[0]

    def ranges(self, doc_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(first window ids, window counts) of stored `doc_ids` (int64; the caller checked they are stored)."""
        _, values = self._documents.find(doc_ids)
        return values[0], values[1]

    def window_ids(self, doc_ids: np.ndarray) -> np.ndarray:
        """The window ids of stored `doc_ids`, document after document, each in document order."""
        first, count = self.ranges(doc_ids)
        offsets = np.cumsum(count) - count  # where each document's windows start in the result
        return np.repeat(first - offsets, count) + np.arange(int(count.sum()), dtype=np.int64)

    def column(self, row: int, window_ids: np.ndarray) -> np.ndarray:
        """One row of the table (`OWNER`, `START`, `END` or `WEIGHT`) at `window_ids`."""
        return self._columns[row, window_ids]

    def order(self) -> np.ndarray:
        """The stored document ids in the order they were first added (the order of their first windows)."""
        if self._order is None:
            keys, values = self._documents.merged()
            self._order = keys[np.argsort(values[0], kind="stable")]
            self._order.flags.writeable = False
        return self._order

    # ------------------------------------------------------------------------------------------------ changing

    def append(self, doc_ids: np.ndarray, owners: np.ndarray, spans: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Add new documents' windows under the next window ids; returns those ids.

        Args:
            doc_ids: int64 (n,), new document ids.
            owners: int (W,), sorted positions into `doc_ids`, every position at least once (`DocumentWindows`).
            spans: int (W, 2), each window's character span.
            weights: int (W,), each window's weight.
        """
        count = int(owners.size)
        first = self._size
        self._reserve(count)
        block = self._columns[:, first : first + count]
        block[OWNER] = doc_ids[owners]
        block[START], block[END], block[WEIGHT] = spans[:, 0], spans[:, 1], weights
        counts = np.bincount(owners, minlength=doc_ids.size).astype(np.int64)
        self._documents.insert(doc_ids, np.stack([first + np.cumsum(counts) - counts, counts]))
        self._size += count
        self._live += count
        self._order = None
        return np.arange(first, first + count, dtype=np.int64)

    def drop(self, doc_ids: np.ndarray) -> None:
        """Remove stored `doc_ids`: their windows' owner becomes −1 (their slots stay), their entries go."""
        window_ids = self.window_ids(doc_ids)
        self._columns[OWNER, window_ids] = -1
        self._documents.remove(doc_ids)
        self._live -= int(window_ids.size)
        self._order = None

    def _reserve(self, count: int) -> None:
        """Room for `count` more windows: the arrays grow to at least twice their capacity (amortised O(1) a
        window), and a memory-mapped table is copied into memory then."""
        capacity = self._columns.shape[1]
        if self._size + count <= capacity:
            return
        grown = np.zeros((4, max(self._size + count, 2 * capacity)), dtype=np.int64)
        grown[:, : self._size] = self._columns[:, : self._size]
        self._columns = grown

    # ------------------------------------------------------------------------------------------------ saving

    def files(self, aggregate: str, fetch_factor: int) -> tuple[bytes, dict[str, Any]]:
        """What `MultiVectorIndex.save` publishes: the header's bytes and, by file name, a function that writes
        each array to the path it is given (staged under the folder's lock, row by row: nothing is copied)."""
        header = {
            "format": FORMAT,
            "version": VERSION,
            "aggregate": aggregate,
            "fetch_factor": fetch_factor,
            "next_window": self._size,
            "windows": self._live,
            "documents": len(self._documents),
        }
        keys, values = self._documents.merged()
        rows = [self._columns[row, : self._size] for row in range(4)]
        return json_bytes(header, indent=None), {
            WINDOW_ROWS_FILE: lambda path: write_rows(path, rows),
            DOCUMENT_WINDOWS_FILE: lambda path: write_rows(path, [keys, values[0], values[1]]),
        }

    # ------------------------------------------------------------------------------------------------ version 1

    @classmethod
    def from_json(cls, raw: bytes, path: Path, stored: np.ndarray) -> tuple[WindowTable, dict[str, Any]]:
        """The table of a format-version-1 `windows.json` (`raw`, the bytes of `path`), and the index settings it
        records (aggregate, fetch_factor); `stored` is the window ids the windows index holds.

        Every number is checked against what the file holds before anything is sized by it (`checked_table`).

        Raises:
            DamagedFileError: if the file cannot be read as a window table of this format, or a recorded number
                is out of its bounds (the message names the field).
            ValueError: if it lists other windows than the index holds (the folder was modified by hand).
        """
        try:
            data = json.loads(raw)
            _check_header(data)
        except (TypeError, ValueError) as error:
            raise DamagedFileError(path, f"its window table cannot be read ({error})", REMEDY) from error
        return cls.from_data(data, path, stored)

    @classmethod
    def from_data(cls, data: dict[str, Any], path: Path, stored: np.ndarray) -> tuple[WindowTable, dict[str, Any]]:
        """`from_json` of a parsed format-version-1 table."""
        try:
            settings, size, documents, counts, live, spans = checked_table(data)
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as error:
            raise DamagedFileError(path, f"its window table cannot be read ({error})", REMEDY) from error
        windows = np.asarray(live, dtype=np.int64)
        if not np.array_equal(np.sort(windows), np.sort(stored)):
            raise ValueError(
                f"{path} lists {windows.size} windows but the index holds {stored.size} (other ids); the folder was "
                "modified by hand. " + REMEDY
            )
        doc_ids, count = np.asarray(documents, dtype=np.int64), np.asarray(counts, dtype=np.int64)
        if (count == 0).any():
            raise DamagedFileError(path, "its 'windows' give a document no window, which no save writes", REMEDY)
        offsets = np.cumsum(count) - count
        first = windows[offsets]
        if not np.array_equal(windows, np.repeat(first - offsets, count) + np.arange(windows.size)):
            raise DamagedFileError(
                path, "its 'window_ids' of a document are not consecutive ids, as every save writes them", REMEDY
            )
        columns = np.zeros((4, size), dtype=np.int64)
        columns[OWNER] = -1
        columns[OWNER, windows] = np.repeat(doc_ids, count)
        if windows.size:
            columns[START:, windows] = np.asarray(spans, dtype=np.int64).T
        order = np.argsort(doc_ids)
        return cls(columns, size, SortedRuns(doc_ids[order], np.stack([first, count])[:, order], 2)), settings


def write_rows(path: Path, rows: Sequence[np.ndarray]) -> None:
    """Write `rows` (int64, one length each) as one int64 (len(rows), n) `.npy` file, row by row."""
    with path.open("wb") as handle:
        shape = (len(rows), int(rows[0].size))
        np.lib.format.write_array_header_1_0(handle, {"descr": _INT64.str, "fortran_order": False, "shape": shape})
        for row in rows:
            np.ascontiguousarray(row, dtype=_INT64).tofile(handle)


# ------------------------------------------------------------------------------------------------ reading a folder


@dataclass(frozen=True)
class SavedTable:
    """A folder's window table as read (checksums verified, shapes checked against the header), not yet checked
    against the windows index.

    Attributes:
        path: the header file (`windows.json`).
        settings: the index settings it records (aggregate, fetch_factor).
        data: its parsed content (the whole table for format version 1).
        arrays: for format version 2, the per-window and per-document arrays, memory-mapped; else None.
    """

    path: Path
    settings: dict[str, Any]
    data: dict[str, Any]
    arrays: tuple[np.ndarray, np.ndarray] | None

    def table(self, stored: np.ndarray) -> WindowTable:
        """The table, its content checked against `stored` (the window ids the windows index holds, ascending).

        Raises:
            DamagedFileError: an array whose content breaks the table's rules (the message names the file).
            ValueError: the table lists other windows than the index holds (the folder was modified by hand).
        """
        if self.arrays is None:
            return WindowTable.from_data(self.data, self.path, stored)[0]
        columns, documents = self.arrays
        windows = self.data["windows"]
        if windows != stored.size:
            raise ValueError(
                f"{self.path} lists {windows} windows but the index holds {stored.size}; the folder was "
                "modified by hand. " + REMEDY
            )
        folder = self.path.parent
        _check_documents(documents, columns.shape[1], windows, folder / DOCUMENT_WINDOWS_FILE)
        _check_windows(columns, documents, stored, folder / WINDOW_ROWS_FILE)
        return WindowTable(columns, columns.shape[1], SortedRuns(documents[0], documents[1:], 2))


def read_saved_table(record: Snapshot) -> SavedTable:
    """The window table of the folder of `record` (its index.json), as that record lists it: the header, and for
    format version 2 its arrays, each verified against the size and CRC-32 recorded and memory-mapped.

    Raises:
        ChangedWhileReadingError: a save replaced the folder meanwhile (read it again).
        DamagedFileError: (a ValueError) a file that differs from its record, is not a table of this format, or
            whose numbers break their bounds (the message names the file and the field).
    """
    path = record.path.parent / WINDOWS_FILE
    with record.open(WINDOWS_FILE) as handle:
        _verify(record, WINDOWS_FILE, handle)
        raw = handle.read()
    try:
        data = json.loads(raw)
        version = _check_header(data)
        if version < 2:
            return SavedTable(path, _settings(data), data, None)
        settings, size, documents = _checked_counts(data)
    except (KeyError, TypeError, ValueError, IndexError, OverflowError) as error:
        raise DamagedFileError(path, f"its window table cannot be read ({error})", REMEDY) from error
    columns = _mapped(record, WINDOW_ROWS_FILE, (4, size))
    return SavedTable(path, settings, data, (columns, _mapped(record, DOCUMENT_WINDOWS_FILE, (3, documents))))


def _verify(record: Snapshot, name: str, handle: IO[bytes]) -> None:
    """Compare the open file `name` with the size and CRC-32 `record` lists (the handle is rewound)."""
    problem = record.mismatch(name, handle)
    if problem is not None:
        if not record.is_current():
            raise ChangedWhileReadingError
        raise DamagedFileError(record.path.parent / name, problem, REMEDY)


def _mapped(record: Snapshot, name: str, shape: tuple[int, int]) -> np.ndarray:
    """The int64 array of shape `shape` in `.npy` file `name`, verified, then memory-mapped copy-on-write from the
    file that was verified; its header is checked against `shape` and its size first, so nothing is mapped (or
    allocated) from what a crafted header claims."""
    path = record.path.parent / name
    with record.open(name, REMEDY) as handle:
        _verify(record, name, handle)
        try:
            version = np.lib.format.read_magic(handle)
            if version not in ((1, 0), (2, 0)):
                raise ValueError(f"format version {version} is not 1.0 or 2.0")
            header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
            found, fortran, dtype = header(handle)
        except (ValueError, SyntaxError, TypeError, EOFError) as error:
            raise DamagedFileError(path, f"it is not a NumPy array file ({error})", REMEDY) from None
        if dtype != _INT64 or fortran or tuple(found) != shape:
            raise DamagedFileError(
                path,
                f"it holds a {dtype} {'Fortran ' if fortran else ''}array of shape {tuple(found)}, not the int64 "
                f"{shape} that {WINDOWS_FILE} records",
                REMEDY,
            )
        offset, size = handle.tell(), record.files[name]["bytes"]
        if size != offset + _INT64.itemsize * shape[0] * shape[1]:
            raise DamagedFileError(path, f"it holds {size} bytes, not the {shape} array its header says", REMEDY)
        if shape[1] == 0:
            return np.zeros(shape, dtype=np.int64)
        return np.memmap(handle, dtype=_INT64, mode="c", offset=offset, shape=shape)


def _check_header(data: Any) -> int:
    """The format version of a parsed `windows.json` (ValueError when it is not a window table this release
    reads)."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ValueError(f"not a {FORMAT} file")
    version = data.get("version", 0)
    if not is_int(version) or version > VERSION:
        raise ValueError(f"its version {version!r} is not an integer ≤ {VERSION}")
    return int(version)


def _settings(data: dict[str, Any]) -> dict[str, Any]:
    """The index settings a table records (aggregate, fetch_factor), checked."""
    aggregate, fetch_factor = data["aggregate"], data["fetch_factor"]
    if aggregate not in AGGREGATES:
        raise ValueError(f"its 'aggregate' {aggregate!r} is not one of {', '.join(AGGREGATES)}")
    if not is_positive_int(fetch_factor) or fetch_factor > INT64_MAX:
        raise ValueError(f"its 'fetch_factor' {fetch_factor!r} is not an integer from 1 to 2**63 - 1")
    return {"aggregate": aggregate, "fetch_factor": fetch_factor}


def _most_slots(windows: int) -> int:
    """The largest counter a table listing `windows` windows may record (`MAX_REMOVED_PER_WINDOW`)."""
    return MAX_REMOVED_PER_WINDOW * windows + REMOVED_SLACK


def _checked_counts(data: dict[str, Any]) -> tuple[dict[str, Any], int, int]:
    """A version-2 header's settings, counter and document count, each checked against the others: the windows
    listed (at most 2**63 − 1), the documents (at most one per window), the counter (from the windows listed to
    `MAX_REMOVED_PER_WINDOW` × them + `REMOVED_SLACK`)."""
    settings = _settings(data)
    windows, documents, size = data["windows"], data["documents"], data["next_window"]
    if not is_int(windows) or not 0 <= windows <= INT64_MAX:
        raise ValueError(f"its 'windows' {windows!r} is not an integer from 0 to 2**63 - 1")
    if not is_int(documents) or not min(windows, 1) <= documents <= windows:
        raise ValueError(f"its 'documents' {documents!r} is not an integer from 1 to its {windows} 'windows'")
    most = _most_slots(windows)
    if not is_int(size) or not windows <= size <= most:
        raise ValueError(
            f"its 'next_window' {size!r} is not an integer from {windows} (its windows) to {most} "
            f"({MAX_REMOVED_PER_WINDOW} × its {windows} windows + {REMOVED_SLACK})"
        )
    return settings, int(size), int(documents)


def _check_documents(documents: np.ndarray, size: int, windows: int, path: Path) -> None:
    """Refuse a per-document array whose ids are not distinct and ascending, or whose windows (first, count) are
    not at least one window inside the table, or whose counts do not add up to the `windows` listed; checked
    `CHECK_CHUNK` documents at a time."""
    total, previous = 0, -1
    for at in range(0, documents.shape[1], CHECK_CHUNK):
        keys, first, count = (np.asarray(row) for row in documents[:, at : at + CHECK_CHUNK])
        steps = np.diff(keys, prepend=previous)
        bad = np.flatnonzero((steps <= 0) | (first < 0) | (count < 1) | (count > size - first))
        if bad.size:
            i = int(bad[0])
            raise DamagedFileError(
                path,
                f"its document {at + i} (id {keys[i]}) has windows {first[i]} + {count[i]}: document ids must ascend "
                f"from 0 and each document have 1 or more windows below 'next_window' {size}",
                REMEDY,
            )
        total += int(count.sum(dtype=np.uint64))
        previous = int(keys[-1])
    if total != windows:
        raise DamagedFileError(path, f"its documents have {total} windows, not the {windows} listed", REMEDY)


def _check_windows(columns: np.ndarray, documents: np.ndarray, stored: np.ndarray, path: Path) -> None:
    """Refuse a per-window array whose owners, spans or weights break the table's rules, `CHECK_CHUNK` windows at a
    time: each window owned (≥ 0) must lie in its owner's run of windows and be stored in the index (which holds
    these windows and no other); spans run forwards from 0, weights are ≥ 0.

    With the document counts adding up to the windows listed (`_check_documents`), a window inside its owner's run
    for every owned window means each run is owned whole: no document's windows are another's."""
    keys, firsts, counts = documents
    listed = 0
    for at in range(0, columns.shape[1], CHECK_CHUNK):
        owner, start, end, weight = (np.asarray(row) for row in columns[:, at : at + CHECK_CHUNK])
        bad = np.flatnonzero((owner < -1) | (start < 0) | (end < start) | (weight < 0))
        if bad.size:
            i = int(bad[0])
            raise DamagedFileError(
                path,
                f"its window {at + i} has owner {owner[i]}, span ({start[i]}, {end[i]}) and weight {weight[i]}: an "
                "owner from -1, a span forwards from 0 and a weight from 0 are needed",
                REMEDY,
            )
        owned = np.flatnonzero(owner >= 0)
        window_ids, owners = owned + at, owner[owned]
        if owned.size:
            row = np.minimum(np.searchsorted(keys, owners), keys.size - 1) if keys.size else None
            inside = np.zeros(owned.size, dtype=bool)
            if row is not None:
                first = np.asarray(firsts[row])
                inside = (np.asarray(keys[row]) == owners) & (first <= window_ids)
                inside &= window_ids < first + np.asarray(counts[row])
            if not inside.all():
                i = int(np.flatnonzero(~inside)[0])
                raise DamagedFileError(
                    path, f"its window {window_ids[i]} names document {owners[i]}, which does not list it", REMEDY
                )
        if not np.array_equal(stored[listed : listed + window_ids.size], window_ids):
            raise ValueError(
                f"{path} lists other windows than the index holds (window ids near {at}); the folder was modified "
                "by hand. " + REMEDY
            )
        listed += int(window_ids.size)
    if listed != stored.size:
        raise DamagedFileError(path, f"it lists {listed} windows, not the {stored.size} the index holds", REMEDY)


def checked_table(data: dict[str, Any]) -> tuple[dict[str, Any], int, list[int], list[int], list[int], list[Any]]:
    """The fields of a format-version-1 window table, each checked against the others before any is used to size
    anything: (the index settings, the counter `next_window`, the document ids, their window counts, the live
    window ids, their (start, end, weight)).

    Ids, spans and weights are integers from 0 to 2**63 − 1; the counts add up to the ids listed; the ids are
    distinct and below `next_window`, which is at most `MAX_REMOVED_PER_WINDOW` × the windows listed +
    `REMOVED_SLACK` (the slots of removed windows a table keeps: each costs 32 bytes).

    Raises:
        ValueError: naming the field and the bound it breaks.
        KeyError: a missing field.
    """
    settings = _settings(data)
    documents = _integers(data, "documents")
    live = _integers(data, "window_ids")
    counts = _integers(data, "windows", len(live))
    if len(counts) != len(documents) or sum(counts) != len(live) or len(set(documents)) != len(documents):
        raise ValueError(
            f"its 'windows' ({len(counts)} counts adding up to {sum(counts)}) do not match its {len(documents)} "
            f"distinct 'documents' and {len(live)} 'window_ids'"
        )
    if len(set(live)) != len(live):
        raise ValueError("its 'window_ids' repeat an id")
    size = data["next_window"]
    least = max(live) + 1 if live else 0
    most = _most_slots(len(live))
    if not is_int(size) or not least <= size <= most:
        raise ValueError(
            f"its 'next_window' {size!r} is not an integer from {least} (one past its highest window id) to "
            f"{most} ({MAX_REMOVED_PER_WINDOW} × its {len(live)} windows + {REMOVED_SLACK})"
        )
    starts, ends, weights = (_integers(data, field) for field in ("starts", "ends", "weights"))
    if not len(starts) == len(ends) == len(weights) == len(live):
        raise ValueError(f"its 'starts', 'ends' and 'weights' do not each list its {len(live)} windows")
    bad = next((position for position, (a, b) in enumerate(zip(starts, ends, strict=True)) if a > b), None)
    if bad is not None:
        raise ValueError(f"its window {live[bad]} starts after it ends ('starts'[{bad}] > 'ends'[{bad}])")
    return settings, size, documents, counts, live, list(zip(starts, ends, weights, strict=True))


def _integers(data: dict[str, Any], field: str, most: int = INT64_MAX) -> list[int]:
    """`data[field]`: a list of integers from 0 to `most` (ValueError naming the field and the first other value)."""
    values = data[field]
    if not isinstance(values, list):
        raise ValueError(f"its {field!r} is {type(values).__name__}, not a list")
    for position, value in enumerate(values):
        if not is_int(value) or not 0 <= value <= most:
            raise ValueError(f"its {field!r}[{position}] is {value!r}, not an integer from 0 to {most}")
    return values
