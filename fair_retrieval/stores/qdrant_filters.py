"""The stores' one filter grammar (`fair_retrieval.stores.filters`) as a Qdrant filter, evaluated in the engine.

A Qdrant-backed store keeps each document's metadata in the payload of its points (under `METADATA_FIELD`), so a
filtered search runs inside Qdrant among the points the filter keeps and k documents come back whenever k match,
as in the FAISS store. `qdrant_filter` translates a grammar dict (already checked by `compile_filter`) operator by
operator:

- equality (``{"f": v}``, ``$eq``): strings and booleans by `MatchValue`, numbers by a closed `Range` (so 1 equals
  1.0, as in the grammar), None by `IsNull`, an empty list by `IsEmpty` without `IsNull` (which a missing field
  also passes: Qdrant reads it as empty); ``{"f": [a, b]}``, ``$in`` and ``$any``: any of them; ``$ne``, ``$nin``
  and ``$not``: `must_not` (a missing field passes, as in the grammar); ``$gt`` … ``$lte``: `Range` for numbers,
  `DatetimeRange` for ISO dates given as strings; ``$contains`` / ``$all``: Qdrant's match on a list field holds when
  one element matches; ``$exists``: `IsEmpty` negated or not; ``$and`` / ``$or`` / ``$not``: nested filters.

Where Qdrant's engine reads a condition otherwise than the grammar, the difference is Qdrant's and documented
(docs/guides/qdrant.md): a condition on a list field holds when one element matches (the grammar compares the whole
list, except for ``$contains``/``$any``/``$all``), ``$exists`` counts a null or empty list as absent. What the engine
cannot evaluate is refused by name before any search, never filtered after it: a function of the metadata, string
ordering other than ISO dates, a list or dict compared as a value, substring matches (``$text_match``: Qdrant's
text match is by words), and an empty field name or one holding a double quote (no key path can name it). A name
other than word characters and ``-`` is quoted in its key path (``metadata."a b"``), so ``.``, ``[``, ``]`` and
spaces are part of the name, as in the grammar.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from typing import Any

from fair_retrieval.validate import is_number

__all__ = ["METADATA_FIELD", "qdrant_filter"]

METADATA_FIELD = "metadata"
"""The payload key under which every point of a document carries the document's metadata."""

_FUNCTION = (
    "A Qdrant store filters inside the engine, which cannot run a Python function; pass a filter dict of the stores' "
    "grammar instead (e.g. {'year': {'$gte': 2024}, 'lang': {'$in': ['en', 'de']}})."
)


def qdrant_filter(spec: Mapping[str, Any] | None, where: str = "filter") -> Any:
    """`spec`, a filter dict of the stores' grammar (checked already), as a `qdrant_client.models.Filter`; None for
    None or {}.

    Raises:
        ValueError: a condition the engine cannot evaluate as the grammar means it (see the module docstring).
    """
    if spec is None or not spec:
        return None
    return _document(spec, where)


def function_filter_error() -> ValueError:
    """The error for a filter that is a Python function, which a Qdrant store cannot evaluate in the engine."""
    return ValueError(_FUNCTION)


def _models() -> Any:
    from qdrant_client import models

    return models


def _document(spec: Mapping[str, Any], where: str) -> Any:
    """A whole-document filter dict: every key must hold."""
    models = _models()
    must: list[Any] = []
    for key, value in spec.items():
        here = f"{where}[{key!r}]"
        if key == "$and":
            must.append(models.Filter(must=[_document(member, here) for member in value]))
        elif key == "$or":
            must.append(models.Filter(should=[_document(member, here) for member in value]))
        elif key == "$not":
            must.append(models.Filter(must_not=[_document(value, here)]))
        else:
            must.append(_field(key, value, here))
    return models.Filter(must=must)


def _field(field: str, condition: Any, where: str) -> Any:
    """One field's condition: a value (or a list of values), or a dict of operators that must all hold."""
    return _conditions(_path(field, where), condition, where)


def _path(field: str, where: str) -> str:
    """The payload path of a metadata field: a name of word characters and '-' as it is, any other quoted (Qdrant's
    path syntax: `metadata."a b"`, so '.', '[', ']' and spaces stay part of the name).

    Raises:
        ValueError: an empty name or one holding a double quote, which no Qdrant path can name.
    """
    if not field or '"' in field:
        raise ValueError(
            f"{where}: Qdrant cannot filter a metadata field named {field!r} (an empty name, or one holding a double "
            "quote, has no payload path); rename the field to filter on it in a Qdrant store."
        )
    return f"{METADATA_FIELD}.{field}" if _PLAIN_NAME.fullmatch(field) else f'{METADATA_FIELD}."{field}"'


_PLAIN_NAME = re.compile(r"[\w-]+")
"""A field name Qdrant's path syntax reads as it is."""


def _conditions(key: str, condition: Any, where: str) -> Any:
    """The condition on the payload path `key`."""
    models = _models()
    if isinstance(condition, Mapping) and any(str(name).startswith("$") for name in condition):
        return models.Filter(
            must=[_operator(key, name, operand, f"{where}[{name!r}]") for name, operand in condition.items()]
        )
    if isinstance(condition, list | tuple):
        return _one_of(key, condition, where)
    return _equal(key, condition, where)


def _operator(key: str, name: str, operand: Any, where: str) -> Any:
    models = _models()
    if name == "$eq":
        return _equal(key, operand, where)
    if name in ("$ne", "$neq"):
        return models.Filter(must_not=[_equal(key, operand, where)])
    if name in ("$gt", "$gte", "$lt", "$lte"):
        return _ordering(key, name[1:], operand, where)
    if name in ("$in", "$any"):
        return _one_of(key, operand, where)
    if name == "$nin":
        return models.Filter(must_not=[_one_of(key, operand, where)])
    if name == "$exists":
        empty = models.IsEmptyCondition(is_empty=models.PayloadField(key=key))
        return models.Filter(must_not=[empty]) if operand else models.Filter(must=[empty])
    if name == "$not":
        inner = operand if isinstance(operand, Mapping) else {"$eq": operand}
        return models.Filter(must_not=[_conditions(key, inner, where)])
    if name == "$contains":
        return _equal(key, operand, where)
    if name == "$all":
        return models.Filter(must=[_equal(key, value, where) for value in operand])
    raise ValueError(
        f"{where}: {name} matches part of a string, which Qdrant's engine cannot evaluate (its text match is by "
        "words, through a full-text index); filter by equality, $in or ranges in a Qdrant store, or use the FAISS "
        "store."
    )


def _equal(key: str, value: Any, where: str) -> Any:
    models = _models()
    if value is None:
        return models.IsNullCondition(is_null=models.PayloadField(key=key))
    if isinstance(value, bool | str):
        return models.FieldCondition(key=key, match=models.MatchValue(value=value))
    if is_number(value):
        return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
    if isinstance(value, list | tuple) and not value:  # an empty list: Qdrant's "empty" without its null (a
        field = models.PayloadField(key=key)  # missing field reads as empty too: LlamaIndex's IS_EMPTY asks both)
        return models.Filter(
            must=[models.IsEmptyCondition(is_empty=field)], must_not=[models.IsNullCondition(is_null=field)]
        )
    raise ValueError(
        f"{where}: a Qdrant store compares a field with a string, number, boolean or None, not a "
        f"{type(value).__name__}; Qdrant matches list fields element by element: use $contains, $any or $all."
    )


def _one_of(key: str, values: Sequence[Any], where: str) -> Any:
    models = _models()
    values = list(values)
    if not values:  # nothing is one of no values
        return models.HasIdCondition(has_id=[])
    strings = [value for value in values if isinstance(value, str)]
    others = [value for value in values if not isinstance(value, str)]
    should = [models.FieldCondition(key=key, match=models.MatchAny(any=strings))] if strings else []
    should += [_equal(key, value, where) for value in others]
    return should[0] if len(should) == 1 else models.Filter(should=should)


def _ordering(key: str, bound: str, operand: Any, where: str) -> Any:
    models = _models()
    if is_number(operand):
        return models.FieldCondition(key=key, range=models.Range(**{bound: operand}))
    if isinstance(operand, str):
        try:
            dt.datetime.fromisoformat(operand)
        except ValueError:
            raise ValueError(
                f"{where}: Qdrant orders numbers and dates only; {operand!r} is neither a number nor an ISO date. "
                "Store the field as a number, or as an ISO date ('2024-05-01'), to compare it in a Qdrant store."
            ) from None
        return models.FieldCondition(key=key, range=models.DatetimeRange(**{bound: operand}))
    raise ValueError(f"{where}: orders against a number or an ISO date string, got {type(operand).__name__}.")
