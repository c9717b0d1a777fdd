"""Label-free position probes: measure position bias on a user's own corpus, with no queries and no judgements.

A probe is a query made from one sentence of a document, so its relevant document and the depth of its "answer" in
that document are known by construction. Probes are drawn evenly from the first, middle and last third of the
documents, and each is perturbed so that it is not a verbatim copy of the text:

1. the sentence's words are lower-cased and common function words are dropped (English list; other languages keep
   all their words),
2. a seeded share (`DEFAULT_DROP`, 70 %) of the remaining words is dropped (at least `MIN_PROBE_WORDS` are kept),
3. the kept words are shuffled (seeded) until no run of `LEAK_NGRAM` consecutive probe words appears consecutively
   anywhere in the document; a sentence that cannot be made leak-free is not used.

The result is an ordinary `RetrievalTask` with answer positions, so `Evaluator`, PSI, the harmonic mean, the tuner
and the report treat probes exactly like a labelled position benchmark. Everything is deterministic for a seed.
"""

from __future__ import annotations

import logging
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fair_retrieval.evaluation.data.task import AnswerPosition, RetrievalTask
from fair_retrieval.evaluation.data.tokens import TokenCounter, tokenizer_counter
from fair_retrieval.evaluation.groups import THIRDS, position_bin
from fair_retrieval.inputs import ensure_text_list

logger = logging.getLogger(__name__)

MIN_SENTENCE_WORDS = 6  # a shorter sentence carries too little content to identify its document
MIN_PROBE_WORDS = 4
# Share of a sentence's content words left out of its probe. Validated on SQuAD-v2 dev and XQuAD-en with their
# questions hidden: at 0.3 and 0.5 probes were too easy (lexical) and label-free tuning picked strength 1.0, which
# costs real questions nDCG@10 on SQuAD; at 0.7 the probe ranking of configurations follows the questions' (Spearman
# 0.83 / 0.82) and the choice keeps nDCG@10 (docs/guides/cli.md, "On your own corpus").
DEFAULT_DROP = 0.7
LEAK_NGRAM = 3  # no 3 consecutive probe words may appear consecutively in the document
MIN_DOCUMENTS = 10  # fewer documents make nDCG@10 meaningless (every document is in the top 10)
MIN_PROBES_PER_GROUP = 10
_SHUFFLE_TRIES = 20
LABEL_FREE_SOURCE = "label-free probes"  # the `info["source"]` of every probe task: how tools tell probes from labels

_SENTENCE = re.compile(r"[^.!?\n]+(?:[.!?]+|$)", re.MULTILINE)
_WORD = re.compile(r"\w+(?:['’]\w+)*", re.UNICODE)
# Function words dropped from probes: they carry no topic and would make probes verbatim-like.
STOPWORDS = frozenset(
    """a an and are as at be been being but by can could did do does for from had has have he her his how i if in
    into is it its itself may might more most much must no not of on or our over she should so such than that the
    their them then there these they this those through to too under until up very was we were what when where
    which while who whom why will with would you your also after before between both during each other only own
    same some any all about above again against because below further here once out off""".split()
)


@dataclass(frozen=True)
class ProbeStats:
    """How a probe set was built (stored in the task's `info`).

    Attributes:
        documents: documents in the corpus.
        probeable_documents: documents with at least one usable sentence.
        candidates: usable sentences per depth third.
        probes: probes drawn per depth third.
    """

    documents: int
    probeable_documents: int
    candidates: dict[str, int]
    probes: dict[str, int]


@dataclass(frozen=True)
class _Candidate:
    doc_id: str
    start: int
    end: int
    words: tuple[str, ...]


def is_label_free(task: Any) -> bool:
    """True for a probe task (built here, `info["source"]` is `LABEL_FREE_SOURCE`), False for labelled questions."""
    return bool(task.info.get("source") == LABEL_FREE_SOURCE)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """Character spans (start, end) of the sentences of `text`, stripped of surrounding blanks.

    Sentences end at `.`, `!`, `?` or a line break; this is deliberately simple (probes only need spans that are
    mostly whole sentences, and their exact offsets).
    """
    spans = []
    for match in _SENTENCE.finditer(text):
        start, end = match.span()
        while start < end and text[start].isspace():
            start += 1
        while end > start and text[end - 1].isspace():
            end -= 1
        if end > start:
            spans.append((start, end))
    return spans


def perturb(sentence: str, document: str, rng: random.Random, drop: float = DEFAULT_DROP) -> str | None:
    """A probe query made from `sentence`: function words removed, words dropped and shuffled, no verbatim leak.

    Args:
        sentence: the source sentence (a span of `document`).
        document: the whole document, checked for leaks.
        rng: the seeded random source (consumed deterministically).
        drop: share of content words dropped.

    Returns:
        The probe text, or None when the sentence has too few content words or cannot be shuffled leak-free.
    """
    words = [w.lower() for w in _WORD.findall(sentence)]
    content = [w for w in words if w not in STOPWORDS] or words
    if len(content) < MIN_PROBE_WORDS:
        return None
    keep = max(MIN_PROBE_WORDS, round(len(content) * (1 - drop)))
    kept_positions = sorted(rng.sample(range(len(content)), keep))
    kept = [content[i] for i in kept_positions]
    document_ngrams = _ngrams([w.lower() for w in _WORD.findall(document)], LEAK_NGRAM)
    for _ in range(_SHUFFLE_TRIES):
        rng.shuffle(kept)
        if not (_ngrams(kept, LEAK_NGRAM) & document_ngrams):
            return " ".join(kept)
    return None


def leaks(probe: str, document: str, n: int = LEAK_NGRAM) -> bool:
    """True when `n` consecutive words of `probe` appear consecutively in `document` (case-insensitive)."""
    probe_words = [w.lower() for w in _WORD.findall(probe)]
    return bool(_ngrams(probe_words, n) & _ngrams([w.lower() for w in _WORD.findall(document)], n))


def build_probe_task(
    documents: Mapping[str, str],
    *,
    max_probes: int = 600,
    seed: int = 0,
    count_tokens: TokenCounter | None = None,
    name: str = "probes",
    drop: float = DEFAULT_DROP,
) -> RetrievalTask:
    """Build a label-free position benchmark from a corpus: probe queries at known depths of its documents.

    Args:
        documents: document id → text (the corpus you index; every document stays in the corpus, probed or not).
        max_probes: the probe budget, split evenly over the begin/middle/end thirds.
        seed: seeds which sentences are drawn and how they are perturbed.
        count_tokens: optional `TokenCounter` (e.g. `tokenizer_counter(embedder.tokenizer)`); with it, probe depth is
            measured in the model's tokens (what the model sees), otherwise in characters.
        name: the task name used in reports.
        drop: share of a sentence's content words dropped from its probe (0 ≤ drop < 1).

    Returns:
        A `RetrievalTask` whose queries are the probes, each relevant to its source document, with positions.

    Raises:
        ValueError: if the corpus is too small or its documents too short to probe; the message says what is needed.
    """
    if max_probes < len(THIRDS) * MIN_PROBES_PER_GROUP:
        raise ValueError(
            f"max_probes must be ≥ {len(THIRDS) * MIN_PROBES_PER_GROUP} "
            f"({MIN_PROBES_PER_GROUP} per depth third), got {max_probes}."
        )
    if not 0 <= drop < 1:
        raise ValueError(f"drop is a share of words in [0, 1), got {drop}.")
    corpus = {str(k): v for k, v in documents.items() if isinstance(v, str) and v.strip()}
    if len(corpus) < MIN_DOCUMENTS:
        raise ValueError(
            f"The corpus has {len(corpus)} non-empty documents; probing needs at least {MIN_DOCUMENTS} "
            "(nDCG@10 needs distractors). Add documents."
        )
    by_third = _candidates_by_third(corpus)
    rng = random.Random(seed)
    quota = max_probes // len(THIRDS)
    queries: dict[str, str] = {}
    qrels: dict[str, dict[str, int]] = {}
    positions: dict[str, AnswerPosition] = {}
    drawn: dict[str, int] = {}
    for third in THIRDS:
        count = 0
        for candidate in _spread_over_documents(by_third[third], rng):
            if count >= quota:
                break
            text = corpus[candidate.doc_id]
            probe = perturb(text[candidate.start : candidate.end], text, rng, drop)
            if probe is None:
                continue
            qid = f"probe-{third}-{count:05d}"
            queries[qid] = probe
            qrels[qid] = {candidate.doc_id: 1}
            positions[qid] = AnswerPosition(candidate.start, candidate.end, len(text))
            count += 1
        drawn[third] = count
    short = {t: n for t, n in drawn.items() if n < MIN_PROBES_PER_GROUP}
    if short:
        raise ValueError(
            f"Too few probes at some depths ({short}; need ≥ {MIN_PROBES_PER_GROUP} per third). Probes come from "
            f"sentences of ≥ {MIN_SENTENCE_WORDS} words at the begin, middle and end of each document: the corpus "
            "needs more documents, or documents of several sentences each (split on . ! ? or line breaks)."
        )
    if count_tokens is not None:
        positions = _token_positions(corpus, qrels, positions, count_tokens)
    stats = ProbeStats(
        documents=len(corpus),
        probeable_documents=len({c.doc_id for third in by_third.values() for c in third}),
        candidates={t: len(c) for t, c in by_third.items()},
        probes=drawn,
    )
    logger.info("Built %d probes from %d documents (%s per third).", len(queries), len(corpus), drawn)
    return RetrievalTask(
        name=name,
        corpus=corpus,
        queries=queries,
        qrels=qrels,
        positions=positions,
        info={
            "source": LABEL_FREE_SOURCE,
            "seed": seed,
            "max_probes": max_probes,
            "drop": drop,
            "depth_unit": "tokens" if count_tokens is not None else "characters",
            "documents": stats.documents,
            "probeable_documents": stats.probeable_documents,
            "candidates": stats.candidates,
            "probes": stats.probes,
        },
    )


def probe_task_for(
    documents: Mapping[str, str] | Sequence[str],
    embedder: Any,
    *,
    max_probes: int = 600,
    seed: int = 0,
    name: str = "probes",
    drop: float = DEFAULT_DROP,
) -> RetrievalTask:
    """The label-free probe benchmark of `documents` for `embedder` (depths measured in its tokens).

    Args:
        documents: document id → text, or a sequence of texts (ids become "0", "1", …).
        embedder: a `FairEmbedder` (its tokenizer measures depths); without a tokenizer depths are in characters.
        max_probes: the probe budget (split over begin/middle/end).
        seed: seeds the probe draw and perturbation.
        name: the task name in reports.
        drop: share of a sentence's content words left out of its probe.

    Raises:
        TypeError: if `documents` is neither a mapping nor a sequence of strings.
        ValueError: if the corpus is too small or too short to probe.
    """
    if isinstance(documents, Mapping):
        texts = ensure_text_list(list(documents.values()), "documents")
        corpus = dict(zip(documents, texts, strict=True))
    else:
        corpus = {str(i): text for i, text in enumerate(ensure_text_list(documents, "documents"))}
    tokenizer = getattr(embedder, "tokenizer", None)
    counter = tokenizer_counter(tokenizer) if tokenizer is not None else None
    return build_probe_task(corpus, max_probes=max_probes, seed=seed, count_tokens=counter, name=name, drop=drop)


def _candidates_by_third(corpus: Mapping[str, str]) -> dict[str, list[_Candidate]]:
    """Usable sentences of every document, grouped by the third of the document (by characters) they start in."""
    groups: dict[str, list[_Candidate]] = {t: [] for t in THIRDS}
    for doc_id, text in corpus.items():
        for start, end in sentence_spans(text):
            words = tuple(_WORD.findall(text[start:end]))
            if len(words) < MIN_SENTENCE_WORDS:
                continue
            third = THIRDS[position_bin(start / max(1, len(text)), len(THIRDS))]
            groups[third].append(_Candidate(doc_id, start, end, words))
    return groups


def _spread_over_documents(candidates: Sequence[_Candidate], rng: random.Random) -> list[_Candidate]:
    """The candidates in a seeded order that visits every document once before any document twice."""
    per_doc: dict[str, list[_Candidate]] = {}
    for candidate in candidates:
        per_doc.setdefault(candidate.doc_id, []).append(candidate)
    order = list(per_doc)
    rng.shuffle(order)
    for items in per_doc.values():
        rng.shuffle(items)
    spread: list[_Candidate] = []
    for round_index in range(max((len(v) for v in per_doc.values()), default=0)):
        spread.extend(per_doc[d][round_index] for d in order if round_index < len(per_doc[d]))
    return spread


def _token_positions(
    corpus: Mapping[str, str],
    qrels: Mapping[str, Mapping[str, int]],
    positions: Mapping[str, AnswerPosition],
    count_tokens: TokenCounter,
) -> dict[str, AnswerPosition]:
    """Positions with token offsets: content tokens before the probe's sentence and in the whole document."""
    specials = count_tokens([""])[0]  # the counter includes special tokens; positions count content tokens
    qids = list(positions)
    prefixes = [corpus[next(iter(qrels[q]))][: positions[q].char_start] for q in qids]
    whole = [corpus[next(iter(qrels[q]))] for q in qids]
    prefix_tokens = count_tokens(prefixes)
    doc_tokens = count_tokens(whole)
    return {
        q: AnswerPosition(
            p.char_start,
            p.char_end,
            p.doc_chars,
            token_start=max(0, prefix_tokens[i] - specials),
            doc_tokens=max(1, doc_tokens[i] - specials),
        )
        for i, (q, p) in enumerate(positions.items())
    }


def _ngrams(words: Sequence[str], n: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}
