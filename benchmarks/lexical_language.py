"""The lexical side's language on a German store: BM25 (`LexicalIndex`) over XQuAD-de's 240 paragraphs (each
paragraph one document, its questions judged on it) with the German stemmer, the English one (the default) and no
stemmer, nDCG@10 over its 1,190 questions; the same for XQuAD-en as the reference. No model is loaded.

    python benchmarks/lexical_language.py            # prints a markdown table
"""

from __future__ import annotations

import json
import sys

import numpy as np
from pipelines_data import DATA

from fair_retrieval.evaluation.metrics import per_query_metrics
from fair_retrieval.lexical import LexicalIndex, LexicalSettings

LANGUAGES = {"de": ("german", "english", None), "en": ("english", "german", None)}


def paragraphs(code: str) -> tuple[list[str], dict[str, str], dict[str, dict[str, int]]]:
    """XQuAD in `code`: the paragraphs, the questions and their judgements (each on its own paragraph)."""
    data = json.loads((DATA / "xquad" / f"xquad.{code}.json").read_text(encoding="utf-8"))["data"]
    texts, questions, qrels = [], {}, {}
    for article in data:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                questions[qa["id"]] = qa["question"]
                qrels[qa["id"]] = {str(len(texts)): 1}
            texts.append(paragraph["context"])
    return texts, questions, qrels


def ndcg(texts: list[str], questions: dict[str, str], qrels: dict[str, dict[str, int]], language: str | None) -> float:
    index = LexicalIndex(LexicalSettings(language=language), str)
    records = dict(enumerate(texts))
    rankings = {q: [str(i) for i, _ in index.search(records, 0, text, 10)] for q, text in questions.items()}
    per_query = per_query_metrics(rankings, qrels, ndcg_k=(10,), recall_k=(10,))
    return float(np.mean([m["ndcg@10"] for m in per_query.values()]))


def main() -> int:
    lines = ["| set | stemmer | nDCG@10 (BM25 alone) |", "|---|---|---|"]
    for code, languages in LANGUAGES.items():
        texts, questions, qrels = paragraphs(code)
        for language in languages:
            value = ndcg(texts, questions, qrels, language)
            lines.append(f"| XQuAD-{code} ({len(texts)} paragraphs, {len(questions)} q) | {language} | {value:.3f} |")
    sys.stdout.write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
