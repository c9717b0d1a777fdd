"""`MetadataFilters` nested deeper than the library's one nesting bound (64) are a ValueError naming it, checked
before they are translated: never a RecursionError, however deep; 64 levels (NOT included) still filter."""

from __future__ import annotations

import pytest
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index.vector_stores.fair.metadata_filters import metadata_predicate

from fair_retrieval.stores import MAX_FILTER_DEPTH


def nested(depth: int, condition: FilterCondition = FilterCondition.AND) -> MetadataFilters:
    """`depth` levels of `MetadataFilters` around one condition (year ≥ 2024), the outermost level 0."""
    filters = MetadataFilters(filters=[MetadataFilter(key="year", value=2024, operator=FilterOperator.GTE)])
    for _ in range(depth):
        filters = MetadataFilters(filters=[filters], condition=condition)
    return filters


@pytest.mark.parametrize("depth", [MAX_FILTER_DEPTH + 1, 500, 2000])
@pytest.mark.parametrize("condition", [FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT])
def test_metadata_filters_nested_too_deep_are_a_clear_error(depth: int, condition: FilterCondition) -> None:
    with pytest.raises(ValueError, match=f"MetadataFilters nest more than {MAX_FILTER_DEPTH} levels deep; flatten"):
        metadata_predicate(nested(depth, condition))


@pytest.mark.parametrize("condition", [FilterCondition.AND, FilterCondition.NOT])
def test_metadata_filters_nested_64_levels_still_filter(condition: FilterCondition) -> None:
    keep = metadata_predicate(nested(MAX_FILTER_DEPTH, condition))
    assert keep is not None
    assert keep({"year": 2025}) and not keep({"year": 2000})  # 64 NOTs negate an even number of times
    empty = MetadataFilters(filters=[MetadataFilter(key="tag", value=None, operator=FilterOperator.IS_EMPTY)])
    for _ in range(MAX_FILTER_DEPTH):
        empty = MetadataFilters(filters=[empty], condition=FilterCondition.NOT)
    assert metadata_predicate(empty)({}) is True  # type: ignore[misc]
