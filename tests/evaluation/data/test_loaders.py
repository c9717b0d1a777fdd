"""BEIR, SciFact and the Hub-format loaders (FineWeb-PosQ, SQuAD-PosQ, PosIR, NanoBEIR) on fixture files."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from fair_retrieval.evaluation.data import hub
from fair_retrieval.evaluation.data.beir import load_beir, load_scifact
from fair_retrieval.evaluation.data.load import load_path, load_task
from fair_retrieval.evaluation.data.records import read_records
from fair_retrieval.evaluation.data.task import RetrievalTask
from fair_retrieval.evaluation.groups import make_grouping
from tests.evaluation.conftest import shared_data_or_skip

# The Hub-format fixtures (SQuAD-PosQ, PosIR, NanoBEIR) are Parquet files, as on the Hub.
needs_parquet = pytest.mark.skipif(
    not all(importlib.util.find_spec(m) for m in ("pandas", "pyarrow")),
    reason="reading the Parquet fixtures needs pandas and pyarrow (the eval/dev extras)",
)


def test_beir_folder(fixtures: Path) -> None:
    task = load_beir(fixtures / "beir_tiny")
    assert task.corpus["d1"] == "Tortoises Tortoises can live for more than a century."
    assert task.corpus["d3"] == "Hedgehogs roll into a ball when threatened."  # empty title: no leading space
    assert task.qrels == {"t1": {"d1": 2}, "t2": {"d2": 1}}  # grade 0 and unjudged queries dropped
    assert set(task.queries) == {"t1", "t2"}
    with pytest.raises(FileNotFoundError, match=r"dev\.tsv"):
        load_beir(fixtures / "beir_tiny", split="dev")


def test_scifact_csv(fixtures: Path) -> None:
    task = load_scifact(fixtures / "scifact_tiny")
    assert (
        task.corpus["202"] == "Sleep and memory. Sleep consolidates memory. The patients' recall improved after naps."
    )
    assert task.qrels == {"1": {"101": 1}, "2": {"202": 1, "303": 1}}  # duplicate rows merge; missing doc dropped
    assert task.queries["2"] == "Naps improve recall."
    with pytest.raises(ValueError, match="split"):
        load_scifact(fixtures / "scifact_tiny", split="dev")


def test_scifact_shared_data_matches_beir_test_split() -> None:
    folder = shared_data_or_skip("scifact")
    task = load_scifact(folder)
    assert len(task.corpus) == 5183
    assert len(task.queries) == 300
    assert sum(len(j) for j in task.qrels.values()) == 339


def test_fineweb_posq(fixtures: Path) -> None:
    task = hub.load_posq_folder(fixtures / "fineweb_posq")
    assert len(task.corpus) == 3  # the corpus-only row adds a passage, no query
    assert len(task.queries) == 3
    groups = make_grouping(task, "thirds")
    assert list(groups) == ["beginning", "middle", "end"]
    assert len(groups["end"]) == 2 and groups["middle"] == groups["end"][1:]  # one question spans two thirds
    first = task.query_ids[0]
    assert "Glaciers carve valleys" in task.corpus[next(iter(task.qrels[first]))]


@needs_parquet
def test_squad_posq_parquet_hub_layout(fixtures: Path, count_tokens) -> None:
    rows = read_records(fixtures / "squad_posq" / "squad_v2" / "train-00000-of-00001.parquet")
    assert rows[0]["answers"] == {"text": ["Paris"], "answer_start": [0]}  # nested struct read as plain lists
    task = hub.load_posq_folder(fixtures / "squad_posq", count_tokens=count_tokens)
    assert len(task.corpus) == 3  # shared context across splits counted once; unanswerable context kept
    assert set(task.queries) == {"s1", "s2", "s4"}
    for qid, position in task.positions.items():
        text = task.corpus[next(iter(task.qrels[qid]))]
        assert text[position.char_start : position.char_end] in ("Paris", "under the old oak", "the Tagus")
        assert position.token_start is not None
    assert make_grouping(task, "squad-posq") == {"0-100": ["s1", "s4"], "400-500": ["s2"]}
    assert task.positions["s2"].relative > 0.9


@needs_parquet
def test_posir_folder(fixtures: Path) -> None:
    task = hub.load_posir(fixtures / "posir" / "eng-Latn" / "tiny-domain")
    assert task.name == "posir:eng-Latn/tiny-domain"
    assert task.positions["pq1"].relative == 0.0 and task.positions["pq2"].relative > 0.9
    text = task.corpus["pd2"]
    span = task.positions["pq3"]
    assert text[span.char_start : span.char_end] == "A central fact about meteors sits here."
    assert make_grouping(task, "length") == {"Q1": ["pq3"], "Q2": ["pq1", "pq2"]}  # 512/1024/1536 token edges


@needs_parquet
def test_nanobeir_folder(fixtures: Path) -> None:
    task = hub.load_nanobeir(fixtures / "nanobeir" / "NanoTiny")
    assert task.name == "NanoTiny"
    assert task.qrels == {"nq1": {"n1": 1}, "nq2": {"n2": 1}}
    assert set(task.queries) == {"nq1", "nq2"}


@needs_parquet
def test_load_path_recognises_every_format(fixtures: Path, count_tokens) -> None:
    def kind(path: Path) -> str:
        return str(load_path(path, count_tokens).info.get("format", "beir-or-squad"))

    assert kind(fixtures / "posir" / "eng-Latn" / "tiny-domain") == "posir"
    assert kind(fixtures / "nanobeir" / "NanoTiny") == "nanobeir"
    assert kind(fixtures / "fineweb_posq") == "fineweb-posq"
    assert kind(fixtures / "fineweb_posq" / "data" / "train.jsonl") == "fineweb-posq"
    assert kind(fixtures / "squad_posq") == "squad-posq"
    assert load_path(fixtures / "beir_tiny", count_tokens).info["split"] == "test"
    assert load_path(fixtures / "scifact_tiny", count_tokens).name == "scifact"
    assert load_path(fixtures / "squad_tiny.json", count_tokens, 128).name == "squad_tiny@128"
    with pytest.raises(ValueError, match="neither a known dataset"):
        load_task("no-such-thing", count_tokens)
    with pytest.raises(ValueError, match="XQuAD language"):
        load_task("xquad:xx", count_tokens, data_dir=fixtures)


@needs_parquet
def test_load_from_hub_downloads_then_reads_the_same_format(
    fixtures: Path, count_tokens, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, list[str] | None]] = []
    folders = {
        "NovaSearch/FineWeb-PosQ": fixtures / "fineweb_posq",
        "rajpurkar/squad_v2": fixtures / "squad_posq",
        "zeta-alpha-ai/NanoTiny": fixtures / "nanobeir" / "NanoTiny",
        "infgrad/PosIR-Benchmark-v1": fixtures / "posir",
    }

    def fake_snapshot(repo: str, patterns: list[str] | None) -> Path:
        asked.append((repo, patterns))
        return folders[repo]

    monkeypatch.setattr(hub, "_snapshot", fake_snapshot)
    assert hub.load_from_hub("fineweb-posq").info["format"] == "fineweb-posq"
    squad = hub.load_from_hub("squad-posq", count_tokens)
    assert squad.name == "squad-posq" and len(squad.queries) == 3
    assert hub.load_from_hub("nanobeir:Tiny").name == "nanobeir:Tiny"
    assert len(hub.load_from_hub("posir:eng-Latn/tiny-domain").queries) == 3
    assert asked[-1] == ("infgrad/PosIR-Benchmark-v1", ["eng-Latn/tiny-domain/*", "eng-Latn/tiny-domain/qrels/*"])
    with pytest.raises(ValueError, match="Unknown Hub benchmark"):
        hub.load_from_hub("msmarco")
    with pytest.raises(ValueError, match="needs a dataset"):
        hub.load_from_hub("nanobeir")


def test_offline_hub_download_fails_with_advice(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ValueError, match="download it and pass its folder"):
        hub._snapshot("NovaSearch/no-such-dataset-for-tests", None)


def test_task_validation_and_subsampling() -> None:
    with pytest.raises(ValueError, match="no relevant document"):
        RetrievalTask(name="x", corpus={"d": "t"}, queries={"q": "?"}, qrels={})
    with pytest.raises(ValueError, match="not in corpus"):
        RetrievalTask(name="x", corpus={"d": "t"}, queries={"q": "?"}, qrels={"q": {"e": 1}})
    task = RetrievalTask(
        name="x",
        corpus={"d": "t"},
        queries={f"q{i}": "?" for i in range(10)},
        qrels={f"q{i}": {"d": 1} for i in range(10)},
    )
    small = task.subsample_queries(4, seed=1)
    assert len(small.queries) == 4 and small == task.subsample_queries(4, seed=1)
    assert small.corpus == task.corpus and task.subsample_queries(None) is task
