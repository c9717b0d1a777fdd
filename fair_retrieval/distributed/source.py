"""The input of a distributed job: a Ray Dataset, or Parquet/JSONL paths read into one, checked before any model
is loaded.

`scan` reads only the id and text columns, in Ray tasks, and brings back the ids and one validity flag per row, so
a job with an empty input, a missing column, a non-string text or a repeated id fails in seconds with a message
that says what to fix, instead of inside a worker after the model has been loaded (where Ray would hide the error
behind its own wrappers).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fair_retrieval.distributed.runtime import import_pyarrow, import_ray
from fair_retrieval.inputs import visible_files
from fair_retrieval.validate import is_int

PARQUET_SUFFIXES = (".parquet",)
JSONL_SUFFIXES = (".jsonl", ".json")
_SHOWN = 5
_SCAN_ROWS = 16_384


@dataclass(frozen=True)
class Scan:
    """What `scan` found: every id (a pyarrow Array, int64 or string, in dataset order) and the row count."""

    ids: Any
    count: int


def as_dataset(data: Any) -> Any:
    """A Ray Dataset from a Dataset (returned as is) or from Parquet/JSONL files or folders of them.

    Args:
        data: a `ray.data.Dataset`; a path (str or PathLike) to a .parquet/.jsonl/.json file or to a local folder of
            such files; or a list of paths of one format. Files may also be URIs Ray reads (s3://…/part.parquet);
            for a remote folder, read it with `ray.data.read_parquet` yourself and pass the Dataset.

    Raises:
        FileNotFoundError: for a local path that does not exist.
        ValueError: for a folder without such files, mixed formats, or an unknown suffix.
        TypeError: for anything else.
    """
    ray = import_ray()
    if isinstance(data, ray.data.Dataset):
        return data
    paths = _as_paths(data)
    formats = {_format_of(path) for path in paths}
    if len(formats) != 1:
        raise ValueError(f"The input mixes Parquet and JSONL files ({paths[:_SHOWN]}); pass files of one format.")
    fmt = formats.pop()
    if fmt == "parquet":
        return ray.data.read_parquet(paths)
    return ray.data.read_json(paths, lines=True)


def check_columns(dataset: Any, text_column: str, id_column: str) -> None:
    """Fail early when the dataset lacks the text or id column, or their types cannot be what is needed.

    Raises:
        ValueError: a missing column, or no schema at all (an empty dataset).
        TypeError: a text column that is not string-typed, or an id column that is neither integer nor string.
    """
    pa = import_pyarrow()
    if text_column == id_column:
        raise ValueError(f"text_column and id_column are both {text_column!r}; they must be different columns.")
    try:
        schema = dataset.schema()
    except (pa.ArrowTypeError, pa.ArrowInvalid) as error:
        raise TypeError(f"The dataset's rows do not share one schema ({error}); give every column one type.") from error
    if schema is None:
        raise ValueError("The dataset is empty (no rows, no columns); there is nothing to embed.")
    names = list(schema.names)
    missing = [column for column in (text_column, id_column) if column not in names]
    if missing:
        raise ValueError(
            f"The dataset has no column {' or '.join(repr(c) for c in missing)} (its columns: {names}). Name the "
            "columns with text_column=… / id_column=… (CLI: --text-field / --id-field), or add an id column, e.g. "
            "with ds.add_column(...)."
        )
    types = dict(zip(schema.names, schema.types, strict=True))
    text_type, id_type = types[text_column], types[id_column]
    if isinstance(text_type, pa.DataType) and not _is_string(pa, text_type) and not pa.types.is_null(text_type):
        raise TypeError(
            f"Column {text_column!r} must hold strings (the documents), but its type is {text_type}; convert it, "
            "or name the text column with text_column=…."
        )
    if isinstance(id_type, pa.DataType) and not (pa.types.is_integer(id_type) or _is_string(pa, id_type)):
        raise TypeError(f"Column {id_column!r} must hold integer or string ids, but its type is {id_type}.")


def scan(dataset: Any, text_column: str, id_column: str) -> Scan:
    """Read the ids and check every row: an id that is present and unique, a text that is a string.

    Raises:
        ValueError: an empty dataset, missing ids, or repeated ids (the message shows some).
        TypeError: rows whose text is missing or not a string (the message shows their ids).
    """
    pa = import_pyarrow()
    check_columns(dataset, text_column, id_column)
    flags = dataset.select_columns([id_column, text_column]).map_batches(
        _row_flags,
        batch_size=_SCAN_ROWS,  # many small blocks are bundled into few tasks
        batch_format="pyarrow",
        fn_kwargs={"text_column": text_column, "id_column": id_column},
    )
    try:
        batches = list(flags.iter_batches(batch_size=None, batch_format="pyarrow"))
    except (pa.ArrowTypeError, pa.ArrowInvalid) as error:
        raise TypeError(f"The dataset's rows do not share one schema ({error}); give every column one type.") from error
    batches = [batch for batch in batches if batch.num_rows]
    if not batches:
        raise ValueError("The dataset has no rows; there is nothing to embed.")
    table = pa.concat_tables(batches)
    ids, text_ok = table.column("id").combine_chunks(), table.column("text_ok").combine_chunks()
    if ids.null_count:
        raise ValueError(f"{ids.null_count} row(s) have no {id_column!r}; give every row an id.")
    bad = pa.compute.filter(ids, pa.compute.invert(text_ok))
    if len(bad):
        raise TypeError(
            f"{len(bad)} row(s) have a {text_column!r} that is missing or not a string, e.g. ids "
            f"{bad.slice(0, _SHOWN).to_pylist()}; every document needs a text (use '' for an empty one)."
        )
    repeated = _repeated(pa, ids)
    if repeated:
        raise ValueError(
            f"ids repeat: {repeated[:_SHOWN]}{' …' if len(repeated) > _SHOWN else ''}; every id must be unique."
        )
    return Scan(ids=ids, count=len(ids))


def normalise_ids(column: Any) -> Any:
    """Ids as int64 or (non-large) string, so that every shard of a job has the same id type."""
    pa = import_pyarrow()
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_integer(column.type):
        return column.cast(pa.int64())
    if _is_string(pa, column.type):
        return column.cast(pa.string())
    values = column.to_pylist()
    if all(is_int(value) for value in values):
        return pa.array(values, type=pa.int64())
    if all(isinstance(value, str) for value in values):
        return pa.array(values, type=pa.string())
    raise TypeError(f"ids must be all integers or all strings, got {column.type}.")


def _row_flags(batch: Any, text_column: str, id_column: str) -> Any:
    """Per row: its id (normalised) and whether its text is a non-null string (runs in Ray tasks)."""
    pa = import_pyarrow()
    texts = batch.column(text_column).combine_chunks()
    if _is_string(pa, texts.type):
        text_ok = pa.compute.is_valid(texts)
    else:
        text_ok = pa.array([isinstance(value, str) for value in texts.to_pylist()], type=pa.bool_())
    return pa.table({"id": normalise_ids(batch.column(id_column)), "text_ok": text_ok})


def _repeated(pa: Any, ids: Any) -> list[Any]:
    """Ids that occur more than once (at most a few, for the message)."""
    if len(pa.compute.unique(ids)) == len(ids):
        return []
    counts = pa.compute.value_counts(ids)
    values, occurrences = counts.field("values"), counts.field("counts")
    return pa.compute.filter(values, pa.compute.greater(occurrences, 1)).slice(0, _SHOWN + 1).to_pylist()  # type: ignore[no-any-return]


def _is_string(pa: Any, data_type: Any) -> bool:
    return bool(pa.types.is_string(data_type) or pa.types.is_large_string(data_type))


def _as_paths(data: Any) -> list[str]:
    if isinstance(data, str | os.PathLike):
        items: Sequence[Any] = [data]
    elif isinstance(data, list | tuple) and data and all(isinstance(item, str | os.PathLike) for item in data):
        items = data
    else:
        raise TypeError(
            "data must be a ray.data.Dataset, a path to Parquet/JSONL files, or a list of such paths; got "
            f"{type(data).__name__}."
        )
    paths = []
    for item in items:
        text = os.fspath(item)
        if "://" not in text and not Path(text).exists():
            raise FileNotFoundError(f"Input {text} does not exist.")
        paths.append(text)
    return paths


def _format_of(path: str) -> str:
    """ "parquet" or "jsonl" from a file's suffix, or from the files inside a local folder."""
    local = Path(path) if "://" not in path else None
    if local is not None and local.is_dir():
        suffixes = {p.suffix.lower() for p in visible_files(local)}
        found = {"parquet" for s in suffixes if s in PARQUET_SUFFIXES} | {
            "jsonl" for s in suffixes if s in JSONL_SUFFIXES
        }
        if len(found) != 1:
            what = "no .parquet or .jsonl files" if not found else "both .parquet and .jsonl files"
            raise ValueError(f"Folder {path} holds {what}; pass a folder of one format, or the files themselves.")
        return found.pop()
    suffix = Path(path.split("?")[0]).suffix.lower()
    if suffix in PARQUET_SUFFIXES:
        return "parquet"
    if suffix in JSONL_SUFFIXES:
        return "jsonl"
    raise ValueError(f"Input {path}: unknown suffix {suffix!r}; use .parquet or .jsonl files (or a Ray Dataset).")
