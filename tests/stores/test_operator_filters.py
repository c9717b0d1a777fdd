"""Filters written as (field, operator name, value) conditions, translated to the stores' filter grammar."""

from __future__ import annotations

import pytest

from fair_retrieval.stores import compile_filter
from fair_retrieval.stores.operator_filters import SUPPORTED_OPERATORS, combined_spec, condition_spec


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


def test_conditions_the_grammar_cannot_hold_are_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"cannot filter with FilterOperator\.TEXT_MATCH"):
        condition_spec("text", "TEXT_MATCH", "x", "f", "S")
    with pytest.raises(ValueError, match=r"IN on 'lang' needs a list value, e\.g\. value=\['en'\]"):
        condition_spec("lang", "IN", "en", "f", "S")
    with pytest.raises(ValueError, match="GT on 'year' compares with a number or a string"):
        condition_spec("year", "GT", None, "f", "S")
    with pytest.raises(ValueError, match="starting with '\\$'"):
        condition_spec("$year", "EQ", 1, "f", "S")
