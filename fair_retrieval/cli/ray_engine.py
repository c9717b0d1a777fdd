"""The Ray engine of `fair-retrieval index --engine ray`: its options, and input → shards → FaissIndex on Ray.

The documents are read by Ray Data tasks, not by the driver: a folder of .txt/.md files becomes a dataset of file
paths whose contents workers read; a JSONL file is cut into byte ranges at line ends, workers count the lines of
each range (so every document gets its row number as vector id) and then parse them. The driver only lists file
names, keeps one number per range, and streams `documents.jsonl` to disk batch by batch, so its memory does not
grow with the corpus. The embedding shards are kept in `<output>/shards`, so an interrupted run continues where it
stopped when started again with the same arguments (`--overwrite` starts from scratch).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import shutil
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any, cast

from fair_retrieval.calibration import Calibration
from fair_retrieval.gpu import GpuChoice

logger = logging.getLogger(__name__)

SHARDS_FOLDER = "shards"
RAY_KINDS = ("flat", "ivfpq")
TEXT_SUFFIXES = (".txt", ".md")
RANGE_BYTES = 4 << 20  # JSONL bytes per read task


def add_ray_arguments(parser: argparse.ArgumentParser) -> None:
    """Add --engine and the options of the Ray engine."""
    parser.add_argument(
        "--engine",
        choices=["local", "ray"],
        default="local",
        help="local: embed in this process; ray: read and embed on Ray Data workers (a local Ray, or the cluster "
        "in RAY_ADDRESS), resumable (default: local)",
    )
    group = parser.add_argument_group("Ray engine (--engine ray; needs pip install 'fair-retrieval[ray]')")
    group.add_argument("--workers", type=int, default=1, help="embedding workers (model copies; default: 1)")
    group.add_argument(
        "--cpus-per-worker", type=float, default=1.0, help="CPUs per worker, also its torch threads (default: 1)"
    )
    group.add_argument("--gpus-per-worker", type=float, default=0.0, help="GPUs per worker, e.g. 1 or 0.5 (default: 0)")
    group.add_argument("--shard-size", type=int, default=10_000, help="documents per Parquet shard (default: 10000)")
    group.add_argument("--opq", action="store_true", help="rotate with OPQ before IVF-PQ (slower training)")
    group.add_argument(
        "--gpu-shards",
        action="store_true",
        help="with several GPUs, split the index across them while building (default: a copy on each)",
    )
    group.add_argument(
        "--flat-limit",
        type=int,
        help="without --kind, keep an exact flat index up to this many documents, IVF-PQ above (default: 1000000)",
    )


def index_on_ray(
    args: argparse.Namespace,
    calibration: Calibration | None,
    params: dict[str, int],
    documents_path: Path,
    *,
    model: str,
    gpu: GpuChoice,
) -> tuple[Any, int]:
    """Read `args.input` on Ray workers, write `documents_path` (row i = vector id i), embed into
    `<output>/shards` with `model` and build the FaissIndex (on the GPU as `gpu` says).

    Returns:
        (index, number of documents).

    Raises:
        ValueError: for options the Ray engine does not take, an empty or malformed input, or any error of
            `embed_to_shards`/`build_index`.
    """
    from fair_retrieval.distributed.build import build_index
    from fair_retrieval.distributed.embed import embed_to_shards
    from fair_retrieval.distributed.plan import MIN_TRAIN_SIZE, PlanKind, plan_index
    from fair_retrieval.distributed.runtime import ensure_ray
    from fair_retrieval.distributed.shards import ShardFolder
    from fair_retrieval.distributed.spec import EmbedderSpec
    from fair_retrieval.index_plan import factory_plan

    kind = cast("PlanKind", args.kind or "auto")  # no --kind: flat up to --flat-limit documents, IVF-PQ above
    if kind not in (*RAY_KINDS, "auto"):
        raise ValueError(f"--engine ray builds {'/'.join(RAY_KINDS)} indices, not {kind!r}; use --engine local for it.")
    if args.opq and kind == "flat":
        raise ValueError("--opq applies to IVF-PQ; use --kind ivfpq (or no --kind).")
    spec = EmbedderSpec(
        model,
        calibration=calibration,
        pooling=args.pooling,
        max_length=args.max_length,
        batch_size=args.batch_size,
        device=args.device,
    )
    shards = Path(args.output) / SHARDS_FOLDER
    if args.overwrite and shards.exists():
        logger.info("--overwrite: removing %s", shards)
        shutil.rmtree(shards)
    ensure_ray()
    dataset, key = documents_dataset(Path(args.input), args.text_field, args.id_field)
    count = write_documents_file(dataset, documents_path)
    result = embed_to_shards(
        dataset.select_columns(["id", "text"]),
        shards,
        spec,
        workers=args.workers,
        cpus_per_worker=args.cpus_per_worker,
        gpus_per_worker=args.gpus_per_worker,
        shard_rows=args.shard_size,
        input_key=key,
    )
    logger.info(
        "Ray embedding: %d documents, %d embedded now, %d from earlier shards",
        result.total,
        result.embedded,
        result.skipped,
    )
    limit = {"flat_limit": args.flat_limit} if args.flat_limit is not None else {}
    if getattr(args, "factory", None):
        plan = replace(factory_plan(args.factory, args.search), train_size=min(result.total, MIN_TRAIN_SIZE * 10))
    else:
        plan = plan_index(result.total, ShardFolder(shards).dimension(), kind, opq=args.opq, **limit, **params)
    built = build_index(shards, plan, gpu=gpu, gpu_shards=args.gpu_shards)
    logger.info("Built %s", built.plan.describe())
    return built.index, count


def documents_dataset(path: Path, text_field: str = "text", id_field: str = "id") -> tuple[Any, str]:
    """A Ray Dataset of the documents at `path` (columns id = row number, text, document = its documents.jsonl
    line), read by Ray tasks, and a fingerprint of the input (names, sizes, modification times) for resuming.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: an empty input, or a single text file.
    """
    import ray

    if not path.exists():
        raise FileNotFoundError(f"--input {path} does not exist.")
    if path.is_dir():
        files = _text_files(path)
        if not files:
            raise ValueError(f"Found no .txt or .md files under {path}; nothing to index.")
        key = _fingerprint(path, files)
        names = [file.relative_to(path).as_posix() for file in files]
        items = [{"start": start, "paths": names[start : start + 256]} for start in range(0, len(names), 256)]
        dataset = ray.data.from_items(items).flat_map(partial(_read_text_files, root=str(path)))
        return dataset, key
    if path.suffix.lower() in TEXT_SUFFIXES:
        raise ValueError(f"{path} is a single text file; pass the folder that holds it, or a JSONL file.")
    ranges = _line_ranges(path)
    counted = ray.data.from_items(ranges).map(partial(_count_lines, path=str(path))).take_all()
    counted.sort(key=lambda row: row["begin"])
    start = 0
    for row in counted:
        row["start"], start = start, start + row["lines"]
    if start == 0:
        raise ValueError(f"Found no documents in {path}; nothing to index.")
    reader = partial(_read_jsonl_range, path=str(path), text_field=text_field, id_field=id_field)
    dataset = ray.data.from_items(counted).flat_map(reader)
    return dataset, _fingerprint(path.parent, [path])


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


def _read_text_files(item: dict[str, Any], root: str) -> list[dict[str, Any]]:
    rows = []
    for offset, name in enumerate(item["paths"]):
        file = Path(root) / name
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{file} is not UTF-8 text ({error.reason}); convert it to UTF-8.") from error
        document = json.dumps({"id": name, "text": text, "metadata": {}}, ensure_ascii=False)
        rows.append({"id": item["start"] + offset, "text": text, "document": document})
    return rows


def _count_lines(item: dict[str, Any], path: str) -> dict[str, Any]:
    with open(path, "rb") as handle:
        handle.seek(item["begin"])
        data = handle.read(item["end"] - item["begin"])
    return {**item, "lines": sum(1 for line in data.split(b"\n") if line.strip())}


def _read_jsonl_range(item: dict[str, Any], path: str, text_field: str, id_field: str) -> list[dict[str, Any]]:
    with open(path, "rb") as handle:
        handle.seek(item["begin"])
        data = handle.read(item["end"] - item["begin"])
    rows: list[dict[str, Any]] = []
    for line in (raw for raw in data.split(b"\n") if raw.strip()):
        row_id = item["start"] + len(rows)
        where = f"{path} document {row_id + 1}"
        try:
            record = json.loads(line)
        except (json.JSONDecodeError, UnicodeDecodeError) as error:
            raise ValueError(f"{where}: not valid UTF-8 JSON ({error}).") from error
        if not isinstance(record, dict) or not isinstance(record.get(text_field), str):
            raise ValueError(f"{where}: expected a JSON object with a string {text_field!r} field.")
        text = record[text_field]
        doc_id = record.get(id_field, f"line-{row_id + 1}")
        metadata = {key: value for key, value in record.items() if key not in (text_field, id_field, "metadata")}
        if isinstance(record.get("metadata"), dict):
            metadata.update(record["metadata"])
        document = json.dumps({"id": doc_id, "text": text, "metadata": metadata}, ensure_ascii=False)
        rows.append({"id": row_id, "text": text, "document": document})
    return rows


# ---------------------------------------------------------------------------------------------------- driver side


def _text_files(folder: Path) -> list[Path]:
    """Every .txt/.md file under `folder` (hidden paths skipped), sorted by relative path (names only are read)."""
    files = (p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES)
    visible = (p for p in files if not any(part.startswith(".") for part in p.relative_to(folder).parts))
    return sorted(visible, key=lambda p: p.relative_to(folder).as_posix())


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
    digest = hashlib.sha256()
    for file in files:
        stat = file.stat()
        digest.update(f"{file.relative_to(root).as_posix()}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()
