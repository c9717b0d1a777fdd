"""CACM from its SMART files: on a fixture folder, through `load_task`/`load_path`, and on the real collection."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from fair_retrieval.evaluation.data.cacm import find_cacm, load_cacm, read_smart
from fair_retrieval.evaluation.data.load import load_path, load_task
from tests.evaluation.conftest import shared_data_or_skip


def _no_tokens(text: str) -> int:
    return len(text.split())


def test_documents_are_title_and_abstract_and_only_judged_queries_are_kept(fixtures: Path) -> None:
    task = load_cacm(fixtures / "cacm_tiny")
    assert task.corpus == {
        "1": "Preliminary Report on an Algebraic Language",  # title only; .B/.A/.N/.X are not text
        "2": "Time sharing systems A supervisor for time sharing on small machines.",
        "3": "Sorting with tapes Merging on magnetic tapes.",
    }
    assert task.queries == {"1": "What articles deal with time sharing systems?", "3": "Sorting on tapes"}  # no .N
    assert task.qrels == {"1": {"2": 1, "3": 1}, "3": {"3": 1}}  # "01" is query 1; query 2 has no judgement


def test_cacm_by_name_and_by_folder(fixtures: Path, tmp_path: Path) -> None:
    shutil.copytree(fixtures / "cacm_tiny", tmp_path / "cacm")
    assert load_task("cacm", _no_tokens, data_dir=tmp_path).qrels == load_cacm(fixtures / "cacm_tiny").qrels
    assert load_path(fixtures / "cacm_tiny", _no_tokens).name == "cacm_tiny"
    assert find_cacm([tmp_path / "cacm"]) == tmp_path / "cacm"  # the folder itself works as a root too


def test_missing_files_and_bad_judgements_are_errors(fixtures: Path, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="not downloaded"):
        load_task("cacm", _no_tokens, data_dir=tmp_path)
    shutil.copytree(fixtures / "cacm_tiny", tmp_path / "bad")
    (tmp_path / "bad" / "qrels.text").write_text("01 99 0 0\n")
    with pytest.raises(ValueError, match="document 99"):
        load_cacm(tmp_path / "bad")
    (tmp_path / "bad" / "query.text").unlink()
    with pytest.raises(FileNotFoundError, match=r"query\.text"):
        load_cacm(tmp_path / "bad")
    (tmp_path / "text.all").write_text("stray text\n.I 1\n")
    with pytest.raises(ValueError, match=r"before the first \.I"):
        read_smart(tmp_path / "text.all", ("T",))


def test_the_real_collection() -> None:
    task = load_cacm(shared_data_or_skip("cacm"))
    assert len(task.corpus) == 3204
    assert len(task.queries) == 52
    assert sum(len(judged) for judged in task.qrels.values()) == 796  # qrels.text has 796 distinct lines
    assert all(task.queries.values()) and all(task.corpus.values())
