"""FairEmbedding checks every text and query before the model runs: a lone surrogate (a non-UTF-8 byte read from a
command line or a file) is refused with the library's one-line ValueError instead of the tokenizer's TextEncodeInput
error, by every public embed method, and a batch is checked whole before any of it is embedded; so are a NUL
character and a text over the size limit."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from llama_index.embeddings.fair import FairEmbedding

from fair_retrieval import FairEmbedder


def test_a_query_with_a_lone_surrogate_is_refused_clearly(minilm_path: str) -> None:
    embedding = FairEmbedding(model=minilm_path)
    with pytest.raises(ValueError, match="surrogate"):
        embedding.get_query_embedding("caf\udce9")
    assert len(embedding.get_query_embedding("café")) == 384


@pytest.fixture(scope="module")
def embedder(tiny_model: str) -> FairEmbedder:
    return FairEmbedder(tiny_model, max_length=32, device="cpu")


UNREADABLE = {
    "surrogate": ("ferry \ud800 stop", r"holds a lone surrogate '\\ud800' at character 6, which is not valid"),
    "nul": ("ferry \x00 stop", r"holds a NUL character \('\\x00'\) at character 6, .*text\.replace"),
    "size": ("x" * ((8 << 20) + 1), r"holds 8388609 bytes, more than the 8388608 a text may have"),
}

CALLS: dict[str, Callable[[FairEmbedding, str], Any]] = {
    "get_query_embedding": lambda e, bad: e.get_query_embedding(bad),
    "get_text_embedding": lambda e, bad: e.get_text_embedding(bad),
    "get_text_embedding_batch": lambda e, bad: e.get_text_embedding_batch(["fine"] * 5 + [bad]),
    "get_agg_embedding_from_queries": lambda e, bad: e.get_agg_embedding_from_queries(["fine", bad]),
    "aget_agg_embedding_from_queries": lambda e, bad: asyncio.run(e.aget_agg_embedding_from_queries(["fine", bad])),
    "aget_query_embedding": lambda e, bad: asyncio.run(e.aget_query_embedding(bad)),
    "aget_text_embedding": lambda e, bad: asyncio.run(e.aget_text_embedding(bad)),
    "aget_text_embedding_batch": lambda e, bad: asyncio.run(e.aget_text_embedding_batch(["fine", bad])),
    "embed_document_windows": lambda e, bad: e.embed_document_windows(["fine", bad]),
}


@pytest.mark.parametrize("unreadable", sorted(UNREADABLE))
@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_embed_method_refuses_an_unreadable_text_before_the_model_runs(
    embedder: FairEmbedder, call: str, unreadable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, message = UNREADABLE[unreadable]
    embedding = FairEmbedding(embedder=embedder, embed_batch_size=2)
    ran: list[int] = []

    def forward(*args: Any, **kwargs: Any) -> Any:
        ran.append(1)
        raise AssertionError("the model ran")

    monkeypatch.setattr(embedder, "_run_model", forward, raising=False)
    monkeypatch.setattr(embedder, "_embed_documents", forward)
    monkeypatch.setattr(embedder, "_embed", forward)
    with pytest.raises(ValueError, match=message) as e:
        CALLS[call](embedding, text)
    assert "\n" not in str(e.value) and ran == []
