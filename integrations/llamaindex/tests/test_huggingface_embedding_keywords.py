"""FairEmbedding takes llama-index's HuggingFaceEmbedding keywords with their meaning there: the anchor's documented
examples, ported verbatim (only the class name changed), give the anchor's plain query vectors; the
SentenceTransformer keywords it passes on load the model as sentence-transformers does, or are refused with the
reason; a misspelt keyword is refused with the closest valid one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.embeddings.fair import FairEmbedding
from llama_index.embeddings.huggingface import HuggingFaceEmbedding

QUERY = "who climbs the stairs of the lighthouse?"


@pytest.fixture(scope="module")
def anchor(minilm_path: str) -> HuggingFaceEmbedding:
    return HuggingFaceEmbedding(model_name=minilm_path, device="cpu")


def test_the_anchors_examples_give_its_plain_query_vectors(minilm_path: str, anchor: HuggingFaceEmbedding) -> None:
    expected = np.asarray(anchor.get_query_embedding(QUERY))

    # llama-index-embeddings-huggingface's docstring example (the model: the local copy).
    embed_model = FairEmbedding(model_name=minilm_path)
    np.testing.assert_array_equal(np.asarray(embed_model.get_query_embedding(QUERY)), expected)

    # The starter tutorial's line, with the keywords users add to it.
    embed_model = FairEmbedding(
        model_name=minilm_path, device="cpu", embed_batch_size=16, max_length=256, revision=None, token=None
    )
    np.testing.assert_array_equal(np.asarray(embed_model.get_query_embedding(QUERY)), expected)


def test_sentence_transformers_keywords_load_as_sentence_transformers_does(minilm_path: str, tmp_path: Any) -> None:
    embed_model = FairEmbedding(
        minilm_path,
        device="cpu",
        cache_folder=str(tmp_path),
        local_files_only=True,
        backend="torch",
        truncate_dim=None,
        normalize=False,  # all-MiniLM-L6-v2 ends in a Normalize module: its vectors are the same either way
        prompts={"query": "query: "},
        config_kwargs={"hidden_dropout_prob": 0.25},
    )
    assert embed_model.embedder.identity()["query_prompt"] == "query: "
    assert embed_model.embedder.model[0].auto_model.config.hidden_dropout_prob == 0.25


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"revison": "main"}, r"unknown option 'revison' \(did you mean 'revision'\?\)"),
        ({"backend": "onnx"}, "backend='onnx' cannot be honoured: calibration hooks the attention"),
        ({"truncate_dim": 64}, "truncate_dim=64 cannot be honoured"),
        ({"parallel_process": True}, "parallel_process=True cannot be honoured: calibration runs inside"),
        ({"target_devices": ["cpu", "cpu"]}, "IngestionPipeline"),
        ({"use_kernels": True}, "Hub kernels replace the attention functions"),
        ({"device": "cpu", "tokenizer_kwargs": {}, "processor_kwargs": {"x": 1}}, "both set processor_kwargs"),
    ],
)
def test_what_cannot_be_honoured_is_refused_with_the_reason(
    tiny_model: str, keywords: dict[str, Any], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        FairEmbedding(tiny_model, **keywords)


def test_normalize_false_needs_a_model_that_normalises(tiny_model: str, tmp_path: Path) -> None:
    unnormalised = _unnormalised_copy(tiny_model, tmp_path)
    with pytest.raises(ValueError, match="normalize=False cannot be honoured: vectors are always L2-normalised"):
        FairEmbedding(unnormalised, normalize=False)


def _unnormalised_copy(model: str, folder: Path) -> str:
    """A copy of `model` without its Normalize module: its vectors are not L2-normalised."""
    copy = shutil.copytree(model, folder / "unnormalised")
    modules = json.loads((copy / "modules.json").read_text())
    kept = [module for module in modules if not module["type"].endswith("Normalize")]
    assert len(kept) < len(modules)
    (copy / "modules.json").write_text(json.dumps(kept))
    return str(copy)
