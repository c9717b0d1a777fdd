"""FairEmbeddings takes langchain-huggingface's HuggingFaceEmbeddings keywords with their meaning there: the anchor's
documented examples, ported verbatim (only the class name changed), give the anchor's plain query vectors; what
cannot be honoured is refused with the reason, and a misspelt keyword with the closest valid one."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langchain_fair import FairEmbeddings
from langchain_huggingface import HuggingFaceEmbeddings
from pydantic import ValidationError

from fair_retrieval import FairEmbedder

QUERY = "who climbs the stairs of the lighthouse?"
TEXTS = ["The lighthouse keeper climbed the stairs every evening.", "Penguins huddle together against the cold."]


@pytest.fixture(scope="module")
def anchor(minilm_path: str) -> HuggingFaceEmbeddings:
    return HuggingFaceEmbeddings(model_name=minilm_path, model_kwargs={"device": "cpu"})


def _examples(model_name: str) -> dict[str, Any]:
    """The anchor's documented examples, verbatim but for the class name (and the model: the local copy)."""
    found: dict[str, Any] = {}

    # langchain-huggingface's docstring example.
    model_kwargs = {"device": "cpu"}
    encode_kwargs = {"normalize_embeddings": False}
    hf = FairEmbeddings(
        model_name=model_name,
        model_kwargs=model_kwargs,
        encode_kwargs=encode_kwargs,
    )
    found["docstring"] = hf

    # The integration page's example and the RAG tutorial's line.
    embeddings = FairEmbeddings(model_name=model_name)
    found["integration page"] = embeddings
    found["tutorial"] = FairEmbeddings(
        model_name=model_name, model_kwargs={"device": "cpu"}, encode_kwargs={"normalize_embeddings": True}
    )
    return found


def test_the_anchors_examples_give_its_plain_query_vectors(minilm_path: str, anchor: HuggingFaceEmbeddings) -> None:
    expected = np.asarray(anchor.embed_query(QUERY))
    for name, embeddings in _examples(minilm_path).items():
        # the same vectors, to float32 rounding (these are normalised once more here)
        np.testing.assert_allclose(embeddings.embed_query(QUERY), expected, rtol=0, atol=1e-7, err_msg=name)
        assert embeddings.fair_embedder.device.type == "cpu"


def test_model_kwargs_are_read_as_sentence_transformers_reads_them(minilm_path: str) -> None:
    embeddings = FairEmbeddings(
        model_name=minilm_path,
        model_kwargs={"device": "cpu", "prompts": {"query": "query: "}, "attn_implementation": "eager"},
        show_progress=False,
    )
    assert embeddings.fair_embedder.identity()["query_prompt"] == "query: "
    assert embeddings.model == minilm_path and embeddings.show_progress_bar is False
    config = embeddings.fair_embedder.model[0].auto_model.config
    # a key that is no SentenceTransformer keyword goes to the model (eager attention, hooked: not the default sdpa)
    assert config._attn_implementation == "fair_eager"


def test_prompts_from_encode_kwargs_and_instructions(minilm_path: str) -> None:
    e5_style = FairEmbeddings(
        model=minilm_path,
        device="cpu",
        encode_kwargs={"prompt": "passage: "},
        query_encode_kwargs={"prompt": "query: "},
        calibration=None,
    )
    anchor = HuggingFaceEmbeddings(
        model_name=minilm_path,
        model_kwargs={"device": "cpu"},
        encode_kwargs={"prompt": "passage: "},
        query_encode_kwargs={"prompt": "query: "},
    )
    np.testing.assert_allclose(e5_style.embed_query(QUERY), anchor.embed_query(QUERY), atol=1e-6)
    np.testing.assert_allclose(e5_style.embed_documents(TEXTS), anchor.embed_documents(TEXTS), atol=1e-6)
    named = FairEmbeddings(model=minilm_path, device="cpu", query_instruction="query: ", text_instruction="passage: ")
    assert named.fair_embedder.identity()["query_prompt"] == "query: "
    assert named.fair_embedder.identity()["document_prompt"] == "passage: "
    by_name = FairEmbeddings(
        model=minilm_path,
        model_kwargs={"device": "cpu", "prompts": {"passage": "passage: "}},
        encode_kwargs={"prompt_name": "passage"},
        query_encode_kwargs={"prompt_name": "query"},
    )
    assert by_name.fair_embedder.identity()["document_prompt"] == "passage: "


@pytest.mark.parametrize(
    ("keywords", "message"),
    [
        ({"multi_process": True}, "multi_process=True cannot be honoured: calibration runs inside this process"),
        ({"model_kwargs": {"backend": "onnx"}}, "backend='onnx' cannot be honoured: calibration hooks the attention"),
        ({"model_kwargs": {"trust_remote_code": True}}, "remote-code models are not supported"),
        ({"model_kwargs": {"truncate_dim": 64}}, "truncate the returned vectors yourself"),
        ({"encode_kwargs": {"precision": "int8"}}, "quantize the returned float32 vectors"),
        ({"encode_kwargs": {"prompt_nme": "x"}}, r"unknown key 'prompt_nme' \(did you mean 'prompt_name'\?\)"),
        ({"cache_foldr": "x"}, r"unknown option 'cache_foldr' \(did you mean 'cache_folder'\?\)"),
        ({"model_name": "a", "model": "b"}, "model_name='a' and model='b' disagree"),
        ({"device": "cpu", "model_kwargs": {"device": "cuda"}}, r"model_kwargs\['device'\]='cuda' both set device"),
    ],
)
def test_what_cannot_be_honoured_is_refused_with_the_reason(
    minilm_path: str, keywords: dict[str, Any], message: str
) -> None:
    keywords = {"model": minilm_path, **keywords} if "model_name" not in keywords else keywords
    with pytest.raises(ValidationError, match=message):
        FairEmbeddings(**keywords)


def test_normalize_embeddings_false_needs_a_model_that_normalises(tiny_model: str, tmp_path: Path) -> None:
    """The anchor would return the model's own vectors; a model without a Normalize module would differ."""
    unnormalised = _unnormalised_copy(tiny_model, tmp_path)
    with pytest.raises(ValidationError, match="normalize_embeddings=False cannot be honoured"):
        FairEmbeddings(model=unnormalised, encode_kwargs={"normalize_embeddings": False})


def test_anchor_keywords_that_load_are_refused_with_a_ready_embedder(minilm: FairEmbedder) -> None:
    with pytest.raises(ValidationError, match="device, model_kwargs configure"):
        FairEmbeddings(embedder=minilm, model_kwargs={"device": "cpu"})
    with pytest.raises(ValidationError, match="cache_folder configure"):
        FairEmbeddings(embedder=minilm, cache_folder="/tmp/models")


def _unnormalised_copy(model: str, folder: Path) -> str:
    """A copy of `model` without its Normalize module: its vectors are not L2-normalised."""
    copy = shutil.copytree(model, folder / "unnormalised")
    modules = json.loads((copy / "modules.json").read_text())
    kept = [module for module in modules if not module["type"].endswith("Normalize")]
    assert len(kept) < len(modules)
    (copy / "modules.json").write_text(json.dumps(kept))
    return str(copy)


def test_pickles_for_worker_pools_loading_the_model_again(tiny_model: str) -> None:
    import pickle

    from fair_retrieval import Calibration

    loaded = FairEmbeddings(model=tiny_model, max_length=64, calibration=Calibration(strength=0.5, basket_size=4))
    plain = FairEmbeddings(embedder=loaded.fair_embedder, calibration=None)
    for embeddings in (loaded, plain):
        copy = pickle.loads(pickle.dumps(embeddings))
        assert copy.fair_embedder is not embeddings.fair_embedder
        assert copy.fair_embedder.identity() == embeddings.fair_embedder.identity()
        np.testing.assert_allclose(copy.embed_documents(TEXTS), embeddings.embed_documents(TEXTS), atol=1e-6)


def test_the_keywords_are_read_once_per_construction(tiny_model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from fair_retrieval import FairEmbedder
    from fair_retrieval.adapters import AdapterSettings

    embedder = FairEmbedder(tiny_model, max_length=32, device="cpu")
    reads: list[dict[str, Any]] = []
    original = AdapterSettings.of.__func__  # type: ignore[attr-defined]

    def counted(cls: type[AdapterSettings], settings: dict[str, Any]) -> AdapterSettings:
        reads.append(dict(settings))
        return original(cls, settings)  # type: ignore[no-any-return]

    monkeypatch.setattr(AdapterSettings, "of", classmethod(counted))
    FairEmbeddings(embedder=embedder, show_progress=False, calibration=None)
    assert len(reads) == 1
