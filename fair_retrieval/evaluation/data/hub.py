"""Loaders for the published position benchmarks in the formats they have on the Hugging Face Hub.

Each loader reads local files, so it works offline on a downloaded copy (and is tested on small fixture files);
`load_from_hub` downloads a copy with `huggingface_hub` first, for users who are online.

Formats
    FineWeb-PosQ (NovaSearch/FineWeb-PosQ): rows with `content` (the passage), `question` (empty for rows that only
        add a passage to the corpus), `answer`, `span_class` (list of "beginning" / "middle" / "end": the thirds of
        the passage the question is grounded in). Groups come from `span_class`; a question may be in several.
    SQuAD-PosQ (NovaSearch's construction over rajpurkar/squad_v2): Hub SQuAD rows `id`, `title`, `context`,
        `question`, `answers` {`text`: [...], `answer_start`: [...]}; corpus = all distinct contexts, queries = the
        answerable questions, grouped by the character offset of the answer ([0-100], …, [500-3120]).
    PosIR (infgrad/PosIR-Benchmark-v1): per language and domain `queries.parquet` (`_id`, `text`, `pos_char_span`
        [start, end], `pos_char_length`, `pos_token_length`), `corpus.parquet` (`_id`, `text`) and
        `qrels/test.parquet` (`query-id`, `corpus-id`, `score`); length buckets at 512/1024/1536 tokens as published.
    NanoBEIR (zeta-alpha-ai/Nano*): `corpus/`, `queries/` (`_id`, `text`) and `qrels/` (`query-id`, `corpus-id`)
        Parquet shards.
"""

from __future__ import annotations

import dataclasses
import logging
from pathlib import Path
from typing import Any

from fair_retrieval.evaluation.data.records import data_files, read_records
from fair_retrieval.evaluation.data.task import AnswerPosition, RetrievalTask
from fair_retrieval.evaluation.data.tokens import TokenCounter

logger = logging.getLogger(__name__)

HUB_DATASETS = {
    "fineweb-posq": "NovaSearch/FineWeb-PosQ",
    "squad-posq": "rajpurkar/squad_v2",
    "nanobeir": "zeta-alpha-ai/Nano{name}",
    "posir": "infgrad/PosIR-Benchmark-v1",
}
POSIR_LENGTH_EDGES = (512, 1024, 1536)


# ------------------------------------------------------------------------------------------------ FineWeb-PosQ


def fineweb_posq_task(rows: list[dict[str, Any]], name: str = "fineweb-posq") -> RetrievalTask:
    """Build a task from FineWeb-PosQ rows (see the module docstring for the columns)."""
    _require_columns(rows, ("content", "question", "span_class"), "FineWeb-PosQ")
    passages = sorted({str(row["content"]) for row in rows})
    doc_of = {text: f"fw-{i:06d}" for i, text in enumerate(passages)}
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    labels: dict[str, tuple[str, ...]] = {}
    for index, row in enumerate(rows):
        question = row.get("question")
        if not question:
            continue  # a corpus-only row
        qid = f"fwq-{index:06d}"
        queries[qid] = str(question)
        qrels[qid] = {doc_of[str(row["content"])]: 1}
        classes = row.get("span_class") or []
        labels[qid] = tuple(str(c) for c in ([classes] if isinstance(classes, str) else classes))
    return RetrievalTask(
        name=name,
        corpus={doc_of[text]: text for text in passages},
        queries=queries,
        qrels=qrels,
        labels=labels,
        info={"format": "fineweb-posq", "grouping": "labels"},
    )


# ------------------------------------------------------------------------------------------------ SQuAD-PosQ


def squad_posq_task(
    rows: list[dict[str, Any]], count_tokens: TokenCounter | None = None, name: str = "squad-posq"
) -> RetrievalTask:
    """Build SQuAD-PosQ from Hub SQuAD rows: distinct contexts as corpus, answerable questions as queries.

    With `count_tokens`, answer positions are also measured in tokens (what the model sees); without, by chars.
    """
    _require_columns(rows, ("context", "question", "answers"), "SQuAD (Hub format)")
    contexts = sorted({str(row["context"]) for row in rows})
    doc_of = {text: f"sq-{i:06d}" for i, text in enumerate(contexts)}
    queries: dict[str, str] = {}
    spans: dict[str, tuple[str, int, int]] = {}
    for index, row in enumerate(rows):
        answers = row.get("answers") or {}
        starts, texts = list(answers.get("answer_start") or []), list(answers.get("text") or [])
        if not starts or not texts:
            continue  # unanswerable: its context stays in the corpus
        context = str(row["context"])
        start, end = int(starts[0]), int(starts[0]) + len(texts[0])
        if context[start:end] != texts[0]:
            logger.warning("Skipping question %s: its answer_start does not point at its answer.", row.get("id"))
            continue
        qid = str(row.get("id") or f"sqq-{index:06d}")
        queries[qid] = str(row["question"])
        spans[qid] = (doc_of[context], start, end)
    corpus = {doc_of[text]: text for text in contexts}
    info: dict[str, object] = {"format": "squad-posq", "grouping": "squad-posq"}
    return RetrievalTask.from_answer_spans(name, corpus, queries, spans, count_tokens, info)


# ------------------------------------------------------------------------------------------------ PosIR


def load_posir(folder: str | Path, split: str = "test") -> RetrievalTask:
    """Load one PosIR language/domain folder (queries.parquet, corpus.parquet, qrels/<split>.parquet)."""
    folder = Path(folder)
    query_rows = read_records(folder / "queries.parquet")
    corpus_rows = read_records(folder / "corpus.parquet")
    qrel_rows = read_records(folder / "qrels" / f"{split}.parquet")
    _require_columns(query_rows, ("_id", "text", "pos_char_span", "pos_char_length"), "PosIR queries")
    corpus = {str(row["_id"]): str(row["text"]) for row in corpus_rows}
    qrels: dict[str, dict[str, int]] = {}
    for row in qrel_rows:
        if int(row.get("score", 1)) > 0:
            qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = int(row.get("score", 1))
    queries: dict[str, str] = {}
    positions: dict[str, AnswerPosition] = {}
    doc_tokens: dict[str, int] = {}
    for row in query_rows:
        qid = str(row["_id"])
        if qid not in qrels:
            continue
        queries[qid] = str(row["text"])
        start, end = (int(x) for x in row["pos_char_span"][:2])
        length = int(row["pos_char_length"])
        positions[qid] = AnswerPosition(start, end, length)
        if row.get("pos_token_length") is not None:
            for doc in qrels[qid]:
                doc_tokens[doc] = int(row["pos_token_length"])
    return RetrievalTask(
        name=f"posir:{folder.parent.name}/{folder.name}",
        corpus=corpus,
        queries=queries,
        qrels={qid: qrels[qid] for qid in queries},
        positions=positions,
        doc_tokens=doc_tokens,
        info={"format": "posir", "source": str(folder), "length_edges": list(POSIR_LENGTH_EDGES)},
    )


# ------------------------------------------------------------------------------------------------ NanoBEIR


def load_nanobeir(folder: str | Path, name: str | None = None) -> RetrievalTask:
    """Load a NanoBEIR dataset folder (corpus/, queries/, qrels/ Parquet shards)."""
    folder = Path(folder)
    parts = {}
    for part in ("corpus", "queries", "qrels"):
        files = data_files(folder / part)
        if not files:
            raise FileNotFoundError(f"NanoBEIR folder {folder} has no data files under {part}/.")
        parts[part] = [row for path in files for row in read_records(path)]
    corpus = {str(row["_id"]): str(row["text"]) for row in parts["corpus"]}
    all_queries = {str(row["_id"]): str(row["text"]) for row in parts["queries"]}
    qrels: dict[str, dict[str, int]] = {}
    for row in parts["qrels"]:
        score = int(row.get("score", 1))
        if score > 0 and str(row["query-id"]) in all_queries:
            qrels.setdefault(str(row["query-id"]), {})[str(row["corpus-id"])] = score
    return RetrievalTask(
        name=name or folder.name,
        corpus=corpus,
        queries={qid: text for qid, text in all_queries.items() if qid in qrels},
        qrels=qrels,
        info={"format": "nanobeir", "source": str(folder)},
    )


# ------------------------------------------------------------------------------------------------ dispatch


def load_posq_file(path: str | Path, count_tokens: TokenCounter | None = None) -> RetrievalTask:
    """Load one FineWeb-PosQ or SQuAD-PosQ data file, recognised by its columns."""
    path = Path(path)
    return _posq_task(read_records(path), count_tokens, path.stem)


def load_posq_folder(folder: str | Path, count_tokens: TokenCounter | None = None) -> RetrievalTask:
    """Load every data file of a downloaded FineWeb-PosQ or SQuAD-PosQ dataset (all splits together)."""
    folder = Path(folder)
    files = data_files(folder)
    if not files:
        raise ValueError(
            f"{folder} holds no recognised benchmark (no corpus.jsonl, queries.parquet, corpus/ or data files)."
        )
    rows = [row for path in files for row in read_records(path)]
    return _posq_task(rows, count_tokens, folder.name)


def _posq_task(rows: list[dict[str, Any]], count_tokens: TokenCounter | None, name: str) -> RetrievalTask:
    if not rows:
        raise ValueError(f"{name}: no rows.")
    keys = set(rows[0])
    if "content" in keys and "span_class" in keys:
        return fineweb_posq_task(rows, name=name)
    if {"context", "question", "answers"} <= keys:
        return squad_posq_task(rows, count_tokens, name=name)
    raise ValueError(
        f"{name}: rows with columns {sorted(keys)} are neither FineWeb-PosQ (content, question, span_class) nor "
        "SQuAD (context, question, answers)."
    )


def load_from_hub(name: str, count_tokens: TokenCounter | None = None) -> RetrievalTask:
    """Download (or reuse the local Hub cache of) a published benchmark and load it.

    Args:
        name: "fineweb-posq", "squad-posq", "nanobeir:NAME" (e.g. nanobeir:SciFact), or "posir:LANG/DOMAIN".
        count_tokens: the model's token counter, for token positions where the format has none.

    Raises:
        ValueError: for an unknown name, or when the download fails (offline and not cached).
    """
    kind, _, rest = name.partition(":")
    if kind not in HUB_DATASETS:
        raise ValueError(
            f"Unknown Hub benchmark {name!r}; use one of fineweb-posq, squad-posq, nanobeir:NAME, posir:LANG/DOMAIN."
        )
    if kind in ("nanobeir", "posir") and not rest:
        raise ValueError(
            f"hub:{kind} needs a dataset after the colon, e.g. hub:nanobeir:SciFact or hub:posir:eng-Latn/DOMAIN."
        )
    repo = HUB_DATASETS[kind].format(name=rest)
    patterns = [f"{rest}/*", f"{rest}/qrels/*"] if kind == "posir" else None
    folder = _snapshot(repo, patterns)
    if kind == "fineweb-posq":
        return fineweb_posq_task(
            [row for path in data_files(folder) for row in read_records(path)], name="fineweb-posq"
        )
    if kind == "squad-posq":
        task = load_posq_folder(folder, count_tokens)
        return dataclasses.replace(task, name="squad-posq")
    if kind == "nanobeir":
        return load_nanobeir(folder, name=f"nanobeir:{rest}")
    return load_posir(folder / rest)


def _snapshot(repo: str, patterns: list[str] | None) -> Path:
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo, repo_type="dataset", allow_patterns=patterns))
    except Exception as error:
        raise ValueError(
            f"Could not get the dataset {repo} from the Hugging Face Hub ({type(error).__name__}: {error}). "
            "Go online (or unset HF_HUB_OFFLINE), or download it and pass its folder as --data PATH."
        ) from error


def _require_columns(rows: list[dict[str, Any]], columns: tuple[str, ...], what: str) -> None:
    if not rows:
        raise ValueError(f"No {what} rows found.")
    missing = [c for c in columns if c not in rows[0]]
    if missing:
        raise ValueError(f"{what} rows lack the column(s) {missing}; found {sorted(rows[0])}.")
