"""Fixtures of the evaluation tests: the MiniLM tokenizer as a token counter, fixture folders, a fake embedder."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.fixture(scope="session")
def count_tokens(minilm: str):  # type: ignore[no-untyped-def]
    """MiniLM's token counter (special tokens included), as the builders get it from FairEmbedder."""
    from transformers import AutoTokenizer

    from fair_retrieval.evaluation.data.tokens import tokenizer_counter

    return tokenizer_counter(AutoTokenizer.from_pretrained(minilm))


@pytest.fixture
def fixtures() -> Path:
    """Folder of the committed fixture files."""
    return FIXTURES


def shared_data_or_skip(*parts: str) -> Path:
    """A path inside ../shared/data, or skip the test with the reason."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"shared evaluation data not found at {path} (it lives beside the checkout, not in the repo)")
    return path


class FakeEmbedder:
    """Deterministic bag-of-words embeddings; counts calls. Calibrated documents get a fixed twist of the vector.

    Fast stand-in for a model where a test checks plumbing (caching, runs, reports), not model quality.
    """

    model_name = "fake-bow"
    pooling = "mean"
    max_length = 512
    num_layers = 2

    def __init__(self, dim: int = 64) -> None:
        self.dim = dim
        self.document_calls = 0
        self.query_calls = 0

    def _vector(self, text: str, twist: float) -> np.ndarray:
        vector = np.zeros(self.dim, dtype=np.float32)
        words = text.lower().split()
        for position, word in enumerate(words):
            bucket = int(hashlib.md5(word.strip(".,?!").encode()).hexdigest(), 16) % self.dim
            # plain: early words weigh more (a position bias); calibrated by `twist` flattens it
            vector[bucket] += 1.0 / (1.0 + (1.0 - twist) * position / 8)
        norm = np.linalg.norm(vector)
        return vector / norm if norm else vector

    def embed_documents(self, texts: Sequence[str], calibration=None, show_progress_bar=None):  # type: ignore[no-untyped-def]
        self.document_calls += 1
        twist = 0.0 if calibration is None else calibration.strength
        return np.stack([self._vector(t, twist) for t in texts])

    def embed_queries(self, texts: Sequence[str], show_progress_bar=None):  # type: ignore[no-untyped-def]
        self.query_calls += 1
        return np.stack([self._vector(t, 1.0) for t in texts])

    def token_lengths(self, texts: Sequence[str], task: str = "document") -> list[int]:
        return [len(t.split()) + 2 for t in texts]


@pytest.fixture
def fake_embedder() -> FakeEmbedder:
    """A fresh fake embedder."""
    return FakeEmbedder()
