"""FairEmbeddings checks every text and query before the model runs: a lone surrogate is refused with the library's
one-line ValueError (not the tokenizer's TextEncodeInput error) by every public embed method."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_fair import FairEmbeddings

from fair_retrieval import FairEmbedder

CALLS: dict[str, Callable[[FairEmbeddings], Any]] = {
    "embed_query": lambda e: e.embed_query("ferry \ud800 stop"),
    "embed_documents": lambda e: e.embed_documents(["fine", "ferry \ud800 stop"]),
    "embed_document_windows": lambda e: e.embed_document_windows(["fine", "ferry \ud800 stop"]),
    "aembed_query": lambda e: asyncio.run(e.aembed_query("ferry \ud800 stop")),
    "aembed_documents": lambda e: asyncio.run(e.aembed_documents(["fine", "ferry \ud800 stop"])),
}
WHERE = {"embed_query": "the query", "aembed_query": "the query"}


@pytest.fixture(scope="module")
def embedder(tiny_model: str) -> FairEmbedder:
    return FairEmbedder(tiny_model, max_length=32, device="cpu")


@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_embed_method_refuses_a_lone_surrogate_before_the_model_runs(
    embedder: FairEmbedder, call: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    embeddings = FairEmbeddings(embedder=embedder)

    def forward(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model ran")

    monkeypatch.setattr(embedder, "_embed_documents", forward)
    monkeypatch.setattr(embedder, "_embed", forward)
    where = WHERE.get(call, "texts[1]")
    with pytest.raises(
        ValueError, match=rf"^{re.escape(where)} holds a lone surrogate '\\ud800' at character 6"
    ) as raised:
        CALLS[call](embeddings)
    assert "\n" not in str(raised.value)
