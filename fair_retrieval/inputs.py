"""Validation of user-supplied text batches, shared by the embedder, the CLI and the framework adapters."""

from __future__ import annotations

from collections.abc import Iterable


def ensure_text_list(texts: object, name: str = "texts") -> list[str]:
    """Return `texts` as a list of str, or raise a TypeError that names the first bad item.

    A single string is refused on purpose: iterating it would embed one character per row.

    Raises:
        TypeError: if `texts` is a str/bytes, not iterable, or holds a non-str item (the message gives its index).
    """
    if isinstance(texts, str | bytes | bytearray):
        raise TypeError(
            f"{name} must be a list of strings, got a single {type(texts).__name__}; wrap it in a list: [text]."
        )
    if not isinstance(texts, Iterable):
        raise TypeError(f"{name} must be a list of strings, got {type(texts).__name__}.")
    result = list(texts)
    for index, item in enumerate(result):
        if not isinstance(item, str):
            raise TypeError(
                f"{name}[{index}] is {type(item).__name__}, expected str"
                + (" (decode bytes first, e.g. text.decode('utf-8'))." if isinstance(item, bytes | bytearray) else ".")
            )
    return result
