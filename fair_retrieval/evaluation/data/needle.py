"""A synthetic "needle" benchmark that needs no downloaded data: facts hidden at chosen depths in real prose.

The haystack is the prose of the Python reference documentation that ships with every CPython install
(`pydoc_data.topics`), cut into documents of a token budget. Into each document one invented, unique fact (the
needle) is inserted at a sentence boundary near a controlled relative position, and one question asks for it. The
question's only relevant document is the one holding its fact, so retrieval quality per depth measures position
bias directly, with the same prose everywhere. Deterministic for a given tokenizer, budget and seed.
"""

from __future__ import annotations

import itertools
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass

from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.data.tokens import TokenCounter

_FIRST = (
    "Amelia",
    "Bruno",
    "Cecilia",
    "Dorian",
    "Elif",
    "Farid",
    "Greta",
    "Hamish",
    "Ines",
    "Jonas",
    "Kalinda",
    "Leopold",
    "Marisol",
    "Nikhil",
    "Odette",
    "Pavel",
    "Quentin",
    "Rosalind",
    "Soren",
    "Tamsin",
    "Ulrich",
    "Viviane",
    "Wendell",
    "Ximena",
    "Yusuf",
    "Zelda",
)
_LAST = (
    "Abernathy",
    "Blackwood",
    "Castellanos",
    "Drummond",
    "Eriksen",
    "Fairweather",
    "Galloway",
    "Hargreaves",
    "Ishikawa",
    "Jankowski",
    "Kowalczyk",
    "Lindqvist",
    "Montgomery",
    "Nakashima",
    "Okonkwo",
    "Pemberton",
    "Quisenberry",
    "Rasmussen",
    "Szymanski",
    "Thornbury",
    "Underhill",
    "Valdivia",
    "Whitcombe",
    "Yamamoto",
)
_PLACES = (
    "Tarnwick",
    "Oslund",
    "Bramblecote",
    "Kestrel Bay",
    "Marrowdale",
    "Pennyfield",
    "Quillhaven",
    "Ravensmoor",
    "Saltmarsh",
    "Thistlewood",
    "Umberleigh",
    "Vantmoor",
    "Wrenfold",
    "Yarrowby",
    "Ashcombe",
    "Brightwater",
    "Coldharbour",
    "Dunmere",
    "Elmstead",
    "Foxhollow",
)
_COLORS = ("teal", "crimson", "amber", "violet", "ochre", "turquoise", "scarlet", "olive", "cobalt", "saffron")
_ANIMALS = ("tortoise", "parrot", "ferret", "goat", "hedgehog", "llama", "peacock", "donkey")
_PET_NAMES = ("Biscuit", "Pemberly", "Juniper", "Marzipan", "Rumpole", "Tiberius", "Clementine", "Wobble")
_SPICES = ("cardamom", "saffron", "fennel seed", "star anise", "nutmeg", "caraway", "sumac", "juniper berries")
_OBJECTS = ("cracked flowerpot", "rusty anchor", "stone owl", "blue watering can", "loose floorboard", "copper kettle")

# (fact, question) templates; every needle fills one with a unique person and place.
_TEMPLATES = (
    (
        "The {animal} that {person} adopted in {place} is called {pet}.",
        "What is the name of the {animal} that {person} adopted in {place}?",
    ),
    (
        "{person} hid the spare key to the {color} boathouse in {place} under a {obj}.",
        "Where did {person} hide the spare key to the {color} boathouse in {place}?",
    ),
    (
        "The bakery that {person} runs in {place} sells a {color} bread flavoured with {spice}.",
        "Which spice flavours the {color} bread sold by {person}'s bakery in {place}?",
    ),
    (
        "{person} won the {place} chess championship of {year} with a queen sacrifice on move {move}.",
        "On which move did {person} sacrifice the queen to win the {place} chess championship?",
    ),
    (
        "The lighthouse of {place} was repainted {color} by {person} in the spring of {year}.",
        "In which year did {person} repaint the lighthouse of {place} {color}?",
    ),
)

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z])")


@dataclass(frozen=True)
class Needle:
    """One invented fact and the question that asks for it."""

    fact: str
    question: str


def haystack_sentences() -> list[str]:
    """Prose sentences of the Python reference docs shipped with CPython (code blocks and tables left out)."""
    from pydoc_data.topics import topics

    sentences: list[str] = []
    for key in sorted(topics):
        for block in re.split(r"\n\s*\n", topics[key]):
            if block.startswith((" ", "\t")) or ">>>" in block:
                continue  # indented code examples, grammar productions, doctests
            text = " ".join(block.split())
            letters = sum(ch.isalpha() or ch == " " for ch in text)
            if len(text.split()) < 8 or letters < 0.85 * len(text) or "*" in text or "|" in text:
                continue
            sentences.extend(s for s in _SENTENCE_END.split(text) if len(s.split()) >= 4)
    return sentences


def make_needles(count: int, seed: int = 0) -> list[Needle]:
    """`count` unique facts with questions; every needle names a different person."""
    rng = random.Random(seed)
    people = [f"{first} {last}" for first, last in itertools.product(_FIRST, _LAST)]
    if count > len(people):
        raise ValueError(f"At most {len(people)} needles can be made, asked for {count}.")
    rng.shuffle(people)
    needles = []
    for index in range(count):
        fact, question = _TEMPLATES[index % len(_TEMPLATES)]
        values = {
            "person": people[index],
            "place": rng.choice(_PLACES),
            "color": rng.choice(_COLORS),
            "animal": rng.choice(_ANIMALS),
            "pet": rng.choice(_PET_NAMES),
            "spice": rng.choice(_SPICES),
            "obj": rng.choice(_OBJECTS),
            "year": str(rng.randint(1952, 2019)),
            "move": str(rng.randint(14, 61)),
        }
        needles.append(Needle(fact.format(**values), question.format(**values)))
    return needles


def build_needle_benchmark(
    count_tokens: TokenCounter,
    max_tokens: int = 512,
    num_documents: int | None = 60,
    depths: Sequence[float] | None = None,
    seed: int = 0,
) -> RetrievalTask:
    """Build the needle benchmark: one fact per document at a controlled depth, one question per fact.

    Args:
        count_tokens: the model's token counter (special tokens included), e.g. `FairEmbedder.token_lengths`.
        max_tokens: token budget per document, special tokens and needle included.
        num_documents: how many documents (and questions); None uses all the prose (~90k tokens).
        depths: target relative positions of the needles, cycled over the documents; default nine depths evenly
            covering the document ((i + 0.5) / 9), three per third.
        seed: chooses the invented facts.

    Returns:
        A task with a measured `AnswerPosition` per question (the inserted fact is the "answer").

    Raises:
        ValueError: if the budget is too small for a needle plus prose, or the prose cannot fill `num_documents`.
    """
    depths = tuple(depths) if depths is not None else tuple((i + 0.5) / 9 for i in range(9))
    if not depths or not all(0.0 <= d <= 1.0 for d in depths):
        raise ValueError(f"depths must be relative positions in [0, 1], got {depths}.")
    specials = count_tokens([""])[0]
    reserve = 48  # room for the longest needle
    if max_tokens < specials + reserve + 32:
        raise ValueError(f"max_tokens={max_tokens} is too small for the needle benchmark; use ≥ 128.")
    chunks = _pack_sentences(haystack_sentences(), count_tokens, max_tokens - reserve)
    if num_documents is not None:
        if num_documents < 1:
            raise ValueError(f"num_documents must be ≥ 1, got {num_documents}.")
        if num_documents > len(chunks):
            raise ValueError(
                f"The prose fills only {len(chunks)} documents of {max_tokens} tokens; ask for at most that many."
            )
        chunks = chunks[:num_documents]
    needles = make_needles(len(chunks), seed)

    corpus: dict[str, str] = {}
    queries: dict[str, str] = {}
    answers: dict[str, tuple[str, int, int]] = {}
    for index, (sentences, needle) in enumerate(zip(chunks, needles, strict=True)):
        depth = depths[index % len(depths)]
        lengths = [n - specials for n in count_tokens([*sentences, needle.fact])]
        cut = _boundary_near(lengths[:-1], lengths[-1], depth)
        before = " ".join(sentences[:cut])
        text = " ".join(part for part in (before, needle.fact, " ".join(sentences[cut:])) if part)
        start = len(before) + 1 if before else 0
        doc_id, qid = f"needle-d{index:03d}", f"needle-q{index:03d}"
        corpus[doc_id] = text
        queries[qid] = needle.question
        answers[qid] = (doc_id, start, start + len(needle.fact))
    info = {"source": "pydoc_data.topics", "max_tokens": max_tokens, "depths": list(depths), "seed": seed}
    return RetrievalTask.from_answer_spans(f"needle@{max_tokens}", corpus, queries, answers, count_tokens, info)


def _pack_sentences(sentences: list[str], count_tokens: TokenCounter, budget: int) -> list[list[str]]:
    """Consecutive sentences packed into chunks of at most `budget` tokens (specials included); no chunk is short."""
    specials = count_tokens([""])[0]
    lengths = [n - specials for n in count_tokens(sentences)]
    chunks: list[list[str]] = []
    current: list[str] = []
    used = specials
    for sentence, length in zip(sentences, lengths, strict=True):
        if length + specials > budget:
            continue  # a single over-long sentence (rare) is skipped rather than truncated
        if used + length > budget:
            chunks.append(current)
            current, used = [], specials
        current.append(sentence)
        used += length
    if current and used > 0.8 * budget:
        chunks.append(current)
    # Token counts of joined text can exceed the sum of parts by a few tokens; trim the tail until it fits.
    fitted = []
    for chunk in chunks:
        while len(chunk) > 1 and count_tokens([" ".join(chunk)])[0] > budget:
            chunk = chunk[:-1]
        fitted.append(chunk)
    return fitted


def _boundary_near(lengths: list[int], needle_length: int, depth: float) -> int:
    """Index of the sentence boundary where the needle's start lands closest to `depth` of the final document.

    Measured in tokens (what the model sees): inserting before sentence i puts the needle's start at
    sum(lengths[:i]) / (sum(lengths) + needle_length).
    """
    total = sum(lengths) + needle_length
    best, best_gap, prefix = 0, float("inf"), 0
    for index in range(len(lengths) + 1):
        gap = abs(prefix / max(1, total) - depth)
        if gap < best_gap:
            best, best_gap = index, gap
        if index < len(lengths):
            prefix += lengths[index]
    return best
