"""Boundary windows (window_boundaries="text", window_tokens) give the same vectors through every surface:
FairEmbedder, LangChain's FairEmbeddings, LlamaIndex's FairEmbedding and `fair-retrieval index`."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from fair_retrieval import FairEmbedder, FaissIndex, MultiVectorIndex
from fair_retrieval.cli import main
from tests.embedding.test_boundaries import article

INDEX = ("index", "--output-format", "index")  # the command writing the earlier index folder

OPTIONS = {"window_boundaries": "text", "window_tokens": 100, "calibration": None}
TEXTS = [article(41, paragraphs=6), "A short text about tides.", article(42, paragraphs=3)]


@pytest.fixture(scope="module")
def reference(minilm: str) -> FairEmbedder:
    return FairEmbedder(minilm, **OPTIONS)  # type: ignore[arg-type]


def test_adapters_give_the_embedders_vectors(reference: FairEmbedder, minilm: str) -> None:
    langchain_fair = pytest.importorskip("langchain_fair")
    llama_fair = pytest.importorskip("llama_index.embeddings.fair")
    expected = reference.embed_documents(TEXTS)
    assert len(reference.plan_documents(TEXTS).pieces) > len(TEXTS) + 2  # the long texts are windowed
    by_langchain = np.array(langchain_fair.FairEmbeddings(model=minilm, **OPTIONS).embed_documents(TEXTS))
    by_llama = np.array(llama_fair.FairEmbedding(minilm, **OPTIONS).get_text_embedding_batch(TEXTS))
    np.testing.assert_allclose(by_langchain, expected, atol=1e-5)
    np.testing.assert_allclose(by_llama, expected, atol=1e-5)


@pytest.mark.parametrize("multivector", [False, True], ids=["pooled", "multivector"])
def test_the_cli_index_holds_the_embedders_vectors(
    reference: FairEmbedder, minilm: str, tmp_path: Path, multivector: bool
) -> None:
    source = tmp_path / "docs.jsonl"
    source.write_text("".join(json.dumps({"id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    output = tmp_path / "index"
    flags = ["--window-boundaries", "text", "--window-tokens", "100", "--no-calibration"]
    flags += ["--multivector", "--aggregate", "max"] if multivector else []
    assert main([*INDEX, "--model", minilm, "--input", str(source), "--output", str(output), *flags]) == 0
    manifest = json.loads((output / "manifest.json").read_text())
    assert (manifest["window_boundaries"], manifest["window_tokens"]) == ("text", 100)
    windows = reference.embed_document_windows(TEXTS)
    if multivector:
        index = MultiVectorIndex.load(output, gpu=False)
        scores, ids = index.search(windows.vectors[:1], 1)
        assert ids[0][0] == 0 and scores[0][0] == pytest.approx(1.0, abs=1e-5)  # the first window, exactly
        assert index.window_count == len(windows.vectors)
    else:
        index = FaissIndex.load(output, gpu=False)
        np.testing.assert_allclose(index.get_vectors(np.arange(len(TEXTS))), windows.pooled, atol=1e-5)
