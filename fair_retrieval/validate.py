"""Checks of argument values shared by the whole library: whole numbers that are not bools, ranges, allowed values.

Python's `bool` is a subclass of `int`, so `isinstance(True, int)` holds and `batch_size=True` would pass a plain
`isinstance` check as a batch of one; every check here refuses bools where a number is meant. Each raising check
returns the value it accepted and raises a ValueError whose message names the argument, says what it must be and
shows what it got, so a user can correct the call. The predicates (`is_int`, `is_number`) are for callers that word
their own message.

This module imports nothing from fair_retrieval, so every layer (engine, library, CLI) may use it.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable
from typing import Any, TypeGuard, TypeVar

__all__ = [
    "MAX_DIMENSION",
    "MAX_NESTING",
    "dimension",
    "in_words",
    "int_at_least",
    "is_int",
    "is_number",
    "is_positive_int",
    "nested_deeper_than",
    "number_in",
    "one_of",
    "positive_int",
    "shown",
]

T = TypeVar("T")

SHOWN_CHARACTERS = 80
"""The most characters of a value an error message echoes (a crafted 4,000-digit number or a long string is shown
cut, with its length)."""
MAX_DIMENSION = 2**31 - 1
"""The largest vector size faiss takes (its dimensions are C ints)."""


def shown(value: object) -> str:
    """`repr(value)` for an error message, cut to `SHOWN_CHARACTERS` with its full length said when longer."""
    try:
        text = repr(value)
    except ValueError:  # an int past Python's digit limit for str()
        return f"an int of more than {SHOWN_CHARACTERS} digits"
    if len(text) <= SHOWN_CHARACTERS:
        return text
    if isinstance(value, int):
        return f"an int of {len(text):,} digits ({text[:12]}…)"
    return f"{text[:SHOWN_CHARACTERS]}… ({len(text):,} characters)"


def dimension(value: object, name: str = "dim") -> int:
    """`value` if it is a vector size faiss can hold: an int (a NumPy integer too) from 1 to `MAX_DIMENSION`.

    Raises:
        ValueError: for anything else, naming `name` and showing the value (cut when long).
    """
    if is_positive_int(value, numpy=True) and value <= MAX_DIMENSION:
        return int(value)
    raise ValueError(f"{name} must be a positive int up to {MAX_DIMENSION:,} (the embedding size), got {shown(value)}.")


def is_int(value: object, *, numpy: bool = False) -> TypeGuard[int]:
    """True for an int that is not a bool (with `numpy`, also a NumPy integer such as `np.int64`)."""
    kinds = numbers.Integral if numpy else int
    return isinstance(value, kinds) and not isinstance(value, bool)


def is_positive_int(value: object, *, numpy: bool = False) -> TypeGuard[int]:
    """True for an int ≥ 1 that is not a bool (with `numpy`, also a NumPy integer)."""
    return is_int(value, numpy=numpy) and value >= 1


def is_number(value: object) -> TypeGuard[int | float]:
    """True for an int or a float that is not a bool (NaN and infinities included: check them with `number_in`)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def positive_int(value: T, name: str, *, or_none: bool = False, note: str = "", numpy: bool = False) -> T:
    """`value` if it is an int ≥ 1 (not a bool), or None when `or_none`; else a ValueError.

    The message reads `{name} must be a positive int[ or None][ ({note})], got {value!r}.`.

    Raises:
        ValueError: for anything else.
    """
    if (or_none and value is None) or is_positive_int(value, numpy=numpy):
        return value
    raise ValueError(f"{name} must be a positive int{_or_none(or_none)}{_note(note)}, got {shown(value)}.")


def int_at_least(value: T, name: str, minimum: int, *, or_none: bool = False, note: str = "") -> T:
    """`value` if it is an int ≥ `minimum` (not a bool), or None when `or_none`; else a ValueError.

    The message reads `{name} must be an int ≥ {minimum}[ or None][ ({note})], got {value!r}.`.

    Raises:
        ValueError: for anything else.
    """
    if (or_none and value is None) or (is_int(value) and value >= minimum):  # type: ignore[operator]
        return value
    raise ValueError(f"{name} must be an int ≥ {minimum}{_or_none(or_none)}{_note(note)}, got {shown(value)}.")


def number_in(value: T, name: str, low: float, high: float | None = None, *, note: str = "") -> T:
    """`value` if it is an int or float (not a bool) in [low, high] (NaN never is); high=None: no upper bound.

    The message reads "{name} must be a number in [{low}, {high}][ ({note})], got {value!r}." or, without an upper
    bound, "{name} must be a number ≥ {low}[ ({note})], got {value!r}.".

    Raises:
        ValueError: for anything else.
    """
    number: object = value
    if is_number(number) and low <= number and (high is None or number <= high):
        return value
    bounds = f"≥ {low:g}" if high is None else f"in [{low:g}, {high:g}]"
    raise ValueError(f"{name} must be a number {bounds}{_note(note)}, got {shown(value)}.")


def one_of(value: T, name: str, allowed: tuple[Any, ...], *, note: str = "", words: bool = False) -> T:
    """`value` if it is one of `allowed` (e.g. `typing.get_args` of a Literal), else a ValueError.

    The message reads "{name} must be one of {allowed}[ ({note})], got {value!r}.", or with `words`
    "{name} must be 'a', 'b' or 'c'[ ({note})], got {value!r}." (see `in_words`). A bool matches only a bool: True
    is not taken for an allowed 1.

    Raises:
        ValueError: for anything else.
    """
    if any(value == choice and isinstance(value, bool) == isinstance(choice, bool) for choice in allowed):
        return value
    described = in_words(allowed) if words else f"one of {allowed}"
    raise ValueError(f"{name} must be {described}{_note(note)}, got {shown(value)}.")


def in_words(values: Iterable[Any]) -> str:
    """The values as a reader lists them: ('a', 'b', 'c') → "'a', 'b' or 'c'" (reprs, the last joined by "or")."""
    shown = [repr(value) for value in values]
    return "".join(shown) if len(shown) < 2 else f"{', '.join(shown[:-1])} or {shown[-1]}"


def _or_none(or_none: bool) -> str:
    return " or None" if or_none else ""


def _note(note: str) -> str:
    return f" ({note})" if note else ""


MAX_NESTING = 64
"""The deepest nesting of lists and dicts that metadata (and a JSONL line) may have: deeper values are refused
when they are added or read (`nested_deeper_than`), long before JSON encoding or a recursive check would fail on
them with a RecursionError."""


def nested_deeper_than(value: object, limit: int = MAX_NESTING) -> bool:
    """Whether `value` nests lists, tuples and dicts more than `limit` levels deep (a scalar is level 0); walked
    without recursion, so any depth is measured safely."""
    stack: list[tuple[object, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Iterable[object] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth + 1 > limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
