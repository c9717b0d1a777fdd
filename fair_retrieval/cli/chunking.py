"""Chunking: cut long texts into pieces of at most N model tokens, with exact character offsets.

Windows (`long_documents="windows"`) give one vector per document; a search that should point *into* a long
document needs one vector per piece instead. This module cuts a text at token boundaries of the model's own
(fast) tokenizer, so a chunk is exactly what the model reads and `text[chunk.start:chunk.end] == chunk.text`.
Cuts prefer paragraph, line and sentence ends, then whitespace, then punctuation, over a cut between two pieces of
one word (a cut inside a character, which byte-level tokenizers allow, is taken only when nothing else fits).

`chunk_text` cuts one text; `chunk_documents` turns `Document`s into chunk `Document`s with ids `ID#k` and their
source and offsets in the metadata (what `fair-retrieval index --chunk-tokens` stores). Sizes are checked by
`fair_retrieval.embedding.windows.chunk_plan`, the rule the LlamaIndex and LangChain splitters share.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from fair_retrieval.embedding.windows import chunk_plan
from fair_retrieval.inputs import Document

logger = logging.getLogger(__name__)

__all__ = ["Chunk", "chunk_documents", "chunk_id", "chunk_text"]

_SENTENCE_ENDS = frozenset(".!?;…")
_FULL_WIDTH_ENDS = frozenset("。！？；")  # end a sentence without a following space (CJK)
_INSIDE_CHARACTER, _INSIDE_WORD, _PUNCTUATION, _WHITESPACE, _SENTENCE, _PARAGRAPH = -1, 0, 1, 2, 3, 4
_SHORTEST_SHARE = 4  # a chunk may end up to 1/4 before its limit to end at a better boundary
_EXTRA_OVERLAP_SHARE = 2  # the next chunk may start up to overlap/2 tokens earlier to start at a better boundary


@dataclass(frozen=True)
class Chunk:
    """One chunk of a text.

    Attributes:
        text: the chunk, `source[start:end]` (it starts at a token's first character and ends at a token's last).
        start: offset of its first character in the source text.
        end: offset just past its last character.
        token_start: index of its first token in the source text's tokenization (no special tokens).
        token_end: index just past its last token there; consecutive chunks share `previous.token_end -
            next.token_start` tokens.
        tokens: how many tokens the model reads for `text` alone (no special tokens): at most the chunk size, except
            for a chunk of a single token whose text reads as more (one byte of a character that byte-level
            tokenizers split, whose offsets cover the whole character).
    """

    text: str
    start: int
    end: int
    token_start: int
    token_end: int
    tokens: int


def chunk_text(text: str, tokenizer: Any, chunk_tokens: int, chunk_overlap: int | None = None) -> list[Chunk]:
    """Cut `text` into chunks of at most `chunk_tokens` tokens that share at least `chunk_overlap` tokens.

    Every token of the text lies in a chunk, and chunks are cut only between tokens. Within the last quarter of a
    chunk's room the cut goes to the best boundary (paragraph > line or sentence > whitespace > punctuation > inside
    a word), and the next chunk starts at the best boundary among the `chunk_overlap` to `1.5 × chunk_overlap`
    tokens before it, so chunks read as whole sentences where the text allows. A chunk is re-tokenized on its own
    and shortened when that gives more than `chunk_tokens` tokens (a word cut apart can tokenize differently); a
    chunk so shortened that it holds no more than `chunk_overlap` tokens shares all but its first with the next.

    Args:
        text: the text to cut.
        tokenizer: a fast Hugging Face tokenizer (the model's, e.g. `FairEmbedder.tokenizer`): its offset mapping
            tells where tokens lie in the text.
        chunk_tokens: the most tokens (content tokens, no special tokens) a chunk holds.
        chunk_overlap: tokens consecutive chunks share at least; None: an eighth of `chunk_tokens`.

    Returns:
        The chunks in text order; none for a text without tokens (empty or whitespace only).

    Raises:
        TypeError: if `text` is not a str.
        ValueError: for a chunk size < 1, an overlap outside [0, chunk size), or a tokenizer without offsets.
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}.")
    size, overlap = chunk_plan(chunk_tokens, chunk_tokens, chunk_overlap)  # checks both; None is refused
    _check_tokenizer(tokenizer)
    offsets = _offsets(tokenizer, text)
    count = len(offsets)
    chunks: list[Chunk] = []
    first = 0
    while first < count:
        limit = size
        while True:
            last = count if count - first <= limit else _best_cut(text, offsets, first, limit, overlap)
            start, end = offsets[first][0], max(end for _, end in offsets[first:last])
            tokens = len(tokenizer(text[start:end], add_special_tokens=False, verbose=False)["input_ids"])
            if tokens <= size or last - first <= 1:
                break
            limit = max(1, last - first - (tokens - size))  # the cut piece tokenizes longer: leave it room
        chunks.append(Chunk(text[start:end], start, end, first, last, tokens))
        if last == count:
            break
        first = _next_start(text, offsets, first, last, overlap)
    return chunks


def chunk_id(source_id: str, index: int) -> str:
    """The id of chunk `index` (from 0) of the document `source_id`: "ID#k"."""
    return f"{source_id}#{index}"


def chunk_documents(
    documents: Sequence[Document], tokenizer: Any, chunk_tokens: int, chunk_overlap: int | None = None
) -> list[Document]:
    """Each document cut by `chunk_text` into chunk documents, in order: what `index --chunk-tokens` stores.

    A chunk's id is `chunk_id(document.id, k)` ("notes/a.txt#0", "7#3", …) and its metadata is the document's plus
    `source_id` (the document's id), `chunk` (k), `start_char` and `end_char` (`document.text[start_char:end_char]`
    is the chunk's text); these four replace metadata fields of the same name. Documents without tokens (empty or
    whitespace only) give no chunk; a warning counts them.

    Args:
        documents: the documents to cut.
        tokenizer: a fast Hugging Face tokenizer, the model's (see `chunk_text`).
        chunk_tokens: the most tokens a chunk holds; `fair_retrieval.embedding.windows.chunk_plan` gives the usual size.
        chunk_overlap: tokens consecutive chunks share at least; None: an eighth of `chunk_tokens`.

    Raises:
        ValueError, TypeError: as `chunk_text` does.
    """
    chunks: list[Document] = []
    empty = 0
    for document in documents:
        pieces = chunk_text(document.text, tokenizer, chunk_tokens, chunk_overlap)
        empty += not pieces
        for k, piece in enumerate(pieces):
            metadata = {
                **document.metadata,
                "source_id": document.id,
                "chunk": k,
                "start_char": piece.start,
                "end_char": piece.end,
            }
            chunks.append(Document(chunk_id(document.id, k), piece.text, metadata))
    if empty:
        logger.warning(
            "%d of %d documents hold no tokens (empty or whitespace only) and give no chunk.", empty, len(documents)
        )
    logger.info("Cut %d documents into %d chunks of at most %d tokens.", len(documents), len(chunks), chunk_tokens)
    return chunks


# ------------------------------------------------------------------------------------------------ internals


def _check_tokenizer(tokenizer: Any) -> None:
    if not callable(tokenizer):
        raise TypeError(f"tokenizer must be a Hugging Face tokenizer, got {type(tokenizer).__name__}.")
    if not getattr(tokenizer, "is_fast", False):
        raise ValueError(
            f"Chunking cuts at token offsets, which {type(tokenizer).__name__} (a slow tokenizer) does not give; "
            "use a model with a fast tokenizer (AutoTokenizer.from_pretrained(..., use_fast=True))."
        )


def _offsets(tokenizer: Any, text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of the content tokens of `text`, untruncated."""
    if not text:
        return []
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, truncation=False, verbose=False)
    return [(int(start), int(end)) for start, end in encoded["offset_mapping"]]


def _best_cut(text: str, offsets: list[tuple[int, int]], first: int, limit: int, overlap: int) -> int:
    """Where a chunk starting at token `first` ends (exclusive): the best boundary in its last quarter of room.

    The chunk keeps more than `overlap` tokens, so the next one starts after `first`."""
    shortest = min(limit, max(limit - limit // _SHORTEST_SHARE, overlap + 1))
    return max(range(first + shortest, first + limit + 1), key=lambda i: (_boundary(text, offsets, i), i))


def _next_start(text: str, offsets: list[tuple[int, int]], first: int, last: int, overlap: int) -> int:
    """Where the chunk after [first, last) starts: `overlap` tokens before `last`, or a little earlier at a better
    boundary (sharing at most overlap × 1.5 tokens), always after `first`."""
    latest = max(first + 1, last - overlap)
    earliest = max(first + 1, latest - overlap // _EXTRA_OVERLAP_SHARE)
    return max(range(earliest, latest + 1), key=lambda i: (_boundary(text, offsets, i), i))


def _boundary(text: str, offsets: list[tuple[int, int]], i: int) -> int:
    """How good a cut before token `i` is (larger is better); `0 < i < len(offsets)`."""
    (left_start, left_end), (right_start, right_end) = offsets[i - 1], offsets[i]
    if right_start < left_end:
        return _INSIDE_CHARACTER  # both tokens hold bytes of one character (byte-level tokenizers)
    left, right = text[left_start:left_end], text[right_start:right_end]
    # what lies between the tokens: the gap, plus the whitespace a tokenizer keeps inside them (byte-level BPE)
    between = left[len(left.rstrip()) :] + text[left_end:right_start] + right[: len(right) - len(right.lstrip())]
    spaced = any(character.isspace() for character in between)
    newlines = between.count("\n")
    before = left.rstrip()[-1:]
    if newlines >= 2:
        return _PARAGRAPH
    if newlines == 1 or (spaced and before in _SENTENCE_ENDS) or before in _FULL_WIDTH_ENDS:
        return _SENTENCE
    if spaced:
        return _WHITESPACE
    after = right.lstrip()[:1]
    if not (before.isalnum() and after.isalnum()):
        return _PUNCTUATION
    return _INSIDE_WORD
