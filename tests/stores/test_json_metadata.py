"""Metadata kept as JSON: what is refused (and how the message names it), and that stored copies stay private."""

from __future__ import annotations

import datetime
from typing import Any

import pytest

from fair_retrieval.stores.arguments import json_metadata, json_metadata_list, private_copy


@pytest.mark.parametrize(
    ("metadata", "message"),
    [
        ({"when": datetime.date(2026, 5, 1)}, r"m\['when'\] is a date.*isoformat"),
        ({1: "x"}, "JSON keys must be strings"),
        ({"score": float("nan")}, r"m\['score'\].*NaN or infinity"),
        ({"a": [1.0, float("inf")]}, r"m\['a'\].*NaN or infinity"),
        ({"pair": (1, 2)}, r"m\['pair'\] would change through JSON"),
        ({"nested": {1: "x"}}, r"m\['nested'\] would change through JSON"),
        ("text", "m is str, expected a dict"),
    ],
)
def test_values_json_cannot_carry_are_refused(metadata: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        json_metadata(metadata, "m")


def test_a_copy_is_stored() -> None:
    original = {"tags": ["a"], "n": 1, "none": None, "nested": {"x": [1, 2.5, True]}}
    copied = json_metadata(original, "m")
    assert copied == original
    original["tags"].append("b")
    assert copied["tags"] == ["a"]
    assert json_metadata(None, "m") == {}


def test_the_list_has_one_dict_per_text() -> None:
    assert json_metadata_list(None, 2) == [{}, {}]
    with pytest.raises(ValueError, match="2 texts but 1 metadatas"):
        json_metadata_list([{}], 2)
    with pytest.raises(TypeError, match="single dict; wrap it"):
        json_metadata_list({"a": 1}, 1)
    with pytest.raises(TypeError, match=r"metadatas\[1\] is int"):
        json_metadata_list([{}, 3], 2)


def test_private_copy_is_deep_where_it_must_be() -> None:
    stored: dict[str, Any] = {"tags": ["a"], "n": 1}
    copied = private_copy(stored)
    copied["tags"].append("b")
    copied["n"] = 2
    assert stored == {"tags": ["a"], "n": 1}
    flat = {"n": 1}
    assert private_copy(flat) == flat and private_copy(flat) is not flat
