"""FairEmbedding in the pipeline LlamaIndex users run: SentenceSplitter() defaults, chunks longer than the window."""

from __future__ import annotations

import numpy as np
import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.ingestion import IngestionPipeline
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.schema import MetadataMode
from llama_index.embeddings.fair import FairEmbedding
from llama_index.embeddings.huggingface import HuggingFaceEmbedding

from fair_retrieval import FairEmbedder


@pytest.fixture(scope="module")
def long_document() -> Document:
    """About 3,000 tokens of Python's own docs: SentenceSplitter() cuts it into chunks of ~1,000 tokens."""
    from fair_retrieval.evaluation.data.needle import haystack_sentences

    sentences = haystack_sentences()[:300]
    return Document(text=" ".join(sentences), id_="pydoc")


def test_default_pipeline_embeds_every_token_of_every_node(minilm_path: str, long_document: Document) -> None:
    embedding = FairEmbedding(model=minilm_path)  # the model's 256-token window, LlamaIndex's default splitter
    pipeline = IngestionPipeline(transformations=[SentenceSplitter(), embedding])
    nodes = pipeline.run(documents=[long_document])
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    lengths = embedding.embedder.token_lengths(texts)
    assert len(nodes) > 1 and max(lengths) > 900  # SentenceSplitter's chunks are about four windows long
    report = embedding.embedder.last_report
    assert report is not None and report.truncated == 0 and report.cut_tokens == 0 and report.windowed >= 1
    direct = FairEmbedder(embedding.embedder.model).embed_documents(texts)
    np.testing.assert_allclose(np.array([node.embedding for node in nodes]), direct, atol=1e-5)


def test_truncate_policy_gives_the_vectors_of_huggingface_embedding(minilm_path: str, long_document: Document) -> None:
    nodes = SentenceSplitter().get_nodes_from_documents([long_document])
    texts = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in nodes]
    anchor = np.array(HuggingFaceEmbedding(model_name=minilm_path).get_text_embedding_batch(texts))
    truncating = FairEmbedding(model=minilm_path, long_documents="truncate", calibration=None)
    np.testing.assert_allclose(np.array(truncating.get_text_embedding_batch(texts)), anchor, atol=1e-5)
    windows = FairEmbedding(embedder=FairEmbedder(truncating.embedder.model, calibration=None))
    windowed = np.array(windows.get_text_embedding_batch(texts))
    assert float(np.min(np.sum(windowed * anchor, axis=1))) < 0.99  # windows change long chunks


def test_text_splitter_counts_model_tokens_and_fills_one_window(minilm_path: str, long_document: Document) -> None:
    embedding = FairEmbedding(model=minilm_path)
    splitter = embedding.text_splitter()
    assert (splitter.chunk_size, splitter.chunk_overlap) == (254, 32)
    nodes = splitter.get_nodes_from_documents([long_document])
    lengths = embedding.embedder.token_lengths([node.get_content() for node in nodes])
    assert max(lengths) <= 256 and np.median(lengths) > 200
    for node in nodes:
        assert long_document.text[node.start_char_idx : node.end_char_idx] == node.get_content()
    index = VectorStoreIndex(nodes, embed_model=embedding)
    assert embedding.embedder.last_report is not None and embedding.embedder.last_report.windowed == 0
    assert index.as_retriever(similarity_top_k=3).retrieve("What does the raise statement do?")
    small = embedding.text_splitter(chunk_size=64, chunk_overlap=0)
    assert (small.chunk_size, small.chunk_overlap) == (64, 0)
    with pytest.raises(ValueError, match="chunk overlap"):
        embedding.text_splitter(chunk_size=64, chunk_overlap=64)


def test_long_document_options_are_fields_and_refused_with_a_ready_embedder(minilm_path: str) -> None:
    embedding = FairEmbedding(model=minilm_path, long_documents="truncate", window_overlap=16)
    assert (embedding.long_documents, embedding.window_overlap) == ("truncate", 16)
    assert embedding.embedder.long_documents == "truncate"
    with pytest.raises(ValueError, match="window_overlap"):
        FairEmbedding(embedder=embedding.embedder, window_overlap=8)
    with pytest.raises(ValueError, match="long_documents must be one of"):
        FairEmbedding(model=minilm_path, long_documents="cut")
