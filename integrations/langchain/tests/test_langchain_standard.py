"""LangChain's standard test suites (langchain-tests) for FairEmbeddings and FaissVectorStore."""

from __future__ import annotations

from collections.abc import Generator
from functools import cache
from typing import Any

import pytest
from langchain_core.vectorstores import VectorStore
from langchain_fair import FairEmbeddings, FaissVectorStore
from langchain_tests.integration_tests import EmbeddingsIntegrationTests, VectorStoreIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from fair_retrieval import FairEmbedder


@cache
def _shared_minilm() -> FairEmbedder:
    from tests.models import minilm_path

    return FairEmbedder(minilm_path(), max_length=512, device="cpu")


class TestFairEmbeddingsUnit(EmbeddingsUnitTests):
    @property
    def embeddings_class(self) -> type[FairEmbeddings]:
        return FairEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        from tests.models import minilm_path

        return {"model": minilm_path(), "max_length": 512, "device": "cpu"}


class TestFairEmbeddingsIntegration(EmbeddingsIntegrationTests):
    @property
    def embeddings_class(self) -> type[FairEmbeddings]:
        return FairEmbeddings

    @property
    def embedding_model_params(self) -> dict[str, Any]:
        return {"embedder": _shared_minilm()}  # one loaded model for the whole suite


class TestFaissVectorStoreStandard(VectorStoreIntegrationTests):
    @pytest.fixture
    def vectorstore(self) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        yield FaissVectorStore(embedding=self.get_embeddings(), gpu=False)


class TestFaissVectorStoreStandardHnswL2(VectorStoreIntegrationTests):
    """The same contract on another index kind and metric (HNSW deletes by rebuilding its graph)."""

    @pytest.fixture
    def vectorstore(self) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        yield FaissVectorStore(embedding=self.get_embeddings(), metric="l2", kind="hnsw", gpu=False)
