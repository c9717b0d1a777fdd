"""FairFaissVectorStore's query modes through LlamaIndex's own entry points: `as_retriever(vector_store_query_mode=
"hybrid" | "sparse" | "text_search", alpha=, sparse_top_k=, hybrid_top_k=)`, the store's `default_query_mode`, and
the lexical side kept equal to the nodes through inserts, deletes, upserts and a persist / load."""

from __future__ import annotations

import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.schema import QueryBundle, TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery, VectorStoreQueryMode
from llama_index.vector_stores.fair import FairFaissVectorStore

from fair_retrieval.lexical import fuse
from fair_retrieval.stores import LexicalSettings

pytest.importorskip("bm25s")

DIM = 12
TEXTS = {
    "ferry": "The ferry leaves the harbour at dawn and crosses the bay.",
    "train": "The night train runs north through the mountains.",
    "bread": "Bake the bread slowly in a stone oven.",
    "harbour": "Fishing boats fill the old harbour every evening.",
    "oven": "A stone oven keeps its heat for hours.",
}


def _vector(text: str) -> list[float]:
    return np.random.default_rng(zlib.crc32(text.encode())).standard_normal(DIM).tolist()  # type: ignore[no-any-return]


class TableEmbedding(BaseEmbedding):
    """A fixed random vector per text, counting the query embeddings."""

    query_calls: int = 0

    def _get_text_embedding(self, text: str) -> list[float]:
        return _vector(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        self.query_calls += 1
        return _vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)


def _index(**options: Any) -> tuple[VectorStoreIndex, FairFaissVectorStore, TableEmbedding]:
    embed = TableEmbedding()
    store = FairFaissVectorStore.create(DIM, embed_model=embed, **options)
    nodes = [TextNode(id_=key, text=text) for key, text in TEXTS.items()]
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed)
    return index, store, embed


def _ids(retriever: Any, question: str) -> list[str]:
    return [hit.node.node_id for hit in retriever.retrieve(question)]


def test_sparse_and_text_search_retrieve_by_the_nodes_words() -> None:
    index, _, _ = _index()
    for mode in ("sparse", "text_search"):
        found = _ids(index.as_retriever(vector_store_query_mode=mode, similarity_top_k=3), "stone oven")
        assert set(found) == {"bread", "oven"}, mode
    sparse_k = index.as_retriever(vector_store_query_mode="sparse", similarity_top_k=5, sparse_top_k=1)
    assert len(_ids(sparse_k, "stone oven")) == 1
    assert _ids(index.as_retriever(vector_store_query_mode="sparse"), "zebra") == []


def test_hybrid_is_the_fusion_of_the_dense_and_the_sparse_results() -> None:
    index, store, _ = _index(fusion="relative_score")
    question = "harbour ferry"
    retriever = index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=3, alpha=0.4)
    hits = retriever.retrieve(question)
    dense = store.query(VectorStoreQuery(query_embedding=_vector(question), similarity_top_k=20))
    sparse = store.query(VectorStoreQuery(query_str=question, similarity_top_k=20, mode=VectorStoreQueryMode.SPARSE))
    expected = fuse(
        list(zip(dense.ids or [], dense.similarities or [], strict=True)),
        list(zip(sparse.ids or [], sparse.similarities or [], strict=True)),
        3,
        fusion="relative_score",
        alpha=0.4,
    )
    assert [(hit.node.node_id, pytest.approx(hit.score)) for hit in hits] == [
        (i, pytest.approx(s)) for i, s in expected
    ]
    top = index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=5, hybrid_top_k=2)
    assert len(_ids(top, question)) == 2


def _qdrant_index(**options: Any) -> tuple[VectorStoreIndex, Any, TableEmbedding]:
    pytest.importorskip("qdrant_client")
    from llama_index.vector_stores.fair import FairQdrantVectorStore

    embed = TableEmbedding()
    store = FairQdrantVectorStore(location=":memory:", collection_name="nodes", embed_model=embed, **options)
    nodes = [TextNode(id_=key, text=text) for key, text in TEXTS.items()]
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed)
    return index, store, embed


def _scored(retriever: Any, question: str) -> list[tuple[str, float]]:
    return [(hit.node.node_id, hit.score or 0.0) for hit in retriever.retrieve(question)]


@pytest.mark.parametrize("build", [_index, _qdrant_index], ids=["faiss", "qdrant"])
def test_a_query_that_names_no_mode_is_answered_by_the_hybrid_and_dense_is_one_option_away(build: Any) -> None:
    index, store, _ = build()
    for question in ("harbour ferry", "stone oven", "zebra"):
        hybrid = _scored(index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=3), question)
        assert _scored(index.as_retriever(similarity_top_k=3), question) == hybrid
        engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=3)
        assert [(hit.node.node_id, hit.score) for hit in engine.query(question).source_nodes] == hybrid
    vector_only = store.query(VectorStoreQuery(query_embedding=_vector("oven"), similarity_top_k=5))
    assert len(vector_only.ids or []) == 5  # a query without text is answered by its vector
    for opt_out in ("dense", "default", VectorStoreQueryMode.DEFAULT):
        dense_index, dense_store, _ = build(default_query_mode=opt_out)
        query = VectorStoreQuery(query_embedding=_vector("stone oven"), similarity_top_k=3)
        by_vector = dense_store.query(query)
        found = _scored(dense_index.as_retriever(similarity_top_k=3), "stone oven")
        assert found == list(zip(by_vector.ids or [], by_vector.similarities or [], strict=True))


def test_the_default_query_mode_is_the_stores_and_follows_a_persist(tmp_path: Path) -> None:
    index, store, embed = _index(default_query_mode="hybrid", alpha=0.0, fusion="rrf")
    lexical_only = _ids(index.as_retriever(similarity_top_k=2), "stone oven")  # α 0: the BM25 order
    assert set(lexical_only) == {"bread", "oven"}
    index.storage_context.persist(persist_dir=str(tmp_path))
    loaded = FairFaissVectorStore.from_persist_dir(str(tmp_path), embed_model=embed)
    assert loaded._store.search_settings == store._store.search_settings
    again = VectorStoreIndex.from_vector_store(loaded, embed_model=embed)
    assert _ids(again.as_retriever(similarity_top_k=2), "stone oven") == lexical_only
    vector_only = loaded.query(VectorStoreQuery(query_embedding=_vector("oven"), similarity_top_k=5))
    assert len(vector_only.ids or []) == 5  # a query without text is answered by its vector


def test_writes_keep_the_lexical_side_equal_to_the_nodes() -> None:
    embed = TableEmbedding()
    store = FairFaissVectorStore.create(DIM, embed_model=embed)
    index = VectorStoreIndex.from_documents(
        [Document(text=t, id_=k) for k, t in TEXTS.items()],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed,
    )
    sparse = index.as_retriever(vector_store_query_mode="sparse", similarity_top_k=5)

    def documents(question: str) -> set[str]:
        return {hit.node.ref_doc_id for hit in sparse.retrieve(question)}

    assert documents("bread") == {"bread"}
    index.delete_ref_doc("bread")
    assert documents("bread") == set()
    index.insert(Document(text="Rye bread from the mill.", id_="mill"))
    assert documents("bread") == {"mill"}
    node = TextNode(id_=store.node_ids[0], text="Cheese from the valley.", embedding=_vector("cheese"))
    store.add([node])  # replaces the stored node of that id
    assert {hit.node.node_id for hit in sparse.retrieve("cheese")} == {node.node_id}
    store.clear()
    assert documents("cheese") == set()


def test_metadata_filters_and_node_ids_restrict_the_sparse_side() -> None:
    _, store, _ = _index()
    query = VectorStoreQuery(
        query_str="stone oven", similarity_top_k=5, mode=VectorStoreQueryMode.SPARSE, node_ids=["oven", "train"]
    )
    assert store.query(query).ids == ["oven"]


def test_non_english_nodes_with_their_language() -> None:
    embed = TableEmbedding()
    store = FairFaissVectorStore.create(DIM, embed_model=embed, lexical=LexicalSettings(language="spanish"))
    nodes = [TextNode(id_="a", text="Los trenes nocturnos cruzan las montañas."), TextNode(id_="b", text="El pan.")]
    index = VectorStoreIndex(nodes, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed)
    assert _ids(index.as_retriever(vector_store_query_mode="sparse"), "tren nocturno") == ["a"]


def test_bad_query_mode_arguments_are_refused_with_the_fix() -> None:
    with pytest.raises(ValueError, match="default_query_mode must be one of"):
        FairFaissVectorStore.create(DIM, default_query_mode="svm")
    with pytest.raises(ValueError, match="fusion must be one of"):
        FairFaissVectorStore.create(DIM, fusion="max")
    with pytest.raises(ValueError, match="alpha must be"):
        FairFaissVectorStore.create(DIM, alpha=-1)
    _, store, _ = _index()
    with pytest.raises(ValueError, match="needs query_str"):
        store.query(VectorStoreQuery(query_embedding=_vector("x"), similarity_top_k=2, mode="hybrid"))
    with pytest.raises(ValueError, match=r"answers VectorStoreQueryMode\.DEFAULT"):
        store.query(VectorStoreQuery(query_embedding=_vector("x"), query_str="x", mode="svm"))
    with pytest.raises(ValueError, match="empty"):
        store.query(VectorStoreQuery(query_str="", mode="sparse"))
    bundle = QueryBundle(query_str="ferry", embedding=_vector("ferry"))
    assert _ids(VectorStoreIndex.from_vector_store(store, embed_model=TableEmbedding()).as_retriever(), bundle)
