"""FairEmbeddings in the pipeline LangChain users run: the default splitter's 4,000-character chunks, our store."""

from __future__ import annotations

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_fair import FairEmbeddings, FaissVectorStore
from langchain_huggingface import HuggingFaceEmbeddings
from langchain_text_splitters import RecursiveCharacterTextSplitter

from fair_retrieval import FairEmbedder


@pytest.fixture(scope="module")
def long_text() -> str:
    from fair_retrieval.evaluation.data.needle import haystack_sentences

    return " ".join(haystack_sentences()[:300])


def test_default_splitter_chunks_are_embedded_whole(minilm_path: str, long_text: str) -> None:
    embeddings = FairEmbeddings(model=minilm_path)
    chunks = RecursiveCharacterTextSplitter(add_start_index=True).split_documents([Document(page_content=long_text)])
    store = FaissVectorStore.from_documents(chunks, embeddings)
    report = embeddings.fair_embedder.last_report
    assert report is not None and report.windowed == len(chunks) > 1 and report.cut_tokens == 0
    texts = [chunk.page_content for chunk in chunks]
    np.testing.assert_allclose(
        np.array(embeddings.embed_documents(texts)), FairEmbedder(embeddings.fair_embedder.model).embed_documents(texts)
    )
    assert store.similarity_search("What does the raise statement do?", k=2)


def test_truncate_policy_gives_the_vectors_of_huggingface_embeddings(minilm_path: str, long_text: str) -> None:
    texts = RecursiveCharacterTextSplitter().split_text(long_text)
    anchor = np.array(HuggingFaceEmbeddings(model_name=minilm_path).embed_documents(texts))
    truncating = FairEmbeddings(model=minilm_path, long_documents="truncate", calibration=None)
    np.testing.assert_allclose(np.array(truncating.embed_documents(texts)), anchor, atol=1e-5)
    assert truncating.fair_embedder.last_report is not None and truncating.fair_embedder.last_report.truncated > 0


def test_text_splitter_counts_model_tokens_and_keeps_true_offsets(minilm_path: str, long_text: str) -> None:
    embeddings = FairEmbeddings(model=minilm_path)
    splitter = embeddings.text_splitter()
    documents = splitter.split_documents([Document(page_content=long_text, metadata={"source": "pydoc"})])
    lengths = embeddings.fair_embedder.token_lengths([d.page_content for d in documents])
    assert max(lengths) <= 256 and np.median(lengths) > 200
    for document in documents:  # LangChain's own create_documents gives -1 for about half of these
        start = document.metadata["start_index"]
        assert long_text[start : start + len(document.page_content)] == document.page_content
        assert document.metadata["source"] == "pydoc"
    with pytest.raises(ValueError, match="chunk size"):
        embeddings.text_splitter(chunk_size=0)


def test_long_document_fields_are_validated(minilm_path: str) -> None:
    embeddings = FairEmbeddings(model=minilm_path, long_documents="truncate", window_overlap=4)
    assert embeddings.fair_embedder.long_documents == "truncate" and embeddings.fair_embedder.window_overlap == 4
    with pytest.raises(ValueError, match="long_documents"):
        FairEmbeddings(model=minilm_path, long_documents="cut")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="long_documents"):
        FairEmbeddings(embedder=embeddings.fair_embedder, long_documents="windows")
