"""StoreFilter: compiled once, malformed filters refused up front, function filters unable to edit the store."""

from __future__ import annotations

from typing import Any

import pytest

from fair_retrieval.stores.filters import StoreFilter, store_filter


def test_none_and_compiled_filters_pass_through() -> None:
    assert store_filter(None) is None
    compiled = store_filter({"lang": "en"})
    assert isinstance(compiled, StoreFilter)
    assert store_filter(compiled) is compiled


def test_dict_filters_use_the_filters_grammar() -> None:
    keep = store_filter({"year": {"$gte": 2024}, "lang": ["en", "fr"]})
    assert keep is not None
    assert keep({"year": 2025, "lang": "fr"}) and not keep({"year": 2023, "lang": "en"}) and not keep({"year": 2025})


def test_a_malformed_filter_fails_when_compiled() -> None:
    with pytest.raises(ValueError, match="Unknown filter operator"):
        store_filter({"year": {"$regex": "x"}})


def test_a_function_filter_sees_a_copy_and_its_truth_value_counts() -> None:
    stored: dict[str, Any] = {"tags": ["a"], "n": 1}

    def meddling(metadata: dict[str, Any]) -> Any:
        metadata["tags"].append("b")
        metadata["n"] = 2
        return metadata.get("tags")  # a truthy list, not a bool

    keep = store_filter(meddling)
    assert keep is not None and keep(stored) is True
    assert stored == {"tags": ["a"], "n": 1}
