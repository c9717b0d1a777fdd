"""General retrieval tasks in BEIR form: any BEIR folder, and SciFact from the CSV release in the shared data.

These have no answer positions; they check that calibration does not cost retrieval quality in general.
"""

from __future__ import annotations

import ast
import csv
import re
from pathlib import Path

from fair_retrieval.evaluation.data.records import read_records
from fair_retrieval.evaluation.data.task import RetrievalTask

_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", re.S)


def load_beir(folder: str | Path, split: str = "test", name: str | None = None) -> RetrievalTask:
    """Load a BEIR-format folder: corpus.jsonl (_id, title, text), queries.jsonl (_id, text), qrels/<split>.tsv.

    The document text is "title text" (BEIR's convention for dense models). Only queries with a judged relevant
    document (score > 0) are kept; judgements of documents missing from the corpus are an error.

    Raises:
        FileNotFoundError: if one of the three parts is missing.
    """
    folder = Path(folder)
    corpus_path = _first_existing(folder, ["corpus.jsonl", "corpus.jsonl.gz"])
    queries_path = _first_existing(folder, ["queries.jsonl", "queries.jsonl.gz"])
    qrels_path = _first_existing(folder / "qrels", [f"{split}.tsv"])
    corpus = {str(row["_id"]): _title_text(row.get("title"), row.get("text")) for row in read_records(corpus_path)}
    all_queries = {str(row["_id"]): str(row["text"]) for row in read_records(queries_path)}
    qrels: dict[str, dict[str, int]] = {}
    with qrels_path.open(encoding="utf-8", newline="") as handle:
        for row in csv.reader(handle, delimiter="\t"):
            if len(row) < 3 or not row[2].strip().lstrip("-").isdigit():
                continue  # the header line ("query-id corpus-id score") or a blank line
            qid, doc, score = row[0], row[1], int(row[2])
            if score > 0:
                qrels.setdefault(qid, {})[doc] = score
    qrels = {qid: judged for qid, judged in qrels.items() if qid in all_queries}
    queries = {qid: all_queries[qid] for qid in all_queries if qid in qrels}
    return RetrievalTask(
        name=name or folder.name,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        info={"source": str(folder), "split": split},
    )


def load_scifact(folder: str | Path, split: str = "test") -> RetrievalTask:
    """SciFact (claims → abstracts) from the CSV release: corpus_train.csv and claims_<split>.csv.

    `split="test"` reads claims_validation.csv, which is BEIR's SciFact test split (300 claims, 339 judged pairs);
    "train" reads claims_train.csv. A claim's relevant abstracts are its `cited_doc_ids` (several rows per claim).

    Raises:
        FileNotFoundError: if the CSV files are missing.
        ValueError: for an unknown split.
    """
    files = {"test": "claims_validation.csv", "validation": "claims_validation.csv", "train": "claims_train.csv"}
    if split not in files:
        raise ValueError(f"SciFact split must be one of {sorted(files)}, got {split!r}.")
    folder = Path(folder)
    corpus: dict[str, str] = {}
    for row in read_records(_first_existing(folder, ["corpus_train.csv", "corpus.csv"])):
        sentences = [ast.literal_eval(m) for m in _STRING_LITERAL.findall(row["abstract"])]
        corpus[str(row["doc_id"])] = _title_text(row.get("title"), " ".join(s.strip() for s in sentences))
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    for row in read_records(_first_existing(folder, [files[split]])):
        qid = str(row["id"])
        for doc in re.findall(r"\d+", row.get("cited_doc_ids") or ""):
            if doc in corpus:
                queries[qid] = row["claim"]
                qrels.setdefault(qid, {})[doc] = 1
    return RetrievalTask(
        name="scifact" if split == "test" else f"scifact-{split}",
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        info={"source": str(folder), "split": split},
    )


def _title_text(title: object, text: object) -> str:
    return " ".join(part.strip() for part in (str(title or ""), str(text or "")) if part and part.strip())


def _first_existing(folder: Path, names: list[str]) -> Path:
    for name in names:
        if (folder / name).is_file():
            return folder / name
    raise FileNotFoundError(f"None of {names} found in {folder}.")
