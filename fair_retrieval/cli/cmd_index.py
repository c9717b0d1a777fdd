"""`fair-retrieval index`: documents → calibrated embeddings → a FAISS index folder that `search` can query.

Input is a folder of .txt/.md files (id = path relative to the folder) or a JSONL file (one JSON object per line with
a text field and optional id/metadata fields). The output folder holds:

- `index.faiss` + `index.json`: the FaissIndex; vector id i is row i of documents.jsonl.
- `documents.jsonl`: one `{"id", "text", "metadata"}` object per line.
- `manifest.json`: how the vectors were made (model, pooling, max_length, calibration), so queries are embedded
  by the same model; written last, so a folder with a manifest is complete.

With `--engine ray` the documents are embedded on Ray Data workers instead (see `fair_retrieval.distributed`); the
folder then also keeps the resumable embedding shards in `shards/`, and without `--kind` the index is an exact
flat one for small corpora and IVF-PQ (trained on a sample) for large ones.
"""

from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from fair_retrieval.cli.options import (
    add_calibration_arguments,
    add_model_arguments,
    calibration_from_args,
    dump_json,
    embedder_kwargs,
)
from fair_retrieval.cli.ray_engine import add_ray_arguments, index_on_ray

logger = logging.getLogger(__name__)

MANIFEST_FILE = "manifest.json"
DOCUMENTS_FILE = "documents.jsonl"
MANIFEST_FORMAT = "fair-retrieval-index"
MANIFEST_VERSION = 1
TEXT_SUFFIXES = (".txt", ".md")
KINDS = ("flat", "hnsw", "ivf", "ivfpq")
_OWN_FILES = ("index.faiss", "index.json", DOCUMENTS_FILE, MANIFEST_FILE)


@dataclass(frozen=True)
class Document:
    """One document to index: its id (str or int), its text and free-form JSON metadata."""

    id: str | int
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add the `index` subcommand."""
    parser = subparsers.add_parser(
        "index",
        help="embed documents (calibrated) into a FAISS index folder",
        description="Embed a folder of .txt/.md files or a JSONL file with calibration and write a FAISS index "
        "folder (index files, documents.jsonl, manifest.json) for `fair-retrieval search`.",
    )
    add_model_arguments(parser)
    parser.add_argument("--input", required=True, type=Path, help="a folder of .txt/.md files, or a JSONL file")
    parser.add_argument("--output", required=True, type=Path, help="folder to write the index into")
    parser.add_argument(
        "--kind",
        choices=KINDS,
        help="FAISS index kind (default: flat, exact; with --engine ray: flat or ivfpq by corpus size, see "
        "--flat-limit). ivfpq without --index-param nlist/m/nbits is sized to the corpus (IVF-PQ + SQ8 "
        "refinement, ≥ 0.95 recall@10 at about 30%% of the flat size)",
    )
    parser.add_argument(
        "--factory",
        help="instead of --kind, any faiss index-factory string, e.g. 'OPQ48,IVF4096,PQ48x8,Refine(SQ8)' "
        "(--engine local)",
    )
    parser.add_argument(
        "--search",
        help="search parameters for --factory by faiss ParameterSpace name, e.g. 'nprobe=64,k_factor_rf=16'",
    )
    parser.add_argument(
        "--index-param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="FaissIndex parameter, repeatable: nlist, nprobe (ivf/ivfpq), m, nbits, k_factor (ivfpq), "
        "M, ef_construction, ef_search (hnsw)",
    )
    parser.add_argument("--gpu", choices=["auto", "on", "off"], default="auto", help="FAISS on GPU (default: auto)")
    parser.add_argument("--text-field", default="text", help="JSONL field holding the text (default: text)")
    parser.add_argument("--id-field", default="id", help="JSONL field holding the id (default: id; optional)")
    parser.add_argument("--overwrite", action="store_true", help="replace an index already in --output")
    add_calibration_arguments(parser)
    add_ray_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Read, embed, index and write; prints a one-line summary."""
    from fair_retrieval import FairEmbedder, FaissIndex, __version__

    require_faiss()
    output: Path = args.output
    _check_output(output, args.overwrite)
    params: dict[str, Any] = parse_index_params(args.index_param)
    calibration = calibration_from_args(args)
    if args.factory and args.kind:
        raise ValueError("Pass either --kind or --factory, not both.")
    if args.engine == "ray":  # Ray workers read the input; ids 0..n-1 = rows of documents.jsonl, written by it
        output.mkdir(parents=True, exist_ok=True)
        (output / MANIFEST_FILE).unlink(missing_ok=True)  # until the new one is written, the folder is incomplete
        index, count = index_on_ray(
            args,
            calibration,
            params,
            output / DOCUMENTS_FILE,
            model=model_reference(args.model),
            gpu=gpu_choice(args.gpu),
        )
        pooling, max_length = args.pooling, args.max_length  # None means the model's own, as in search
    else:
        documents = read_documents(args.input, text_field=args.text_field, id_field=args.id_field)
        logger.info("Read %d documents from %s", len(documents), args.input)
        embedder = FairEmbedder(args.model, calibration=calibration, **embedder_kwargs(args))
        vectors = embedder.embed_documents([doc.text for doc in documents], show_progress_bar=True)
        shape = {"factory": args.factory, "search": args.search} if args.factory else {"kind": args.kind or "flat"}
        index = FaissIndex(vectors.shape[1], metric="ip", gpu=gpu_choice(args.gpu), **shape, **params)
        index.add(vectors)  # ids 0..n-1: row numbers of documents.jsonl
        pooling, max_length = embedder.pooling, embedder.max_length
        output.mkdir(parents=True, exist_ok=True)
        (output / MANIFEST_FILE).unlink(missing_ok=True)  # until the new one is written, the folder is incomplete
        write_documents(documents, output / DOCUMENTS_FILE)
        count = len(documents)
    index.save(output)
    manifest = {
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "model": model_reference(args.model),
        "pooling": pooling,
        "max_length": max_length,
        "calibration": calibration.to_dict() if calibration is not None else None,
        "dim": index.dim,
        "count": count,
        "kind": index.kind,
        "metric": "ip",
        "params": index.params,
        "documents": DOCUMENTS_FILE,
        "engine": args.engine,
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "fair_retrieval_version": __version__,
    }
    dump_json(manifest, output / MANIFEST_FILE)
    state = "calibrated" if calibration is not None else "plain"
    print(f"Indexed {count} documents ({state}, {index.dim}-d, {index.kind}) into {output}")
    return 0


# ---------------------------------------------------------------------------------------------------- reading


def read_documents(path: Path, text_field: str = "text", id_field: str = "id") -> list[Document]:
    """Documents from a folder of .txt/.md files or from a JSONL file.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: on an empty input, a bad JSONL line (the message gives its number), duplicate ids, or a file
            that is not UTF-8.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"--input {path} does not exist.")
    if path.is_dir():
        documents = read_folder(path)
    elif path.suffix.lower() in TEXT_SUFFIXES:
        raise ValueError(f"{path} is a single text file; pass the folder that holds it, or a JSONL file.")
    else:
        documents = read_jsonl(path, text_field=text_field, id_field=id_field)
    if not documents:
        what = f".txt or .md files under {path}" if path.is_dir() else f"documents in {path}"
        raise ValueError(f"Found no {what}; nothing to index.")
    return documents


def read_folder(folder: Path) -> list[Document]:
    """Every .txt/.md file under `folder` (recursively, hidden paths skipped), id = its relative POSIX path."""
    files = sorted(
        (p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in TEXT_SUFFIXES),
        key=lambda p: p.relative_to(folder).as_posix(),
    )
    documents = []
    for file in files:
        relative = file.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{file} is not UTF-8 text ({error.reason}); convert it to UTF-8.") from error
        documents.append(Document(id=relative.as_posix(), text=text))
    return documents


def read_jsonl(path: Path, text_field: str = "text", id_field: str = "id") -> list[Document]:
    """One document per non-blank line of a JSONL file.

    A line is a JSON object with a string `text_field`, an optional `id_field` (string or integer; default
    "line-<n>") and any other fields, kept as metadata (a "metadata" object is merged into them).
    """
    documents: list[Document] = []
    seen: dict[str | int, int] = {}
    try:
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                document = _parse_line(line, number, path, text_field, id_field)
                if document.id in seen:
                    raise ValueError(
                        f"{path} line {number}: id {document.id!r} was already used on line {seen[document.id]}; "
                        "ids must be unique."
                    )
                seen[document.id] = number
                documents.append(document)
    except UnicodeDecodeError as error:
        raise ValueError(f"{path} is not UTF-8 ({error.reason}); convert it to UTF-8.") from error
    return documents


def _parse_line(line: str, number: int, path: Path, text_field: str, id_field: str) -> Document:
    where = f"{path} line {number}"
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not valid JSON ({error.msg} at column {error.colno}).") from error
    if not isinstance(record, dict):
        raise ValueError(f"{where}: expected a JSON object per line, got {type(record).__name__}.")
    text = record.get(text_field)
    if not isinstance(text, str):
        if text_field not in record:
            raise ValueError(
                f"{where}: no {text_field!r} field (fields: {sorted(record)}); name the text field with --text-field."
            )
        raise ValueError(f"{where}: {text_field!r} must be a string, got {type(text).__name__}.")
    doc_id = record.get(id_field, f"line-{number}")
    if isinstance(doc_id, bool) or not isinstance(doc_id, str | int):
        raise ValueError(f"{where}: {id_field!r} must be a string or an integer, got {type(doc_id).__name__}.")
    metadata = {key: value for key, value in record.items() if key not in (text_field, id_field, "metadata")}
    nested = record.get("metadata")
    if isinstance(nested, dict):
        metadata.update(nested)
    elif "metadata" in record:
        metadata["metadata"] = nested
    return Document(id=doc_id, text=text, metadata=metadata)


# ---------------------------------------------------------------------------------------------------- writing


def write_documents(documents: list[Document], path: Path) -> None:
    """Write documents.jsonl: row i is the document stored under vector id i."""
    with path.open("w", encoding="utf-8") as handle:
        for doc in documents:
            row = {"id": doc.id, "text": doc.text, "metadata": doc.metadata}
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def parse_index_params(items: list[str]) -> dict[str, int]:
    """Parse repeated --index-param KEY=VALUE (integer values) into FaissIndex keyword arguments."""
    params: dict[str, int] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--index-param {item!r}: use KEY=VALUE, e.g. --index-param nlist=256.")
        try:
            params[key.strip()] = int(value)
        except ValueError as error:
            raise ValueError(f"--index-param {item!r}: the value must be an integer.") from error
    return params


def require_faiss() -> None:
    """Fail early, as a usage error (exit code 2), when faiss is not installed."""
    from fair_retrieval.index import import_faiss

    try:
        import_faiss()
    except ImportError as error:
        raise ValueError(str(error)) from error


def gpu_choice(flag: str) -> Any:
    """Map --gpu auto/on/off to FaissIndex's gpu argument."""
    return {"auto": "auto", "on": True, "off": False}[flag]


def model_reference(model: str) -> str:
    """The model as the manifest records it: an absolute path for a local folder (so search works from any
    working directory), else the Hub id unchanged."""
    path = Path(model).expanduser()
    return str(path.resolve()) if path.exists() else model


def _check_output(output: Path, overwrite: bool) -> None:
    if output.exists() and not output.is_dir():
        raise ValueError(f"--output {output} is a file; pass a folder.")
    if output.is_dir() and not overwrite:
        ours = [name for name in _OWN_FILES if (output / name).exists()]
        if ours:
            raise ValueError(
                f"--output {output} already holds an index ({', '.join(ours)}); pass --overwrite to replace it, "
                "or choose another folder."
            )
