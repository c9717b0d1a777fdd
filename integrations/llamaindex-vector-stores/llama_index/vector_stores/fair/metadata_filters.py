"""llama-index `MetadataFilters` translated to the filter grammar of `fair_retrieval.stores` (LlamaIndex's words
live here, the grammar and its checks in the core).

Every `FilterOperator` has its llama-index meaning (`SUPPORTED_OPERATORS`: CONTAINS, ANY and ALL on list fields,
TEXT_MATCH and TEXT_MATCH_INSENSITIVE on string fields, IS_EMPTY, …), combined with FilterCondition AND, OR and NOT.
`condition_spec` turns one condition into a grammar dict and `combined_spec` combines several, checking what the
grammar would refuse with messages in LlamaIndex's own terms; an operator with no equivalent is refused by name,
never answered with a silently empty result. Combinations nest at most 64 levels deep (the grammar's bound,
`fair_retrieval.stores.MAX_FILTER_DEPTH`), counted in LlamaIndex's own levels (`DocumentStore.check_filter_nesting`,
before a level is translated, so a deep one is a ValueError naming the bound, never a RecursionError); the
translation is compiled at the door (`DocumentStore.translated_filter`: a combination is up to two grammar levels,
NOT as ``$not`` of ``$or``; IS_EMPTY one more).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from fair_retrieval.stores import DocumentStore

__all__ = ["SUPPORTED_OPERATORS", "metadata_predicate"]

OPERATORS: dict[str, str] = {
    "EQ": "$eq",
    "NE": "$ne",
    "GT": "$gt",
    "GTE": "$gte",
    "LT": "$lt",
    "LTE": "$lte",
    "IN": "$in",
    "NIN": "$nin",
    "CONTAINS": "$contains",  # a list field holds the value
    "ANY": "$any",  # a list field holds one of the values
    "ALL": "$all",  # a list field holds each of the values
    "TEXT_MATCH": "$text_match",  # a string field contains the string
    "TEXT_MATCH_INSENSITIVE": "$text_match_insensitive",
}
LISTED = ("IN", "NIN", "ANY", "ALL")  # operators whose value is a list
ORDERINGS = ("GT", "GTE", "LT", "LTE")
EMPTY_VALUES: tuple[Any, ...] = (None, "", [])  # what IS_EMPTY matches besides an absent field, as in llama-index
SUPPORTED_OPERATORS: tuple[str, ...] = (*OPERATORS, "IS_EMPTY")
"""The operator names a condition may use (combined with AND, OR and NOT, nested up to 64 levels)."""


def condition_spec(key: str, operator: str, value: Any, where: str, store: str) -> dict[str, Any]:
    """One condition as a grammar dict.

    Args:
        key: the metadata field.
        operator: the operator's name (`SUPPORTED_OPERATORS`), e.g. "GTE".
        value: its operand.
        where: where the condition is, for messages (e.g. "filters.filters[0]").
        store: the store's class name, for messages.

    Raises:
        ValueError: a field starting with "$", an unsupported operator, IN / NIN / ANY / ALL without a list, a
            TEXT_MATCH without a string, or an ordering without a number or string.
    """
    if key.startswith("$"):
        raise ValueError(f"{where} filters on {key!r}; metadata keys starting with '$' cannot be filtered on here.")
    if operator == "IS_EMPTY":
        return {"$or": [{key: {"$exists": False}}, {key: {"$in": list(EMPTY_VALUES)}}]}
    if operator not in OPERATORS:
        raise ValueError(
            f"{store} cannot filter with FilterOperator.{operator} ({where}, key {key!r}). It supports "
            f"{', '.join(SUPPORTED_OPERATORS)}, combined with AND, OR and NOT; rewrite the filter with those (e.g. IN "
            "for one of several values), or filter the retrieved nodes yourself."
        )
    if operator in LISTED and not isinstance(value, list):
        raise ValueError(
            f"{where}: FilterOperator.{operator} on {key!r} needs a list value, e.g. value=[{value!r}]; got "
            f"{type(value).__name__} {value!r}."
        )
    if operator in ORDERINGS and (isinstance(value, bool) or not isinstance(value, int | float | str)):
        raise ValueError(
            f"{where}: FilterOperator.{operator} on {key!r} compares with a number or a string (dates as ISO "
            f"strings), got {type(value).__name__} {value!r}."
        )
    if operator.startswith("TEXT_MATCH") and not isinstance(value, str):
        raise ValueError(
            f"{where}: FilterOperator.{operator} on {key!r} finds a string in a string field, got "
            f"{type(value).__name__} {value!r}."
        )
    return {key: {OPERATORS[operator]: value}}


def combined_spec(condition: str, members: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Grammar dicts combined by "AND", "OR" or "NOT" (none of them holds); {} (every document) for no members."""
    if not members:
        return {}
    if condition == "AND":
        return {"$and": list(members)}
    if condition == "OR":
        return {"$or": list(members)}
    return {"$not": {"$or": list(members)}}


def metadata_predicate(filters: Any) -> Callable[[Mapping[str, Any]], bool] | None:
    """The compiled `filters` (None when they keep every node); checked whole before any search.

    Raises:
        TypeError: `filters` is not `MetadataFilters`, or holds something other than filters.
        ValueError: a condition the grammar refuses, or `MetadataFilters` nested more than 64 levels deep.
    """
    if filters is None:
        return None
    if not isinstance(filters, MetadataFilters):
        raise TypeError(
            "filters must be llama-index MetadataFilters, e.g. MetadataFilters(filters=[MetadataFilter(key='year', "
            f"value=2024, operator=FilterOperator.GTE)]); got {type(filters).__name__}."
        )
    spec = _filter_spec(filters, "filters", 0)
    return DocumentStore.translated_filter(spec, levels_per_combination=2, levels_per_condition=1)


def _filter_spec(filters: MetadataFilters, where: str, depth: int) -> dict[str, Any]:
    """`MetadataFilters` at level `depth` as a grammar dict ({} keeps every node, as an empty list does)."""
    DocumentStore.check_filter_nesting(depth, where, "MetadataFilters")
    members = []
    for position, item in enumerate(filters.filters):
        here = f"{where}.filters[{position}]" if depth < 8 else f"{where.split('…')[0]}…"
        if isinstance(item, MetadataFilters):
            members.append(_filter_spec(item, here, depth + 1))
        elif isinstance(item, MetadataFilter):
            operator = FilterOperator(item.operator).name
            members.append(condition_spec(item.key, operator, item.value, here, "FairFaissVectorStore"))
        else:
            raise TypeError(f"{here} is {type(item).__name__}; expected a MetadataFilter or nested MetadataFilters.")
    return combined_spec(FilterCondition(filters.condition or FilterCondition.AND).name, members)
