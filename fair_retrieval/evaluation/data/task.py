"""The retrieval task every benchmark builds: a corpus, queries, relevance judgements and answer positions.

Every loader in `fair_retrieval.evaluation.data` (and the label-free probes) returns a `RetrievalTask`, so metrics,
grouping, the CLI and the tuner work the same on SQuAD-style position benchmarks, BEIR tasks, the synthetic needle
benchmark, Hub datasets and probes of a user's own corpus.
"""

from __future__ import annotations

import hashlib
import json
import random
from collections.abc import Mapping
from dataclasses import dataclass, field

from fair_retrieval.evaluation.data.tokens import TokenCounter


@dataclass(frozen=True)
class AnswerPosition:
    """Where the answer to one query sits in its relevant document.

    Args:
        char_start: character offset of the answer's first character in the document text.
        char_end: character offset one past the answer's last character.
        doc_chars: length of the document in characters.
        token_start: number of content tokens (special tokens excluded) before the answer; None if unknown.
        doc_tokens: content tokens of the whole document; None if unknown.
    """

    char_start: int
    char_end: int
    doc_chars: int
    token_start: int | None = None
    doc_tokens: int | None = None

    @property
    def relative(self) -> float:
        """Relative position of the answer's start in [0, 1]: by tokens when known (what the model sees), else chars."""
        if self.token_start is not None and self.doc_tokens:
            return min(1.0, max(0.0, self.token_start / self.doc_tokens))
        return min(1.0, max(0.0, self.char_start / max(1, self.doc_chars)))

    def to_dict(self) -> dict[str, int | float | None]:
        """JSON-compatible form, with the derived relative position."""
        return {
            "char_start": self.char_start,
            "char_end": self.char_end,
            "doc_chars": self.doc_chars,
            "token_start": self.token_start,
            "doc_tokens": self.doc_tokens,
            "relative": round(self.relative, 6),
        }


@dataclass(frozen=True)
class RetrievalTask:
    """A retrieval benchmark in BEIR form, optionally with answer positions and preset group labels.

    Args:
        name: short name used in reports ("squad-v2@512", "scifact", …).
        corpus: document id → text, in corpus order.
        queries: query id → text.
        qrels: query id → {document id: graded relevance > 0}. Every query has at least one relevant document.
        positions: query id → where its answer sits in its relevant document (position benchmarks only).
        labels: query id → preset group labels given by the dataset itself (e.g. FineWeb-PosQ's
            beginning/middle/end span classes; a query may carry several).
        doc_tokens: document id → token count (special tokens included) when the builder measured it.
        info: free-form facts about how the task was built (budget, counts of dropped questions, source file).
    """

    name: str
    corpus: dict[str, str]
    queries: dict[str, str]
    qrels: dict[str, dict[str, int]]
    positions: dict[str, AnswerPosition] = field(default_factory=dict)
    labels: dict[str, tuple[str, ...]] = field(default_factory=dict)
    doc_tokens: dict[str, int] = field(default_factory=dict)
    info: dict[str, object] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.corpus:
            raise ValueError(f"Task {self.name!r} has an empty corpus; check the data source.")
        if not self.queries:
            raise ValueError(f"Task {self.name!r} has no queries with a relevant document; check the data source.")
        missing = [qid for qid in self.queries if not self.qrels.get(qid)]
        if missing:
            raise ValueError(f"Task {self.name!r}: queries {missing[:5]} have no relevant document in qrels.")
        for qid, judged in self.qrels.items():
            unknown = [doc for doc in judged if doc not in self.corpus]
            if unknown:
                raise ValueError(f"Task {self.name!r}: qrels of {qid!r} name documents {unknown[:3]} not in corpus.")

    @classmethod
    def from_answer_spans(
        cls,
        name: str,
        corpus: dict[str, str],
        queries: Mapping[str, str],
        answers: Mapping[str, tuple[str, int, int]],
        count_tokens: TokenCounter | None,
        info: dict[str, object],
    ) -> RetrievalTask:
        """A position benchmark: each query's one relevant document is the one holding its answer span.

        Why: the SQuAD-format, needle and SQuAD-PosQ builders all end the same way (locate each answer, measure its
        position in the model's tokens, judge its document relevant), so they share this rather than repeat it.

        Args:
            name: short name used in reports.
            corpus: document id → text, in corpus order.
            queries: query id → text; queries without an entry in `answers` are left out.
            answers: query id → (its document's id, char_start, char_end of the answer), in query order.
            count_tokens: the model's token counter (special tokens included); with it, positions are also measured
                in content tokens and every document's token count is kept in `doc_tokens`; None measures chars only.
            info: free-form facts about how the task was built.

        Raises:
            ValueError: for an answer in a document not in `corpus`, and as the constructor does (empty corpus, …).
        """
        unknown = sorted({doc_id for doc_id, _, _ in answers.values() if doc_id not in corpus})
        if unknown:
            raise ValueError(f"Task {name!r}: answers lie in documents {unknown[:3]} that are not in the corpus.")
        kept = {qid: queries[qid] for qid in answers}
        qrels = {qid: {doc_id: 1} for qid, (doc_id, _, _) in answers.items()}
        doc_tokens: dict[str, int] = {}
        if count_tokens is None:
            positions = {qid: AnswerPosition(s, e, len(corpus[doc_id])) for qid, (doc_id, s, e) in answers.items()}
        else:
            specials = count_tokens([""])[0]
            doc_tokens = dict(zip(corpus, count_tokens(list(corpus.values())), strict=True))
            before = count_tokens([corpus[doc_id][:start] for doc_id, start, _ in answers.values()])
            positions = {
                qid: AnswerPosition(
                    char_start=start,
                    char_end=end,
                    doc_chars=len(corpus[doc_id]),
                    token_start=prefix - specials,
                    doc_tokens=doc_tokens[doc_id] - specials,
                )
                for (qid, (doc_id, start, end)), prefix in zip(answers.items(), before, strict=True)
            }
        return cls(name, corpus, kept, qrels, positions=positions, doc_tokens=doc_tokens, info=info)

    @property
    def doc_ids(self) -> list[str]:
        """Document ids in corpus order."""
        return list(self.corpus)

    @property
    def query_ids(self) -> list[str]:
        """Query ids in order."""
        return list(self.queries)

    def fingerprint(self) -> str:
        """A short hash of the corpus texts and ids: two tasks with the same fingerprint embed identically."""
        digest = hashlib.sha256()
        for doc_id, text in self.corpus.items():
            digest.update(doc_id.encode("utf-8") + b"\0" + text.encode("utf-8") + b"\1")
        return digest.hexdigest()[:16]

    def query_fingerprint(self) -> str:
        """A short hash of the query texts and ids."""
        digest = hashlib.sha256()
        digest.update(json.dumps(self.queries, sort_keys=True, ensure_ascii=False).encode("utf-8"))
        return digest.hexdigest()[:16]

    def subsample_queries(self, max_queries: int | None, seed: int = 0) -> RetrievalTask:
        """Keep at most `max_queries` queries, chosen reproducibly by `seed` (the corpus is kept whole).

        Why: tuning on a few hundred queries is much cheaper for the query side and, with the corpus unchanged,
        measures the same retrieval problem.
        """
        if max_queries is None or max_queries >= len(self.queries):
            return self
        if max_queries < 1:
            raise ValueError(f"max_queries must be ≥ 1, got {max_queries}.")
        chosen = sorted(random.Random(seed).sample(range(len(self.queries)), max_queries))
        ids = [self.query_ids[i] for i in chosen]
        return RetrievalTask(
            name=self.name,
            corpus=self.corpus,
            queries={qid: self.queries[qid] for qid in ids},
            qrels={qid: self.qrels[qid] for qid in ids},
            positions={qid: self.positions[qid] for qid in ids if qid in self.positions},
            labels={qid: self.labels[qid] for qid in ids if qid in self.labels},
            doc_tokens=self.doc_tokens,
            info={**self.info, "subsampled_queries": max_queries, "subsample_seed": seed},
        )

    def summary(self) -> dict[str, object]:
        """Counts for reports: documents, queries, judged pairs, and whether positions are known."""
        return {
            "name": self.name,
            "num_documents": len(self.corpus),
            "num_queries": len(self.queries),
            "num_judgements": sum(len(j) for j in self.qrels.values()),
            "has_positions": bool(self.positions),
            "info": dict(self.info),
        }
