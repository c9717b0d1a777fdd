"""Metadata filters: the one filter grammar of fair-retrieval's stores, compiled into a predicate over metadata.

A store keeps a metadata dict per document; a filter says which documents a search may return. `compile_filter`
turns a filter into a plain function `predicate(metadata) -> bool`, checking the whole filter first, so a
malformed one fails when it is given, before any search runs. The stores then search only the documents whose
metadata pass (`FaissIndex.search(..., ids=...)`), so a filtered search finds k hits whenever k documents match.

The grammar is the Mongo-like one LangChain users write (and langchain-community's FAISS store read):

- ``{}``: every document.
- ``{"field": value}``: the field is present and equal to `value` (a dict `value` without ``$`` keys is compared
  as a value too).
- ``{"field": [a, b]}`` (a list or tuple): the field is present and equal to one of a, b; as before this module
  existed, a list-valued field also matches when it equals the whole list.
- ``{"field": {"$op": operand, ...}}``: every operator holds for that field. Field operators:

  - ``$eq``, ``$ne`` (also spelt ``$neq``, as langchain-community's FAISS store did): equal / not equal;
  - ``$gt``, ``$gte``, ``$lt``, ``$lte``: ordering against a number or a string operand (an ISO date or date-time
    operand orders ISO dates and date-times in time order, across time zones, a date-time without an offset read as
    UTC, and no other string, as Qdrant reads them);
  - ``$in``, ``$nin``: equal to one of / none of a list of values;
  - ``$exists``: ``True`` if the field is present, ``False`` if it is absent;
  - ``$not``: the negation of a field condition, e.g. ``{"year": {"$not": {"$gt": 2020}}}``;
  - ``$contains``: a list field holds the value; ``$any`` / ``$all``: a list field holds one / each of a list of
    values (``{"tags": {"$all": ["a", "b"]}}``);
  - ``$text_match``, ``$text_match_insensitive``: a string field contains the string operand (the second ignoring
    case, by `str.casefold`).
- ``{"$and": [f, ...]}``, ``{"$or": [f, ...]}`` (non-empty lists of filters), ``{"$not": f}``.
- Several keys in one dict must all hold (an implicit ``$and``), e.g. ``{"year": {"$gte": 2020}, "lang": "en"}``.
- A callable ``filter(metadata) -> bool`` is used as it is.

Semantics where vector stores disagree, fixed here:

- A missing field matches no comparison (``$eq``, ``$gt``, ``$in``, plain equality, …) but matches ``$ne`` and
  ``$nin`` (it is not equal to anything), and ``$not`` of a condition it fails.
- Values compare only within a type family: numbers with numbers (``1 == 1.0``), strings with strings, booleans
  with booleans (``True`` is not ``1``). An ordering across families (``"2024" > 3``) is False, never an error.
- Lists, dicts and None are compared for equality only, lists and dicts member by member (with the rules above:
  ``[1, True]`` is not ``[1, 1]``); ordering operators need a number or string operand.

Filters nest $and / $or / $not (at the top or on a field) at most `MAX_DEPTH` (64) levels deep, counted together.

Malformed filters raise ValueError naming the place (``filter['year']['$in']``) and the valid operators: an
unknown ``$`` operator, ``$in``/``$nin`` without a list, ``$and``/``$or`` without a non-empty list of dicts, an
ordering operator with a non-orderable operand, ``$exists`` without a bool, a field operator at the top level,
or ``$and``/``$or`` inside a field condition.

A store's public methods call each other (a search by text calls the search by vector); the first compiles the
filter once (`store_filter`: a grammar dict, or a function of the metadata, which gets a copy), so that a
malformed one fails before anything is embedded or searched, and hands the compiled `StoreFilter` down, which the
next ones take as it is (`record_filter`: the same as a test of a stored record). A framework with its own filter
vocabulary (LlamaIndex's `MetadataFilters`) translates it to this grammar in its adapter: `check_nesting` refuses its
combinations nested deeper than `MAX_DEPTH` of its own levels before each is translated, and `translated_filter`
compiles the translation with the grammar's bound counted in those levels.
"""

from __future__ import annotations

import datetime as dt
import operator
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from fair_retrieval.stores.arguments import private_copy
from fair_retrieval.validate import MAX_NESTING, is_number

__all__ = [
    "FILTER_OPERATORS",
    "MAX_DEPTH",
    "FilterSpec",
    "Predicate",
    "RecordFilter",
    "StoreFilter",
    "check_depth",
    "check_nesting",
    "compile_filter",
    "record_filter",
    "store_filter",
    "translated_filter",
]

Predicate: TypeAlias = Callable[[Mapping[str, Any]], bool]
"""A compiled filter: True for the metadata of a document the filter keeps."""

FilterSpec: TypeAlias = Mapping[str, Any] | Callable[[Mapping[str, Any]], Any]
"""What `compile_filter` accepts: a filter dict in the grammar above, or a callable over the metadata."""

_MEMBERSHIPS = ("$contains", "$any", "$all")  # on list fields
_TEXT_MATCHES = ("$text_match", "$text_match_insensitive")  # on string fields
_FIELD_OPERATORS = (
    *("$eq", "$ne", "$neq", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$not"),
    *_MEMBERSHIPS,
    *_TEXT_MATCHES,
)
_COMBINATORS = ("$and", "$or", "$not")
FILTER_OPERATORS: tuple[str, ...] = (*_FIELD_OPERATORS, "$and", "$or")
"""Every operator the grammar knows (``$not`` works both on a field and on a whole filter)."""

_ORDERINGS: dict[str, Callable[[Any, Any], bool]] = {
    "$gt": operator.gt,
    "$gte": operator.ge,
    "$lt": operator.lt,
    "$lte": operator.le,
}
_MISSING = object()  # a field absent from the metadata


MAX_DEPTH = MAX_NESTING
"""How deep $and / $or / $not may nest (64, the library's one nesting bound, `fair_retrieval.validate.MAX_NESTING`),
counted together wherever they are: a field's ``$not`` inside a ``$not`` inside an ``$or`` is three levels. Far more
than a filter written by hand or generated from a UI needs, and shallow enough that compiling and evaluating never
exhaust Python's stack: the depth is counted before each level is compiled, so a deeper filter is refused with a
ValueError, never a RecursionError."""


def compile_filter(spec: FilterSpec | None, *, max_depth: int = MAX_DEPTH) -> Predicate:
    """Compile a metadata filter into a predicate, checking all of it now.

    Args:
        spec: a filter dict in the grammar of this module (see the module docstring), a callable taking the
            metadata dict and returning a truth value, or None (keeps every document).
        max_depth: how deep $and / $or / $not may nest (`MAX_DEPTH`); an adapter whose filters translate one of
            their own levels into several of the grammar's passes its bound in grammar levels.

    Returns:
        A function of a metadata mapping returning True for documents the filter keeps. It never raises on odd
        metadata: comparing values of different types is simply False.

    Raises:
        ValueError: for a malformed filter (an unknown operator, an operand of the wrong shape, …), or one nested
            deeper than `max_depth`; the message names where in the filter the problem is and lists the valid
            operators.

    Example:
        >>> keep = compile_filter({"year": {"$gte": 2024}, "$or": [{"lang": "en"}, {"lang": {"$exists": False}}]})
        >>> keep({"year": 2025, "lang": "en"}), keep({"year": 2025}), keep({"year": "2025"})
        (True, True, False)
    """
    if spec is None:
        return _keep_all
    if callable(spec) and not isinstance(spec, Mapping):
        user_function = spec
        return lambda metadata: bool(user_function(metadata))
    if not isinstance(spec, Mapping):
        raise ValueError(
            f"filter must be a dict such as {{'year': {{'$gte': 2024}}}} or a function of the metadata dict, got "
            f"{type(spec).__name__} {spec!r}."
        )
    return _compile_filter_dict(spec, "filter", 0, max_depth)


# ---------------------------------------------------------------------------------------------------- compiling


def check_depth(depth: int, limit: int = MAX_DEPTH) -> None:
    """Refuse a filter level deeper than `limit` (the filter's top is level 0).

    Raises:
        ValueError: naming the bound and how to flatten the filter.
    """
    if depth > limit:
        raise ValueError(
            f"filter nests $and / $or / $not more than {limit} levels deep; flatten it (e.g. one $and or $in "
            "with many members instead of nested ones)."
        )


def check_nesting(depth: int, where: str, kind: str) -> None:
    """Refuse a framework's combination of conditions nested deeper than `MAX_DEPTH` of its own levels (the outermost
    is level 0), before it is translated to the grammar, so a deep one never exhausts Python's stack.

    Args:
        depth: the level of the combination.
        where: where it is, for the message (e.g. "filters.filters[0].filters[0]…").
        kind: what the framework calls a combination, for the message (e.g. "MetadataFilters").

    Raises:
        ValueError: naming the bound.
    """
    if depth > MAX_DEPTH:
        raise ValueError(
            f"{where}: {kind} nest more than {MAX_DEPTH} levels deep; flatten them (one AND or OR over many "
            "filters, or IN with many values, instead of nested ones)."
        )


def translated_filter(
    spec: Mapping[str, Any], *, levels_per_combination: int, levels_per_condition: int = 0
) -> StoreFilter | None:
    """A grammar dict translated from a framework's filters (its combinations checked by `check_nesting`), compiled;
    None for {} (it keeps every document).

    Args:
        spec: the translation, in this module's grammar.
        levels_per_combination: how many grammar levels the translation spells one of the framework's combinations
            in (e.g. 2: NOT as ``$not`` of ``$or``).
        levels_per_condition: how many grammar levels it spells one condition in (e.g. 1: "is empty" as one
            ``$or``).

    Raises:
        ValueError: a condition the grammar refuses, naming the place.
    """
    if not spec:
        return None
    depth = levels_per_combination * (MAX_DEPTH + 1) + levels_per_condition
    return StoreFilter(compile_filter(spec, max_depth=depth), private_copy(spec))


def _compile_filter_dict(spec: Mapping[Any, Any], where: str, depth: int = 0, limit: int = MAX_DEPTH) -> Predicate:
    """A whole-document filter dict at level `depth`: field conditions and combinators, all of which must hold."""
    check_depth(depth, limit)
    parts: list[Predicate] = []
    for key, value in spec.items():
        here = f"{where}[{key!r}]"
        if not isinstance(key, str):
            raise ValueError(
                f"{where} has the key {key!r} ({type(key).__name__}); filter keys are metadata field names (str) or "
                f"the combinators {', '.join(_COMBINATORS)}."
            )
        if not key.startswith("$"):
            parts.append(_compile_field(key, value, here, depth, limit))
        elif key in ("$and", "$or"):
            members = [
                _compile_filter_dict(member, f"{where}[{key!r}][{position}]" if depth < 8 else "…", depth + 1, limit)
                for position, member in _members(key, value, here)
            ]
            parts.append(_all_of(members) if key == "$and" else _any_of(members))
        elif key == "$not":
            if not isinstance(value, Mapping):
                raise ValueError(
                    f"{here} needs a filter dict to negate, e.g. {{'$not': {{'lang': 'en'}}}}; got "
                    f"{type(value).__name__} {value!r}."
                )
            parts.append(_negation(_compile_filter_dict(value, here if depth < 8 else "…", depth + 1, limit)))
        elif key in _FIELD_OPERATORS:
            raise ValueError(
                f"{here}: {key} compares a field, so it goes under a field name: {{'field': {{{key!r}: ...}}}}. "
                f"At the top of a filter only field names and {', '.join(_COMBINATORS)} are allowed."
            )
        else:
            raise ValueError(_unknown_operator(key, here))
    return _all_of(parts)


def _members(key: str, value: Any, where: str) -> list[tuple[int, Mapping[Any, Any]]]:
    """The filters combined by $and / $or: a non-empty list (or tuple) of dicts."""
    if not isinstance(value, list | tuple) or not value:
        raise ValueError(
            f"{where} needs a non-empty list of filter dicts, e.g. {{{key!r}: [{{'lang': 'en'}}, {{'year': 2024}}]}}; "
            f"got {type(value).__name__} {value!r}."
        )
    for position, member in enumerate(value):
        if not isinstance(member, Mapping):
            raise ValueError(
                f"{where}[{position}] is {type(member).__name__} {member!r}; {key} combines filter dicts such as "
                "{'lang': 'en'}."
            )
    return list(enumerate(value))


def _compile_field(field: str, condition: Any, where: str, depth: int, limit: int) -> Predicate:
    """The condition on one field at level `depth`: an operator dict, a list of allowed values, or a value to
    equal."""
    check_depth(depth, limit)
    if isinstance(condition, Mapping) and any(isinstance(key, str) and key.startswith("$") for key in condition):
        plain = [key for key in condition if not (isinstance(key, str) and key.startswith("$"))]
        if plain:
            raise ValueError(
                f"{where} mixes operators with plain keys {plain!r}; write either operators "
                "({'$gte': 1, '$lt': 5}) or a dict value to compare with, not both."
            )
        return _all_of(
            [
                _compile_operator(field, key, operand, f"{where}[{key!r}]" if depth < 8 else "…", depth, limit)
                for key, operand in condition.items()
            ]
        )
    if isinstance(condition, list | tuple):
        allowed = list(condition)

        def one_of_or_the_list(metadata: Mapping[str, Any]) -> bool:
            value = metadata.get(field, _MISSING)
            if value is _MISSING:
                return False
            if isinstance(value, list):  # a list field is compared as a whole, as the store always did
                return _same(value, allowed)
            return _is_one_of(value, allowed)

        return one_of_or_the_list
    return _equal_to(field, condition)


def _compile_operator(field: str, name: str, operand: Any, where: str, depth: int, limit: int) -> Predicate:
    """One `$operator: operand` on `field`, at level `depth` (a ``$not`` compiles its condition one level down)."""
    if name == "$eq":
        return _equal_to(field, operand)
    if name in ("$ne", "$neq"):
        return _negation(_equal_to(field, operand))
    if name in _ORDERINGS:
        if not _orderable(operand):
            raise ValueError(
                f"{where} compares with {type(operand).__name__} {operand!r}; {name} needs a number or a string "
                f"(dates as ISO strings). For equality with other values use $eq or $in."
            )
        return _ordering(field, _ORDERINGS[name], operand)
    if name in ("$in", "$nin"):
        if not isinstance(operand, list | tuple):
            raise ValueError(
                f"{where} needs a list of values, got {type(operand).__name__} {operand!r}; write "
                f"{{{field!r}: {{{name!r}: [{operand!r}]}}}} for a single value."
            )
        allowed = list(operand)

        def is_one_of(metadata: Mapping[str, Any]) -> bool:
            value = metadata.get(field, _MISSING)
            return value is not _MISSING and _is_one_of(value, allowed)

        return is_one_of if name == "$in" else _negation(is_one_of)
    if name in _MEMBERSHIPS:
        return _membership(field, name, operand, where)
    if name in _TEXT_MATCHES:
        if not isinstance(operand, str):
            raise ValueError(f"{where} needs a string to find in the field, got {type(operand).__name__} {operand!r}.")
        return _text_match(field, operand, ignore_case=name == "$text_match_insensitive")
    if name == "$exists":
        if not isinstance(operand, bool):
            raise ValueError(f"{where} needs True or False, got {type(operand).__name__} {operand!r}.")
        wanted = operand
        return lambda metadata: (field in metadata) is wanted
    if name == "$not":
        return _negation(_compile_field(field, operand, where, depth + 1, limit))
    if name in ("$and", "$or"):
        raise ValueError(
            f"{where}: {name} combines whole filters, so it goes at the top: "
            f"{{{name!r}: [{{{field!r}: ...}}, {{{field!r}: ...}}]}}. Several operators on one field already must "
            "all hold: {'$gte': 1, '$lt': 5}."
        )
    raise ValueError(_unknown_operator(name, where))


def _unknown_operator(name: str, where: str) -> str:
    return (
        f"Unknown filter operator {name!r} at {where}. Valid field operators: {', '.join(_FIELD_OPERATORS)}; "
        f"combinators: {', '.join(_COMBINATORS)}. A metadata field whose name starts with '$' cannot be filtered "
        "on; for anything else pass a function of the metadata dict as the filter."
    )


# ---------------------------------------------------------------------------------------------------- predicates


def _keep_all(metadata: Mapping[str, Any]) -> bool:
    return True


def _all_of(parts: Sequence[Predicate]) -> Predicate:
    if not parts:
        return _keep_all
    if len(parts) == 1:
        return parts[0]
    members = tuple(parts)
    return lambda metadata: all(part(metadata) for part in members)


def _any_of(parts: Sequence[Predicate]) -> Predicate:
    members = tuple(parts)
    return lambda metadata: any(part(metadata) for part in members)


def _negation(part: Predicate) -> Predicate:
    return lambda metadata: not part(metadata)


def _equal_to(field: str, expected: Any) -> Predicate:
    def equal(metadata: Mapping[str, Any]) -> bool:
        value = metadata.get(field, _MISSING)
        return value is not _MISSING and _same(value, expected)

    return equal


def _ordering(field: str, compare: Callable[[Any, Any], bool], operand: Any) -> Predicate:
    text = isinstance(operand, str)
    moment = _moment(operand) if text else None  # an ISO date-time operand orders by time, across time zones

    def ordered(metadata: Mapping[str, Any]) -> bool:
        value = metadata.get(field, _MISSING)
        if value is _MISSING or not _orderable(value) or isinstance(value, str) is not text:
            return False  # absent, or another type family: never an error
        if moment is not None:  # a date orders dates only (as Qdrant's DatetimeRange): another string is False
            when = _moment(value)
            return when is not None and compare(when, moment)
        return compare(value, operand)

    return ordered


def _moment(text: str) -> dt.datetime | None:
    """An ISO 8601 date or date-time string as an aware datetime (no offset: UTC, as Qdrant reads it); None for any
    other string."""
    if len(text) < 10 or not text[:4].isdigit() or text[4] != "-":
        return None  # not an ISO date: skip the parse (most strings)
    try:
        parsed = dt.datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=dt.timezone.utc)


def _membership(field: str, name: str, operand: Any, where: str) -> Predicate:
    """$contains (one value), $any / $all (a list of values) on a list field: a field that is no list holds none."""
    if name == "$contains":
        wanted = [operand]
    elif isinstance(operand, list | tuple):
        wanted = list(operand)
    else:
        raise ValueError(
            f"{where} needs a list of values, got {type(operand).__name__} {operand!r}; for one value write "
            f"{{{field!r}: {{'$contains': {operand!r}}}}}."
        )
    every = name == "$all"

    def holds(metadata: Mapping[str, Any]) -> bool:
        value = metadata.get(field, _MISSING)
        if not isinstance(value, list):
            return False
        found = (_is_one_of(candidate, value) for candidate in wanted)
        return all(found) if every else any(found)

    return holds


def _text_match(field: str, text: str, *, ignore_case: bool) -> Predicate:
    wanted = text.casefold() if ignore_case else text

    def matches(metadata: Mapping[str, Any]) -> bool:
        value = metadata.get(field, _MISSING)
        if not isinstance(value, str):
            return False
        return wanted in (value.casefold() if ignore_case else value)

    return matches


# ---------------------------------------------------------------------------------------------------- values


def _orderable(value: Any) -> bool:
    """A number (not a bool) or a string: what the ordering operators compare."""
    return isinstance(value, str) or is_number(value)


def _same(value: Any, expected: Any) -> bool:
    """Equality where a bool equals only a bool (Python would have True == 1), also inside lists and dicts (which
    compare member by member; a tuple as the list it stands for)."""
    if isinstance(value, bool) is not isinstance(expected, bool):
        return False
    if isinstance(value, list | tuple) and isinstance(expected, list | tuple):
        return len(value) == len(expected) and all(_same(a, b) for a, b in zip(value, expected, strict=True))
    if isinstance(value, Mapping) and isinstance(expected, Mapping):
        return value.keys() == expected.keys() and all(_same(value[key], expected[key]) for key in value)
    try:
        return bool(value == expected)
    except Exception:  # an exotic metadata value whose __eq__ raises: not equal
        return False


def _is_one_of(value: Any, allowed: Sequence[Any]) -> bool:
    return any(_same(value, candidate) for candidate in allowed)


ENGINE_ONLY = (
    "A qdrant_client models.Filter is evaluated by a Qdrant collection's engine; this store filters in Python: pass a "
    "filter dict of the stores' grammar (e.g. {'topic': 'ferries', 'year': {'$gte': 2024}}), or search a Qdrant store."
)


def is_engine_filter(spec: Any) -> bool:
    """Whether `spec` is Qdrant's own filter (`qdrant_client.models.Filter`), which only a Qdrant store evaluates."""
    kind = type(spec)
    return kind.__name__ == "Filter" and kind.__module__.startswith("qdrant_client")


def _engine_only(metadata: Mapping[str, Any]) -> bool:
    raise ValueError(ENGINE_ONLY)


class StoreFilter:
    """A compiled filter: `filter(metadata)` is True for the metadata of a document the filter keeps.

    Attributes:
        matches: the predicate.
        spec: the grammar dict it was compiled from (a private copy), what a store whose engine filters itself (a
            Qdrant collection) translates; None for a function of the metadata, which only Python can run.
        engine: Qdrant's own filter (`qdrant_client.models.Filter`) as the caller gave it, which only a Qdrant
            store evaluates (its `matches` refuses); None for the others.
    """

    __slots__ = ("engine", "matches", "spec")

    def __init__(self, matches: Predicate, spec: Mapping[str, Any] | None = None, engine: Any = None) -> None:
        self.matches = matches
        self.spec = spec
        self.engine = engine

    def __call__(self, metadata: Mapping[str, Any]) -> bool:
        return self.matches(metadata)


def store_filter(spec: Mapping[str, Any] | Callable[..., Any] | StoreFilter | None) -> StoreFilter | None:
    """The compiled `spec` (None for none; a `StoreFilter` as it is).

    Args:
        spec: a `fair_retrieval.stores.filters` dict, a function of the metadata dict returning a truth value, an
            already compiled filter, Qdrant's own `models.Filter` (for a Qdrant store), or None. A function gets a
            copy of each metadata dict, so one that edits its argument cannot edit the store.

    Raises:
        ValueError: a malformed filter dict (the message names the place), before any search.
    """
    if spec is None or isinstance(spec, StoreFilter):
        return spec
    if is_engine_filter(spec):
        return StoreFilter(_engine_only, engine=spec)
    if callable(spec) and not isinstance(spec, Mapping):
        user_filter = spec
        return StoreFilter(lambda metadata: bool(user_filter(private_copy(metadata))))
    return StoreFilter(compile_filter(spec), private_copy(spec))


class RecordFilter:
    """A compiled filter as a test of a stored record by its metadata (`record_filter`); `filter` is the
    `StoreFilter` it runs, so a store whose engine filters itself can read its grammar dict.

    Args:
        predicate: the compiled filter (a `StoreFilter`, whose `spec` an engine translates; or another predicate).
        metadata_of: a record's metadata (None: its `metadata` attribute).
    """

    __slots__ = ("filter", "metadata_of")

    def __init__(self, predicate: Predicate, metadata_of: Callable[[Any], Mapping[str, Any]] | None = None) -> None:
        self.filter = predicate
        self.metadata_of = metadata_of

    def __call__(self, record: Any) -> bool:
        return self.filter(record.metadata if self.metadata_of is None else self.metadata_of(record))


def record_filter(spec: Mapping[str, Any] | Callable[..., Any] | StoreFilter | None) -> Callable[[Any], bool] | None:
    """`store_filter(spec)` as a test of a stored record by its `metadata` attribute (what `DocumentStore.search`
    takes as `keep`); None keeps every record.

    Raises:
        ValueError: a malformed filter dict (`store_filter`).
    """
    predicate = store_filter(spec)
    return None if predicate is None else RecordFilter(predicate)
