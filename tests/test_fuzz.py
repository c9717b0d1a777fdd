"""Fuzz tests (hypothesis): random and mutated inputs to the filter grammar, the JSONL reader and the store loaders
give a documented error (ValueError, or FileNotFoundError for a missing file) or a correct result, never another
exception, a hang or a silently wrong answer. Derandomised and bounded, so they run in seconds and never flake."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from fair_retrieval.inputs import lone_surrogate, scan_documents  # noqa: E402
from fair_retrieval.stores.filters import compile_filter  # noqa: E402

FUZZ = settings(
    max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
FIELDS = ["year", "lang", "tags", "n"]
OPERATORS = ["$eq", "$ne", "$neq", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$not", "$and", "$or"]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 5),
    st.floats(allow_nan=True),
    st.text(max_size=3),
    st.sampled_from(FIELDS),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=2),
    max_leaves=8,
)
keys = st.one_of(st.sampled_from(FIELDS + OPERATORS), st.text(max_size=4), st.integers(0, 2))
filter_specs = st.recursive(
    st.dictionaries(keys, values, max_size=3),
    lambda inner: st.dictionaries(keys, st.one_of(inner, st.lists(inner, max_size=3), values), max_size=3),
    max_leaves=12,
)
metadata = st.dictionaries(st.sampled_from(FIELDS), values, max_size=4)


def compiled(spec: Any) -> Any:
    """The predicate of `spec`, or None where the grammar refuses it (with a ValueError, as documented)."""
    try:
        return compile_filter(spec)
    except ValueError:
        return None


@FUZZ
@given(filter_specs, st.lists(metadata, min_size=1, max_size=4))
def test_a_random_filter_compiles_or_is_refused_and_never_raises_on_metadata(spec: Any, rows: list) -> None:
    keep = compiled(spec)
    if keep is None:
        return
    for row in rows:
        assert isinstance(keep(row), bool)


@FUZZ
@given(filter_specs, filter_specs, metadata)
def test_combinators_are_the_logic_they_name(first: Any, second: Any, row: dict) -> None:
    keep_first, keep_second = compiled(first), compiled(second)
    if keep_first is None or keep_second is None:
        return
    assert compile_filter({"$not": first})(row) is (not keep_first(row))
    assert compile_filter({"$and": [first, second]})(row) is (keep_first(row) and keep_second(row))
    assert compile_filter({"$or": [first, second]})(row) is (keep_first(row) or keep_second(row))


@FUZZ
@given(st.sampled_from(FIELDS), st.one_of(st.booleans(), st.integers(-3, 3), st.text(max_size=3)), metadata)
def test_a_plain_field_condition_is_equality_of_a_present_field(field: str, value: Any, row: dict) -> None:
    expected = field in row and type(row[field]) is type(value) and row[field] == value
    assert compile_filter({field: value})(row) is expected
    assert compile_filter({field: {"$exists": True}})(row) is (field in row)


# ---------------------------------------------------------------------------------------------------- the JSONL reader

good_lines = st.builds(
    lambda id_, text, extra: json.dumps({"id": id_, "text": text, **extra}, ensure_ascii=False),
    st.one_of(st.text(max_size=5), st.integers(-9, 9)),
    st.text(max_size=12),
    st.dictionaries(st.sampled_from(["lang", "metadata", "n"]), values, max_size=2),
)
mutations = st.tuples(st.integers(0, 400), st.integers(0, 255))


@FUZZ
@given(st.lists(good_lines, max_size=6), st.lists(mutations, max_size=3), st.booleans())
def test_the_jsonl_reader_reads_or_lists_problems(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], flips: list, bom: bool
) -> None:
    raw = bytearray(("\n".join(lines) + "\n").encode("utf-8", "surrogatepass"))
    for position, byte in flips:
        if raw:
            raw[position % len(raw)] = byte
    source = tmp_path_factory.mktemp("jsonl") / "docs.jsonl"
    source.write_bytes((b"\xef\xbb\xbf" if bom else b"") + bytes(raw))
    documents, problems = scan_documents(source)
    for document in documents:
        assert (
            document.text.strip() and lone_surrogate(document.text) is None and not document.text.startswith("\ufeff")
        )
        json.dumps(document.metadata, ensure_ascii=False).encode("utf-8")  # what documents.jsonl will hold
    ids = [document.id for document in documents]
    assert len(ids) == len(set(ids))
    non_blank = sum(1 for line in bytes(raw).split(b"\n") if line.strip())
    assert len(documents) + len(problems) <= non_blank


# ---------------------------------------------------------------------------------------------------- the loaders

faiss = pytest.importorskip("faiss")


@pytest.fixture(scope="module")
def saved_index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import numpy as np

    from fair_retrieval import FaissIndex

    index = FaissIndex(4, gpu=False)
    index.add(np.eye(4, dtype=np.float32))
    return index.save(tmp_path_factory.mktemp("index") / "index")


@pytest.fixture(scope="module")
def saved_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    langchain_fair = pytest.importorskip("langchain_fair")
    from langchain_core.embeddings import DeterministicFakeEmbedding

    store = langchain_fair.FaissVectorStore(DeterministicFakeEmbedding(size=4), gpu=False)
    store.add_texts(["alpha", "beta", "gamma"], metadatas=[{"n": 1}, {"n": 2}, {"n": 3}], ids=["a", "b", "c"])
    return store.save_local(tmp_path_factory.mktemp("store") / "store")


def mutated_copy(source: Path, target: Path, name: str, flips: list, cut: int | None) -> Path:
    shutil.copytree(source, target)
    path = target / name
    raw = bytearray(path.read_bytes())
    for position, byte in flips:
        raw[position % len(raw)] = byte
    path.write_bytes(bytes(raw[:cut] if cut is not None else raw))
    return target


@FUZZ
@given(
    st.sampled_from(["index.faiss", "index.json"]),
    st.lists(mutations, min_size=1, max_size=3),
    st.none() | st.integers(0, 300),
)
def test_a_mutated_index_folder_loads_unchanged_or_is_refused(
    saved_index: Path, tmp_path_factory: pytest.TempPathFactory, name: str, flips: list, cut: int | None
) -> None:
    from fair_retrieval import FaissIndex

    folder = mutated_copy(saved_index, tmp_path_factory.mktemp("m") / "index", name, flips, cut)
    changed = (folder / name).read_bytes() != (saved_index / name).read_bytes()
    try:
        loaded = FaissIndex.load(folder, gpu=False)
    except (ValueError, FileNotFoundError):
        assert changed
        return
    if changed:  # only a change that leaves the content as it was (whitespace in index.json) may load
        assert name == "index.json"
        assert json.loads((folder / name).read_bytes()) == json.loads((saved_index / name).read_bytes())
    assert sorted(loaded.ids.tolist()) == [0, 1, 2, 3]


@FUZZ
@given(
    st.sampled_from(["store.json", "index/index.json", "index/index.faiss"]),
    st.lists(mutations, min_size=1, max_size=3),
    st.none() | st.integers(0, 300),
)
def test_a_mutated_store_folder_loads_unchanged_or_is_refused(
    saved_store: Path, tmp_path_factory: pytest.TempPathFactory, name: str, flips: list, cut: int | None
) -> None:
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_fair import FaissVectorStore

    folder = mutated_copy(saved_store, tmp_path_factory.mktemp("m") / "store", name, flips, cut)
    changed = (folder / name).read_bytes() != (saved_store / name).read_bytes()
    try:
        loaded = FaissVectorStore.load_local(folder, DeterministicFakeEmbedding(size=4), gpu=False)
    except (ValueError, FileNotFoundError):
        assert changed
        return
    if changed:  # only a change that leaves the content as it was (whitespace in index.json) may load
        assert name == "index/index.json"
        assert json.loads((folder / name).read_bytes()) == json.loads((saved_store / name).read_bytes())
    assert [(d.id, d.page_content, d.metadata) for d in loaded.get_by_ids(["a", "b", "c"])] == [
        ("a", "alpha", {"n": 1}),
        ("b", "beta", {"n": 2}),
        ("c", "gamma", {"n": 3}),
    ]
