"""Where a store's records could live: today's store file (every record as JSON, rewritten by each save) against
Python's `sqlite3` (a table of records, one transaction a write), measured on the same records.

Each record is what a text store keeps of a chunk: its key, its text (`--words` Zipf-distributed words) and a small
metadata dict, as the JSON entry the store file holds. For each size:

- `json_save_s` / `json_bytes`: today's cost of any save, however small the change: every record serialised and the
  file written and flushed to disk (`os.fsync`), as the store file is;
- `json_load_s`: reading and parsing that file back into a dict of int id → entry;
- `sqlite_build_s`: the same records written into a table (WAL, one transaction), once;
- `sqlite_write_s`: a small write, one record replaced and one deleted, in one committed transaction (`synchronous=
  FULL`: on disk when it returns), the median of `--writes`;
- `sqlite_load_s`: every record read back into a dict, as a load would; `sqlite_bytes`: the database file.

A measurement to choose the engine of the records, not the project's storage code (which stays as it is until the
switch).

    python benchmarks/records_engine.py --sizes 2000,40000,200000 --out runs/records-engine
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np


def records(count: int, words: int, seed: int = 0) -> dict[int, str]:
    """`count` JSON entries, as a text store keeps them (key, text, metadata), by int id."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{index}" for index in range(20_000)])
    ranks = np.minimum(rng.zipf(1.2, size=(count, words)), len(vocabulary)) - 1
    return {
        index: json.dumps(
            {
                "id": f"doc-{index}",
                "text": " ".join(vocabulary[ranks[index]]),
                "metadata": {"source": f"file-{index % 97}.txt", "n": index},
            },
            ensure_ascii=False,
        )
        for index in range(count)
    }


def measure_json(entries: dict[int, str], folder: Path) -> dict[str, float]:
    """Save every entry as one JSON file (flushed), then load it back."""
    path = folder / "store.json"
    started = time.perf_counter()
    raw = ("[" + ",".join(f"[{key},{entry}]" for key, entry in entries.items()) + "]").encode("utf-8")
    with path.open("wb") as handle:
        handle.write(raw)
        handle.flush()
        os.fsync(handle.fileno())
    saved = time.perf_counter() - started
    started = time.perf_counter()
    loaded = {int(key): entry for key, entry in json.loads(path.read_bytes())}
    took = time.perf_counter() - started
    assert len(loaded) == len(entries)
    return {"json_save_s": saved, "json_load_s": took, "json_bytes": path.stat().st_size}


def measure_sqlite(entries: dict[int, str], folder: Path, writes: int) -> dict[str, float]:
    """Build the table once, then time small committed writes and a full read."""
    path = folder / "records.sqlite"
    connection = sqlite3.connect(path, isolation_level=None)
    connection.execute("PRAGMA journal_mode=WAL")
    connection.execute("PRAGMA synchronous=FULL")
    connection.execute("CREATE TABLE records (int_id INTEGER PRIMARY KEY, entry TEXT NOT NULL)")
    started = time.perf_counter()
    connection.execute("BEGIN IMMEDIATE")
    connection.executemany("INSERT INTO records VALUES (?, ?)", entries.items())
    connection.execute("COMMIT")
    built = time.perf_counter() - started
    count, times = len(entries), []
    for step in range(writes):
        replaced, deleted = (step * 7919) % count, (step * 104729 + 1) % count
        started = time.perf_counter()
        connection.execute("BEGIN IMMEDIATE")
        connection.execute("INSERT OR REPLACE INTO records VALUES (?, ?)", (replaced, entries[replaced]))
        connection.execute("DELETE FROM records WHERE int_id = ?", (deleted,))
        connection.execute("COMMIT")
        times.append(time.perf_counter() - started)
        connection.execute("INSERT OR REPLACE INTO records VALUES (?, ?)", (deleted, entries[deleted]))
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.close()
    started = time.perf_counter()
    connection = sqlite3.connect(path)
    loaded = dict(connection.execute("SELECT int_id, entry FROM records"))
    took = time.perf_counter() - started
    connection.close()
    assert len(loaded) == count
    return {
        "sqlite_build_s": built,
        "sqlite_write_s": statistics.median(times),
        "sqlite_load_s": took,
        "sqlite_bytes": path.stat().st_size,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,40000,200000", help="records, comma-separated")
    parser.add_argument("--words", type=int, default=80, help="words a record's text")
    parser.add_argument("--writes", type=int, default=21, help="small writes timed at each size (the median)")
    parser.add_argument("--out", type=Path, default=Path("runs/records-engine"))
    args = parser.parse_args(argv)
    sizes = [int(size) for size in args.sizes.split(",")]
    if not sizes or min(sizes) < 2 or args.words < 1 or args.writes < 1:
        raise SystemExit("--sizes must be counts ≥ 2, --words and --writes ≥ 1.")
    rows = []
    for size in sizes:
        entries = records(size, args.words)
        with tempfile.TemporaryDirectory() as folder:
            row = {
                "records": size,
                **measure_json(entries, Path(folder)),
                **measure_sqlite(entries, Path(folder), args.writes),
            }
        rows.append(row)
        print(json.dumps(row), flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    columns = ["records", "json_save_s", "json_load_s", "json_bytes", "sqlite_write_s", "sqlite_load_s", "sqlite_bytes"]
    print("| " + " | ".join(columns) + " |\n|" + "---|" * len(columns))
    for row in rows:
        print(
            "| " + " | ".join(f"{row[c]:,.4f}" if isinstance(row[c], float) else f"{row[c]:,}" for c in columns) + " |"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
