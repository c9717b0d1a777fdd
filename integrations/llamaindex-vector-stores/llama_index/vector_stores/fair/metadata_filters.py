"""llama-index `MetadataFilters` as a filter of `fair_retrieval.stores`: every FilterOperator with llama-index's
meaning (`SUPPORTED_OPERATORS`: CONTAINS, ANY, ALL on list fields, TEXT_MATCH and TEXT_MATCH_INSENSITIVE on
strings, …), combined with FilterCondition AND, OR and NOT, nested up to 64 levels deep (`condition_spec`,
`combined_spec`, `check_combination_depth`): deeper ones are a ValueError naming the bound, never a RecursionError.
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from fair_retrieval.stores import (
    COMBINED_GRAMMAR_DEPTH,
    SUPPORTED_OPERATORS,
    Predicate,
    check_combination_depth,
    combined_spec,
    compile_filter,
    condition_spec,
)

__all__ = ["SUPPORTED_OPERATORS", "metadata_predicate"]


def metadata_predicate(filters: Any) -> Predicate | None:
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
    return compile_filter(spec, max_depth=COMBINED_GRAMMAR_DEPTH) if spec else None


def _filter_spec(filters: MetadataFilters, where: str, depth: int) -> dict[str, Any]:
    """`MetadataFilters` at level `depth` as a grammar dict ({} keeps every node, as an empty list does)."""
    check_combination_depth(depth, where, "MetadataFilters")
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
