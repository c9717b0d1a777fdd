"""End-to-end tests of llama-index-embeddings-fair: FairEmbedding in VectorStoreIndex, default and FAISS stores."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.schema import MetadataMode, TextNode
from llama_index.embeddings.fair import FairEmbedding

from fair_retrieval import Calibration, FairEmbedder
from fair_retrieval.embedding.loading import DEFAULT_MODEL

PACKAGE = Path(__file__).resolve().parents[1]


def _nodes(texts: list[str]) -> list[TextNode]:
    return [TextNode(text=text, id_=f"doc-{position}") for position, text in enumerate(texts)]


def _answer_ranks(index: VectorStoreIndex, queries: list[str], answer_ids: list[str], k: int) -> list[int]:
    retriever = index.as_retriever(similarity_top_k=k)
    ranks = []
    for query, answer_id in zip(queries, answer_ids, strict=True):
        hits = [hit.node.node_id for hit in retriever.retrieve(query)]
        ranks.append(hits.index(answer_id) + 1 if answer_id in hits else k + 1)
    return ranks


def _mrr(ranks: list[int]) -> float:
    return sum(1.0 / rank for rank in ranks) / len(ranks)


# ---------------------------------------------------------------------------------------------------- packaging


def test_namespace_packages_have_no_init_file() -> None:
    # PEP 420: other llama-index distributions share llama_index/ and llama_index/embeddings/.
    assert not (PACKAGE / "llama_index" / "__init__.py").exists()
    assert not (PACKAGE / "llama_index" / "embeddings" / "__init__.py").exists()
    import llama_index.embeddings.fair as fair

    assert fair.FairEmbedding is FairEmbedding
    assert FairEmbedding.class_name() == "FairEmbedding"


# ---------------------------------------------------------------------------------------------------- vectors


@pytest.fixture(scope="module")
def indexes(minilm: FairEmbedder, late_case) -> dict[str, VectorStoreIndex]:
    """The late-answer corpus indexed twice through LlamaIndex: calibrated (FairEmbedding) and plain."""
    nodes = _nodes(late_case.documents)
    return {
        # embed_batch_size=8: 30 nodes reach the embedder as LlamaIndex batches of 8, 8, 8 and 6.
        "fair": VectorStoreIndex(nodes, embed_model=FairEmbedding(embedder=minilm, embed_batch_size=8)),
        "plain": VectorStoreIndex(nodes, embed_model=FairEmbedding(embedder=minilm, calibration=None)),
    }


def test_stored_vectors_are_calibrated_documents_and_queries_are_plain(
    minilm: FairEmbedder, late_case, indexes: dict[str, VectorStoreIndex]
) -> None:
    sample = [0, 7, 13, 29]  # a few documents from different LlamaIndex batches
    texts = [late_case.documents[position] for position in sample]
    node_ids = [f"doc-{position}" for position in sample]
    fair, plain = indexes["fair"], indexes["plain"]
    assert [fair.docstore.get_node(i).get_content(metadata_mode=MetadataMode.EMBED) for i in node_ids] == texts

    stored = np.array([fair.vector_store.get(node_id) for node_id in node_ids], dtype=np.float32)
    stored_plain = np.array([plain.vector_store.get(node_id) for node_id in node_ids], dtype=np.float32)
    np.testing.assert_allclose(stored, minilm.embed_documents(texts), atol=1e-6)
    np.testing.assert_allclose(stored_plain, minilm.embed_documents(texts, calibration=None), atol=1e-6)
    assert np.abs(stored - stored_plain).max() > 1e-3  # calibration really changed the long documents

    query = late_case.queries[0]
    query_vector = minilm.embed_queries([query])[0]
    embed_model = fair._embed_model
    np.testing.assert_allclose(embed_model.get_query_embedding(query), query_vector, atol=1e-6)
    # The retriever scores with exactly that plain query vector against the calibrated document vectors.
    hits = {hit.node.node_id: hit.score for hit in fair.as_retriever(similarity_top_k=30).retrieve(query)}
    for node_id, vector in zip(node_ids, stored, strict=True):
        assert hits[node_id] == pytest.approx(float(vector @ query_vector), abs=1e-5)


def test_late_answers_rank_higher_than_with_the_plain_model(late_case, indexes: dict[str, VectorStoreIndex]) -> None:
    answer_ids = [f"doc-{position}" for position in late_case.answer_of]
    k = len(late_case.documents)
    fair_ranks = _answer_ranks(indexes["fair"], late_case.queries, answer_ids, k)
    plain_ranks = _answer_ranks(indexes["plain"], late_case.queries, answer_ids, k)

    improved = sum(f < p for f, p in zip(fair_ranks, plain_ranks, strict=True))
    worsened = sum(f > p for f, p in zip(fair_ranks, plain_ranks, strict=True))
    assert _mrr(fair_ranks) > _mrr(plain_ranks), (fair_ranks, plain_ranks)
    assert improved > worsened, (fair_ranks, plain_ranks)


# ---------------------------------------------------------------------------------------------------- stores


def test_faiss_vector_store_persists_and_loads(minilm: FairEmbedder, late_case, tmp_path: Path) -> None:
    import faiss
    from llama_index.vector_stores.faiss import FaissVectorStore

    texts = late_case.documents[:4]
    embed_model = FairEmbedding(embedder=minilm)
    store = FaissVectorStore(faiss_index=faiss.IndexFlatIP(minilm.dimension))
    index = VectorStoreIndex(
        _nodes(texts), storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
    )
    stored = store.client.reconstruct_n(0, store.client.ntotal)
    np.testing.assert_allclose(stored, minilm.embed_documents(texts), atol=1e-6)

    query = late_case.queries[0]
    before = [(hit.node.node_id, hit.score) for hit in index.as_retriever(similarity_top_k=3).retrieve(query)]
    index.storage_context.persist(persist_dir=str(tmp_path))

    loaded_store = FaissVectorStore.from_persist_dir(str(tmp_path))
    context = StorageContext.from_defaults(vector_store=loaded_store, persist_dir=str(tmp_path))
    loaded = load_index_from_storage(context, embed_model=embed_model)
    after = [(hit.node.node_id, hit.score) for hit in loaded.as_retriever(similarity_top_k=3).retrieve(query)]
    assert [node_id for node_id, _ in after] == [node_id for node_id, _ in before]
    np.testing.assert_allclose([score for _, score in after], [score for _, score in before], atol=1e-6)
    assert loaded.docstore.get_node(after[0][0]).get_content() in texts


# ---------------------------------------------------------------------------------------------------- API details


def test_batches_go_to_the_embedder_whole_and_respect_embed_batch_size(tiny_model: str) -> None:
    embed_model = FairEmbedding(tiny_model, embed_batch_size=2)
    assert embed_model.embedder.batch_size == 2  # loading by name: also the forward-pass batch size
    sizes: list[int] = []
    original = embed_model.embedder.embed_document_windows  # the one pass that gives pooled and window vectors

    def spy(texts, *args, **kwargs):  # type: ignore[no-untyped-def]
        sizes.append(len(texts))
        return original(texts, *args, **kwargs)

    embed_model.embedder.embed_document_windows = spy  # type: ignore[method-assign]
    vectors = embed_model.get_text_embedding_batch(["one", "two", "three", "four", "five"])
    assert sizes == [2, 2, 1]
    assert len(vectors) == 5
    np.testing.assert_allclose(
        vectors, embed_model.embedder.embed_documents(["one", "two", "three", "four", "five"]), atol=1e-6
    )


def test_an_embed_model_keeps_nothing_of_the_texts_it_embedded(tiny_model: str) -> None:
    embed_model = FairEmbedding(tiny_model, max_length=32)
    fields, private = dict(embed_model.__dict__), dict(embed_model.__pydantic_private__ or {})
    texts = [f"text number {i} " * (1 + i % 7) for i in range(40)]  # some several windows long
    first = embed_model.get_text_embedding_batch(texts)
    assert embed_model.__dict__ == fields and set(embed_model.__pydantic_private__ or {}) == set(private)
    assert all(embed_model.__pydantic_private__[name] is value for name, value in private.items())  # type: ignore[index]
    assert not hasattr(embed_model, "window_cache")
    np.testing.assert_array_equal(embed_model.get_text_embedding_batch(texts), first)


def test_async_variants_match_sync(tiny_model: str) -> None:
    embed_model = FairEmbedding(tiny_model, calibration=Calibration(basket_size=2))
    texts = ["a somewhat longer first text", "a second text", "third"]

    async def run() -> tuple[list[list[float]], list[float], list[float]]:
        batch = await embed_model.aget_text_embedding_batch(texts)
        single = await embed_model.aget_text_embedding(texts[0])
        query = await embed_model.aget_query_embedding("a query")
        return batch, single, query

    batch, single, query = asyncio.run(run())
    np.testing.assert_allclose(batch, embed_model.get_text_embedding_batch(texts), atol=1e-6)
    np.testing.assert_allclose(single, embed_model.get_text_embedding(texts[0]), atol=1e-6)
    np.testing.assert_allclose(query, embed_model.get_query_embedding("a query"), atol=1e-6)


def test_calibration_defaults_and_overrides(tiny_model: str) -> None:
    loaded = FairEmbedding(tiny_model)
    assert loaded.calibration == Calibration()
    shared = FairEmbedder(tiny_model, calibration=Calibration(strength=0.8))
    assert FairEmbedding(embedder=shared).calibration == Calibration(strength=0.8)  # the embedder's own
    assert FairEmbedding(embedder=shared, calibration=None).calibration is None
    texts = ["one text that is long enough", "another"]
    np.testing.assert_allclose(
        FairEmbedding(embedder=shared, calibration=None).get_text_embedding_batch(texts),
        shared.embed_documents(texts, calibration=None),
        atol=1e-6,
    )


def test_to_dict_round_trip(tiny_model: str) -> None:
    embed_model = FairEmbedding(tiny_model, calibration=Calibration(strength=0.7, layers=(1, 3)), max_length=64)
    data = embed_model.to_dict()
    assert data["class_name"] == "FairEmbedding"
    assert data["calibration"]["strength"] == 0.7
    restored = FairEmbedding.from_dict(data)
    assert restored.calibration == embed_model.calibration
    assert (restored.model_name, restored.max_length, restored.pooling) == (tiny_model, 64, "mean")


def test_bad_arguments_give_clear_errors(tiny_model: str) -> None:
    shared = FairEmbedder(tiny_model)
    with pytest.raises(ValueError, match="not both"):
        FairEmbedding(tiny_model, embedder=shared)
    with pytest.raises(TypeError, match="FairEmbedder"):
        FairEmbedding(embedder="not an embedder")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"max_length.*on the FairEmbedder"):
        FairEmbedding(embedder=shared, max_length=128)
    with pytest.raises(TypeError, match="calibration"):
        FairEmbedding(embedder=shared, calibration="strong")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="disagree"):
        FairEmbedding(tiny_model, model_name="another-model")


def test_bad_texts_give_clear_errors(tiny_model: str) -> None:
    embed_model = FairEmbedding(tiny_model)
    with pytest.raises(TypeError, match=r"texts\[1\] is NoneType"):
        embed_model.get_text_embedding_batch(["fine", None])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="text must be a str"):
        embed_model.get_query_embedding(None)  # type: ignore[arg-type]
    assert embed_model.get_text_embedding_batch([]) == []  # LlamaIndex's contract: nothing in, nothing out


def test_no_model_loads_the_default_model_as_huggingface_embedding_does() -> None:
    embed_model = FairEmbedding()
    assert embed_model.model_name == DEFAULT_MODEL
    assert embed_model.embedder.dimension == 384 and embed_model.calibration == Calibration()
    assert len(embed_model.get_text_embedding("The ferry leaves at nine.")) == 384
