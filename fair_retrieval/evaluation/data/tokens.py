"""Counting tokens as the model under test does, so token budgets and answer positions are what the model sees.

Task builders take a `TokenCounter` rather than a tokenizer: the CLI passes `FairEmbedder.token_lengths`, tests and
scripts wrap a Hugging Face tokenizer with `tokenizer_counter`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

# Counts tokens (special tokens included) of each text, e.g. `FairEmbedder.token_lengths`.
TokenCounter = Callable[[Sequence[str]], list[int]]


def tokenizer_counter(tokenizer: Any) -> TokenCounter:
    """Wrap a Hugging Face tokenizer as a `TokenCounter` (special tokens included, no truncation)."""

    def count(texts: Sequence[str]) -> list[int]:
        if not texts:
            return []
        encoded = tokenizer(list(texts), add_special_tokens=True, truncation=False, verbose=False)
        return [len(ids) for ids in encoded["input_ids"]]

    return count
