"""ShardFolder: a folder of Parquet files of (id, embedding) rows, written one complete file at a time.

Layout: `job.json` (the settings that made the vectors) and `shard-000000.parquet`, `shard-000001.parquet`, … with
two columns, `id` (int64 or string) and `embedding` (fixed-size list of float32). A multi-vector job (documents kept
as their windows) writes one row per window instead, with the window's character span and weight in three more
columns (`WINDOW_COLUMNS`); a document's windows are consecutive rows of one shard. A shard is written to a temporary
name and renamed when complete, so every `shard-*.parquet` is whole; a job that was interrupted leaves only whole
shards (and perhaps a temporary file, removed on the next start) and resumes by skipping the ids they hold.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from fair_retrieval.distributed.runtime import import_pyarrow
from fair_retrieval.jsonio import TEMPORARY_SUFFIX, write_atomically

logger = logging.getLogger(__name__)

JOB_FILE = "job.json"
JOB_FORMAT = "fair-retrieval-shards"
JOB_VERSION = 1
ID_COLUMN = "id"
EMBEDDING_COLUMN = "embedding"
WINDOW_COLUMNS = ("window_start", "window_end", "window_weight")
"""The columns of a multi-vector shard beyond id and embedding: each window's character span and content tokens."""
_SHARD_NAME = re.compile(r"^shard-(\d{6,})\.parquet$")


class ShardFolder:
    """Read and write the embedding shards of one job.

    Args:
        path: the folder (created by `start`).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"ShardFolder({str(self.path)!r}, shards={len(self.files())})"

    # ------------------------------------------------------------------------------------------------ writing

    def start(self, job: dict[str, Any]) -> None:
        """Create the folder for `job` (a JSON-compatible description of how vectors are made), or check that the
        shards already there were made the same way, and remove temporary files left by an interrupted run.

        Raises:
            ValueError: if the folder holds shards of a job with different settings (they must not be mixed).
        """
        job = json.loads(json.dumps(job))  # compare as it is stored: tuples become lists
        record = {"format": JOB_FORMAT, "version": JOB_VERSION, "job": job}
        job_path = self.path / JOB_FILE
        if job_path.is_file():
            stored = self.job()
            if stored != job:
                keys = sorted(k for k in set(stored) | set(job) if stored.get(k) != job.get(k))
                raise ValueError(
                    f"{self.path} holds shards made with other settings ({', '.join(keys)} differ: "
                    f"{[stored.get(k) for k in keys]} there, {[job.get(k) for k in keys]} now). Use another "
                    "output folder, or delete this one to start again."
                )
        elif self.files():
            raise ValueError(f"{self.path} holds shards but no {JOB_FILE}; delete the folder or use another one.")
        else:
            self.path.mkdir(parents=True, exist_ok=True)
            write_atomically(job_path, (json.dumps(record, indent=2) + "\n").encode("utf-8"))
        for stale in self.path.glob(f"*{TEMPORARY_SUFFIX}"):
            logger.info("Removing %s, left by an interrupted run.", stale)
            stale.unlink()

    def job(self) -> dict[str, Any]:
        """The job description stored in job.json.

        Raises:
            FileNotFoundError: if the folder has no job.json (not a shard folder).
            ValueError: if job.json is not one this version wrote.
        """
        job_path = self.path / JOB_FILE
        if not job_path.is_file():
            raise FileNotFoundError(f"{job_path} not found: is {self.path} a folder written by embed_to_shards?")
        try:
            record = json.loads(job_path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as error:
            raise ValueError(f"{job_path} is not valid JSON: {error}") from error
        if (
            not isinstance(record, dict)
            or record.get("format") != JOB_FORMAT
            or not isinstance(record.get("job"), dict)
        ):
            raise ValueError(f"{job_path} was not written by fair-retrieval's embed_to_shards.")
        if int(record.get("version", 0)) > JOB_VERSION:
            raise ValueError(f"{job_path} was written by a newer fair-retrieval; upgrade to read it.")
        return record["job"]  # type: ignore[no-any-return]

    def write(self, table: Any) -> Path:
        """Write one shard (a pyarrow Table with `id` and `embedding` columns) under the next free number.

        Returns:
            The path of the new shard.
        """
        pa = import_pyarrow()
        missing = {ID_COLUMN, EMBEDDING_COLUMN} - set(table.column_names)
        if missing:
            raise ValueError(f"A shard needs the columns {ID_COLUMN!r} and {EMBEDDING_COLUMN!r}; missing {missing}.")
        files = self.files()
        number = _shard_number(files[-1]) + 1 if files else 0
        path = self.path / f"shard-{number:06d}.parquet"
        sink = pa.BufferOutputStream()
        windows = [name for name in WINDOW_COLUMNS if name in table.column_names]
        pa.parquet.write_table(table.select([ID_COLUMN, EMBEDDING_COLUMN, *windows]), sink)
        write_atomically(path, sink.getvalue().to_pybytes())
        return path

    # ------------------------------------------------------------------------------------------------ reading

    def files(self) -> list[Path]:
        """The complete shard files, in the order they were written."""
        if not self.path.is_dir():
            return []
        return sorted((p for p in self.path.iterdir() if _SHARD_NAME.match(p.name)), key=_shard_number)

    def row_counts(self) -> list[int]:
        """Rows per shard file, from the Parquet footers (no data is read)."""
        pa = import_pyarrow()
        return [pa.parquet.ParquetFile(path).metadata.num_rows for path in self.files()]

    def count(self) -> int:
        """Total number of embedded rows."""
        return sum(self.row_counts())

    def dimension(self) -> int:
        """Size of the stored vectors.

        Raises:
            ValueError: if the folder holds no shards yet.
        """
        pa = import_pyarrow()
        files = self.files()
        if not files:
            raise ValueError(f"{self.path} holds no embedding shards.")
        field = pa.parquet.read_schema(files[0]).field(EMBEDDING_COLUMN)
        return int(field.type.list_size)

    def ids(self) -> Any:
        """All stored ids as one pyarrow Array (int64 or string), in shard order; only the id column is read."""
        pa = import_pyarrow()
        columns = [pa.parquet.read_table(path, columns=[ID_COLUMN]).column(ID_COLUMN) for path in self.files()]
        if not columns:
            return pa.array([], type=pa.int64())
        return pa.chunked_array([chunk for column in columns for chunk in column.chunks]).combine_chunks()

    def read(self, path: Path) -> tuple[Any, np.ndarray]:
        """The ids (pyarrow Array) and vectors (float32 (n, d)) of one shard file."""
        table = import_pyarrow().parquet.read_table(path)
        return table.column(ID_COLUMN).combine_chunks(), embeddings_to_numpy(table.column(EMBEDDING_COLUMN))

    def read_windows(self, path: Path) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        """The rows of one multi-vector shard: ids (pyarrow Array, one per window), window vectors (float32 (W, d)),
        spans (int64 (W, 2)) and weights (int64 (W,)).

        Raises:
            ValueError: if the shard has no window columns (it holds one pooled vector per document).
        """
        table = import_pyarrow().parquet.read_table(path)
        missing = [name for name in WINDOW_COLUMNS if name not in table.column_names]
        if missing:
            raise ValueError(f"{path} holds one vector per document, not windows (no {', '.join(missing)} column).")
        start, end, weight = (table.column(name).to_numpy().astype(np.int64) for name in WINDOW_COLUMNS)
        vectors = embeddings_to_numpy(table.column(EMBEDDING_COLUMN))
        return table.column(ID_COLUMN).combine_chunks(), vectors, np.stack([start, end], axis=1), weight

    def __iter__(self) -> Iterator[tuple[Any, np.ndarray]]:
        """(ids, vectors) of every shard, in shard order; one shard in memory at a time."""
        for path in self.files():
            yield self.read(path)

    def sample(self, size: int, seed: int = 0) -> np.ndarray:
        """`size` vectors drawn uniformly without replacement from all shards (all of them if fewer), float32.

        Used to train compressed indices; reads one shard at a time, so memory stays at one shard plus the sample.
        """
        counts = np.asarray(self.row_counts(), dtype=np.int64)
        total = int(counts.sum())
        rng = np.random.default_rng(seed)
        chosen = np.sort(rng.choice(total, size=min(size, total), replace=False))
        starts = np.concatenate([[0], np.cumsum(counts)])
        parts = []
        for number, path in enumerate(self.files()):
            rows = chosen[(chosen >= starts[number]) & (chosen < starts[number + 1])] - starts[number]
            if rows.size:
                parts.append(self.read(path)[1][rows])
        if not parts:
            return np.zeros((0, self.dimension() if total else 0), dtype=np.float32)
        return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def embeddings_to_numpy(column: Any) -> np.ndarray:
    """A pyarrow (chunked) fixed-size-list column of float32 as a float32 (n, d) array."""
    pa = import_pyarrow()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    dim = int(column.type.list_size)
    flat = column.flatten().to_numpy(zero_copy_only=False)
    return np.ascontiguousarray(flat, dtype=np.float32).reshape(len(column), dim)


def embeddings_to_arrow(vectors: np.ndarray) -> Any:
    """A float32 (n, d) array as a pyarrow fixed-size-list array (the shards' embedding column)."""
    pa = import_pyarrow()
    matrix = np.ascontiguousarray(vectors, dtype=np.float32)
    return pa.FixedSizeListArray.from_arrays(pa.array(matrix.reshape(-1)), matrix.shape[1])


def _shard_number(path: Path) -> int:
    match = _SHARD_NAME.match(path.name)
    return int(match.group(1)) if match else -1
