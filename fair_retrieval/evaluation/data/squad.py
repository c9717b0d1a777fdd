"""Position benchmarks from SQuAD-format data: paragraphs joined into long documents, answers labelled by position.

SQuAD paragraphs are short (~150 tokens), too short to show position bias. Following SQuAD-PosQ and PosIR, this
module joins consecutive paragraphs of one article into documents of at most `max_tokens` tokens of the model's
own tokenizer, shifts every answer offset into the joined text, and labels each answerable question with the
absolute (characters, tokens) and relative position of its answer. The corpus is every document built from the
file, so retrieval is over the whole article set. The construction is deterministic: same file, same tokenizer,
same budget → same task.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.data.tokens import TokenCounter

logger = logging.getLogger(__name__)

SEPARATOR = "\n\n"


@dataclass(frozen=True)
class _Question:
    qid: str
    text: str
    answer: str
    start: int  # offset inside its paragraph


def read_squad(path: str | Path) -> list[dict[str, Any]]:
    """Read a SQuAD v1.1/v2.0 JSON file and return its `data` list (articles with paragraphs).

    Raises:
        FileNotFoundError: if the file does not exist.
        ValueError: if the JSON does not have SQuAD's `data[].paragraphs[].context/qas` structure.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"SQuAD file not found: {path}")
    data = json.loads(path.read_text(encoding="utf-8"))
    articles = data.get("data") if isinstance(data, dict) else None
    if not isinstance(articles, list) or not all(isinstance(a, dict) and "paragraphs" in a for a in articles):
        raise ValueError(f"{path} is not SQuAD-format JSON (expected data[].paragraphs[].context and qas).")
    return articles


def build_position_benchmark(
    articles: list[dict[str, Any]] | str | Path,
    count_tokens: TokenCounter,
    max_tokens: int = 512,
    name: str = "squad",
) -> RetrievalTask:
    """Join consecutive paragraphs of each article into documents of at most `max_tokens` tokens.

    Args:
        articles: SQuAD `data` list, or the path of a SQuAD JSON file.
        count_tokens: token counter of the model under test (special tokens included), so the budget is what the
            model sees; `FairEmbedder.token_lengths` fits.
        max_tokens: token budget per document, special tokens included (e.g. 256, 512, …, 4096).
        name: task name prefix; the budget is appended ("squad@512").

    Returns:
        A task whose corpus is every joined document and whose queries are the answerable questions; each has an
        `AnswerPosition` (first answer) and qrels {its document: 1}. A paragraph longer than the budget becomes a
        document of its own; questions whose answer falls beyond the budget (the model would never see it) are
        dropped and counted in `info["dropped_beyond_budget"]`.

    Raises:
        ValueError: if `max_tokens` is too small to hold even the special tokens.
    """
    if isinstance(articles, str | Path):
        source = str(articles)
        articles = read_squad(articles)
    else:
        source = "<in-memory>"
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        raise TypeError(f"max_tokens must be an int, got {type(max_tokens).__name__}.")
    specials = count_tokens([""])[0]
    if max_tokens <= specials:
        raise ValueError(f"max_tokens={max_tokens} leaves no room for text ({specials} special tokens); use ≥ 64.")

    corpus: dict[str, str] = {}
    groups: list[tuple[str, list[str], list[list[_Question]]]] = []
    for a_index, article in enumerate(articles):
        paragraphs = [(p.get("context", ""), _questions(p)) for p in article.get("paragraphs", [])]
        for d_index, members in enumerate(_pack(paragraphs, count_tokens, max_tokens)):
            doc_id = f"a{a_index:03d}-d{d_index:02d}"
            corpus[doc_id] = SEPARATOR.join(paragraphs[i][0] for i in members)
            groups.append((doc_id, [paragraphs[i][0] for i in members], [paragraphs[i][1] for i in members]))

    queries: dict[str, str] = {}
    located: list[tuple[str, str, int, int]] = []  # qid, doc_id, char_start, char_end
    mismatched = 0
    for doc_id, texts, questions in groups:
        offset = 0
        for text, qs in zip(texts, questions, strict=True):
            for q in qs:
                start = offset + q.start
                end = start + len(q.answer)
                if corpus[doc_id][start:end] != q.answer:
                    mismatched += 1
                    continue
                located.append((q.qid, doc_id, start, end))
                queries[q.qid] = q.text
            offset += len(text) + len(SEPARATOR)

    end_tokens = [n - specials for n in count_tokens([corpus[doc_id][:end] for _, doc_id, _, end in located])]
    answers: dict[str, tuple[str, int, int]] = {}
    dropped = 0
    for (qid, doc_id, start, end), upto in zip(located, end_tokens, strict=True):
        if upto > max_tokens - specials:
            dropped += 1
            continue
        answers[qid] = (doc_id, start, end)
    if mismatched:
        logger.warning("%d answers did not match their answer_start offset in the source and were skipped.", mismatched)
    if dropped:
        logger.info("%d questions dropped: their answer lies beyond the %d-token budget.", dropped, max_tokens)
    info: dict[str, object] = {
        "source": source,
        "max_tokens": max_tokens,
        "articles": len(articles),
        "dropped_beyond_budget": dropped,
        "dropped_offset_mismatch": mismatched,
    }
    return RetrievalTask.from_answer_spans(f"{name}@{max_tokens}", corpus, queries, answers, count_tokens, info)


def _questions(paragraph: dict[str, Any]) -> list[_Question]:
    """Answerable questions of one paragraph, each with its first answer."""
    result = []
    for qa in paragraph.get("qas", []):
        answers = qa.get("answers") or []
        if qa.get("is_impossible") or not answers:
            continue
        first = answers[0]
        result.append(_Question(str(qa["id"]), qa["question"], first["text"], int(first["answer_start"])))
    return result


def _pack(
    paragraphs: list[tuple[str, list[_Question]]], count_tokens: TokenCounter, max_tokens: int
) -> list[list[int]]:
    """Greedily group consecutive paragraph indices so every joined group fits `max_tokens` (exact counts)."""
    packed: list[list[int]] = []
    current: list[int] = []
    for index in range(len(paragraphs)):
        if not current:
            current = [index]
            continue
        candidate = [*current, index]
        if count_tokens([SEPARATOR.join(paragraphs[i][0] for i in candidate)])[0] <= max_tokens:
            current = candidate
        else:
            packed.append(current)
            current = [index]
    if current:
        packed.append(current)
    return packed
