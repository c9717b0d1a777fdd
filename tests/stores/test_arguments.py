"""The argument checks the stores share: previews of long lists, repeated keys, positive ints, new ids, id lists."""

from __future__ import annotations

import uuid

import pytest

from fair_retrieval.stores.arguments import id_strings, new_ids, preview, repeated


def test_preview_shows_five_and_counts_the_rest() -> None:
    assert preview(["a", "b"]) == "'a', 'b'"
    assert preview([str(i) for i in range(8)]) == "'0', '1', '2', '3', '4' … (3 more)"


def test_repeated_lists_each_doubled_key_once_sorted() -> None:
    assert repeated(["b", "a", "b", "c", "a", "b"]) == ["a", "b"]
    assert repeated(["x", "y"]) == []


def test_new_ids_fill_none_with_uuids_and_refuse_bad_lists() -> None:
    made = new_ids(None, 2)
    assert len(set(made)) == 2 and all(uuid.UUID(id_) for id_ in made)
    assert new_ids(["a", None], 2)[0] == "a"
    with pytest.raises(ValueError, match="2 texts but 1 ids"):
        new_ids(["a"], 2)
    with pytest.raises(ValueError, match="repeat within this call: 'a'"):
        new_ids(["a", "a"], 2)
    with pytest.raises(TypeError, match="wrap it in a list"):
        new_ids("ab", 2)
    with pytest.raises(TypeError, match=r"ids\[1\] is int"):
        new_ids(["a", 3], 2)


def test_id_strings_refuses_a_single_string() -> None:
    assert id_strings(("a", 2), "node_ids") == ["a", "2"]
    with pytest.raises(TypeError, match=r"node_ids must be a list of ids.*wrap one id"):
        id_strings("abc", "node_ids")
    with pytest.raises(TypeError, match="doc_ids must be a list"):
        id_strings(5, "doc_ids")
