"""The bounds of `FairFaissVectorStore`'s inputs: `MetadataFilters` nested deeper than the library's one nesting bound
(64) are a ValueError naming it, checked before they are translated (never a RecursionError, however deep; 64 levels,
NOT included, still filter); a node whose metadata uses a reserved result key ("best_window") is refused at add
time, so a result never replaces a user's value."""

from __future__ import annotations

import pytest
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index.vector_stores.fair import BEST_WINDOW_KEY, FairFaissVectorStore
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


def test_a_node_with_a_reserved_metadata_key_is_refused_at_add_time() -> None:
    store = FairFaissVectorStore(gpu=False, multivector=False)  # refused in either mode: the key is reserved
    fine = TextNode(id_="fine", text="a harbour", metadata={"user_best_window": "USERVAL"}, embedding=[1.0, 0.0])
    taken = TextNode(id_="taken", text="a bakery", metadata={BEST_WINDOW_KEY: "USERVAL"}, embedding=[0.0, 1.0])
    with pytest.raises(ValueError, match=r"\[1\] \(id 'taken'\): metadata key 'best_window' is reserved.*rename"):
        store.add([fine, taken])
    assert len(store._store) == 0  # nothing of the call is stored
