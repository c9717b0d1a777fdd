"""The documents of an index built on Ray: a folder of .txt/.md files or a JSONL file, read by Ray Data tasks with
the same reader as the local engine, and checked before anything is embedded.

Reading is `fair_retrieval.inputs`' own, called on the workers: a folder is listed with `text_file_names` and its
files are read with `read_text_file`; a JSONL file is cut into byte ranges at line ends, each range is split into
lines with `jsonl_lines` and each line parsed with `parse_jsonl_line`; repeated ids are reported with
`repeated_id_error`. So `--engine ray` and `--engine local` give the same documents (ids, texts, metadata), or the
same error, for the same input.

The driver only lists file names and keeps a few numbers per range; the texts stay in Ray (`write_documents_file`
streams them to disk batch by batch), so its memory does not grow with them. Before a dataset is returned the whole
input is checked by Ray tasks, and the first problem in reading order (a bad line, a file that is not UTF-8, or an
id used before) is raised as the local reader raises it: each task reads one part and reports its first bad line,
and sends the ids it read, split by hash, to one task per hash bucket, which finds the earliest repeated id of its
bucket.
"""

from __future__ import annotations

import hashlib
import io
import json
import zlib
from collections.abc import Iterator
from functools import partial
from pathlib import Path
from typing import Any

from fair_retrieval.distributed.runtime import import_pyarrow, import_ray, is_ray_error, worker_failure
from fair_retrieval.inputs import (
    Document,
    InputKind,
    input_kind,
    jsonl_lines,
    no_documents_error,
    parse_jsonl_line,
    read_text_file,
    repeated_id_error,
    text_file_names,
)

RANGE_BYTES = 4 << 20
"""JSONL bytes per read task."""
FILES_PER_TASK = 256
"""Files of a folder per read task."""
MAX_BUCKETS = 64
"""Most hash buckets (tasks) the repeated-id check splits the ids into."""

Parsed = Document | ValueError
"""What reading one line or file gives: its document, or the error `read_documents` would raise for it."""


def documents_dataset(path: str | Path, text_field: str = "text", id_field: str = "id") -> tuple[Any, str]:
    """The documents at `path` as a Ray Dataset, read by Ray tasks and checked, and a fingerprint of the input.

    The dataset has the columns id (the row number: the vector id, in input order), text, and document (the row's
    line of documents.jsonl, `Document.to_json`). It is lazy: every consumer reads the input again.

    Args:
        path: a folder of .txt/.md files, or a JSONL file (as for `fair_retrieval.inputs.read_documents`).
        text_field: the JSONL field holding the text.
        id_field: the JSONL field holding the id.

    Returns:
        (dataset, fingerprint of the input's names, sizes and modification times, for resuming).

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: exactly as `read_documents` raises it: a single text file, an empty input, the first bad JSONL
            line or repeated id, or a file that is not UTF-8.
        DistributedJobError: another failure in a Ray task (e.g. a file that cannot be read).
    """
    ray = import_ray()
    path = Path(path)
    kind = input_kind(path)
    try:
        if kind == "folder":
            names = text_file_names(path)
            parts: list[dict[str, Any]] = [
                {"start": start, "names": chunk, "documents": len(chunk)}
                for start in range(0, len(names), FILES_PER_TASK)
                for chunk in [names[start : start + FILES_PER_TASK]]
            ]
            key = _fingerprint(path, [path / name for name in names])
        else:
            parts = _numbered_ranges(ray, path)
            key = _fingerprint(path.parent, [path])
        if sum(part["documents"] for part in parts) == 0:
            raise no_documents_error(path, kind)
        _raise_first_problem(ray, parts, path, kind, text_field, id_field)
    except Exception as error:
        if is_ray_error(error):
            raise worker_failure(error, "Reading the documents") from error
        raise
    reader = partial(_read_rows, path=str(path), kind=kind, text_field=text_field, id_field=id_field)
    return ray.data.from_items(parts).flat_map(reader), key


def write_documents_file(dataset: Any, path: Path) -> int:
    """Stream the `document` column to `path` in id order, one batch at a time; returns the row count."""
    rows = 0
    temporary = path.with_name(path.name + ".tmp")
    with temporary.open("w", encoding="utf-8") as handle:
        for batch in dataset.sort("id").select_columns(["document"]).iter_batches(batch_format="pyarrow"):
            for line in batch.column("document").to_pylist():
                handle.write(line + "\n")
            rows += batch.num_rows
    temporary.replace(path)
    return rows


# ---------------------------------------------------------------------------------------------------- worker side


def _parsed(
    part: dict[str, Any], path: str, kind: InputKind, text_field: str, id_field: str
) -> Iterator[tuple[int, Parsed]]:
    """(position, document or error) for each document of a part, in input order, up to its first error.

    The position orders problems like the local reader meets them: the line number in a JSONL file, 1 + the index
    of the file in a folder.
    """
    if kind == "folder":
        for offset, name in enumerate(part["names"]):
            try:
                document = read_text_file(Path(path), name)
            except ValueError as error:
                yield part["start"] + offset + 1, error
                return
            yield part["start"] + offset + 1, document
        return
    with open(path, "rb") as handle:
        handle.seek(part["begin"])
        data = handle.read(part["end"] - part["begin"])
    for number, line in jsonl_lines(io.BytesIO(data), first_line=part["first_line"]):
        try:
            document = parse_jsonl_line(line, number, path, text_field, id_field)
        except ValueError as error:
            yield number, error
            return
        yield number, document


def _read_rows(
    part: dict[str, Any], path: str, kind: InputKind, text_field: str, id_field: str
) -> list[dict[str, Any]]:
    """The dataset rows (id = row number, text, document) of one part of the input (a Ray Data task)."""
    rows: list[dict[str, Any]] = []
    for _, document in _parsed(part, path, kind, text_field, id_field):
        if isinstance(document, ValueError):  # the input changed after it was checked
            raise document
        rows.append({"id": part["start"] + len(rows), "text": document.text, "document": document.to_json()})
    return rows


def _count_lines(part: dict[str, int], path: str) -> dict[str, int]:
    """A byte range of a JSONL file with its line ends and its documents (non-blank lines) counted (a Ray task)."""
    with open(path, "rb") as handle:
        handle.seek(part["begin"])
        data = handle.read(part["end"] - part["begin"])
    return {**part, "newlines": data.count(b"\n"), "documents": sum(1 for _ in jsonl_lines(io.BytesIO(data)))}


def _check_part(part: dict[str, Any], path: str, kind: InputKind, text_field: str, id_field: str, buckets: int) -> Any:
    """Read one part of the input (a Ray task): its first error as (position, message) or None, then (when there
    are buckets) one table of (key, position) of its documents per bucket.

    The key of a document is its id as JSON, so that the integer 7 and the string "7" stay different ids, as they
    are for the local reader; its bucket is a hash of the key that every process computes alike.
    """
    pa = import_pyarrow()
    keys: list[list[str]] = [[] for _ in range(buckets)]
    positions: list[list[int]] = [[] for _ in range(buckets)]
    problem: tuple[int, str] | None = None
    for position, document in _parsed(part, path, kind, text_field, id_field):
        if isinstance(document, ValueError):
            problem = (position, str(document))
            break
        if buckets:
            key = json.dumps(document.id)
            bucket = zlib.crc32(key.encode("utf-8")) % buckets
            keys[bucket].append(key)
            positions[bucket].append(position)
    tables = [
        pa.table({"key": pa.array(k, pa.string()), "position": pa.array(p, pa.int64())})
        for k, p in zip(keys, positions, strict=True)
    ]
    return [problem, *tables] if buckets else problem  # one return value: Ray does not unpack it


def _first_repeat(*tables: Any) -> tuple[int, int, str] | None:
    """The earliest repeated key of one bucket as (position, position of its first use, key), or None (a Ray task).

    Sorted by key and position, a row repeats its key when the row before it has the same key; the repeat with
    the smallest position is a second use, so the row before it is the first use.
    """
    pa = import_pyarrow()
    table = pa.concat_tables(tables)
    if table.num_rows < 2:
        return None
    table = table.sort_by([("key", "ascending"), ("position", "ascending")])
    keys, positions = table.column("key").combine_chunks(), table.column("position").combine_chunks()
    repeats = pa.compute.equal(keys.slice(1), keys.slice(0, len(keys) - 1))
    if not pa.compute.any(repeats).as_py():
        return None
    later = pa.compute.if_else(repeats, positions.slice(1), pa.scalar(None, pa.int64()))
    index = pa.compute.index(later, pa.compute.min(later)).as_py()
    return positions[index + 1].as_py(), positions[index].as_py(), keys[index + 1].as_py()


# ---------------------------------------------------------------------------------------------------- driver side


def _numbered_ranges(ray: Any, path: Path) -> list[dict[str, int]]:
    """The byte ranges of a JSONL file with their first row (start) and first line number, counted by Ray tasks."""
    count = ray.remote(_count_lines)
    counted: list[dict[str, int]] = ray.get([count.remote(part, str(path)) for part in _line_ranges(path)])
    start, line = 0, 1
    for part in counted:
        part["start"], part["first_line"] = start, line
        start, line = start + part["documents"], line + part["newlines"]
    return counted


def _raise_first_problem(
    ray: Any, parts: list[dict[str, Any]], path: Path, kind: InputKind, text_field: str, id_field: str
) -> None:
    """Raise the error of the input's first problem in reading order, as the local reader would; else return.

    A part's task stops at its first error, which cannot hide an earlier problem: everything before that error
    was read. Ids repeat only in JSONL files (a folder's names are unique). The ids travel from the part tasks to
    the bucket tasks through Ray's object store, where Ray keeps small objects with the driver that starts the
    tasks: while the check runs, its memory holds up to some tens of bytes per document (the id and a line
    number), never the texts, and it is released as soon as the bucket tasks have their inputs.
    """
    buckets = max(1, min(MAX_BUCKETS, len(parts))) if kind == "jsonl" else 0
    check = ray.remote(_check_part).options(num_returns=1 + buckets)
    outputs = [check.remote(part, str(path), kind, text_field, id_field, buckets) for part in parts]
    outputs = [refs if isinstance(refs, list) else [refs] for refs in outputs]
    repeat = ray.remote(_first_repeat)
    repeats = [repeat.remote(*(refs[1 + bucket] for refs in outputs)) for bucket in range(buckets)]
    errors = [refs[0] for refs in outputs]
    del outputs  # the bucket tasks hold the id tables now
    problems = [(position, ValueError(message)) for position, message in filter(None, ray.get(errors))]
    for position, first, key in filter(None, ray.get(repeats)):
        problems.append((position, repeated_id_error(path, position, json.loads(key), first)))
    if problems:
        raise min(problems, key=lambda problem: problem[0])[1]


def _line_ranges(path: Path) -> list[dict[str, int]]:
    """Byte ranges of about RANGE_BYTES that end at line ends (only a little of the file is read to find them)."""
    size = path.stat().st_size
    ranges: list[dict[str, int]] = []
    begin = 0
    with path.open("rb") as handle:
        while begin < size:
            end = min(size, begin + RANGE_BYTES)
            if end < size:
                handle.seek(end)
                handle.readline()  # move to the end of the line the cut falls in
                end = handle.tell()
            ranges.append({"begin": begin, "end": end})
            begin = end
    return ranges


def _fingerprint(root: Path, files: list[Path]) -> str:
    """A digest of the files' relative names, sizes and modification times (a changed input is not resumed)."""
    digest = hashlib.sha256()
    for file in files:
        stat = file.stat()
        digest.update(f"{file.relative_to(root).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()
