"""`fair_retrieval.cli.chunking` against direct tokenization: exact offsets, every token covered, overlap, boundaries.

Two fast tokenizers: MiniLM's WordPiece (offsets skip whitespace) and a small byte-level BPE trained here (its
tokens carry their leading space, and characters outside its training text are split into byte tokens that share
one character's offsets), so both ways a tokenizer reports offsets are checked.
"""

from __future__ import annotations

import itertools
import logging
from typing import Any

import pytest

from fair_retrieval.cli.chunking import Chunk, chunk_documents, chunk_id, chunk_text
from fair_retrieval.inputs import Document

SENTENCES = [
    f"Sentence {i} tells how the keeper of lighthouse number {i} trimmed the lamp and polished the lens."
    for i in range(30)
]
PROSE = " ".join(s + ("\n\n" if i % 7 == 6 else "") for i, s in enumerate(SENTENCES))
MIXED = (
    "Unbelievably, the café's crème brûlée — served at 7:45pm — cost €12.50 😀😀 per portion!!! "
    "Straße, naïve façade, 東京では雨が降っています。明日は晴れるでしょう。 well-known e-mail addresses: a@b.example; "
) * 6


@pytest.fixture(scope="module")
def wordpiece(minilm: str) -> Any:
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(minilm)


@pytest.fixture(scope="module")
def byte_level() -> Any:
    """A byte-level BPE with a 400-token vocabulary, trained on the English prose only (so MIXED splits bytes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(SENTENCES, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer)


@pytest.fixture(params=["wordpiece", "byte_level"])
def tokenizer(request: pytest.FixtureRequest) -> Any:
    return request.getfixturevalue(request.param)


def offsets_of(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    return [tuple(pair) for pair in encoded["offset_mapping"]]


def check_chunks(text: str, tokenizer: Any, chunks: list[Chunk], size: int, overlap: int) -> None:
    """Every property the chunker promises, checked against the text's own tokenization."""
    offsets = offsets_of(tokenizer, text)
    assert chunks and chunks[0].token_start == 0 and chunks[-1].token_end == len(offsets)
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text  # exact offsets
        assert chunk.start == offsets[chunk.token_start][0]  # starts where a token starts …
        assert chunk.end == max(end for _, end in offsets[chunk.token_start : chunk.token_end])  # … ends where one ends
        assert 0 < chunk.token_end - chunk.token_start <= size
        retokenized = tokenizer(chunk.text, add_special_tokens=False, verbose=False)["input_ids"]
        assert chunk.tokens == len(retokenized)
        # what the model reads fits, except one token whose text reads as more (a byte of a character split in two)
        assert chunk.tokens <= size or chunk.token_end - chunk.token_start == 1
    for before, after in itertools.pairwise(chunks):
        assert before.token_start < after.token_start <= before.token_end  # in order, no token left out
        shared = before.token_end - after.token_start
        assert shared <= overlap + overlap // 2  # a little more than the overlap, to start at a boundary
        # at least the overlap, unless re-tokenizing shortened the chunk to the overlap (then the next starts one later)
        assert shared >= min(overlap, before.token_end - before.token_start - 1)
    covered = set().union(*(range(c.token_start, c.token_end) for c in chunks))
    assert covered == set(range(len(offsets)))  # every token is in a chunk


@pytest.mark.parametrize(("size", "overlap"), [(40, 0), (40, 5), (64, 8), (17, 16), (1, 0), (300, 30)])
@pytest.mark.parametrize("text", [PROSE, MIXED], ids=["prose", "mixed"])
def test_chunks_cover_every_token_at_token_boundaries(tokenizer: Any, text: str, size: int, overlap: int) -> None:
    chunks = chunk_text(text, tokenizer, size, overlap)
    check_chunks(text, tokenizer, chunks, size, overlap)
    if overlap == 0:  # without overlap the chunks tile the tokens exactly
        assert all(a.token_end == b.token_start for a, b in itertools.pairwise(chunks))


def test_the_default_overlap_is_an_eighth(wordpiece: Any) -> None:
    chunks = chunk_text(PROSE, wordpiece, 64)
    check_chunks(PROSE, wordpiece, chunks, 64, 8)
    assert chunk_text(PROSE, wordpiece, 64, None) == chunks


def test_a_text_that_fits_is_one_chunk(wordpiece: Any) -> None:
    text = "  Penguins cannot fly.\n"
    [chunk] = chunk_text(text, wordpiece, 64, 8)
    assert (chunk.text, chunk.start, chunk.end, chunk.token_start, chunk.token_end) == (
        "Penguins cannot fly.",
        2,
        22,
        0,
        4,
    )


def test_cuts_prefer_sentence_ends_then_word_starts(wordpiece: Any) -> None:
    text = " ".join(SENTENCES)  # every sentence is 20-odd tokens, so a sentence ends in each chunk's last quarter
    chunks = chunk_text(text, wordpiece, 48, 0)
    assert len(chunks) > 5
    assert all(chunk.text.endswith(".") for chunk in chunks)
    assert all(chunk.text.startswith("Sentence ") for chunk in chunks)
    overlapping = chunk_text(text, wordpiece, 48, 6)
    check_chunks(text, wordpiece, overlapping, 48, 6)
    for chunk in overlapping:  # an overlap starts at a word, never inside one
        assert chunk.start == 0 or text[chunk.start - 1] == " "


def test_a_paragraph_end_beats_a_later_sentence_end(wordpiece: Any) -> None:
    first = "The first paragraph has one sentence about penguins and their long winter walk."
    text = first + "\n\n" + "Then a second paragraph follows. It has short sentences. They end often. " * 5
    chunks = chunk_text(text, wordpiece, len(offsets_of(wordpiece, first)) + 4, 0)
    assert chunks[0].text == first


def test_a_text_without_tokens_has_no_chunks(wordpiece: Any) -> None:
    assert chunk_text("", wordpiece, 16) == []
    assert chunk_text(" \n\t ", wordpiece, 16) == []


class SlowTokenizer:
    is_fast = False

    def __call__(self, *args: Any, **kwargs: Any) -> dict:
        raise AssertionError("never called")


@pytest.mark.parametrize(
    ("size", "overlap", "message"),
    [
        (0, None, "chunk size must be a positive number of tokens, got 0"),
        (None, None, "chunk size must be a positive number of tokens, got None"),
        (True, None, "chunk size must be a positive number of tokens"),
        (10, 10, r"chunk overlap must be an int in \[0, 10\) tokens, got 10"),
        (10, -1, r"chunk overlap must be an int in \[0, 10\) tokens, got -1"),
        (10, 2.5, "chunk overlap must be an int"),
    ],
)
def test_bad_sizes_are_refused(wordpiece: Any, size: Any, overlap: Any, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        chunk_text(PROSE, wordpiece, size, overlap)


def test_bad_texts_and_tokenizers_are_refused(wordpiece: Any) -> None:
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        chunk_text(b"bytes", wordpiece, 16)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"slow tokenizer.*use a model with a fast tokenizer"):
        chunk_text(PROSE, SlowTokenizer(), 16)
    with pytest.raises(TypeError, match="tokenizer must be a Hugging Face tokenizer"):
        chunk_text(PROSE, "bert-base-uncased", 16)


def test_chunk_documents_names_chunks_and_keeps_their_source(wordpiece: Any, caplog: pytest.LogCaptureFixture) -> None:
    documents = [
        Document("notes/a.txt", PROSE, {"lang": "en", "chunk": "overwritten"}),
        Document(7, "  \n"),
        Document(8, "Short one."),
    ]
    with caplog.at_level(logging.WARNING, logger="fair_retrieval.cli.chunking"):
        chunks = chunk_documents(documents, wordpiece, 64, 8)
    assert "1 of 3 documents hold no tokens" in caplog.text
    expected = chunk_text(PROSE, wordpiece, 64, 8)
    assert [c.id for c in chunks] == [f"notes/a.txt#{k}" for k in range(len(expected))] + ["8#0"]
    for k, (chunk, piece) in enumerate(zip(chunks, expected, strict=False)):
        assert chunk.text == piece.text == PROSE[chunk.metadata["start_char"] : chunk.metadata["end_char"]]
        assert chunk.metadata == {
            "lang": "en",
            "source_id": "notes/a.txt",
            "chunk": k,
            "start_char": piece.start,
            "end_char": piece.end,
        }
    assert chunks[-1].metadata == {"source_id": 8, "chunk": 0, "start_char": 0, "end_char": 10}  # the id keeps its type
    assert chunk_id(8, 0) == "8#0"
