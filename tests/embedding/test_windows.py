"""Token-window pooling: documents longer than the window are cut, embedded window by window and pooled."""

from __future__ import annotations

import itertools
import logging

import numpy as np
import pytest

from fair_retrieval import Calibration, FairEmbedder, PositionalScaling
from fair_retrieval.embedding import embedding_report
from fair_retrieval.embedding.windows import chunk_plan, pool_windows, snap_to_words, window_spans, word_starts
from tests.engine.test_attention import make_text

# 1,400 / 700 / 30 words of one-token words: about 1,400, 700 and 30 tokens.
LONG, MEDIUM, SHORT = make_text(1400, 31), make_text(700, 32), make_text(30, 33)
SMALL_BASKETS = Calibration(strength=1.0, basket_size=16, min_full_baskets=2)  # every window long enough


@pytest.mark.parametrize(("tokens", "capacity", "overlap"), [(10, 10, 0), (11, 10, 0), (1000, 254, 0), (1000, 254, 32)])
def test_window_spans_cover_every_token_with_equal_windows(tokens: int, capacity: int, overlap: int) -> None:
    spans = window_spans(tokens, capacity, overlap)
    assert spans[0][0] == 0 and spans[-1][1] == tokens
    sizes = [end - start for start, end in spans]
    assert max(sizes) <= capacity and max(sizes) - min(sizes) <= 1
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end - start == overlap  # consecutive windows share exactly the overlap, and leave no gap
    fewer = len(spans) - 1
    if fewer:  # the fewest windows: one window less could not cover the tokens
        assert fewer * capacity - (fewer - 1) * overlap < tokens


def test_window_spans_and_chunk_plan_refuse_bad_sizes() -> None:
    with pytest.raises(ValueError, match="window_overlap"):
        window_spans(100, 10, 10)
    with pytest.raises(ValueError, match="at least one content token"):
        window_spans(100, 0, 0)
    assert chunk_plan(254) == (254, 32)
    assert chunk_plan(254, 100, 0) == (100, 0)
    for size, overlap in ((0, None), (100, 100), (100, -1)):
        with pytest.raises(ValueError, match="chunk"):
            chunk_plan(254, size, overlap)


def test_window_starts_snap_back_to_the_start_of_a_word() -> None:
    text = "alpha betagamma delta"
    offsets = [(0, 5), (6, 10), (10, 15), (16, 21)]  # "betagamma" is two tokens
    starts = word_starts(text, offsets)
    assert starts == [True, True, False, True]
    assert snap_to_words([(0, 2), (2, 4)], starts, margin=2) == [(0, 1), (1, 4)]
    assert snap_to_words([(0, 2), (2, 4)], starts, margin=0) == [(0, 2), (2, 4)]  # no room: the token boundary
    assert snap_to_words([(0, 3), (2, 4)], starts, margin=2) == [(0, 3), (1, 4)]  # overlapping: only the start moves


def test_pool_windows_is_the_token_weighted_normalised_mean() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(5, 8)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    pooled = pool_windows(vectors, [0, 0, 1, 2, 2], [10, 30, 5, 1, 1], 3)
    expected = np.stack([10 * vectors[0] + 30 * vectors[1], vectors[2], vectors[3] + vectors[4]])
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    np.testing.assert_allclose(pooled, expected, atol=1e-6)


def direct(embedder: FairEmbedder, text: str, **kwargs: object) -> np.ndarray:
    """The windowed vector computed by hand: each window embedded on its own (no batching), weighted mean."""
    plan = embedder.plan_documents([text])
    vectors = np.concatenate([embedder.embed_documents([piece], **kwargs) for piece in plan.pieces])  # type: ignore[arg-type]
    mean = (vectors * np.asarray(plan.weights, dtype=np.float64)[:, None]).sum(axis=0)
    return mean / np.linalg.norm(mean)


def test_minilm_windows_cover_the_document_and_fit_the_window(minilm: str) -> None:
    assert FairEmbedder(minilm).window_overlap == 32  # the default: an eighth of the 254 content tokens
    embedder = FairEmbedder(minilm, window_overlap=0)  # max_length 256, long_documents="windows" by default
    plan = embedder.plan_documents([LONG, SHORT])
    assert embedder.long_documents == "windows" and plan.windowed == 1 and plan.truncated == 0
    assert plan.pieces[-1] == SHORT and plan.owners == [0] * (len(plan.pieces) - 1) + [1]
    assert max(embedder.token_lengths(plan.pieces)) <= 256
    assert " ".join(plan.pieces[:-1]).split() == LONG.split()  # every word once, in order, none cut in two
    assert sum(plan.weights[:-1]) == plan.tokens[0] - 2  # every content token weighs once
    overlapping = FairEmbedder(embedder.model, window_overlap=40).plan_documents([LONG])
    assert len(overlapping.pieces) > len(plan.pieces) - 1 and sum(overlapping.weights) > plan.tokens[0] - 2


def test_minilm_windowed_vector_equals_the_direct_per_window_computation(minilm: str) -> None:
    embedder = FairEmbedder(minilm, batch_size=3)
    for calibration in (None, SMALL_BASKETS):
        ours = embedder.embed_documents([LONG, SHORT, MEDIUM], calibration=calibration)
        np.testing.assert_allclose(ours[0], direct(embedder, LONG, calibration=calibration), atol=1e-5)
        np.testing.assert_allclose(ours[2], direct(embedder, MEDIUM, calibration=calibration), atol=1e-5)
    truncating = FairEmbedder(embedder.model, long_documents="truncate")
    np.testing.assert_allclose(ours[1], truncating.embed_documents([SHORT], calibration=SMALL_BASKETS)[0], atol=1e-6)
    assert float(ours[0] @ truncating.embed_documents([LONG], calibration=SMALL_BASKETS)[0]) < 0.999


@pytest.mark.parametrize("key", ["bert-cls", "qwen3-last", "qwen3-last-left", "modernbert-mean", "xlm-roberta-cls"])
def test_every_pooling_windows_exactly_and_batch_invariantly(tiny_models: dict[str, str], key: str) -> None:
    embedder = FairEmbedder(tiny_models[key], max_length=128, calibration=SMALL_BASKETS, batch_size=2)
    texts = [make_text(400, 41), make_text(20, 42), make_text(260, 43)]
    ours = embedder.embed_documents(texts)
    assert embedder.last_report is not None and embedder.last_report.windowed == 2
    assert embedder.last_report.calibrated_windows == embedder.last_report.windows - 1  # all but the short text
    for i in (0, 2):
        np.testing.assert_allclose(ours[i], direct(embedder, texts[i]), atol=1e-5)
    alone = FairEmbedder(embedder.model, max_length=128, calibration=SMALL_BASKETS, batch_size=7)
    mixed = alone.embed_documents([make_text(90, 44), texts[2], texts[0], make_text(3, 45)])
    np.testing.assert_allclose(mixed[[2, 1]], ours[[0, 2]], atol=1e-5)


def test_lpes_applies_inside_every_window(tiny_models: dict[str, str]) -> None:
    embedder = FairEmbedder(tiny_models["modernbert-cls"], max_length=128, calibration=None)
    scaling = PositionalScaling(factors=[1.0, 2.0, 3.0, 1.5])
    text = make_text(300, 51)
    ours = embedder.embed_documents([text], positional_scaling=scaling)[0]
    np.testing.assert_allclose(ours, direct(embedder, text, positional_scaling=scaling), atol=1e-5)
    assert float(ours @ embedder.embed_documents([text])[0]) < 0.9999


def test_calibrated_texts_counts_windows_and_agrees_with_embedding(minilm: str) -> None:
    embedder = FairEmbedder(minilm, max_length=512)  # windows of 510 content tokens hold the default's 384
    texts = [LONG, SHORT, make_text(350, 61)]
    flags = embedder.calibrated_texts(texts, Calibration())
    plain = embedder.embed_documents(texts, calibration=None)
    changed = np.abs(embedder.embed_documents(texts) - plain).max(axis=1) > 1e-4
    assert flags == changed.tolist() == [True, False, False]
    assert embedder.last_report is not None and embedder.last_report.calibrated == 1


def test_queries_are_never_windowed(minilm: str) -> None:
    windows = FairEmbedder(minilm)
    truncating = FairEmbedder(windows.model, long_documents="truncate")
    np.testing.assert_allclose(windows.embed_queries([LONG]), truncating.embed_queries([LONG]), atol=1e-7)


def test_one_summary_per_call_and_one_construction_note_a_process_when_nothing_can_be_calibrated(
    minilm: str, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(embedding_report, "_NEVER_CALIBRATED_SAID", set())  # as in a new process
    with caplog.at_level(logging.INFO, logger="fair_retrieval.embedding.embedder"):
        embedder = FairEmbedder(minilm, batch_size=2)  # 256-token windows cannot hold 384 content tokens
        embedder.embed_documents([LONG, SHORT, MEDIUM])
        embedder.embed_documents([SHORT])
        FairEmbedder(minilm)  # the same model and window: not said again
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING]  # the default window is no fault
    notes = [r.getMessage() for r in caplog.records if "content tokens, fewer than" in r.getMessage()]
    assert len(notes) == 1 and "holds at most 254 content tokens, fewer than the 384" in notes[0]
    assert "raise max_length (the model allows 512)" in notes[0]
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO and r.getMessage().startswith("Em")]
    assert len(infos) == 2  # one per call, not one per batch
    report = embedder.last_report
    assert report is not None and (report.documents, report.windowed, report.calibrated) == (1, 0, 0)
    assert infos[0].startswith("Embedded 3 documents, 2 windowed into") and infos[0].endswith("0 calibrated.")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fair_retrieval.embedding.embedder"):
        FairEmbedder(embedder.model, max_length=512)
        FairEmbedder(embedder.model, calibration=None)
    assert not caplog.records


def test_truncation_report_counts_the_tokens_never_embedded(minilm: str, caplog: pytest.LogCaptureFixture) -> None:
    embedder = FairEmbedder(minilm, long_documents="truncate", calibration=None)
    with caplog.at_level(logging.WARNING, logger="fair_retrieval.embedding.embedder"):
        embedder.embed_documents([LONG, SHORT])
    report = embedder.last_report
    lengths = embedder.token_lengths([LONG, SHORT])
    assert report is not None and report.truncated == 1 and report.cut_tokens == lengths[0] - 256
    assert "1 truncated (" in report.summary() and "long_documents='windows'" in caplog.text


def test_bad_window_options_are_refused(minilm: str) -> None:
    with pytest.raises(ValueError, match="long_documents must be one of"):
        FairEmbedder(minilm, long_documents="split")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="window_overlap must be an int"):
        FairEmbedder(minilm, window_overlap=-1)
    with pytest.raises(ValueError, match="at most half of the 254 content tokens"):
        FairEmbedder(minilm, window_overlap=128)
    assert FairEmbedder(minilm, window_overlap=127).window_overlap == 127
