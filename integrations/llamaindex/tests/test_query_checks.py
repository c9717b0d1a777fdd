"""FairEmbedding checks a query as documents are checked: a lone surrogate (a non-UTF-8 byte read from a command line)
is refused with a clear ValueError instead of the tokenizer's TextEncodeInput error."""

from __future__ import annotations

import pytest
from llama_index.embeddings.fair import FairEmbedding


def test_a_query_with_a_lone_surrogate_is_refused_clearly(minilm_path: str) -> None:
    embedding = FairEmbedding(model=minilm_path)
    with pytest.raises(ValueError, match="surrogate"):
        embedding.get_query_embedding("caf\udce9")
    assert len(embedding.get_query_embedding("café")) == 384
