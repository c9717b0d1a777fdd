"""FairEmbedder: plain paths equal the model's own output, batching invariance, inputs, errors, thread safety."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import numpy as np
import pytest
import torch

from fair_retrieval import Calibration, FairEmbedder, UnsupportedModelError
from tests.engine.test_attention import TINY_TEXTS, make_text

TEXTS = ["", "a short query", make_text(150, 21), make_text(300, 22), make_text(60, 23), make_text(220, 24)]


@pytest.fixture(scope="module")
def minilm_embedder(minilm: str) -> FairEmbedder:
    return FairEmbedder(minilm, max_length=512, batch_size=4)


def test_queries_equal_the_models_own_output(minilm: str) -> None:
    embedder = FairEmbedder(minilm)  # the model's configured max length (256)
    ours = embedder.embed_queries(TEXTS)
    theirs = embedder.model.encode_query(TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    assert ours.dtype == np.float32 and ours.shape == (len(TEXTS), 384)
    np.testing.assert_allclose(ours, theirs, atol=1e-6)


@pytest.mark.parametrize("model_key", ["bert-cls", "qwen3-last", "qwen3-last-left", "modernbert-mean"])
def test_tiny_queries_equal_the_models_own_output(tiny_models: dict[str, str], model_key: str) -> None:
    embedder = FairEmbedder(tiny_models[model_key], batch_size=2)
    theirs = embedder.model.encode_query(TINY_TEXTS, convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(embedder.embed_queries(TINY_TEXTS), theirs, atol=1e-6)


def test_plain_documents_equal_queries_and_strength_zero(minilm_embedder: FairEmbedder) -> None:
    plain = minilm_embedder.embed_documents(TEXTS, calibration=None)
    np.testing.assert_allclose(plain, minilm_embedder.embed_queries(TEXTS), atol=1e-6)
    zero = minilm_embedder.embed_documents(TEXTS, calibration=Calibration(strength=0.0))
    np.testing.assert_allclose(zero, plain, atol=1e-6)
    calibrated = minilm_embedder.embed_documents(TEXTS, calibration=Calibration.paper())  # TEXTS are < 384 tokens
    assert np.abs(calibrated[3] - plain[3]).max() > 1e-3
    np.testing.assert_allclose(np.linalg.norm(calibrated, axis=1), 1.0, atol=1e-5)


def test_batch_size_and_order_do_not_change_results(minilm: str) -> None:
    reference = FairEmbedder(minilm, max_length=512, batch_size=1).embed_documents(TEXTS)
    batched = FairEmbedder(minilm, max_length=512, batch_size=3).embed_documents(TEXTS)
    np.testing.assert_allclose(batched, reference, atol=1e-5)
    order = np.random.default_rng(0).permutation(len(TEXTS))
    shuffled = FairEmbedder(minilm, max_length=512, batch_size=4).embed_documents([TEXTS[i] for i in order])
    np.testing.assert_allclose(shuffled, reference[order], atol=1e-5)


@pytest.mark.parametrize("model_key", ["qwen3-last-left", "qwen3-last", "bert-cls", "modernbert-mean"])
def test_batch_composition_with_padding(tiny_models: dict[str, str], model_key: str) -> None:
    cal = Calibration(strength=1.0, basket_size=16)
    alone = FairEmbedder(tiny_models[model_key], calibration=cal, batch_size=1).embed_documents(TINY_TEXTS)
    together = FairEmbedder(tiny_models[model_key], calibration=cal, batch_size=4).embed_documents(TINY_TEXTS)
    np.testing.assert_allclose(together, alone, atol=1e-5)


def test_empty_and_short_inputs(minilm_embedder: FairEmbedder) -> None:
    empty = minilm_embedder.embed_documents([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32
    assert minilm_embedder.embed_queries([]).shape == (0, 384)
    blank = minilm_embedder.embed_documents([""])
    assert np.isfinite(blank).all() and abs(np.linalg.norm(blank) - 1.0) < 1e-5


@pytest.mark.parametrize(
    ("texts", "fragment"),
    [
        ("a single string", "single str"),
        (b"bytes", "single bytes"),
        (["ok", None], "texts[1] is NoneType"),
        (["ok", "fine", b"raw"], "texts[2] is bytes"),
        ([1.5], "texts[0] is float"),
        (42, "list of strings"),
    ],
)
def test_bad_inputs_raise_type_errors(minilm_embedder: FairEmbedder, texts: object, fragment: str) -> None:
    with pytest.raises(TypeError) as info:
        minilm_embedder.embed_documents(texts)  # type: ignore[arg-type]
    assert fragment in str(info.value)
    with pytest.raises(TypeError):
        minilm_embedder.embed_queries(texts)  # type: ignore[arg-type]


def test_constructor_errors(minilm: str) -> None:
    with pytest.raises(ValueError, match="pooling"):
        FairEmbedder(minilm, pooling="max")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_length"):
        FairEmbedder(minilm, max_length=4096)
    with pytest.raises(ValueError, match="batch_size"):
        FairEmbedder(minilm, batch_size=0)
    with pytest.raises(ValueError, match="layers"):
        FairEmbedder(minilm, calibration=Calibration(layers=9))
    with pytest.raises(TypeError, match="calibration"):
        FairEmbedder(minilm, calibration={"strength": 0.5})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="model"):
        FairEmbedder(3.14)
    with pytest.raises(ValueError, match="Could not load"):
        FairEmbedder("/no/such/model/folder")


def test_layers_outside_the_model_at_call_time(minilm_embedder: FairEmbedder) -> None:
    with pytest.raises(ValueError, match="outside a model with 6 layers"):
        minilm_embedder.embed_documents(["text"], calibration=Calibration(layers=(6,)))


def test_bare_model_needs_explicit_pooling(tiny_models: dict[str, str]) -> None:
    bare = str(Path(tiny_models["bert-cls"]).parent / "hf")  # a transformers folder without modules.json
    with pytest.raises(ValueError, match="pooling="):
        FairEmbedder(bare)
    embedder = FairEmbedder(bare, pooling="cls", calibration=Calibration(basket_size=16))
    with_st = FairEmbedder(tiny_models["bert-cls"], calibration=Calibration(basket_size=16))
    np.testing.assert_allclose(embedder.embed_documents(TINY_TEXTS), with_st.embed_documents(TINY_TEXTS), atol=1e-6)


def test_forced_pooling_changes_the_pooled_token(minilm: str) -> None:
    cls = FairEmbedder(minilm, pooling="cls", max_length=512)
    hidden = cls.model[0]({k: v for k, v in cls.model.preprocess(["hello there"]).items()})["token_embeddings"]
    expected = torch.nn.functional.normalize(hidden[:, 0], dim=-1).detach().numpy()
    np.testing.assert_allclose(cls.embed_queries(["hello there"]), expected, atol=1e-6)


def test_truncation_is_logged_once_per_call(minilm: str, caplog: pytest.LogCaptureFixture) -> None:
    embedder = FairEmbedder(minilm, max_length=64, batch_size=1, long_documents="truncate")
    with caplog.at_level(logging.WARNING, logger="fair_retrieval"):
        embedder.embed_documents([make_text(200, 1), make_text(10, 2), make_text(120, 3)])
    warnings = [r for r in caplog.records if "truncated" in r.getMessage()]
    assert len(warnings) == 1
    message = warnings[0].getMessage()
    assert "2 of 3 documents exceed max_length=64" in message
    assert f"longest: {max(embedder.token_lengths([make_text(200, 1)]))} tokens" in message
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="fair_retrieval"):
        embedder.embed_documents([make_text(10, 2)])
    assert not [r for r in caplog.records if "truncated" in r.getMessage()]


def test_prompts_from_the_config_are_used(minilm: str) -> None:
    embedder = FairEmbedder(minilm, max_length=512)
    embedder.model.prompts = {"query": "query: ", "document": "passage: "}
    embedder = FairEmbedder(embedder.model, max_length=512)
    expected = embedder.model.encode_query(["find me"], convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(embedder.embed_queries(["find me"]), expected, atol=1e-6)
    documents = embedder.model.encode_document(["a doc"], convert_to_numpy=True, normalize_embeddings=True)
    np.testing.assert_allclose(embedder.embed_documents(["a doc"], calibration=None), documents, atol=1e-6)
    embedder.model.prompts = {"query": "", "document": ""}


def test_plain_queries_in_another_thread_are_unaffected(minilm_embedder: FairEmbedder) -> None:
    """A query embedded while a calibrated document pass is in flight (in another thread) stays plain."""
    long_texts = [make_text(450, 31)]  # ≥ 384 content tokens: the default calibrates it
    expected = minilm_embedder.embed_queries(long_texts)
    seen: list[np.ndarray] = []

    def run_query_mid_forward(module: torch.nn.Module, args: object) -> None:
        if not seen:
            seen.append(np.empty(0))
            worker = threading.Thread(target=lambda: seen.append(minilm_embedder.embed_queries(long_texts)))
            worker.start()
            worker.join()

    layer = minilm_embedder.model[0].auto_model.encoder.layer[5]
    handle = layer.register_forward_pre_hook(run_query_mid_forward)
    try:
        calibrated = minilm_embedder.embed_documents(long_texts)
    finally:
        handle.remove()
    assert len(seen) == 2
    np.testing.assert_allclose(seen[1], expected, atol=1e-6)
    assert np.abs(calibrated - expected).max() > 1e-3


def test_models_bypassing_the_attention_interface_are_refused(tiny_models: dict[str, str]) -> None:
    embedder = FairEmbedder(tiny_models["bert-cls"], calibration=Calibration(basket_size=16))
    for layer in embedder.model[0].auto_model.encoder.layer:
        attention = layer.attention.self
        attention.forward = _own_attention(attention)  # like remote code that computes attention itself
    with pytest.raises(UnsupportedModelError, match="ALL_ATTENTION_FUNCTIONS"):
        embedder.embed_documents(TINY_TEXTS)


def test_models_that_cannot_switch_attention_are_refused(
    tiny_models: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from transformers import BertModel

    monkeypatch.setattr(BertModel, "_can_set_attn_implementation", classmethod(lambda cls: False))
    with pytest.raises(UnsupportedModelError, match="BertModel"):
        FairEmbedder(tiny_models["bert-cls"])


def _own_attention(module: torch.nn.Module):  # type: ignore[no-untyped-def]
    def forward(hidden_states: torch.Tensor, attention_mask: torch.Tensor | None = None, **kwargs: object):  # type: ignore[no-untyped-def]
        batch, seq, _ = hidden_states.shape
        shape = (batch, seq, -1, module.attention_head_size)
        q = module.query(hidden_states).view(shape).transpose(1, 2)
        k = module.key(hidden_states).view(shape).transpose(1, 2)
        v = module.value(hidden_states).view(shape).transpose(1, 2)
        out = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=attention_mask)
        return out.transpose(1, 2).reshape(batch, seq, -1), None

    return forward


@pytest.mark.parametrize("special_tokens", ["content", "preserve"])
def test_batches_of_only_short_or_empty_texts(minilm_embedder: FairEmbedder, special_tokens: str) -> None:
    texts = ["", "", "tiny"]
    cal = Calibration(special_tokens=special_tokens)  # type: ignore[arg-type]
    np.testing.assert_allclose(
        minilm_embedder.embed_documents(texts, calibration=cal), minilm_embedder.embed_queries(texts), atol=1e-6
    )
