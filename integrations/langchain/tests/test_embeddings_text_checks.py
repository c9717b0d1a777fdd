"""FairEmbeddings checks every text and query before the model runs: a lone surrogate, a NUL character and a text
over the size limit are refused with the library's one-line ValueError (not the tokenizer's TextEncodeInput error,
nor a silently dropped character or minutes of tokenizing) by every public embed method."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any

import pytest
from langchain_fair import FairEmbeddings

from fair_retrieval import FairEmbedder

CALLS: dict[str, Callable[[FairEmbeddings, str], Any]] = {
    "embed_query": lambda e, bad: e.embed_query(bad),
    "embed_documents": lambda e, bad: e.embed_documents(["fine", bad]),
    "embed_document_windows": lambda e, bad: e.embed_document_windows(["fine", bad]),
    "aembed_query": lambda e, bad: asyncio.run(e.aembed_query(bad)),
    "aembed_documents": lambda e, bad: asyncio.run(e.aembed_documents(["fine", bad])),
}
UNREADABLE = {
    "surrogate": ("ferry \ud800 stop", r"holds a lone surrogate '\\ud800' at character 6"),
    "nul": ("ferry \x00 stop", r"holds a NUL character \('\\x00'\) at character 6, .*text\.replace"),
    "size": ("x" * ((8 << 20) + 1), r"holds 8388609 bytes, more than the 8388608 a text may have"),
}
WHERE = {"embed_query": "the query", "aembed_query": "the query"}


@pytest.fixture(scope="module")
def embedder(tiny_model: str) -> FairEmbedder:
    return FairEmbedder(tiny_model, max_length=32, device="cpu")


@pytest.mark.parametrize("unreadable", sorted(UNREADABLE))
@pytest.mark.parametrize("call", sorted(CALLS))
def test_every_embed_method_refuses_an_unreadable_text_before_the_model_runs(
    embedder: FairEmbedder, call: str, unreadable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    text, message = UNREADABLE[unreadable]
    embeddings = FairEmbeddings(embedder=embedder)

    def forward(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the model ran")

    monkeypatch.setattr(embedder, "_embed_documents", forward)
    monkeypatch.setattr(embedder, "_embed", forward)
    where = WHERE.get(call, "texts[1]")
    with pytest.raises(ValueError, match=rf"^{re.escape(where)} {message}") as raised:
        CALLS[call](embeddings, text)
    assert "\n" not in str(raised.value)
