"""Checks of texts, ids and metadata before they are embedded or stored, shared by the CLI's reader
(`fair_retrieval.inputs`), the vector stores (`check_store_entries`) and queries (`check_query`): texts must be
non-empty valid Unicode without NUL characters, of at most `MAX_TEXT_BYTES` bytes, ids non-empty, metadata nested at
most `fair_retrieval.validate.MAX_NESTING` levels deep.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fair_retrieval.validate import MAX_NESTING, nested_deeper_than

MAX_TEXT_BYTES = 8 << 20
"""The largest text (document or query) taken, in UTF-8 bytes (8 MiB): a bigger one would take gigabytes of memory
and many minutes in the tokenizer, or abort in it; split it into several documents first."""
LONG_TEXT_CHARACTERS = 200_000
"""A text longer than this (about 50,000 tokens, a short book) is long work: it becomes hundreds of windows, each
a forward pass. A call holding one warns before the model runs, with the cost, and shows a progress bar whatever
`show_progress_bar` says (`fair_retrieval.embedding.embedding_report.announce_long_texts`); TQDM_DISABLE=1 hides it."""
NESTING_PROBLEM = f"the metadata is nested deeper than {MAX_NESTING} levels of lists and objects; flatten it"


def lone_surrogate(text: str) -> int | None:
    """The position of the first lone surrogate (U+D800–U+DFFF, e.g. from a JSON escape "\\udcff" or a file name
    that is not UTF-8) in `text`, or None: such a string is not valid Unicode and cannot be written as UTF-8."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        return error.start
    return None


def surrogate_path(value: Any, where: str) -> str | None:
    """Where in a JSON value (keys and values, recursively) a string holds a lone surrogate, e.g.
    "metadata['a'][0]"; None when there is none."""
    if isinstance(value, str):
        return where if lone_surrogate(value) is not None else None
    if isinstance(value, dict):
        for key, item in value.items():
            found = surrogate_path(key, f"{where} key {key!r}") or surrogate_path(item, f"{where}[{key!r}]")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for position, item in enumerate(value):
            found = surrogate_path(item, f"{where}[{position}]")
            if found is not None:
                return found
    return None


def text_problem(text: str) -> str | None:
    """What makes `text` unfit to embed and store (empty or whitespace only, or what `unreadable_problem` finds), or
    None."""
    problem = unreadable_problem(text)
    if problem is not None:
        return f"the text {problem}"
    if not text.strip():
        return "the text is empty or whitespace only (it would match every query alike)"
    return None


def unreadable_problem(text: str) -> str | None:
    """What makes `text` unfit for the tokenizer, worded to follow the text's name, or None: more than
    `MAX_TEXT_BYTES` bytes (gigabytes of memory and minutes in the tokenizer), a lone surrogate (not valid Unicode:
    the tokenizer fails on it with an obscure TypeError), or a NUL character (binary data, or UTF-16 read as 8-bit
    text: the tokenizer drops it silently, so the text would be embedded as something else than what is stored)."""
    if len(text) > MAX_TEXT_BYTES // 4 and len(text.encode("utf-8", "surrogatepass")) > MAX_TEXT_BYTES:
        return (
            f"holds {len(text.encode('utf-8', 'surrogatepass'))} bytes, more than the {MAX_TEXT_BYTES} a text may "
            "have (split it into several documents)"
        )
    problem = surrogate_problem(text)
    if problem is not None:
        return problem
    position = text.find("\x00")
    if position >= 0:
        return (
            f"holds a NUL character ('\\x00') at character {position}, which text does not carry (binary data, or "
            "UTF-16 decoded as UTF-8?); decode the source correctly, or remove it: text.replace('\\x00', '')"
        )
    return None


def surrogate_problem(text: str) -> str | None:
    """What a lone surrogate in `text` is (where, which), worded to follow the text's name; None without one."""
    position = lone_surrogate(text)
    if position is None:
        return None
    return (
        f"holds a lone surrogate {text[position]!r} at character {position}, which is not valid Unicode (fix the "
        "encoding where the text comes from)"
    )


def check_readable(texts: Sequence[str], name: str = "texts", *, one: bool = False) -> None:
    """Refuse, before any model work, a text the tokenizer cannot read (`unreadable_problem`: too large, a lone
    surrogate, a NUL character). Empty texts are the caller's to judge.

    Args:
        texts: the texts (str each; `fair_retrieval.inputs.ensure_text_list` checks that).
        name: what the message calls them (e.g. "texts", "the query").
        one: `texts` is one text, named `name` itself rather than `name[i]`.

    Raises:
        ValueError: one line naming the first such text, what is wrong and what to do.
    """
    for index, text in enumerate(texts):
        problem = unreadable_problem(text)
        if problem is not None:
            raise ValueError(f"{name if one else f'{name}[{index}]'} {problem}.")


def too_deep(value: object) -> bool:
    """Whether metadata (or a JSONL record) nests deeper than `fair_retrieval.validate.MAX_NESTING` allows."""
    return nested_deeper_than(value, MAX_NESTING)


def check_query(query: object, what: str = "the query") -> str:
    """`query` if it is a text that can be embedded, as documents are checked (`text_problem`): a str, not empty,
    without lone surrogates (what a non-UTF-8 byte in a command line argument becomes); the tokenizer would fail
    on it with an obscure error.

    Raises:
        TypeError: `query` is not a str.
        ValueError: it is empty or holds a lone surrogate; the message says where and what to do.
    """
    if not isinstance(query, str):
        raise TypeError(f"{what} must be a str, got {type(query).__name__}.")
    problem = text_problem(query)
    if problem is not None:
        raise ValueError(f"{what}: {problem}")
    return query


def id_problem(id_: Any, name: str = "the id") -> str | None:
    """What makes a document id unfit (the one rule of the CLI and the stores): an empty string, or a lone
    surrogate in it; None for a fine one."""
    if isinstance(id_, str) and not id_:
        return f"{name} is empty; give a non-empty id, or none for a new one"
    if isinstance(id_, str) and lone_surrogate(id_) is not None:
        return f"{name} holds a lone surrogate, which is not valid Unicode"
    return None
