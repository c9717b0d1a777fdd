"""Filters written as (field, operator name, value) conditions, translated to the stores' filter grammar."""

from __future__ import annotations

import pytest
from llama_index.vector_stores.fair.metadata_filters import SUPPORTED_OPERATORS, combined_spec, condition_spec

from fair_retrieval.stores import compile_filter


def test_conditions_become_grammar_dicts() -> None:
    spec = combined_spec(
        "AND",
        [condition_spec("year", "GTE", 2024, "f[0]", "S"), condition_spec("lang", "IN", ["en", "fr"], "f[1]", "S")],
    )
    keep = compile_filter(spec)
    assert keep({"year": 2025, "lang": "en"}) and not keep({"year": 2025, "lang": "de"}) and not keep({"year": 2020})
    empty = compile_filter(condition_spec("tag", "IS_EMPTY", None, "f", "S"))
    assert empty({}) and empty({"tag": ""}) and not empty({"tag": "x"})
    assert not compile_filter(combined_spec("NOT", [condition_spec("a", "EQ", 1, "f", "S")]))({"a": 1})
    assert combined_spec("OR", []) == {} and "IS_EMPTY" in SUPPORTED_OPERATORS


@pytest.mark.parametrize(
    ("operator", "value", "kept"),
    [
        ("CONTAINS", "a", [0]),
        ("ANY", ["a", "c"], [0, 2]),
        ("ALL", ["a", "b"], [0]),
        ("TEXT_MATCH", "Ab", [3]),
        ("TEXT_MATCH_INSENSITIVE", "ab", [3, 4]),
    ],
)
def test_list_and_text_operators_have_llama_index_meaning(operator: str, value: object, kept: list[int]) -> None:
    rows = [{"f": ["a", "b"]}, {"f": ["b"]}, {"f": ["c"]}, {"f": "xAby"}, {"f": "AB"}, {}]
    keep = compile_filter(condition_spec("f", operator, value, "f", "S"))
    assert [position for position, metadata in enumerate(rows) if keep(metadata)] == kept


def test_conditions_the_grammar_cannot_hold_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"cannot filter with FilterOperator\.REGEX"):
        condition_spec("text", "REGEX", "x", "f", "S")
    with pytest.raises(ValueError, match=r"ANY on 'tags' needs a list value"):
        condition_spec("tags", "ANY", "a", "f", "S")
    with pytest.raises(ValueError, match=r"TEXT_MATCH on 'title' finds a string"):
        condition_spec("title", "TEXT_MATCH", 3, "f", "S")
    with pytest.raises(ValueError, match=r"IN on 'lang' needs a list value, e\.g\. value=\['en'\]"):
        condition_spec("lang", "IN", "en", "f", "S")
    with pytest.raises(ValueError, match="GT on 'year' compares with a number or a string"):
        condition_spec("year", "GT", None, "f", "S")
    with pytest.raises(ValueError, match="starting with '\\$'"):
        condition_spec("$year", "EQ", 1, "f", "S")
