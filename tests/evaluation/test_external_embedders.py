"""Measuring the embedder a user runs today: LlamaIndex's HuggingFaceEmbedding and LangChain's HuggingFaceEmbeddings
through `diagnose_corpus` give FairEmbedder's numbers when it truncates plainly, and say how much they never embed."""

from __future__ import annotations

import json
import random
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fair_retrieval import FairEmbedder
from fair_retrieval.engine.calibration import Calibration
from fair_retrieval.evaluation.cache import EmbeddingCache
from fair_retrieval.evaluation.compare import diagnose_corpus
from fair_retrieval.evaluation.data.needle import haystack_sentences
from fair_retrieval.evaluation.evaluation_report import REPORT_SCHEMA, format_table
from fair_retrieval.evaluation.external_embedders import ForeignEmbedder, token_coverage

PROBES = 30  # the smallest probe budget: 10 per depth third
CLASS_NAMES = {"llamaindex": "HuggingFaceEmbedding", "langchain": "HuggingFaceEmbeddings"}


@pytest.fixture(scope="module")
def documents() -> list[str]:
    """12 documents of 387–576 MiniLM tokens: longer than its 256-token window, so truncation shows."""
    pool = haystack_sentences()
    rng = random.Random(3)
    return [" ".join(rng.sample(pool, 18)) for _ in range(12)]


@pytest.fixture(scope="module")
def truncating(minilm: str) -> FairEmbedder:
    """What HuggingFaceEmbedding and HuggingFaceEmbeddings do, as a FairEmbedder: plain, cut at 256 tokens."""
    return FairEmbedder(minilm, calibration=None, long_documents="truncate", device="cpu")


@pytest.fixture(scope="module")
def reference(documents: list[str], truncating: FairEmbedder) -> dict[str, Any]:
    return diagnose_corpus(documents, truncating, None, max_probes=PROBES, show_progress_bar=False)


@pytest.fixture(scope="module")
def stacks(minilm: str) -> dict[str, Any]:
    """The two anchors, loaded as users load them (defaults, by model path)."""
    llama = pytest.importorskip("llama_index.embeddings.huggingface")
    langchain = pytest.importorskip("langchain_huggingface")
    return {
        "llamaindex": llama.HuggingFaceEmbedding(model_name=minilm, device="cpu"),
        "langchain": langchain.HuggingFaceEmbeddings(model_name=minilm, model_kwargs={"device": "cpu"}),
    }


@pytest.mark.parametrize("stack", ["llamaindex", "langchain"])
def test_a_foreign_embedder_reports_what_fair_embedder_reports_when_truncating(
    stack: str, stacks: dict[str, Any], documents: list[str], truncating: FairEmbedder, reference: dict[str, Any]
) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    embedding = stacks[stack]
    assert min(truncating.token_lengths(documents)) > truncating.max_length == 256
    report = diagnose_corpus(documents, embedding, None, max_probes=PROBES, show_progress_bar=False)
    jsonschema.validate(json.loads(json.dumps(report)), REPORT_SCHEMA)
    assert report["task"] == reference["task"]  # the same probes: depths measured in the same tokens
    assert report["model"]["pooling"] is None and report["model"]["max_length"] == 256
    (run,), (expected,) = report["runs"], reference["runs"]
    assert run["label"] == CLASS_NAMES[stack] and run["calibration"] is None
    assert run["overall"] == pytest.approx(expected["overall"], abs=1e-9)
    for field in ("groups", "bins"):
        assert run[field].keys() == expected[field].keys()
        for name, scores in run[field].items():
            assert scores == pytest.approx(expected[field][name], abs=1e-9), (field, name)
    assert run["psi"] == pytest.approx(expected["psi"], abs=1e-9)
    assert run["harmonic_mean"] == pytest.approx(expected["harmonic_mean"], abs=1e-9)
    never = run["tokens_never_embedded"]
    assert never == expected["tokens_never_embedded"]
    assert never["share"] > 0.3 and never["truncated_documents"] == len(documents) and never["max_length"] == 256
    assert "tokens never embedded" in format_table(report) and f"{never['share']:.1%}" in format_table(report)

    wrapped = ForeignEmbedder(embedding)  # the same vectors, not only the same scores
    documents_out = wrapped.embed_documents(documents[:4])
    queries_out = wrapped.embed_queries(["where is the library?", "a short query"])
    assert documents_out.dtype == np.float32 and np.allclose(np.linalg.norm(documents_out, axis=1), 1.0, atol=1e-5)
    np.testing.assert_allclose(documents_out, truncating.embed_documents(documents[:4]), atol=1e-5)
    np.testing.assert_allclose(
        queries_out, truncating.embed_queries(["where is the library?", "a short query"]), atol=1e-5
    )


def test_our_fair_embedder_reads_every_token_with_windows(minilm: str, documents: list[str]) -> None:
    windows = FairEmbedder(minilm, calibration=None, device="cpu")
    coverage = token_coverage(windows, documents)
    assert coverage is not None and coverage.share == 0.0 and coverage.truncated == 0
    assert coverage.tokens == sum(windows.token_lengths(documents))


def test_a_baseline_runs_first_and_stacks_never_share_cache_entries(
    tmp_path: Path, stacks: dict[str, Any], documents: list[str], truncating: FairEmbedder
) -> None:
    cache = EmbeddingCache(tmp_path / "cache")
    options: dict[str, Any] = {"max_probes": PROBES, "show_progress_bar": False, "cache": cache}
    report = diagnose_corpus(documents, truncating, None, baseline=stacks["llamaindex"], **options)
    assert [run["label"] for run in report["runs"]] == ["HuggingFaceEmbedding", "plain"]
    assert report["comparison"]["baseline"] == "HuggingFaceEmbedding"
    assert report["comparison"]["ndcg@10_delta"] == pytest.approx(0.0, abs=1e-9)  # the same vectors, truncated alike
    entries = set((tmp_path / "cache").glob("*.npy"))
    assert len(entries) == 4  # documents and queries, per embedder

    diagnose_corpus(documents, stacks["langchain"], None, **options)
    assert len(set((tmp_path / "cache").glob("*.npy")) - entries) == 2  # its own, though the model is the same

    again = diagnose_corpus(documents, truncating, None, baseline=stacks["llamaindex"], **options)
    assert len(list((tmp_path / "cache").glob("*.npy"))) == 6
    assert [run["overall"] for run in again["runs"]] == [run["overall"] for run in report["runs"]]
    assert all(run["seconds"] == 0.0 for run in again["runs"])  # loaded from the cache


def test_an_embedder_without_tokenizer_says_unknown(documents: list[str]) -> None:
    fake = pytest.importorskip("langchain_core.embeddings").DeterministicFakeEmbedding(size=16)
    report = diagnose_corpus(documents, fake, None, max_probes=PROBES, show_progress_bar=False)
    assert report["runs"][0]["tokens_never_embedded"] is None
    assert report["task"]["info"]["depth_unit"] == "characters"  # no tokenizer: depths in characters
    assert report["model"]["max_length"] is None
    row = next(line for line in format_table(report).splitlines() if line.startswith("tokens never embedded"))
    assert row.split()[-1] == "unknown"


def test_a_calibration_for_a_foreign_embedder_is_refused(stacks: dict[str, Any], documents: list[str]) -> None:
    with pytest.raises(ValueError, match=r"HuggingFaceEmbedding cannot be calibrated.*calibration=None"):
        diagnose_corpus(documents, stacks["llamaindex"], Calibration(), max_probes=PROBES)
    with pytest.raises(ValueError, match="cannot be calibrated"):
        ForeignEmbedder(stacks["langchain"]).embed_documents(documents[:1], calibration=Calibration())


@pytest.mark.parametrize("wrong", [object(), "sentence-transformers/all-MiniLM-L6-v2", 42])
def test_a_wrong_object_is_refused_with_what_is_accepted(wrong: Any, documents: list[str]) -> None:
    if isinstance(wrong, str):
        with pytest.raises(TypeError, match=r"load it with FairEmbedder\(model\)"):
            diagnose_corpus(documents, wrong, None, max_probes=PROBES)
    with pytest.raises(TypeError, match=r"pass a FairEmbedder, a LlamaIndex BaseEmbedding .*a LangChain Embeddings"):
        diagnose_corpus(documents, wrong, None, max_probes=PROBES)
    with pytest.raises(TypeError, match=r"cannot wrap an object of type .*: pass a LlamaIndex BaseEmbedding"):
        ForeignEmbedder(wrong)


def test_the_library_imports_neither_llama_index_nor_langchain() -> None:
    code = (
        "import sys, fair_retrieval, fair_retrieval.evaluation.compare, fair_retrieval.evaluation.external_embedders, "
        "fair_retrieval.cli.cmd_diagnose\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('llama_index', 'langchain_core', "
        "'langchain_huggingface', 'langchain')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=300)
    assert result.stdout.strip() == "[]"


def test_the_table_names_each_truncation_once(reference: dict[str, Any]) -> None:
    plain = reference["runs"][0]
    report = {**reference, "runs": [plain, {**plain, "label": "calibrated"}]}
    lines = [line for line in format_table(report).splitlines() if "never embedded" in line]
    assert lines[0].split()[-2:] == [f"{plain['tokens_never_embedded']['share']:.1%}"] * 2
    assert lines[1].startswith("plain, calibrated: 12 of 12 documents exceed the 256-token window; their ends, ")
    assert len(lines) == 2
