"""`build_embedder(options, model, prompts=...)`: a model loaded with other query/document prompts (the adapters'
instructions) gives the embedder of a SentenceTransformer whose prompts were set by hand, named as when loaded by name.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sentence_transformers import SentenceTransformer

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding.embedder_building import build_embedder, resolve_embedder
from fair_retrieval.embedding.embedder_options import EmbedderOptions
from tests.models import build_tiny_model

TEXTS = ["a first document with a few words in it", "a second one"]
PROMPTS = {"query": "question: ", "document": "passage: "}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> str:
    return build_tiny_model("bert", "mean", Path(tmp_path_factory.mktemp("tiny-prompts")))


def test_prompts_give_the_embedder_of_a_model_with_those_prompts(tiny: str) -> None:
    options = EmbedderOptions(calibration=Calibration(basket_size=2), device="cpu")
    built = build_embedder(options, tiny, prompts=PROMPTS)
    model = SentenceTransformer(tiny, device="cpu")
    model.prompts = dict(PROMPTS)
    reference = FairEmbedder(model, calibration=Calibration(basket_size=2), device="cpu")
    np.testing.assert_allclose(built.embed_documents(TEXTS), reference.embed_documents(TEXTS), atol=1e-6)
    np.testing.assert_allclose(built.embed_queries(TEXTS), reference.embed_queries(TEXTS), atol=1e-6)
    plain = build_embedder(options, tiny)
    assert np.abs(built.embed_queries(TEXTS) - plain.embed_queries(TEXTS)).max() > 1e-3
    assert built.model_name == plain.model_name == tiny  # named as when FairEmbedder loads it
    assert (built.pooling, built.max_length, built.device.type) == (plain.pooling, plain.max_length, "cpu")
    assert built.token_lengths([""], "query") == [plain.token_lengths([""], "query")[0] + 2]  # "question", ":"


def test_a_prompt_left_out_keeps_the_models_own(tiny: str) -> None:
    built = build_embedder(EmbedderOptions(device="cpu"), tiny, prompts={"document": "passage: "})
    plain = build_embedder(EmbedderOptions(device="cpu"), tiny)
    np.testing.assert_allclose(built.embed_queries(TEXTS), plain.embed_queries(TEXTS), atol=1e-6)
    assert built.window_content_tokens == plain.window_content_tokens - 2  # the document prompt takes room


def test_bad_prompts_are_refused(tiny: str) -> None:
    options = EmbedderOptions(device="cpu")
    with pytest.raises(ValueError, match=r"Unknown prompt name\(s\) \['passage'\]; .* \['query', 'document'\]"):
        build_embedder(options, tiny, prompts={"passage": "p: "})
    with pytest.raises(TypeError, match="The query prompt must be a str, got int"):
        build_embedder(options, tiny, prompts={"query": 1})  # type: ignore[dict-item]
    with pytest.raises(TypeError, match="not for a SentenceTransformer; set the prompts of a loaded"):
        build_embedder(options, SentenceTransformer(tiny, device="cpu"), prompts=PROMPTS)
    with pytest.raises(ValueError, match="prompts are read from the model when a FairEmbedder is built"):
        resolve_embedder("Owner", model=None, embedder=FairEmbedder(tiny, device="cpu"), prompts=PROMPTS)


def test_a_model_without_pooling_config_is_refused_as_by_fair_embedder(tiny: str) -> None:
    bare = str(Path(tiny).parent / "hf")  # the transformers model alone, without modules.json
    with pytest.raises(ValueError) as theirs:
        FairEmbedder(bare, device="cpu")
    with pytest.raises(ValueError) as ours:
        build_embedder(EmbedderOptions(device="cpu"), bare, prompts=PROMPTS)
    assert str(ours.value) == str(theirs.value)
    assert build_embedder(EmbedderOptions(device="cpu", pooling="cls"), bare, prompts=PROMPTS).pooling == "cls"


def test_an_empty_document_prompt_does_not_hide_the_models_passage_prompt() -> None:
    """sentence-transformers 6 adds an empty "document" prompt to every model; e5's "passage: " must still be found."""
    from types import SimpleNamespace

    from fair_retrieval.embedding.loading import document_prompt, query_prompt

    e5_like = SimpleNamespace(prompts={"query": "query: ", "document": "", "passage": "passage: "})
    assert (document_prompt(e5_like), query_prompt(e5_like)) == ("passage: ", "query: ")
    assert document_prompt(SimpleNamespace(prompts={"document": "doc: ", "passage": "passage: "})) == "doc: "
    assert document_prompt(SimpleNamespace(prompts={"query": "", "document": ""})) == ""  # all empty: no prompt
    assert document_prompt(SimpleNamespace(prompts={}, default_prompt_name=None)) is None
