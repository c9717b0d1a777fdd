"""llama-index `MetadataFilters` as a filter of `fair_retrieval.stores`: every FilterOperator with llama-index's
meaning (`SUPPORTED_OPERATORS`: CONTAINS, ANY, ALL on list fields, TEXT_MATCH and TEXT_MATCH_INSENSITIVE on
strings, …), combined with FilterCondition AND, OR and NOT, nested as wanted (`condition_spec`, `combined_spec`).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters

from fair_retrieval.stores import SUPPORTED_OPERATORS, Predicate, combined_spec, compile_filter, condition_spec

__all__ = ["SUPPORTED_OPERATORS", "metadata_predicate"]


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
    return compile_filter(spec) if spec else None


def _filter_spec(filters: MetadataFilters, where: str) -> dict[str, Any]:
    """`MetadataFilters` as a grammar dict ({} keeps every node, as an empty list does)."""
    members = []
    for position, item in enumerate(filters.filters):
        here = f"{where}.filters[{position}]"
        if isinstance(item, MetadataFilters):
            members.append(_filter_spec(item, here))
        elif isinstance(item, MetadataFilter):
            operator = FilterOperator(item.operator).name
            members.append(condition_spec(item.key, operator, item.value, here, "FairFaissVectorStore"))
        else:
            raise TypeError(f"{here} is {type(item).__name__}; expected a MetadataFilter or nested MetadataFilters.")
    return combined_spec(FilterCondition(filters.condition or FilterCondition.AND).name, members)
