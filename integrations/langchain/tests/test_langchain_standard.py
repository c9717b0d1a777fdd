"""LangChain's standard test suites (langchain-tests): FairEmbeddings, FaissVectorStore pooled and multi-vector."""

from __future__ import annotations

from collections.abc import Generator
from functools import cache
from typing import Any

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_fair import FairEmbeddings, FairQdrantVectorStore, FaissVectorStore
from langchain_tests.integration_tests import EmbeddingsIntegrationTests, VectorStoreIntegrationTests
from langchain_tests.unit_tests import EmbeddingsUnitTests

from fair_retrieval import DocumentWindows, FairEmbedder, MultiVectorIndex
from fair_retrieval.stores.best_window import BEST_WINDOW_KEY


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


class WordWindowEmbeddings(Embeddings):
    """The suite's fake embeddings, made to give window vectors: a text's windows are the whole text and each word.

    The suite embeds with `DeterministicFakeEmbedding` (a random vector per text), which gives no windows, and a
    multi-vector store needs `embed_document_windows`. Here a text of several words is stored as several windows,
    the whole text (so a query equal to a document's text still finds it first, as the suite expects) and one window
    per word, each the fake vector of its own text; `pooled` (and `embed_documents`) is their token-weighted mean, as
    `FairEmbedder.embed_document_windows` gives it. A search must then return distinct documents among windows of
    the same document ("new foo" has three), and a delete or an upsert must remove all of a document's windows.
    """

    def __init__(self, inner: Embeddings) -> None:
        self.inner = inner

    def embed_document_windows(self, texts: list[str]) -> DocumentWindows:
        vectors, owners, spans, weights = [], [], [], []
        for position, text in enumerate(texts):
            words = [(word, text.index(word)) for word in text.split()] if len(text.split()) > 1 else []
            pieces = [(text, 0, max(1, len(text.split())))] + [(word, start, 1) for word, start in words]
            for piece, start, weight in pieces:
                vectors.append(self.inner.embed_query(piece))
                owners.append(position)
                spans.append((start, start + len(piece)))
                weights.append(weight)
        window_vectors = np.asarray(vectors, dtype=np.float32)
        window_vectors /= np.linalg.norm(window_vectors, axis=1, keepdims=True)
        owner_array = np.asarray(owners, dtype=np.int64)
        pooled = np.zeros((len(texts), window_vectors.shape[1]))
        np.add.at(pooled, owner_array, window_vectors * np.asarray(weights, dtype=np.float64)[:, None])
        pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
        return DocumentWindows(
            pooled.astype(np.float32),
            window_vectors,
            owner_array,
            np.asarray(spans, dtype=np.int64).reshape(-1, 2),
            np.asarray(weights, dtype=np.int64),
        )

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return self.embed_document_windows(texts).pooled.tolist()  # type: ignore[no-any-return]

    def embed_query(self, text: str) -> list[float]:
        return self.inner.embed_query(text)


class BestWindowChecking:
    """A multi-vector store whose search results' best windows are checked, then removed.

    The suite compares whole `Document`s, metadata included, with the documents it added; a multi-vector store adds
    the best window's span under "best_window" to each result the dense side found (a copy; a hybrid hit found by
    BM25 alone has none). Every search entry point (dense, hybrid, MMR, the async ones) ends in `_documents`: here it
    checks each window is inside its text and drops it, so the suite's comparisons test everything else (order,
    distinct documents, deletes, upserts). That dense hits always carry one is tested in test_store_multivector.py.
    """

    @staticmethod
    def _documents(found: Any) -> list[tuple[Document, float]]:
        documents = FaissVectorStore._documents(found)
        for document, _ in documents:
            window = document.metadata.pop(BEST_WINDOW_KEY, None)
            if window is not None:
                assert 0 <= window["start"] < window["end"] <= len(document.page_content) and window["window"] >= 0
        return documents


class BestWindowCheckingStore(BestWindowChecking, FaissVectorStore):
    """`BestWindowChecking` over the FAISS store."""


class BestWindowCheckingQdrantStore(BestWindowChecking, FairQdrantVectorStore):
    """`BestWindowChecking` over the Qdrant store."""


class TestFaissVectorStoreStandardMultiVector(VectorStoreIntegrationTests):
    """The same contract in multi-vector mode (the suite's fake embeddings given windows: `WordWindowEmbeddings`)."""

    @pytest.fixture
    def vectorstore(self) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        store = BestWindowCheckingStore(WordWindowEmbeddings(self.get_embeddings()), multivector=True, gpu=False)
        yield store
        assert store.index is None or isinstance(store.index, MultiVectorIndex)
        if store.index is not None:  # every stored document is its windows, and only those of stored documents
            assert len(store.index) == len(store)


class TestFaissVectorStoreStandardMultiVectorTop2L2(TestFaissVectorStoreStandardMultiVector):
    """Multi-vector mode with another aggregate, metric and index kind."""

    @pytest.fixture
    def vectorstore(self) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        yield BestWindowCheckingStore(
            WordWindowEmbeddings(self.get_embeddings()),
            multivector=True,
            aggregate="top2",
            metric="l2",
            kind="hnsw",
            gpu=False,
        )


class TestFairQdrantVectorStoreStandard(VectorStoreIntegrationTests):
    """The contract on the Qdrant store, pooled (the suite's fake embeddings give no windows), local mode."""

    @pytest.fixture
    def vectorstore(self) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        from qdrant_client import QdrantClient

        yield FairQdrantVectorStore(QdrantClient(":memory:"), "standard", self.get_embeddings())


class TestFairQdrantVectorStoreStandardMultiVector(VectorStoreIntegrationTests):
    """The contract on the Qdrant store in multi-vector mode (`WordWindowEmbeddings`): distinct documents by their
    best window, every window of a document deleted and replaced with it."""

    @pytest.fixture
    def vectorstore(self) -> Generator[VectorStore, None, None]:  # type: ignore[override]
        from qdrant_client import QdrantClient

        embeddings = WordWindowEmbeddings(self.get_embeddings())
        yield BestWindowCheckingQdrantStore(QdrantClient(":memory:"), "standard", embeddings, multivector=True)
