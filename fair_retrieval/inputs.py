"""User input: validation of text batches (embedder, CLI, adapters) and reading documents from files.

Documents come from a folder of .txt/.md files (id = path relative to the folder) or from a JSONL file (one JSON
object per line with a text field and optional id/metadata fields); both the `index` command and the Ray engine
read them here.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)


def ensure_text_list(texts: object, name: str = "texts") -> list[str]:
    """Return `texts` as a list of str, or raise a TypeError that names the first bad item.

    A single string is refused on purpose: iterating it would embed one character per row.

    Raises:
        TypeError: if `texts` is a str/bytes, not iterable, or holds a non-str item (the message gives its index).
    """
    if isinstance(texts, str | bytes | bytearray):
        raise TypeError(
            f"{name} must be a list of strings, got a single {type(texts).__name__}; wrap it in a list: [text]."
        )
    if not isinstance(texts, Iterable):
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__}.")
    result = list(texts)
    for index, item in enumerate(result):
        if not isinstance(item, str):
            raise TypeError(
                f"{name}[{index}] is {type(item).__name__}, expected str"
                + (" (decode bytes first, e.g. text.decode('utf-8'))." if isinstance(item, bytes | bytearray) else ".")
            )
    return result


# ------------------------------------------------------------------------------------------------ documents

TEXT_SUFFIXES = (".txt", ".md")


@dataclass(frozen=True)
class Document:
    """One document to index: its id (str or int), its text and free-form JSON metadata."""

    id: str | int
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)


def read_documents(path: str | Path, text_field: str = "text", id_field: str = "id") -> list[Document]:
    """Documents from a folder of .txt/.md files or from a JSONL file.

    Files of other types in a folder are skipped with one warning that gives how many and their extensions.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: on an empty input, a bad JSONL line (the message gives its number), duplicate ids, or a file
            that is not UTF-8.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist.")
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
    """Every .txt/.md file under `folder` (recursively, hidden paths skipped), id = its relative POSIX path.

    Other files are not read; a warning says how many were skipped and which extensions they have, so a folder of
    PDFs or HTML does not silently index nothing (or only part of what the user expected).
    """
    documents: list[Document] = []
    skipped: Counter[str] = Counter()
    for file in sorted((p for p in folder.rglob("*") if p.is_file()), key=lambda p: p.relative_to(folder).as_posix()):
        relative = file.relative_to(folder)
        if any(part.startswith(".") for part in relative.parts):
            continue
        if file.suffix.lower() not in TEXT_SUFFIXES:
            skipped[file.suffix.lower() or "(no extension)"] += 1
            continue
        try:
            text = file.read_text(encoding="utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{file} is not UTF-8 text ({error.reason}); convert it to UTF-8.") from error
        documents.append(Document(id=relative.as_posix(), text=text))
    if skipped:
        total = sum(skipped.values())
        kinds = ", ".join(f"{suffix} ({count})" for suffix, count in sorted(skipped.items()))
        one = total == 1
        logger.warning(
            "Skipped %d %s under %s that %s not .txt or .md: %s. Convert %s to text (or JSONL) to index %s.",
            total,
            "file" if one else "files",
            folder,
            "is" if one else "are",
            kinds,
            "it" if one else "them",
            "it" if one else "them",
        )
    return documents


def read_jsonl(path: Path, text_field: str = "text", id_field: str = "id") -> list[Document]:
    """One document per non-blank line of a JSONL file.

    A line is a JSON object with a string `text_field`, an optional `id_field` (string or integer; default
    "line-<n>") and any other fields, kept as metadata (a "metadata" object is merged into them).

    Raises:
        ValueError: on a line that is not a JSON object with the text field, on a duplicate id, or on non-UTF-8.
    """
    documents: list[Document] = []
    seen: dict[str | int, int] = {}
    try:
        with Path(path).open(encoding="utf-8") as handle:
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
        raise ValueError(f"{where}: not valid JSON: {error.msg} (column {error.colno}).") from error
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
