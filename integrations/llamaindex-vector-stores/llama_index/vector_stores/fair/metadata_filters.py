"""llama-index `MetadataFilters` translated to the filter grammar of `fair_retrieval.stores.filter_grammar`.

The LangChain store reads that grammar too; this module maps LlamaIndex's filters onto it: FilterOperator EQ, NE,
GT, GTE, LT, LTE, IN, NIN and IS_EMPTY, combined with FilterCondition AND, OR and NOT (none of them), nested as
wanted. Operators with no equivalent are refused with a ValueError naming them, never a silently empty result.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from fair_retrieval.stores import Predicate, compile_filter

__all__ = ["SUPPORTED_OPERATORS", "metadata_predicate"]

# llama-index filter operators and their fair_retrieval.stores.filter_grammar equivalents (IS_EMPTY is composed in
# _filter_leaf).
_OPERATORS: dict[FilterOperator, str] = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
_ORDERINGS = (FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT, FilterOperator.LTE)
_EMPTY_VALUES: list[Any] = [None, "", []]  # what IS_EMPTY matches besides an absent field, as in llama-index
SUPPORTED_OPERATORS: tuple[str, ...] = (*(operator.name for operator in _OPERATORS), FilterOperator.IS_EMPTY.name)
"""The `FilterOperator`s this store applies (combined with FilterCondition AND, OR and NOT, nested as wanted)."""


def metadata_predicate(filters: Any) -> Predicate | None:
    """The compiled `filters` (None when they keep every node); checked whole before any search."""
    if filters is None:
        return None
    if not isinstance(filters, MetadataFilters):
        raise TypeError(
            "filters must be llama-index MetadataFilters, e.g. MetadataFilters(filters=[MetadataFilter(key='year', "
            f"value=2024, operator=FilterOperator.GTE)]); got {type(filters).__name__}."
        )
    spec = _filter_spec(filters, "filters")
    if not spec:
        return None
    try:
        return compile_filter(spec)
    except ValueError as error:  # pragma: no cover - _filter_spec checks what compile_filter would refuse
        raise ValueError(f"These MetadataFilters cannot be applied: {error}") from error


def _filter_spec(filters: MetadataFilters, where: str) -> dict[str, Any]:
    """`MetadataFilters` as a filter dict of `fair_retrieval.stores` ({} keeps every node, as an empty list does)."""
    members = []
    for position, item in enumerate(filters.filters):
        here = f"{where}.filters[{position}]"
        if isinstance(item, MetadataFilters):
            members.append(_filter_spec(item, here))
        elif isinstance(item, MetadataFilter):
            members.append(_filter_leaf(item, here))
        else:
            raise TypeError(f"{here} is {type(item).__name__}; expected a MetadataFilter or nested MetadataFilters.")
    if not members:
        return {}
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    if condition == FilterCondition.AND:
        return {"$and": members}
    if condition == FilterCondition.OR:
        return {"$or": members}
    return {"$not": {"$or": members}}  # NOT: none of the filters holds, as in llama-index


def _filter_leaf(leaf: MetadataFilter, where: str) -> dict[str, Any]:
    """One `MetadataFilter` as a field condition."""
    operator, key, value = FilterOperator(leaf.operator), leaf.key, leaf.value
    if key.startswith("$"):
        raise ValueError(f"{where} filters on {key!r}; metadata keys starting with '$' cannot be filtered on here.")
    if operator == FilterOperator.IS_EMPTY:
        return {"$or": [{key: {"$exists": False}}, {key: {"$in": list(_EMPTY_VALUES)}}]}
    if operator not in _OPERATORS:
        raise ValueError(
            f"FairFaissVectorStore cannot filter with FilterOperator.{operator.name} ({where}, key {key!r}). It "
            f"supports {', '.join(SUPPORTED_OPERATORS)}, combined with AND, OR and NOT; rewrite the filter with "
            "those (e.g. IN for one of several values), or filter the retrieved nodes yourself."
        )
    if operator in (FilterOperator.IN, FilterOperator.NIN) and not isinstance(value, list):
        raise ValueError(
            f"{where}: FilterOperator.{operator.name} on {key!r} needs a list value, e.g. value=[{value!r}]; got "
            f"{type(value).__name__} {value!r}."
        )
    if operator in _ORDERINGS and (isinstance(value, bool) or not isinstance(value, int | float | str)):
        raise ValueError(
            f"{where}: FilterOperator.{operator.name} on {key!r} compares with a number or a string (dates as ISO "
            f"strings), got {type(value).__name__} {value!r}."
        )
    return {key: {_OPERATORS[operator]: value}}
