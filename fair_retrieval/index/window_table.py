"""The window table of a `MultiVectorIndex`: which document owns each window, where the window sits in it and what
it weighs, and its JSON form (`windows.json`, written by `MultiVectorIndex.save` beside the windows index).

Window ids are int64 handed out by a counter that only grows (a removed window keeps its slot, owner −1), so the
table lists the live windows only and the counter (`next_window`); reading it checks it against the ids the windows
index holds, so a folder edited by hand is refused instead of searched wrongly.
"""

from __future__ import annotations

import json
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.jsonio import DamagedFileError

FORMAT = "fair-retrieval-multivector"
VERSION = 1
REMEDY = "Rebuild the index and save it again (or restore the folder from a backup)."


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

        Raises:
            DamagedFileError: if the file cannot be read as a window table of this format.
            ValueError: if it lists other windows than the index holds (the folder was modified by hand).
        """
        try:
            data = json.loads(raw)
            if data.get("format") != FORMAT or int(data.get("version", 0)) > VERSION:
                raise ValueError(f"not a {FORMAT} file of version ≤ {VERSION}")
            settings = {"aggregate": data["aggregate"], "fetch_factor": data["fetch_factor"]}
            size = int(data["next_window"])
            table = cls(
                array("q", [-1] * size), array("q", [0] * size), array("q", [0] * size), array("q", [0] * size), {}
            )
            live = np.asarray(data["window_ids"], dtype=np.int64)
            position = 0
            for doc_id, count in zip(data["documents"], data["windows"], strict=True):
                own = live[position : position + count]
                table.of[int(doc_id)] = own
                for w in own.tolist():
                    table.owner[w] = int(doc_id)
                position += count
            for w, start, end, weight in zip(live.tolist(), data["starts"], data["ends"], data["weights"], strict=True):
                table.start[w], table.end[w], table.weight[w] = int(start), int(end), int(weight)
        except (KeyError, TypeError, ValueError, IndexError) as error:
            raise DamagedFileError(path, f"its window table cannot be read ({error})", REMEDY) from error
        if set(live.tolist()) != set(stored.tolist()) or position != live.size:
            raise ValueError(
                f"{path} lists {live.size} windows but the index holds {stored.size} (other ids); the folder was "
                "modified by hand. " + REMEDY
            )
        return table, settings
