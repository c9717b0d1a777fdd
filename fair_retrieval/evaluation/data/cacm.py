"""CACM, the classic SMART test collection: Communications of the ACM titles and abstracts, with information needs
written by users before any search and their judged relevant articles.

The SMART text files of one folder:

    cacm.all     `.I id`, then fields `.T` title, `.W` abstract, `.B` `.A` `.N` `.X` (date, authors, entry, links)
    query.text   `.I n`, then `.W` the query's text (and `.A` `.N`, which are not part of it)
    qrels.text   one judgement a line: `query doc 0 0`

A document is its title and abstract (many documents have a title only); only the queries with a judged document
are kept (52 of the 64).
"""

from __future__ import annotations

import re
from pathlib import Path

from fair_retrieval.evaluation.data.task import RetrievalTask

__all__ = ["CACM_FILES", "find_cacm", "is_cacm_folder", "load_cacm", "read_smart"]

CACM_FILES = ("cacm.all", "query.text", "qrels.text")
"""The files of a CACM folder, as the SMART distribution names them."""

_FIELD = re.compile(r"^\.([A-Z])(?:\s+(.*))?$")


def read_smart(path: str | Path, fields: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """The records of a SMART text file: each `.I id` record's text of the given fields (e.g. ("T", "W")).

    A field runs from its marker line (`.T`) to the next marker; its lines are joined by single spaces. Fields not
    asked for are read past. Ids are kept as written without leading zeros ("007" → "7").

    Raises:
        FileNotFoundError: if the file is missing.
        ValueError: for text before the first `.I` line.
    """
    records: dict[str, dict[str, list[str]]] = {}
    current: dict[str, list[str]] | None = None
    field: str | None = None
    with Path(path).open(encoding="utf-8", errors="replace") as handle:
        for number, line in enumerate(handle, start=1):
            marker = _FIELD.match(line.rstrip("\n"))
            if marker and marker.group(1) == "I":
                current = records.setdefault(_plain_id(marker.group(2) or ""), {})
                field = None
            elif marker:
                field = marker.group(1)
                if current is None:
                    raise ValueError(f"{path}, line {number}: a field before the first .I line.")
                if field in fields:
                    current.setdefault(field, []).extend([marker.group(2)] if marker.group(2) else [])
            elif line.strip():
                if current is None:
                    raise ValueError(f"{path}, line {number}: text before the first .I line.")
                if field in fields:
                    current.setdefault(field, []).append(line.strip())
    return {rid: {f: " ".join(lines) for f, lines in parts.items()} for rid, parts in records.items()}


def load_cacm(folder: str | Path, name: str = "cacm") -> RetrievalTask:
    """CACM from its SMART files in `folder` (`CACM_FILES`): documents title + abstract, the judged queries.

    Raises:
        FileNotFoundError: if one of the three files is missing.
        ValueError: for a malformed file, or a judgement of a document the collection does not have.
    """
    folder = Path(folder)
    missing = [f for f in CACM_FILES if not (folder / f).is_file()]
    if missing:
        raise FileNotFoundError(f"CACM needs {', '.join(CACM_FILES)} in {folder}; missing: {', '.join(missing)}.")
    documents = read_smart(folder / "cacm.all", ("T", "W"))
    corpus = {d: " ".join(p for p in (f.get("T", ""), f.get("W", "")) if p) for d, f in documents.items()}
    texts = {q: f.get("W", "") for q, f in read_smart(folder / "query.text", ("W",)).items()}
    qrels: dict[str, dict[str, int]] = {}
    with (folder / "qrels.text").open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            parts = line.split()
            if not parts:
                continue
            if len(parts) < 2:
                raise ValueError(f"{folder / 'qrels.text'}, line {number}: expected 'query doc ...', got {line!r}.")
            query, doc = _plain_id(parts[0]), _plain_id(parts[1])
            if doc not in corpus:
                raise ValueError(f"{folder / 'qrels.text'}, line {number}: document {doc} is not in cacm.all.")
            if query in texts:
                qrels.setdefault(query, {})[doc] = 1
    queries = {q: texts[q] for q in texts if q in qrels and texts[q]}
    return RetrievalTask(
        name=name,
        corpus=corpus,
        queries=queries,
        qrels={q: qrels[q] for q in queries},
        info={"source": str(folder)},
    )


def is_cacm_folder(path: str | Path) -> bool:
    """True when `path` is a folder holding CACM's SMART files."""
    return all((Path(path) / f).is_file() for f in CACM_FILES)


def find_cacm(roots: list[Path]) -> Path:
    """The CACM folder: `ROOT/cacm` (or ROOT itself) of the first root that holds the files.

    Raises:
        FileNotFoundError: naming the files and the places looked in (CACM is not downloaded).
    """
    for root in roots:
        for folder in (root / "cacm", root):
            if is_cacm_folder(folder):
                return folder
    where = ", ".join(str(r / "cacm") for r in roots) or "nowhere (no data folder given)"
    raise FileNotFoundError(
        f"CACM's SMART files ({', '.join(CACM_FILES)}) were not found in {where}; CACM is not downloaded: put the "
        "collection's files in a folder `cacm` of the data folder (--data-dir or $FAIR_RETRIEVAL_DATA)."
    )


def _plain_id(text: str) -> str:
    token = text.strip()
    return token.lstrip("0") or "0" if token.isdigit() else token
