"""The stores' one filter grammar (`fair_retrieval.stores.filters`) as a Qdrant filter, evaluated in the engine.

A Qdrant-backed store keeps each document's metadata in the payload of its points (under `METADATA_FIELD`), so a
filtered search runs inside Qdrant among the points the filter keeps and k documents come back whenever k match,
as in the FAISS store. Qdrant reads a condition on a list field as "one element matches", a null or empty list as an
absent field, and has no condition for a whole list or dict; the grammar compares whole values. So every point also
carries what the grammar needs and the engine cannot see (`field_markers`): the names of the metadata's fields
(`FIELDS_MARKER`), of those holding a list (`LISTS_MARKER`), and each list or dict value as one canonical string
(`VALUES_MARKER`, `canonical_value`). `qdrant_filter` translates a grammar dict (already checked by `compile_filter`)
operator by operator, exactly:

- equality (``{"f": v}``, ``$eq``): strings and booleans by `MatchValue`, numbers by a closed `Range` (so 1 equals
  1.0, as in the grammar), None by `IsNull`, each only on a field that holds no list; a list or dict by its
  canonical string; ``$in``: any of them; ``{"f": [a, b]}``: one of them, or a list field equal to the whole list;
  ``$ne``, ``$nin`` and ``$not``: `must_not` (a missing field passes, as in the grammar); ``$gt`` … ``$lte``: `Range`
  for numbers, `DatetimeRange` for ISO dates given as strings, on a field holding no list; ``$contains``, ``$any``,
  ``$all``: a list field with one element, any, or every element matching (``$all: []``: any list field);
  ``$exists``: the field's name among the point's field names; ``$and`` / ``$or`` / ``$not``: nested filters.

A collection written before the markers existed (its record has no ``"filter_markers"``) is translated as then,
with Qdrant's reading of lists, nulls and empty lists (documented in docs/guides/qdrant.md); writing its documents
into a new collection makes its filters exact. What the engine cannot evaluate is refused by name before any search,
never filtered after it: a function of the metadata, string ordering other than ISO dates, substring matches
(``$text_match``: Qdrant's text match is by words), a list or dict as an element of a list field, and an empty field
name or one holding a double quote (no key path can name it). A name other than word characters and ``-`` is quoted
in its key path (``metadata."a b"``), so ``.``, ``[``, ``]`` and spaces are part of the name, as in the grammar.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from fair_retrieval.validate import is_int, is_number

__all__ = [
    "FIELDS_MARKER",
    "LISTS_MARKER",
    "METADATA_FIELD",
    "VALUES_MARKER",
    "WHOLE_MARKER",
    "check_engine_filter",
    "field_markers",
    "qdrant_filter",
    "renamed_keys",
]

METADATA_FIELD = "metadata"
"""The payload key under which every point of a document carries the document's metadata."""
FIELDS_MARKER = "fr_fields"
"""The payload key of the names of the metadata's fields (what ``$exists`` reads: Qdrant's IsEmpty also counts a
null or an empty list as absent)."""
LISTS_MARKER = "fr_lists"
"""The payload key of the names of the metadata's fields that hold a list (Qdrant matches a list field by any one
element; a value condition of the grammar holds on a field that holds no list)."""
WHOLE_MARKER = "fr_whole"
"""The payload key of the metadata's floats of whole value, each as its int under its field's name (1.0 as 1): what
lets one `MatchAny` of ints compare numbers as the grammar does (Qdrant matches an int to int payloads only)."""
VALUES_MARKER = "fr_values"
"""The payload key of the metadata's list and dict values, each as its `canonical_value` under its field's name
(whole-value equality, which Qdrant has no condition for)."""

_FUNCTION = (
    "A Qdrant store filters inside the engine, which cannot run a Python function; pass a filter dict of the stores' "
    "grammar instead (e.g. {'year': {'$gte': 2024}, 'lang': {'$in': ['en', 'de']}})."
)


def field_markers(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """The payload entries beside a document's metadata that make filters exact (see the module docstring)."""
    names = [str(name) for name in metadata]
    return {
        FIELDS_MARKER: names,
        LISTS_MARKER: [str(name) for name, value in metadata.items() if isinstance(value, list | tuple)],
        VALUES_MARKER: {
            str(name): canonical_value(value)
            for name, value in metadata.items()
            if isinstance(value, list | tuple | dict)
        },
        WHOLE_MARKER: {str(name): int(value) for name, value in metadata.items() if _whole_float(value)},
    }


def _whole_float(value: Any) -> bool:
    """A float of whole value in Qdrant's int range (2.0, not 2.5 nor 1e300)."""
    return isinstance(value, float) and value.is_integer() and abs(value) < _INT_RANGE


def canonical_value(value: Any) -> str:
    """One string for each value the grammar calls equal (`filters._same`): numbers of equal value alike (1 and
    1.0), a bool never a number, dicts whatever their key order, tuples as lists."""
    return json.dumps(_canonical(value), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _canonical(value: Any) -> Any:
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, int):
        return int(value)
    if is_number(value):
        number = float(value)
        return int(number) if number.is_integer() else number  # 2.0 as 2; inf and nan as JSON's Infinity, NaN
    if isinstance(value, list | tuple):
        return [_canonical(member) for member in value]
    if isinstance(value, Mapping):
        return {str(key): _canonical(member) for key, member in value.items()}
    return {"$repr": repr(value)}


def qdrant_filter(spec: Mapping[str, Any] | None, where: str = "filter", *, exact: bool = True) -> Any:
    """`spec`, a filter dict of the stores' grammar (checked already), as a `qdrant_client.models.Filter`; None for
    None or {}.

    Args:
        spec: the filter dict.
        where: how messages name it.
        exact: the points carry `field_markers` (collections made by this release); False translates for a
            collection written before them, with Qdrant's reading of lists and nulls.

    Raises:
        ValueError: a condition the engine cannot evaluate as the grammar means it (see the module docstring).
    """
    if spec is None or not spec:
        return None
    return _Translation(exact).document(spec, where)


def renamed_keys(spec: Any, rename: Callable[[str], str]) -> Any:
    """A copy of Qdrant's own filter (or condition) with every payload key passed through `rename`: how an adapter
    reads a filter written for another layout (llama-index's Qdrant store keeps metadata at the payload's top)."""
    models = _models()
    if isinstance(spec, models.Filter):
        changes: dict[str, Any] = {
            name: [renamed_keys(member, rename) for member in _listed(getattr(spec, name))]
            for name in _CLAUSES
            if getattr(spec, name) is not None  # an absent clause stays absent
        }
        if spec.min_should is not None:
            conditions = [renamed_keys(member, rename) for member in spec.min_should.conditions]
            changes["min_should"] = spec.min_should.model_copy(update={"conditions": conditions})
        return spec.model_copy(update=changes)
    if isinstance(spec, models.FieldCondition):
        return spec.model_copy(update={"key": rename(spec.key)})
    if isinstance(spec, models.IsEmptyCondition):
        return spec.model_copy(update={"is_empty": models.PayloadField(key=rename(spec.is_empty.key))})
    if isinstance(spec, models.IsNullCondition):
        return spec.model_copy(update={"is_null": models.PayloadField(key=rename(spec.is_null.key))})
    if isinstance(spec, models.NestedCondition):
        nested = spec.nested.model_copy(update={"key": rename(spec.nested.key)})
        return spec.model_copy(update={"nested": nested})
    return spec


def check_engine_filter(spec: Any, where: str = "filter", also: Sequence[str] = ()) -> None:
    """Refuse Qdrant's own `models.Filter` where it names what this store's points do not hold as there: a payload key
    outside the metadata (langchain-qdrant keeps "page_content" on its points; this store keeps a document's text in
    one point of several, so such a condition would keep nothing, in silence) or point ids (this store's are its own,
    not the documents' ids).

    Raises:
        ValueError: naming the condition and what to filter by instead.
    """
    models = _models()
    if isinstance(spec, models.Filter):
        for name in _CLAUSES:
            for position, member in enumerate(_listed(getattr(spec, name))):
                check_engine_filter(member, f"{where}.{name}[{position}]", also)
        if spec.min_should is not None:
            for position, member in enumerate(spec.min_should.conditions):
                check_engine_filter(member, f"{where}.min_should[{position}]", also)
        return
    if isinstance(spec, models.HasIdCondition):
        raise ValueError(
            f"{where}: a HasIdCondition names Qdrant point ids, and this store's points have ids of their own (a "
            "document is several points); filter by a metadata field, or get documents by id with get_by_ids."
        )
    key = _payload_key(spec)
    metadata = key == METADATA_FIELD or (key or "").startswith((f"{METADATA_FIELD}.", f"{METADATA_FIELD}["))
    if key is not None and not metadata and key not in also:
        raise ValueError(
            f"{where}: the condition on {key!r} reads a payload key this store's points do not hold as "
            f"langchain-qdrant's do; its points keep the document's metadata under {METADATA_FIELD!r}, so filter on "
            f"'{METADATA_FIELD}.<field>' (the text itself is searched by the query, or by BM25 in a sparse or hybrid "
            "search)."
        )


_CLAUSES = ("must", "should", "must_not")
"""The clauses of a `models.Filter` that hold conditions (beside `min_should`)."""


def _listed(members: Any) -> list[Any]:
    """A clause's conditions as a list (Qdrant's models take one condition or a list, or None)."""
    if members is None:
        return []
    return members if isinstance(members, list) else [members]


def _payload_key(condition: Any) -> str | None:
    """The payload key a condition reads (None for one that reads none, such as HasIdCondition)."""
    models = _models()
    if isinstance(condition, models.FieldCondition):
        return str(condition.key)
    if isinstance(condition, models.IsEmptyCondition):
        return str(condition.is_empty.key)
    if isinstance(condition, models.IsNullCondition):
        return str(condition.is_null.key)
    if isinstance(condition, models.NestedCondition):
        return str(condition.nested.key)
    return None


def function_filter_error() -> ValueError:
    """The error for a filter that is a Python function, which a Qdrant store cannot evaluate in the engine."""
    return ValueError(_FUNCTION)


def _models() -> Any:
    from qdrant_client import models

    return models


_PLAIN_NAME = re.compile(r"[\w-]+")
"""A field name Qdrant's path syntax reads as it is."""


def _path(root: str, field: str, where: str) -> str:
    """The payload path of a field under `root`: a name of word characters and '-' as it is, any other quoted
    (Qdrant's path syntax: `metadata."a b"`, so '.', '[', ']' and spaces stay part of the name).

    Raises:
        ValueError: an empty name or one holding a double quote, which no Qdrant path can name.
    """
    if not field or '"' in field:
        raise ValueError(
            f"{where}: Qdrant cannot filter a metadata field named {field!r} (an empty name, or one holding a double "
            "quote, has no payload path); rename the field to filter on it in a Qdrant store."
        )
    return f"{root}.{field}" if _PLAIN_NAME.fullmatch(field) else f'{root}."{field}"'


class _Translation:
    """One filter's translation; `exact` as `qdrant_filter` takes it."""

    def __init__(self, exact: bool) -> None:
        self.exact = exact
        self.models = _models()

    def document(self, spec: Mapping[str, Any], where: str) -> Any:
        """A whole-document filter dict: every key must hold."""
        models = self.models
        must: list[Any] = []
        for key, value in spec.items():
            here = f"{where}[{key!r}]"
            if key == "$and":
                must.append(models.Filter(must=[self.document(member, here) for member in value]))
            elif key == "$or":
                must.append(models.Filter(should=[self.document(member, here) for member in value]))
            elif key == "$not":
                must.append(models.Filter(must_not=[self.document(value, here)]))
            else:
                must.append(self.conditions(key, value, here))
        return models.Filter(must=must)

    def conditions(self, field: str, condition: Any, where: str) -> Any:
        """One field's condition: a value (or a list of values), or a dict of operators that must all hold."""
        models = self.models
        if isinstance(condition, Mapping) and any(str(name).startswith("$") for name in condition):
            return models.Filter(
                must=[self.operator(field, name, operand, f"{where}[{name!r}]") for name, operand in condition.items()]
            )
        if isinstance(condition, list | tuple):
            if not self.exact:
                return self.one_of(field, condition, where)
            # the grammar: a list field equal to the whole list, any other field equal to one of the values (a field
            # that holds no list equals no list among them)
            values = [value for value in condition if not isinstance(value, list | tuple)]
            return models.Filter(should=[self.one_of(field, values, where), self.equal(field, list(condition), where)])
        return self.equal(field, condition, where)

    def operator(self, field: str, name: str, operand: Any, where: str) -> Any:
        models = self.models
        if name == "$eq":
            return self.equal(field, operand, where)
        if name in ("$ne", "$neq"):
            return models.Filter(must_not=[self.equal(field, operand, where)])
        if name in ("$gt", "$gte", "$lt", "$lte"):
            return self.scalar(field, self.ordering(field, name[1:], operand, where))
        if name == "$in":
            return self.one_of(field, operand, where)
        if name == "$nin":
            return models.Filter(must_not=[self.one_of(field, operand, where)])
        if name == "$exists":
            present = self.present(field, where)
            return present if operand else models.Filter(must_not=[present])
        if name == "$not":
            return models.Filter(must_not=[self.conditions(field, operand, where)])  # a value, list or operators
        if name in ("$contains", "$any", "$all"):
            return self.membership(field, name, operand, where)
        raise ValueError(
            f"{where}: {name} matches part of a string, which Qdrant's engine cannot evaluate (its text match is by "
            "words, through a full-text index); filter by equality, $in or ranges in a Qdrant store, or use the FAISS "
            "store."
        )

    def equal(self, field: str, value: Any, where: str) -> Any:
        """The field equal to `value` as the grammar compares (a list or dict as a whole)."""
        models = self.models
        if isinstance(value, list | tuple | dict):
            if self.exact:
                key = _path(VALUES_MARKER, field, where)
                return models.FieldCondition(key=key, match=models.MatchValue(value=canonical_value(value)))
            if isinstance(value, list | tuple) and not value:  # Qdrant's "empty" without its null: LlamaIndex's
                payload = models.PayloadField(key=_path(METADATA_FIELD, field, where))  # IS_EMPTY asks for both
                return models.Filter(
                    must=[models.IsEmptyCondition(is_empty=payload)], must_not=[models.IsNullCondition(is_null=payload)]
                )
            raise ValueError(
                f"{where}: this Qdrant collection, written by an earlier release, cannot compare a field with a "
                f"{type(value).__name__} (Qdrant matches list fields element by element): use $contains, $any or "
                "$all, or write the documents into a new collection, whose filters compare whole values."
            )
        return self.scalar(field, self.element(field, value, where))

    def element(self, field: str, value: Any, where: str) -> Any:
        """Qdrant's match of `value`, which on a list field holds when one element matches."""
        models = self.models
        key = _path(METADATA_FIELD, field, where)
        if value is None:
            return models.IsNullCondition(is_null=models.PayloadField(key=key))
        if isinstance(value, bool | str):
            return models.FieldCondition(key=key, match=models.MatchValue(value=value))
        if is_number(value):
            return models.FieldCondition(key=key, range=models.Range(gte=value, lte=value))
        raise ValueError(
            f"{where}: a Qdrant store matches a list's elements by a string, number, boolean or None, not a "
            f"{type(value).__name__}; filter such fields in the FAISS store, or compare the whole list with $eq."
        )

    def scalar(self, field: str, condition: Any) -> Any:
        """`condition` on a field that holds no list (where the collection's points say which do)."""
        if not self.exact:
            return condition
        models = self.models
        lists = models.FieldCondition(key=LISTS_MARKER, match=models.MatchValue(value=field))
        return models.Filter(must=[condition], must_not=[lists])

    def one_of(self, field: str, values: Sequence[Any], where: str) -> Any:
        """The field equal to one of `values`: the strings in one `MatchAny`."""
        models = self.models
        values = list(values)
        if not values:  # nothing is one of no values
            return models.HasIdCondition(has_id=[])
        strings = [value for value in values if isinstance(value, str)]
        key = _path(METADATA_FIELD, field, where)
        should = (
            [self.scalar(field, models.FieldCondition(key=key, match=models.MatchAny(any=strings)))] if strings else []
        )
        wholes = sorted({int(value) for value in values if _whole(value)}) if self.exact else []
        if wholes:  # whole numbers in two MatchAny (int payloads, and floats of whole value), not a Range each
            ints = models.Filter(
                should=[
                    models.FieldCondition(key=key, match=models.MatchAny(any=wholes)),
                    models.FieldCondition(key=_path(WHOLE_MARKER, field, where), match=models.MatchAny(any=wholes)),
                ]
            )
            should.append(self.scalar(field, ints))
        others = [value for value in values if not isinstance(value, str) and not (wholes and _whole(value))]
        should += [self.equal(field, value, where) for value in others]
        return should[0] if len(should) == 1 else models.Filter(should=should)

    def membership(self, field: str, name: str, operand: Any, where: str) -> Any:
        """$contains / $any / $all: a list field holding the value, one of the values, each of them."""
        models = self.models
        wanted = [operand] if name == "$contains" else list(operand)
        matches = [self.element(field, value, where) for value in wanted]
        if name == "$any":
            if not matches:  # no element is one of no values
                return models.HasIdCondition(has_id=[])
            held = matches[0] if len(matches) == 1 else models.Filter(should=matches)
        else:
            held = models.Filter(must=matches)
        if not self.exact:
            return held
        lists = models.FieldCondition(key=LISTS_MARKER, match=models.MatchValue(value=field))
        return models.Filter(must=[lists, held]) if matches else lists

    def present(self, field: str, where: str) -> Any:
        """The field present (with any value: the grammar's ``$exists``)."""
        models = self.models
        if self.exact:
            return models.FieldCondition(key=FIELDS_MARKER, match=models.MatchValue(value=_named(field, where)))
        empty = models.IsEmptyCondition(is_empty=models.PayloadField(key=_path(METADATA_FIELD, field, where)))
        return models.Filter(must_not=[empty])

    def ordering(self, field: str, bound: str, operand: Any, where: str) -> Any:
        models = self.models
        key = _path(METADATA_FIELD, field, where)
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


def _whole(value: Any) -> bool:
    """A number (not a bool) of whole value in Qdrant's int range: an int, or a float such as 2.0."""
    return (is_int(value) and abs(value) < _INT_RANGE) or _whole_float(value)


_INT_RANGE = 2**63
"""Qdrant keeps ints as int64: a whole number beyond it is compared by a range instead."""


def _named(field: str, where: str) -> str:
    """`field` as the markers name it, refused where no payload path could name it (as every other condition)."""
    _path(METADATA_FIELD, field, where)
    return field
