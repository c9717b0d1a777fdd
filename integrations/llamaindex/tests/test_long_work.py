"""Long work with FairEmbedding: one INFO line per call however many batches LlamaIndex makes (DEBUG per batch), and
pickling for worker pools (IngestionPipeline(num_workers=N)) without warnings, the copy loading the same model."""

from __future__ import annotations

import logging
import pickle

import numpy as np
import pytest
from llama_index.embeddings.fair import FairEmbedding

from fair_retrieval import Calibration

TEXTS = [f"Text number {i} says something about harbours, ferries and the wind." for i in range(7)]


def test_one_info_line_per_call_and_debug_per_batch(tiny_model: str, caplog: pytest.LogCaptureFixture) -> None:
    embed_model = FairEmbedding(tiny_model, embed_batch_size=2, calibration=None)
    logger = "fair_retrieval.embedding.embedder"
    with caplog.at_level(logging.DEBUG, logger=logger):
        embed_model.get_text_embedding_batch(TEXTS)
    lines = [(r.levelno, r.getMessage()) for r in caplog.records if r.name == logger]
    info = [message for level, message in lines if level == logging.INFO]
    assert info == ["Embedded 7 documents, 0 calibrated in 4 batches."]
    assert len([message for level, message in lines if level == logging.DEBUG]) == 4


def test_pickling_is_silent_and_the_copy_embeds_alike(tiny_model: str, caplog: pytest.LogCaptureFixture) -> None:
    embed_model = FairEmbedding(tiny_model, max_length=64, calibration=Calibration(strength=0.5, basket_size=4))
    with caplog.at_level(logging.WARNING):
        copy = pickle.loads(pickle.dumps(embed_model))
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []
    assert copy.embedder is not embed_model.embedder
    assert copy.embedder.identity() == embed_model.embedder.identity()
    np.testing.assert_allclose(
        copy.get_text_embedding_batch(TEXTS), embed_model.get_text_embedding_batch(TEXTS), atol=1e-6
    )


def test_a_shared_embedder_pickles_with_its_settings(tiny_model: str) -> None:
    shared = FairEmbedding(tiny_model, max_length=64).embedder
    plain = FairEmbedding(embedder=shared, calibration=None)
    copy = pickle.loads(pickle.dumps(plain))
    assert copy.embedder.identity() == plain.embedder.identity()


def test_a_very_long_text_is_announced_with_its_cost(tiny_model: str, caplog: pytest.LogCaptureFixture) -> None:
    from fair_retrieval.embedding.embedding_report import LONG_TEXT_CHARACTERS

    embed_model = FairEmbedding(tiny_model, max_length=64, calibration=None, embed_batch_size=64)
    book = "word " * (LONG_TEXT_CHARACTERS // 5 + 1)
    with caplog.at_level(logging.WARNING, logger="fair_retrieval.embedding.embedder"):
        embed_model.get_text_embedding_batch(["short", book])
    (warning,) = [r.getMessage() for r in caplog.records if "will be embedded as" in r.getMessage()]
    assert f"1 text longer than {LONG_TEXT_CHARACTERS} characters" in warning
    assert "forward passes" in warning and "a progress bar shows it" in warning
