"""A BM25 index over a store's documents, kept equal to them: `LexicalIndex`.

The scoring is Lucene's BM25 (k1 = 1.5, b = 0.75), computed from postings at query time (`BM25Postings`: the scores
of bm25s, the library llama-index's BM25 retriever uses); bm25s's other variants are bm25s's own. The words are
`LexicalTokenizer`'s. The index holds no text of its own: it reads the store's records (`texts`: int id → text) and
keeps each document's token ids, so every write of the store (add, upsert, delete, merge, load) is seen by comparing
the records with what it tokenized, never by a second copy that could drift. The store says which records changed
since the index last looked (`IndexedRecords.changed_since`), so after a write only those are tokenized and their
postings added or removed: a write costs what it wrote, not what the store holds.

Nothing of it is saved: a store saves its texts and its `LexicalSettings`, and a loaded store rebuilds the index from
those checked texts on its first lexical search, so a lexical side cannot be missing, damaged or of another save.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from fair_retrieval.jsonio.recorded_settings import recorded_settings, settings_record
from fair_retrieval.lexical.bm25_postings import BM25Postings
from fair_retrieval.lexical.lexical_tokens import DEFAULT_LANGUAGE, LexicalTokenizer, check_language

logger = logging.getLogger(__name__)

__all__ = ["LEXICAL_METHODS", "LexicalIndex", "LexicalSettings"]

LEXICAL_METHODS: tuple[str, ...] = ("lucene", "robertson", "atire", "bm25l", "bm25+")
"""bm25s's BM25 variants."""


@dataclass(frozen=True)
class LexicalSettings:
    """How a store's lexical side reads and scores its documents (saved with the store).

    Attributes:
        language: the stemmer's language (`fair_retrieval.lexical.LANGUAGES`), or None: words as they are.
        k1: BM25's term-frequency saturation.
        b: BM25's length normalisation (0: none, 1: full).
        method: bm25s's variant (`LEXICAL_METHODS`).
        windows: score a multi-vector store's documents by their best window (each window's text a BM25 document
            of its own, the windows the dense side keeps), not as whole texts; a pooled store has no windows and
            reads whole texts. Off by default: in the dense window study it raised the hybrid on SQuAD-v2 and reddit,
            left XQuAD level and lowered it on SciFact's short abstracts (docs/dense_window_study.md).
    """

    language: str | None = DEFAULT_LANGUAGE
    k1: float = 1.5
    b: float = 0.75
    method: str = "lucene"
    windows: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "language", check_language(self.language))
        for name, value, low, high in (("k1", self.k1, 0.0, 10.0), ("b", self.b, 0.0, 1.0)):
            if not isinstance(value, int | float) or isinstance(value, bool) or not low <= value <= high:
                raise ValueError(f"LexicalSettings.{name} must be a number in [{low}, {high}], got {value!r}.")
        if not isinstance(self.windows, bool):
            raise TypeError(f"LexicalSettings.windows must be True or False, got {self.windows!r}.")
        if self.method not in LEXICAL_METHODS:
            raise ValueError(f"LexicalSettings.method must be one of {LEXICAL_METHODS}, got {self.method!r}.")

    def settings(self) -> dict[str, Any]:
        """The JSON a store file records (nothing for the default settings, as files of earlier releases)."""
        return settings_record(self, LEXICAL_KEY)

    @classmethod
    def saved(cls, state: Mapping[str, Any], where: str) -> LexicalSettings:
        """The settings a store file records (the default when it records none).

        Raises:
            ValueError: recorded settings that are not an object of known fields and valid values.
        """
        return recorded_settings(cls, state, LEXICAL_KEY, "lexical settings", where)


LEXICAL_KEY = "lexical"
"""The store file's key of non-default `LexicalSettings`."""


Spans = Callable[[int], Sequence[tuple[int, int]]]
"""A record's window spans by its int id: [start, end) character offsets in its text."""


class LexicalIndex:
    """BM25 over the texts of a store's records, found by int id.

    A record is scored as one text, or, given `spans_of`, by its best window: each window's text (its span of the
    record's text) is a BM25 document of its own, and a record's score is the highest of its windows' (the dense
    side's `max`; docs/dense_window_study.md measures it against whole-record BM25).

    Lucene's variant (the default) is scored from postings at query time (`BM25Postings`), so a write costs what it
    wrote: the records changed since the index last looked are tokenized and their rows added or removed, nothing
    else (the store tells which, `changed_since`). The other variants are bm25s's, rebuilt after a change.

    Args:
        settings: how to read and score the texts.
        text_of: the text of a record (what is searched).
        spans_of: the window spans of a record by its int id (a multi-vector store's windows); None: whole texts.
    """

    def __init__(self, settings: LexicalSettings, text_of: Callable[[Any], str], spans_of: Spans | None = None) -> None:
        self.settings = settings
        self.tokenizer = LexicalTokenizer(settings.language)
        self._text_of = text_of
        self._spans_of = spans_of
        self._vocabulary: dict[str, int] = _Vocabulary()
        # int id → (the record tokenized, the token ids of each of its texts: its windows, or its whole text)
        self._tokens: dict[int, tuple[Any, list[np.ndarray]]] = {}
        self._revision = -1  # the records' revision the index was brought to
        self._incremental = settings.method == "lucene"
        self._postings = BM25Postings(settings.k1, settings.b)
        self._rows_of: dict[int, list[int]] = {}  # int id → its texts' rows in `_postings`
        self._stale = False  # bm25s variants: the kept tokens changed since `_bm25` was built
        self._rows: np.ndarray = np.zeros(0, np.int64)  # bm25s variants: row (one text) → int id, ascending
        self._bm25: Any = None

    def search(
        self,
        records: Mapping[int, Any],
        revision: int,
        query: str,
        k: int,
        among: Sequence[int] | np.ndarray | None = None,
        changed_since: Callable[[int], Iterable[int] | None] | None = None,
    ) -> list[tuple[int, float]]:
        """The k documents with the highest BM25 score for `query`, best first, among `among` (int ids; None: all):
        (int id, score) pairs, only documents sharing at least one word with the query (none for a query without
        words: an empty query finds nothing here).

        Args:
            records: the store's records by int id (what the index must equal).
            revision: a value that changes whenever `records` do (`IndexedRecords.revision`).
            query: the query text.
            k: how many at most.
            among: restrict to these int ids.
            changed_since: the int ids of the records changed (added, replaced, removed) since a revision, or None
                when that is not known (`IndexedRecords.changed_since`); None: every record is compared.
        """
        self._sync(records, revision, changed_since)
        if not self._tokens:
            return []
        if not self._incremental and self._stale:
            self._rebuild()  # before the query's words are looked up: it renumbers them
            self._stale = False
        query_ids = [self._vocabulary.get(token, -1) for token in self.tokenizer.tokens(query)]
        known = [i for i in query_ids if i >= 0]  # the vocabulary holds the words of the kept records only
        if not known:
            return []
        if self._incremental:
            owners, scores = self._postings.scores(known)
        else:
            owners, scores = self._bm25s_scores(known)
        if among is not None:
            kept = np.isin(owners, np.asarray(among, dtype=np.int64))
            owners, scores = owners[kept], scores[kept]
        if not len(owners) or k <= 0:
            return []
        if self._spans_of is not None or not self._incremental:  # a record's score is its best text's
            order = np.argsort(owners, kind="stable")
            owners, scores = owners[order], scores[order]
            starts = np.flatnonzero(np.r_[True, owners[1:] != owners[:-1]])
            owners, scores = owners[starts], np.maximum.reduceat(scores, starts)
        positive = np.flatnonzero(scores > 0)
        if len(positive) > k:  # the k best and every score tied with the k-th, then sorted: no sort of them all
            cut = np.partition(scores[positive], len(positive) - k)[len(positive) - k]
            positive = positive[scores[positive] >= cut]
        # best first, ties by int id, then cut: search(k) is always the first k of search(k + n)
        order = positive[np.lexsort((owners[positive], -scores[positive]))][:k]
        return [(int(owners[i]), float(scores[i])) for i in order]

    def memory_bytes(self) -> int:
        """Bytes the index holds in memory, measured as Python holds them (`held_bytes`): the vocabulary (a dict of
        word strings and their ids), the token ids kept per document with their containers, the row maps, and the
        postings (or bm25s's index); not the records, which are the store's. What a store's lexical side costs: for
        a corpus of many distinct words (e.g. the character pairs of CJK text) the vocabulary's Python objects, not
        the arrays, are most of it."""
        if not self._tokens:
            return 0  # nothing indexed yet (or every record removed): nothing of its own is held
        records = [record for record, _ in self._tokens.values()]
        held = [self._vocabulary, self._tokens, self._rows_of, self._postings, self._rows, self._bm25]
        return held_bytes(held, skip=records)

    def token_count(self) -> int:
        """How many tokens the index holds (what its memory grows with)."""
        return sum(len(ids) for _, texts in self._tokens.values() for ids in texts)

    def _sync(
        self, records: Mapping[int, Any], revision: int, changed_since: Callable[[int], Iterable[int] | None] | None
    ) -> None:
        """Make the index equal to `records`: tokenize new or replaced records, forget removed ones."""
        if revision == self._revision:
            return
        changed = None if changed_since is None or self._revision < 0 else changed_since(self._revision)
        if changed is None:  # compare every record
            removed = [int_id for int_id in self._tokens if int_id not in records]
            changed = removed + [
                int_id for int_id, record in records.items() if (self._tokens.get(int_id) or (None,))[0] is not record
            ]
        fresh: list[int] = []
        for int_id in changed:
            record, kept = records.get(int_id), self._tokens.get(int_id)
            if kept is not None and kept[0] is record:
                continue  # changed and changed back, or seen already
            if kept is not None:
                self._drop(int_id, kept[1])
            if record is not None:
                self._tokens[int_id] = (record, self._texts(int_id, record))
                self._stale = True
                fresh.append(int_id)
        if self._incremental:
            self._post(fresh)
        if self._incremental and self._postings.dead_share > 1.0:
            self._rebuild_postings()  # more dead rows than live ones: let them go (and the words no record holds)
        self._revision = revision
        logger.debug("Lexical index: %d documents (%d tokenized now).", len(self._tokens), len(fresh))

    def _post(self, int_ids: Sequence[int]) -> None:
        """Add the texts of the kept records `int_ids` to the postings, in one pass."""
        texts = [ids for int_id in int_ids for ids in self._tokens[int_id][1]]
        owners = [int_id for int_id in int_ids for _ in self._tokens[int_id][1]]
        rows = self._postings.add_many(texts, owners).tolist()
        start = 0
        for int_id in int_ids:
            end = start + len(self._tokens[int_id][1])
            self._rows_of[int_id] = rows[start:end]
            start = end

    def _drop(self, int_id: int, texts: list[np.ndarray]) -> None:
        del self._tokens[int_id]
        self._stale = True
        if self._incremental:
            for row, ids in zip(self._rows_of.pop(int_id), texts, strict=True):
                self._postings.remove(row, ids)

    def _rebuild_postings(self) -> None:
        """New postings of the kept records only (int ids ascending), with a vocabulary of the words they hold."""
        kept = [ids for int_id in sorted(self._tokens) for ids in self._tokens[int_id][1]]
        used = np.unique(np.concatenate(kept)) if any(len(ids) for ids in kept) else np.zeros(0, np.int64)
        if len(used) < len(self._vocabulary):
            self._forget_unused_words(used)
        self._postings = BM25Postings(self.settings.k1, self.settings.b)
        self._rows_of = {}
        self._post(sorted(self._tokens))

    def _bm25s_scores(self, known: list[int]) -> tuple[np.ndarray, np.ndarray]:
        """(owner int id, score) of the bm25s texts holding a query word (the variants other than Lucene's)."""
        if self._bm25 is None or not len(self._rows):
            return np.zeros(0, np.int64), np.zeros(0, np.float64)
        scores = np.asarray(self._bm25.get_scores(known), dtype=np.float64)
        # only documents holding a query word: bm25l and bm25+ score every document of the corpus for a known word
        # (their non-occurrence term), so a positive score alone does not say the document shares a word
        holding = np.zeros(len(self._rows), dtype=bool)
        indptr, indices = self._bm25.scores["indptr"], self._bm25.scores["indices"]
        for token in known:
            holding[indices[indptr[token] : indptr[token + 1]]] = True
        return self._rows[holding], scores[holding]

    def _forget_unused_words(self, used: np.ndarray) -> list[np.ndarray]:
        """Drop the words no kept record holds (removed or replaced records' words) and renumber the rest, so the
        index's memory is that of the records it holds, however they churned; the kept texts' token ids in row
        order, renumbered."""
        renumber = np.full(len(self._vocabulary), -1, dtype=np.int64)
        renumber[used] = np.arange(len(used))
        self._vocabulary = _Vocabulary(
            (word, int(renumber[i])) for word, i in self._vocabulary.items() if renumber[i] >= 0
        )
        self._tokens = {
            int_id: (record, [renumber[ids] for ids in texts]) for int_id, (record, texts) in self._tokens.items()
        }
        return [ids for int_id in sorted(self._tokens) for ids in self._tokens[int_id][1]]

    def _texts(self, int_id: int, record: Any) -> list[np.ndarray]:
        """The token ids of what a record is scored by: its windows' texts, or its whole text (also for a record
        without windows)."""
        text = self._text_of(record)
        spans = [] if self._spans_of is None else list(self._spans_of(int_id))
        return [self._token_ids(text[start:end]) for start, end in spans] or [self._token_ids(text)]

    def _token_ids(self, text: str) -> np.ndarray:
        return np.fromiter(map(self._vocabulary.__getitem__, self.tokenizer.tokens(text)), dtype=np.int64)

    def _rebuild(self) -> None:
        """A bm25s index over the kept token ids, in int id order, with a vocabulary of the tokens in use."""
        import bm25s
        from bm25s.tokenization import Tokenized

        ordered = sorted(self._tokens)
        self._rows = np.asarray([i for i in ordered for _ in self._tokens[i][1]], dtype=np.int64)
        if not len(self._rows):
            self._bm25, self._vocabulary = None, _Vocabulary()
            return
        documents = [ids for i in ordered for ids in self._tokens[i][1]]
        used = np.unique(np.concatenate(documents)) if any(len(d) for d in documents) else np.zeros(0, np.int64)
        if len(used) < len(self._vocabulary):
            documents = self._forget_unused_words(used)
        if not len(self._vocabulary):  # no record has a word (stop words, punctuation): nothing can be found
            self._bm25 = None
            return
        # bm25s counts token id 0 ... V-1 and keeps one more, empty token (what a document without words holds)
        vocab = {str(i): i for i in range(len(self._vocabulary))}
        corpus = Tokenized(ids=[d.tolist() for d in documents], vocab=vocab)
        bm25 = bm25s.BM25(k1=self.settings.k1, b=self.settings.b, method=self.settings.method)
        bm25.index(corpus, show_progress=False)
        self._bm25 = bm25


def held_bytes(root: Any, skip: Iterable[Any] = ()) -> int:
    """The bytes of the Python objects reachable from `root`, each counted once (`sys.getsizeof`): containers with
    what they hold, arrays with the buffers they own or view, objects with their attributes; functions, classes and
    modules, shared by everything, are not counted, nor the objects of `skip` and what only they hold.

    It is what tracemalloc sees the objects allocate, up to allocator rounding, which is why `memory_bytes` uses it:
    a sum of array sizes alone leaves out the per-object cost of a dict of a million short strings.
    """
    seen = {id(item) for item in skip}
    total, pending = 0, [root]
    while pending:
        item = pending.pop()
        if id(item) in seen or isinstance(item, type | types.ModuleType | types.FunctionType | types.MethodType):
            continue
        seen.add(id(item))
        total += sys.getsizeof(item)  # an array counts its buffer when it owns it
        if isinstance(item, np.ndarray):
            if item.base is not None:
                pending.append(item.base)
        elif isinstance(item, dict):
            pending.extend(item.keys())
            pending.extend(item.values())
        elif isinstance(item, list | tuple | set | frozenset):
            pending.extend(item)
        elif hasattr(item, "__dict__") and not isinstance(item, str | bytes | int | float):
            pending.append(vars(item))
    return total


class _Vocabulary(dict[str, int]):
    """Word → id, a new word taking the next id when it is first looked up (so a text's ids are one `map`)."""

    def __missing__(self, word: str) -> int:
        self[word] = len(self)
        return len(self) - 1
