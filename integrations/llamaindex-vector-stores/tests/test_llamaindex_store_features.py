"""FairFaissVectorStore where code written for llama-index's own stores expects it: loading a persisted index without
the store fails loudly, MMR query mode, `ref_doc_info`, and metric="cosine" as the LangChain store's."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex, load_index_from_storage
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores import SimpleVectorStore
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
from llama_index.vector_stores.fair import FairFaissVectorStore, persist_files

from fair_retrieval.stores.marginal_relevance import mmr_order

DIM = 8


def _vectors(count: int, seed: int = 0) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)  # type: ignore[no-any-return]


def _nodes(vectors: np.ndarray) -> list[TextNode]:
    return [
        TextNode(
            id_=f"n{position}",
            text=f"text {position}",
            embedding=vector.tolist(),
            relationships={NodeRelationship.SOURCE: RelatedNodeInfo(node_id=f"doc-{position // 2}")},
        )
        for position, vector in enumerate(vectors)
    ]


def _persisted_index(folder: Path) -> None:
    documents = [Document(text=f"note {i} about the harbour", id_=f"d{i}") for i in range(4)]
    storage = StorageContext.from_defaults(vector_store=FairFaissVectorStore(gpu=False, multivector=False))
    index = VectorStoreIndex.from_documents(documents, storage_context=storage, embed_model=MockEmbedding(embed_dim=8))
    index.storage_context.persist(str(folder))


def test_loading_without_the_store_fails_with_the_fix(tmp_path: Path) -> None:
    _persisted_index(tmp_path)
    with pytest.raises(ValueError, match=r"persisted by FairFaissVectorStore.*FairFaissVectorStore\.from_persist_dir"):
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(tmp_path)))  # was: an empty index
    store = FairFaissVectorStore.from_persist_dir(str(tmp_path), gpu=False)
    storage = StorageContext.from_defaults(vector_store=store, persist_dir=str(tmp_path))
    index = load_index_from_storage(storage, embed_model=MockEmbedding(embed_dim=8))
    assert len(index.as_retriever(similarity_top_k=4).retrieve("harbour")) == 4


def test_a_folder_persisted_before_still_loads_the_documented_way(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier = dataclasses.replace(persist_files.STORE_FORMAT, other_readers={})  # what earlier releases wrote
    monkeypatch.setattr(persist_files, "STORE_FORMAT", earlier)
    _persisted_index(tmp_path)
    monkeypatch.undo()
    assert "embedding_dict" not in json.loads((tmp_path / "default__vector_store.json").read_text(encoding="utf-8"))
    store = FairFaissVectorStore.from_persist_dir(str(tmp_path), gpu=False)
    storage = StorageContext.from_defaults(vector_store=store, persist_dir=str(tmp_path))
    index = load_index_from_storage(storage, embed_model=MockEmbedding(embed_dim=8))
    assert len(index.as_retriever(similarity_top_k=4).retrieve("harbour")) == 4
    index.storage_context.persist(str(tmp_path))  # persisted again: the guard is written
    with pytest.raises(ValueError, match="from_persist_dir"):
        load_index_from_storage(StorageContext.from_defaults(persist_dir=str(tmp_path)))


@pytest.mark.parametrize("threshold", [0.0, 0.3, 0.7, 1.0])
def test_mmr_mode_chooses_by_maximal_marginal_relevance(threshold: float) -> None:
    vectors = _vectors(40)
    store = FairFaissVectorStore(gpu=False)
    store.add(_nodes(vectors))
    simple = SimpleVectorStore()
    simple.add(_nodes(vectors))
    query = _vectors(1, seed=7)[0]
    asked = VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=6, mode=VectorStoreQueryMode.MMR)
    found = store.query(asked, mmr_threshold=threshold)
    assert found.ids == [f"n{position}" for position in mmr_order(query, vectors, 6, threshold)]
    assert found.similarities == pytest.approx([float(vectors[int(i[1:])] @ query) for i in found.ids], abs=1e-5)
    two = VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=2, mode=VectorStoreQueryMode.MMR)
    if threshold > 0:  # (at 0 SimpleVectorStore starts with the first node it holds, not the most similar)
        assert store.query(two, mmr_threshold=threshold).ids == simple.query(two, mmr_threshold=threshold).ids
    prefetched = store.query(asked, mmr_threshold=threshold, mmr_prefetch_k=10).ids
    nearest = [f"n{i}" for i in np.argsort(-(vectors @ query))[:10]]
    assert set(prefetched) <= set(nearest)


def test_a_retriever_in_mmr_mode_reads_vector_store_kwargs() -> None:
    vectors = _vectors(30)
    store = FairFaissVectorStore(gpu=False)
    store.add(_nodes(vectors))
    index = VectorStoreIndex.from_vector_store(store, embed_model=MockEmbedding(embed_dim=DIM))
    retriever = index.as_retriever(
        similarity_top_k=4, vector_store_query_mode="mmr", vector_store_kwargs={"mmr_threshold": 0.2}
    )
    query = np.asarray(MockEmbedding(embed_dim=DIM).get_query_embedding("q"), dtype=np.float32)
    expected = [f"n{position}" for position in mmr_order(query, vectors, 4, 0.2)]
    assert [hit.node.node_id for hit in retriever.retrieve("q")] == expected


def test_vector_store_kwargs_the_store_does_not_read_are_refused_by_name() -> None:
    store = FairFaissVectorStore(gpu=False)
    store.add(_nodes(_vectors(6)))
    index = VectorStoreIndex.from_vector_store(store, embed_model=MockEmbedding(embed_dim=DIM))
    for kwargs in ({"qdrant_filters": object()}, {"bogus": 1}, {"mmr_threshold": 0.2, "mmr_treshold": 0.3}):
        retriever = index.as_retriever(similarity_top_k=2, vector_store_kwargs=kwargs)
        with pytest.raises(TypeError, match="does not take") as caught:
            retriever.retrieve("q")
        assert "mmr_threshold" in str(caught.value) and "filters=MetadataFilters" in str(caught.value)
        assert ("is for FairQdrantVectorStore" in str(caught.value)) == ("qdrant_filters" in kwargs)


def test_ref_doc_info_with_nodes_in_the_docstore_and_llama_index_refusal_without() -> None:
    documents = [Document(text=f"note {i}", id_=f"d{i}") for i in range(3)]
    for override in (True, False):
        storage = StorageContext.from_defaults(vector_store=FairFaissVectorStore(gpu=False, multivector=False))
        index = VectorStoreIndex.from_documents(
            documents, storage_context=storage, embed_model=MockEmbedding(embed_dim=8), store_nodes_override=override
        )
        if override:
            info = index.ref_doc_info
            assert sorted(info) == ["d0", "d1", "d2"]
            assert all(set(item.node_ids) <= set(storage.vector_store.node_ids) for item in info.values())  # type: ignore[attr-defined]
        else:  # llama-index's own check for every store that keeps text (documented in the guide)
            with pytest.raises(NotImplementedError, match="store text in the vector store"):
                _ = index.ref_doc_info


def test_cosine_is_the_inner_product_of_unit_vectors() -> None:
    raw = np.random.default_rng(3).standard_normal((20, DIM)).astype(np.float32) * np.arange(1, 21)[:, None]
    nodes = _nodes(raw)
    cosine, inner = FairFaissVectorStore(gpu=False, metric="cosine"), FairFaissVectorStore(gpu=False, metric="ip")
    cosine.add(nodes)
    inner.add(_nodes(raw))
    query = raw[0] * 3
    found = cosine.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=5))
    units = raw / np.linalg.norm(raw, axis=1, keepdims=True)
    expected = units @ (query / np.linalg.norm(query))
    assert found.ids == [f"n{i}" for i in np.argsort(-expected)[:5]] and found.ids[0] == "n0"
    assert found.similarities == pytest.approx(np.sort(expected)[::-1][:5], abs=1e-5)
    assert cosine.metric == "cosine" and inner.query(VectorStoreQuery(query_embedding=query.tolist())).ids != found.ids


def test_index_parameters_the_kind_does_not_take_are_refused_when_the_store_is_built() -> None:
    # no size yet: the index is made on the first add, so its parameters are checked now, not then
    with pytest.raises(TypeError, match=r"kind='flat' takes no parameter\(s\) \['nlist'\]"):
        FairFaissVectorStore(gpu=False, nlist=8)
    with pytest.raises(ValueError, match="nprobe must be a positive int"):
        FairFaissVectorStore(gpu=False, kind="ivf", nprobe=0)
    assert FairFaissVectorStore(gpu=False, kind="ivf", nlist=2).client is None  # accepted; made on the first add
