"""Reading rows from the file formats benchmarks ship in: JSON Lines, JSON, CSV, TSV and Parquet.

Loaders for the different benchmarks share this so that each of them only maps columns to a `RetrievalTask`.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DATA_SUFFIXES = (".jsonl", ".json", ".parquet", ".csv", ".tsv")


def read_records(path: str | Path) -> list[dict[str, Any]]:
    """All rows of one data file as dicts, by file suffix (.jsonl, .json, .parquet, .csv, .tsv; .gz for JSONL).

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: for an unsupported suffix.
        ImportError: for Parquet without pandas and a Parquet engine (pyarrow or fastparquet).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"Data file not found: {path}")
    name = path.name.lower()
    if name.endswith((".jsonl", ".jsonl.gz")):
        return list(_jsonl(path))
    if name.endswith(".json"):
        data = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(data, dict):
            for key in ("data", "rows", "records"):
                if isinstance(data.get(key), list):
                    return list(data[key])
        if isinstance(data, list):
            return data
        raise ValueError(f"{path}: expected a JSON list of rows (or an object with a 'data' list).")
    if name.endswith(".parquet"):
        return _parquet(path)
    if name.endswith((".csv", ".tsv")):
        with path.open(encoding="utf-8", newline="") as handle:
            return list(csv.DictReader(handle, delimiter="\t" if name.endswith(".tsv") else ","))
    raise ValueError(f"{path}: unsupported data file; use one of {', '.join(DATA_SUFFIXES)}.")


def data_files(folder: str | Path, pattern: str = "*") -> list[Path]:
    """Data files (any supported suffix) under `folder` matching `pattern`, recursively, sorted by path."""
    folder = Path(folder)
    found = [p for p in folder.rglob(pattern) if p.is_file() and p.name.lower().endswith(DATA_SUFFIXES)]
    return sorted(found)


def _jsonl(path: Path) -> Iterator[dict[str, Any]]:
    import gzip

    opener: Any = gzip.open if path.name.lower().endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    yield json.loads(line)
                except json.JSONDecodeError as error:
                    raise ValueError(f"{path}:{number}: not valid JSON ({error.msg}).") from error


def _parquet(path: Path) -> list[dict[str, Any]]:
    try:
        import pandas as pd
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("Reading Parquet needs pandas and pyarrow: pip install 'fair-retrieval[eval]'.") from error
    frame = pd.read_parquet(path)
    return [{key: _plain(value) for key, value in row.items()} for row in frame.to_dict(orient="records")]


def _plain(value: Any) -> Any:
    """NumPy arrays and scalars from Parquet → lists and Python scalars; nested structs recursively."""
    if hasattr(value, "tolist"):
        return _plain(value.tolist())
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value
