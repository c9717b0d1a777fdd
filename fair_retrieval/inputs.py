"""User input: validation of text batches (embedder, CLI, adapters) and reading documents from files.

Documents come from a folder of .txt/.md files (id = path relative to the folder) or from a JSONL file (one JSON
object per line with a text field and optional id/metadata fields). Both engines of the `index` command read them
with the functions here: `--engine local` through `read_documents`, the Ray engine through the same folder walker
and line parser, called on its workers (`fair_retrieval.distributed.documents`).
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from fair_retrieval.jsonio.paths import is_inside
from fair_retrieval.text_checks import (
    MAX_TEXT_BYTES,
    NESTING_PROBLEM,
    check_query,
    check_readable,
    id_problem,
    lone_surrogate,
    surrogate_path,
    text_problem,
    too_deep,
)
from fair_retrieval.validate import is_int

logger = logging.getLogger(__name__)

__all__ = [  # the text checks live in `fair_retrieval.text_checks`; they are imported from here too
    "MAX_TEXT_BYTES",
    "check_query",
    "check_readable",
    "check_store_entries",
    "lone_surrogate",
    "readable_texts",
    "surrogate_path",
    "text_problem",
]


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


def readable_texts(texts: object, name: str = "texts") -> list[str]:
    """`texts` as a list of str that the tokenizer can read (`ensure_text_list`, then `check_readable` over the
    whole batch), so no text of a batch is embedded before one that would fail.

    Raises:
        TypeError: as `ensure_text_list`.
        ValueError: a text holding a lone surrogate (`check_readable`), naming it.
    """
    text_list = ensure_text_list(texts, name)
    check_readable(text_list, name)
    return text_list


BOM = "\ufeff"
"""The byte-order mark some editors put at the start of UTF-8 files; removed from what is read."""


def check_store_entries(
    texts: Sequence[str | None],
    ids: Sequence[Any],
    metadatas: Sequence[Any] | None = None,
    *,
    first_position: int = 0,
    reserved: Sequence[str] = (),
) -> None:
    """Refuse, before anything is embedded or stored, texts a vector store must not take: empty or whitespace-only
    texts, and lone surrogates in a text, an id or metadata (they would fail when the store is saved as UTF-8
    JSON, long after); empty ids; and metadata holding a key the store reserves for what it adds to results. The
    vector stores of both adapters call this on every add.

    Args:
        texts: the texts (or node contents), in input order; None for an entry without text (not checked).
        ids: their ids, one per text.
        metadatas: their metadata dicts, or None.
        first_position: the position of the first entry in the caller's input, for the messages.
        reserved: top-level metadata keys the store puts in its results (the stores' `RESERVED_KEYS`):
            stored under them, a user's value would be replaced in every result.

    Raises:
        ValueError: naming every offending entry by position and id (the first few when there are many).
    """
    problems = []
    for offset, (text, id_) in enumerate(zip(texts, ids, strict=False)):
        position = first_position + offset
        where = f"[{position}] (id {ascii(id_) if isinstance(id_, str) else repr(id_)})"
        problem = text_problem(text) if text is not None else None
        if problem is None:
            problem = id_problem(id_)
        if problem is None and metadatas is not None and offset < len(metadatas):
            found = None if too_deep(metadatas[offset]) else surrogate_path(metadatas[offset], "metadata")
            taken = [key for key in reserved if isinstance(metadatas[offset], dict) and key in metadatas[offset]]
            if too_deep(metadatas[offset]):
                problem = NESTING_PROBLEM
            elif found is not None:
                problem = f"{found} holds a lone surrogate, which is not valid Unicode"
            elif taken:
                problem = (
                    f"metadata key {taken[0]!r} is reserved: the store's results carry their own value under it "
                    f"(a multi-vector hit's best window); rename the key, or drop it from a search result's "
                    "metadata before adding that document again"
                )
        if problem is not None:
            problems.append(f"{where}: {problem}")
    if problems:
        shown = "; ".join(problems[:5]) + (f"; … ({len(problems) - 5} more)" if len(problems) > 5 else "")
        raise ValueError(f"Nothing was stored: {shown}. Fix or drop these entries and add again.")


# ------------------------------------------------------------------------------------------------ documents
#
# One definition of how documents are read, for both engines of `fair-retrieval index`: `--engine local` calls
# `read_documents`; the Ray engine (`fair_retrieval.distributed.documents`) lists a folder with `text_file_names`
# and reads its files with `read_text_file` on workers, and parses the lines of a JSONL file with `jsonl_lines`
# and `parse_jsonl_line` on workers, reporting repeated ids with `repeated_id_error`. So the same input gives the
# same documents (ids, texts, metadata), or the same error, on either engine.

TEXT_SUFFIXES = (".txt", ".md")

InputKind = Literal["folder", "jsonl"]


@dataclass(frozen=True)
class Document:
    """One document to index: its id, its text and free-form JSON metadata.

    Ids are strings, as in the vector stores (one rule: `text_checks.id_problem`); a JSONL integer id is read as its
    decimal digits (`parse_jsonl_line`).
    """

    id: str
    text: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> str:
        """The document as one line of an index's documents.jsonl: {"id", "text", "metadata"}, UTF-8 kept as is."""
        return json.dumps({"id": self.id, "text": self.text, "metadata": self.metadata}, ensure_ascii=False)


def input_kind(path: Path) -> InputKind:
    """Whether `path` is read as a folder of .txt/.md files or as a JSONL file.

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: for a single .txt/.md file (its folder, or a JSONL file, is what can be indexed).
    """
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist.")
    if path.is_dir():
        return "folder"
    if path.suffix.lower() in TEXT_SUFFIXES:
        raise ValueError(f"{path} is a single text file; pass the folder that holds it, or a JSONL file.")
    if path.suffix.lower() in UNREAD_SUFFIXES or _starts_with(path, UNREAD_MAGIC):
        raise ValueError(
            f"{path} is a PDF (or another binary document), which is not supported: extract its text first (e.g. "
            "`pdftotext file.pdf file.txt`) and pass the folder of .txt files, or a JSONL file of the texts."
        )
    return "jsonl"


UNREAD_SUFFIXES = (".pdf", ".docx", ".doc", ".odt", ".rtf", ".epub")
"""Document formats an input is never read as (their text must be extracted first)."""
UNREAD_MAGIC = b"%PDF-"


def _starts_with(path: Path, magic: bytes) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(len(magic)) == magic
    except OSError:
        return False


def encoding_hint(raw: bytes) -> str:
    """What to say of bytes that are not UTF-8: their encoding when a byte-order mark names it (UTF-16, UTF-32)."""
    marks = (
        (b"\xff\xfe\x00\x00", "UTF-32"),
        (b"\x00\x00\xfe\xff", "UTF-32"),
        (b"\xff\xfe", "UTF-16"),
        (b"\xfe\xff", "UTF-16"),
    )
    for mark, name in marks:
        if raw.startswith(mark):
            return f" (it is {name}: it starts with a {name} byte-order mark)"
    return ""


def no_documents_error(path: Path, kind: InputKind) -> ValueError:
    """The error for an input that holds no document (a folder without text files, a JSONL file of blank lines)."""
    what = f".txt or .md files under {path}" if kind == "folder" else f"documents in {path}"
    return ValueError(f"Found no {what}; nothing to index.")


class InputProblemsError(ValueError):
    """An input with documents that cannot be indexed; the message lists every one (not only the first).

    Attributes:
        path: the input folder or JSONL file.
        problems: one line per bad file or line, saying what is wrong and what to do.
    """

    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path, self.problems = Path(path), list(problems)
        if len(problems) == 1:
            message = problems[0]
        else:
            listed = "\n".join(f"  {problem}" for problem in problems)
            message = (
                f"{len(problems)} problems in {path}; nothing was indexed. Fix them, or skip what is bad with "
                f"--skip-bad-files:\n{listed}"
            )
        super().__init__(message)


def read_documents(
    path: str | Path, text_field: str = "text", id_field: str = "id", *, skip_bad: bool = False
) -> list[Document]:
    """Documents from a folder of .txt/.md files or from a JSONL file, every one checked before any is returned.

    The whole input is read first (`scan_documents`) and every problem found is reported at once: file names that
    are not UTF-8, contents that are not UTF-8, JSONL lines that are not JSON objects with a text, empty or
    whitespace-only texts, lone surrogates in a text, id or metadata, repeated ids. A UTF-8 byte-order mark is
    removed. Files of other types in a folder are skipped with one warning that gives how many and their
    extensions.

    Args:
        path: the folder or JSONL file.
        text_field: the JSONL field holding the text.
        id_field: the JSONL field holding the id.
        skip_bad: return the good documents and log a WARNING listing what was skipped, instead of refusing.

    Raises:
        FileNotFoundError: if `path` does not exist.
        InputProblemsError: (a ValueError) listing every problem (unless `skip_bad`).
        ValueError: on an input without documents (also when every one was skipped).
    """
    path = Path(path)
    documents, problems = scan_documents(path, text_field, id_field)
    if problems and not skip_bad:
        raise InputProblemsError(path, problems)
    if problems:
        logger.warning(
            "Skipped %d bad %s of %s:\n%s",
            len(problems),
            "entry" if len(problems) == 1 else "entries",
            path,
            "\n".join(f"  {problem}" for problem in problems),
        )
    if not documents:
        raise no_documents_error(path, input_kind(path))
    return documents


def scan_documents(path: Path, text_field: str = "text", id_field: str = "id") -> tuple[list[Document], list[str]]:
    """Read the whole input: the good documents, and one message per bad file or line (in file or line order).

    Raises:
        FileNotFoundError: if `path` does not exist.
        ValueError: for a single .txt/.md file (`input_kind`).
    """
    documents: list[Document] = []
    problems: list[str] = []
    if input_kind(path) == "folder":
        for name in text_file_names(path):
            try:
                documents.append(read_text_file(path, name))
            except ValueError as error:
                problems.append(str(error))
        return documents, problems
    seen: dict[str, int] = {}
    try:
        with path.open("rb") as handle:
            for number, line in jsonl_lines(handle):
                try:
                    document = parse_jsonl_line(line, number, path, text_field, id_field)
                except ValueError as error:
                    problems.append(str(error))
                    continue
                if document.id in seen:
                    problems.append(str(repeated_id_error(path, number, document.id, seen[document.id])))
                    continue
                seen[document.id] = number
                documents.append(document)
    except OSError as error:  # the one input file: a part read is no input to index, whatever --skip-bad-files says
        raise unreadable_error(path, error) from error
    return documents, problems


def read_folder(folder: Path) -> list[Document]:
    """Every .txt/.md file under `folder` (see `text_file_names`), id = its relative POSIX path, no metadata.

    Raises:
        ValueError: for a file `read_text_file` refuses (the first one, in id order).
    """
    return [read_text_file(folder, name) for name in text_file_names(folder)]


def visible_files(folder: Path) -> list[Path]:
    """Every file under `folder`, recursively, sorted by relative POSIX path; hidden paths are skipped: a file whose
    name, or the name of a folder between `folder` and it, starts with "." (.git, .DS_Store, editor backups).

    The one walk of an input folder: the document reader and the format checks of the Ray input and of `--data`
    all see the same files.
    """
    found = []
    for file in folder.rglob("*"):
        relative = file.relative_to(folder)
        if file.is_file() and not any(part.startswith(".") for part in relative.parts):
            found.append((relative.as_posix(), file))
    return [file for _, file in sorted(found)]


def text_file_names(folder: Path) -> list[str]:
    """The .txt/.md files under `folder` (recursively, hidden paths skipped) as relative POSIX paths, sorted.

    Only names are read, not contents. Other files are skipped with one warning that says how many and which
    extensions they have, so a folder of PDFs or HTML does not silently index nothing (or only part of what the
    user expected).
    """
    names: list[str] = []
    skipped: Counter[str] = Counter()
    for file in visible_files(folder):
        relative = file.relative_to(folder)
        if file.suffix.lower() not in TEXT_SUFFIXES:
            skipped[file.suffix.lower() or "(no extension)"] += 1
            continue
        names.append(relative.as_posix())
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
    return names


def read_text_file(folder: Path, name: str) -> Document:
    """The document of the file `name` (a relative POSIX path from `text_file_names`) under `folder`; a UTF-8
    byte-order mark at its start is removed.

    Raises:
        ValueError: if the file name or its content is not UTF-8, or its text is empty, whitespace only or holds a
            lone surrogate, or the file is a link leading out of `folder`, bigger than `MAX_TEXT_BYTES` or cannot
            be read (any OS error: no permission, deleted since the folder was listed, an I/O error); the message
            names the file and says what to do.
    """
    if lone_surrogate(name) is not None:  # a name that is not UTF-8 (Python keeps its bytes as surrogates)
        shown = os.fsencode(name).decode("utf-8", "backslashreplace")
        raise ValueError(
            f"{folder}: the file name '{shown}' is not UTF-8; rename the file (ids and documents.jsonl are UTF-8)."
        )
    file = folder / name
    if not is_inside(folder, file):  # a link to a file elsewhere: never indexed unseen
        raise ValueError(
            f"{file} is a symbolic link to {os.path.realpath(file)}, outside {folder}; copy the file into the folder "
            "to index it, or remove the link."
        )
    try:
        size = file.stat().st_size
        if size > MAX_TEXT_BYTES:
            raise ValueError(
                f"{file} holds {size} bytes, more than the {MAX_TEXT_BYTES} a text may have; split it into several "
                "files."
            )
        raw = file.read_bytes()
    except OSError as error:  # unreadable, gone since the folder was listed, a folder now: the file's problem
        raise unreadable_error(file, error) from error
    try:
        text = raw.decode("utf-8").removeprefix(BOM)
    except UnicodeDecodeError as error:
        raise ValueError(
            f"{file} is not UTF-8 text{encoding_hint(raw)} ({error.reason}); convert it to UTF-8."
        ) from error
    problem = text_problem(text)
    if problem is not None:
        raise ValueError(f"{file}: {problem}; give it text, or remove it from the folder.")
    return Document(id=name, text=text)


def unreadable_error(path: Path, error: OSError) -> ValueError:
    """The problem of an input file the OS would not let be read (`error`), naming the file and the cause, so that it
    is listed with the input's other problems (and skipped by --skip-bad-files) rather than a traceback."""
    cause = error.strerror or type(error).__name__
    return ValueError(f"{path} cannot be read ({cause}); check that it exists and is readable, or remove it.")


def jsonl_lines(lines: Iterable[bytes], first_line: int = 1) -> Iterator[tuple[int, bytes]]:
    """The non-blank lines of a JSONL file, or of a part of one, with their line numbers.

    Lines end at b"\\n" (as in the JSON Lines format; a "\\r" before it is whitespace to JSON), so a file can be
    cut at any line end and its parts numbered independently: pass a binary file, or a `BytesIO` of a part that
    starts on line `first_line`. A line is blank when it holds only whitespace; one that is not UTF-8 is never
    blank (`parse_jsonl_line` reports it).

    Args:
        lines: the raw lines, e.g. a file opened in binary mode.
        first_line: the number of the first line (1 for a whole file).
    """
    for number, raw in enumerate(lines, start=first_line):
        stripped = raw.strip()
        if not stripped:
            continue
        if not stripped.isascii():  # whitespace beyond ASCII (e.g. a no-break space), or a byte-order mark alone
            try:
                if not raw.decode("utf-8").removeprefix(BOM).strip():
                    continue
            except UnicodeDecodeError:
                pass
        yield number, raw


def parse_jsonl_line(
    line: bytes | str, number: int, path: str | Path, text_field: str = "text", id_field: str = "id"
) -> Document:
    """The document of one JSONL line: a JSON object with a string `text_field` and optional id and metadata.

    The id is `id_field`: a string, or an integer read as its decimal digits (7 and "7" are the same id, as in the
    vector stores, whose ids are strings); default "line-<number>". Every other field is metadata; a
    "metadata" object is merged into them, and a "metadata" value that is not an object is kept under that name.

    Args:
        line: the line, as bytes (decoded as UTF-8) or str.
        number: its line number in the file (for the default id and the error messages).
        path: the file (for the error messages).
        text_field: the field holding the text.
        id_field: the field holding the id.

    Raises:
        ValueError: if the line is not UTF-8, not JSON, not an object, or lacks a string text or a valid id, or
            its text is empty or whitespace only, or a lone surrogate is in its text, id or metadata; the message
            names the file and the line and says what to change.
    """
    where = f"{path} line {number}"
    if len(line) > MAX_TEXT_BYTES:  # bytes, or characters (at least as many bytes): refused before parsing
        raise ValueError(f"{where}: the line is longer than the {MAX_TEXT_BYTES} bytes a text may have; split it.")
    if isinstance(line, bytes):
        raw = line
        try:
            line = raw.decode("utf-8")
        except UnicodeDecodeError as error:
            hint = encoding_hint(raw) if number == 1 else ""
            raise ValueError(f"{where}: not UTF-8{hint} ({error.reason}); convert the file to UTF-8.") from error
    line = line.removeprefix(BOM)  # a byte-order mark at the start of the file
    try:
        record = json.loads(line)
    except json.JSONDecodeError as error:
        raise ValueError(f"{where}: not valid JSON: {error.msg} (column {error.colno}).") from error
    except RecursionError:
        raise ValueError(f"{where}: {NESTING_PROBLEM}; fix the line, or remove it.") from None
    if too_deep(record):
        raise ValueError(f"{where}: {NESTING_PROBLEM}; fix the line, or remove it.")
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
    if is_int(doc_id):
        doc_id = str(doc_id)  # ids are strings, as in the stores: 7 and "7" name one document
    if not isinstance(doc_id, str):
        raise ValueError(f"{where}: {id_field!r} must be a string or an integer, got {type(doc_id).__name__}.")
    metadata = {key: value for key, value in record.items() if key not in (text_field, id_field, "metadata")}
    nested = record.get("metadata")
    if isinstance(nested, dict):
        metadata.update(nested)
    elif "metadata" in record:
        metadata["metadata"] = nested
    problem = text_problem(text)
    if problem is None:
        problem = id_problem(doc_id, f"the {id_field!r}")
    found = surrogate_path(metadata, "the metadata") if problem is None else None
    if found is not None:
        problem = f"{found} holds a lone surrogate, which is not valid Unicode"
    if problem is not None:
        raise ValueError(f"{where}: {problem}; fix the line, or remove it.")
    return Document(id=doc_id, text=text, metadata=metadata)


def repeated_id_error(path: str | Path, number: int, doc_id: str, first_number: int) -> ValueError:
    """The error for the id on line `number` of a JSONL file that line `first_number` already used."""
    return ValueError(
        f"{path} line {number}: id {doc_id!r} was already used on line {first_number}; ids must be unique."
    )
