"""The window table of a `MultiVectorIndex`: which document owns each window, where the window sits in it and what
it weighs, and its JSON form (`windows.json`, written by `MultiVectorIndex.save` beside the windows index).

Window ids are int64 handed out by a counter that only grows (a removed window keeps its slot, owner −1), so the
table lists the live windows only and the counter (`next_window`); reading it checks it against the ids the windows
index holds, so a folder edited by hand is refused instead of searched wrongly, and checks every number it records
against what it lists before anything is sized by one (`checked_table`): a crafted counter cannot make a load
allocate more than the file's own windows justify.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.index.aggregates import AGGREGATES
from fair_retrieval.jsonio import DamagedFileError
from fair_retrieval.validate import is_int, is_positive_int

FORMAT = "fair-retrieval-multivector"
VERSION = 1
REMEDY = "Rebuild the index and save it again (or restore the folder from a backup)."
INT64_MAX = 2**63 - 1
MAX_REMOVED_PER_WINDOW = 64
"""How many slots of removed windows a saved table may keep per window it lists, beyond `REMOVED_SLACK` (the
counter `next_window` sizes the table's arrays, 32 bytes a slot: about one 512-d vector per window listed)."""
REMOVED_SLACK = 1 << 20
"""How many slots of removed windows a saved table may keep whatever it lists (32 MiB of arrays)."""


@dataclass
class WindowTable:
    """Per window id: its document (`owner`, −1 once removed), character span (`start`, `end`) and weight (content
    tokens); per document id: its window ids in document order (`of`)."""

    owner: array[int]
    start: array[int]
    end: array[int]
    weight: array[int]
    of: dict[int, np.ndarray]

    def to_json(self, aggregate: str, fetch_factor: int) -> dict[str, Any]:
        """The table as `windows.json` holds it, with the index's aggregate and fetch factor."""
        live = [w for ws in self.of.values() for w in ws.tolist()]
        return {
            "format": FORMAT,
            "version": VERSION,
            "aggregate": aggregate,
            "fetch_factor": fetch_factor,
            "next_window": len(self.owner),
            "documents": list(self.of),
            "windows": [len(ws) for ws in self.of.values()],
            "window_ids": live,
            "starts": [self.start[w] for w in live],
            "ends": [self.end[w] for w in live],
            "weights": [self.weight[w] for w in live],
        }

    @classmethod
    def from_json(cls, raw: bytes, path: Path, stored: np.ndarray) -> tuple[WindowTable, dict[str, Any]]:
        """The table read from `raw` (the bytes of `path`), and the index settings it records (aggregate,
        fetch_factor); `stored` is the window ids the windows index holds.

        Every number is checked against what the file holds before anything is sized by it (`checked_table`).

        Raises:
            DamagedFileError: if the file cannot be read as a window table of this format, or a recorded number
                is out of its bounds (the message names the field).
            ValueError: if it lists other windows than the index holds (the folder was modified by hand).
        """
        try:
            data = json.loads(raw)
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a {FORMAT} file")
            version = data.get("version", 0)
            if not is_int(version) or version > VERSION:
                raise ValueError(f"its version {version!r} is not an integer ≤ {VERSION}")
            settings, size, documents, counts, live, spans = checked_table(data)
        except (KeyError, TypeError, ValueError, IndexError, OverflowError) as error:
            raise DamagedFileError(path, f"its window table cannot be read ({error})", REMEDY) from error
        if set(live) != set(stored.tolist()):
            raise ValueError(
                f"{path} lists {len(live)} windows but the index holds {stored.size} (other ids); the folder was "
                "modified by hand. " + REMEDY
            )
        table = cls(array("q", [-1]) * size, array("q", [0]) * size, array("q", [0]) * size, array("q", [0]) * size, {})
        position = 0
        for doc_id, count in zip(documents, counts, strict=True):
            own = live[position : position + count]
            table.of[doc_id] = np.asarray(own, dtype=np.int64)
            for w in own:
                table.owner[w] = doc_id
            position += count
        for w, (start, end, weight) in zip(live, spans, strict=True):
            table.start[w], table.end[w], table.weight[w] = start, end, weight
        return table, settings


def checked_table(data: dict[str, Any]) -> tuple[dict[str, Any], int, list[int], list[int], list[int], list[Any]]:
    """The fields of a window table, each checked against the others before any is used to size anything: (the
    index settings, the counter `next_window`, the document ids, their window counts, the live window ids, their
    (start, end, weight)).

    Ids, spans and weights are integers from 0 to 2**63 − 1; the counts add up to the ids listed; the ids are
    distinct and below `next_window`, which is at most `MAX_REMOVED_PER_WINDOW` × the windows listed +
    `REMOVED_SLACK` (the slots of removed windows a table keeps: each costs 32 bytes).

    Raises:
        ValueError: naming the field and the bound it breaks.
        KeyError: a missing field.
    """
    aggregate, fetch_factor = data["aggregate"], data["fetch_factor"]
    if aggregate not in AGGREGATES:
        raise ValueError(f"its 'aggregate' {aggregate!r} is not one of {', '.join(AGGREGATES)}")
    if not is_positive_int(fetch_factor) or fetch_factor > INT64_MAX:
        raise ValueError(f"its 'fetch_factor' {fetch_factor!r} is not an integer from 1 to 2**63 - 1")
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
    most = MAX_REMOVED_PER_WINDOW * len(live) + REMOVED_SLACK
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
    settings = {"aggregate": aggregate, "fetch_factor": fetch_factor}
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
