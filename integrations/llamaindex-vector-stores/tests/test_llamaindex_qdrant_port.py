"""llama-index's Qdrant store, as its guides use it, ported: the calls they show (a store over a client, an index from
documents, retrievers with `MetadataFilters` and with Qdrant's own filter in `vector_store_kwargs`, written for
llama-index's payload layout, a hybrid retriever of a store made with `enable_hybrid`, an index reopened from the
store, a deleted source document, a local folder, an async client beside the client) run unchanged against
`FairQdrantVectorStore` imported under llama-index's name; an external sparse model is refused naming the fix."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
import qdrant_client
from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores import FilterCondition, FilterOperator, MetadataFilter, MetadataFilters
from llama_index.embeddings.fair import FairEmbedding
from llama_index.vector_stores.fair import FairQdrantVectorStore as QdrantVectorStore
from qdrant_client.http.models import FieldCondition, Filter, MatchValue, Range

from fair_retrieval import FairEmbedder

FILMS = [
    ("The Godfather", {"director": "Francis Ford Coppola", "theme": "Mafia", "year": 1972}),
    ("Inception", {"director": "Christopher Nolan", "theme": "Fiction", "year": 2010}),
    ("The Shawshank Redemption", {"author": "Stephen King", "theme": "Friendship", "year": 1994}),
    ("Pulp Fiction", {"director": "Quentin Tarantino", "theme": "Mafia", "year": 1994}),
    ("To Kill a Mockingbird", {"author": "Harper Lee", "theme": "Justice", "year": 1960}),
    ("1984", {"author": "George Orwell", "theme": "Totalitarianism", "year": 1949}),
    ("The Great Gatsby", {"author": "F. Scott Fitzgerald", "theme": "The American Dream", "year": 1925}),
    ("Harry Potter and the Sorcerer's Stone", {"author": "J.K. Rowling", "theme": "Fiction", "year": 1997}),
]


@pytest.fixture
def embed_model(tiny_model: str) -> FairEmbedding:
    model = FairEmbedding(embedder=FairEmbedder(tiny_model, max_length=32, device="cpu"))
    previous = Settings._embed_model
    Settings.embed_model = model  # as the guides set it: the store takes the global model
    yield model
    Settings._embed_model = previous


def titles(nodes: list) -> list[str]:
    return sorted(node.node.get_content() for node in nodes)


def test_the_guides_calls_run_unchanged(embed_model: FairEmbedding, tmp_path: Path) -> None:
    # -- a store over a client, an index of nodes
    client = qdrant_client.QdrantClient(location=":memory:")
    nodes = [TextNode(text=title, metadata=metadata) for title, metadata in FILMS]
    vector_store = QdrantVectorStore(client=client, collection_name="test_collection_1")
    storage_context = StorageContext.from_defaults(vector_store=vector_store)
    index = VectorStoreIndex(nodes, storage_context=storage_context)

    filters = MetadataFilters(filters=[MetadataFilter(key="theme", operator=FilterOperator.EQ, value="Mafia")])
    retriever = index.as_retriever(filters=filters)
    assert titles(retriever.retrieve("What is inception about?")) == ["Pulp Fiction", "The Godfather"]

    filters = MetadataFilters(
        filters=[MetadataFilter(key="theme", value="Mafia"), MetadataFilter(key="year", value=1972)]
    )
    assert titles(index.as_retriever(filters=filters).retrieve("Mafia films")) == ["The Godfather"]

    filters = MetadataFilters(
        filters=[
            MetadataFilter(key="theme", value="Fiction"),
            MetadataFilter(key="year", value=1997, operator=FilterOperator.GT),
        ],
        condition=FilterCondition.OR,
    )
    retriever = index.as_retriever(filters=filters, similarity_top_k=10)
    assert titles(retriever.retrieve("Harry Potter?")) == ["Harry Potter and the Sorcerer's Stone", "Inception"]

    # Qdrant's own filter, its keys as llama-index's store lays out the payload (the metadata at its top)
    filters = Filter(
        should=[
            Filter(
                must=[
                    FieldCondition(key="theme", match=MatchValue(value="Mafia")),
                    FieldCondition(key="year", range=Range(gt=1970)),
                ]
            )
        ]
    )
    retriever = index.as_retriever(vector_store_kwargs={"qdrant_filters": filters}, similarity_top_k=10)
    assert titles(retriever.retrieve("Who was the director?")) == ["Pulp Fiction", "The Godfather"]

    # -- an index of documents, hybrid retrieval, the index reopened from the store, a source document deleted
    documents = [Document(text=f"{title}: a film of {meta['theme']}.", doc_id=title) for title, meta in FILMS]
    vector_store = QdrantVectorStore("films", client=client, enable_hybrid=True, batch_size=20)
    storage_context = StorageContext.from_defaults(vector_store=vector_store)
    index = VectorStoreIndex.from_documents(documents, storage_context=storage_context)
    retriever = index.as_retriever(similarity_top_k=2, sparse_top_k=12, vector_store_query_mode="hybrid")
    assert "Inception" in retriever.retrieve("Inception")[0].node.get_content()
    by_source = Filter(must=[FieldCondition(key="doc_id", match=MatchValue(value="Inception"))])
    kept = index.as_retriever(vector_store_kwargs={"qdrant_filters": by_source}).retrieve("film")
    assert [node.node.ref_doc_id for node in kept] == ["Inception"]

    index = VectorStoreIndex.from_vector_store(vector_store=vector_store)
    index.delete_ref_doc("Inception")
    found = index.as_retriever(similarity_top_k=10).retrieve("Inception")
    assert len(found) == 7 and all("Inception" not in node.node.get_content() for node in found)

    # -- a local folder, reopened by a second client after the first is closed
    client = qdrant_client.QdrantClient(path=str(tmp_path / "qdrant_data"))
    vector_store = QdrantVectorStore(client=client, collection_name="films")
    index = VectorStoreIndex.from_documents(
        documents, storage_context=StorageContext.from_defaults(vector_store=vector_store)
    )
    expected = titles(index.as_retriever(similarity_top_k=3).retrieve("The Godfather"))
    client.close()
    client = qdrant_client.QdrantClient(path=str(tmp_path / "qdrant_data"))
    index = VectorStoreIndex.from_vector_store(vector_store=QdrantVectorStore(client=client, collection_name="films"))
    assert titles(index.as_retriever(similarity_top_k=3).retrieve("The Godfather")) == expected
    client.close()


def test_an_async_client_beside_the_client_and_async_calls_off_the_event_loop(
    embed_model: FairEmbedding, caplog: pytest.LogCaptureFixture
) -> None:
    """llama-index's guides pass client= and aclient= together: taken, the async calls (aquery, async_add, ...) run
    the store's calls in a worker thread, never blocking the event loop; aclient= alone is refused naming client=."""
    client = qdrant_client.QdrantClient(location=":memory:")
    with caplog.at_level("INFO"):
        store = QdrantVectorStore("films", client=client, aclient=qdrant_client.AsyncQdrantClient(location=":memory:"))
    assert "aclient taken" in caplog.text
    index = VectorStoreIndex([], storage_context=StorageContext.from_defaults(vector_store=store))
    nodes = [TextNode(text=title, metadata=metadata) for title, metadata in FILMS]
    threads: set[int] = set()
    original = store.query

    def recorded(*args: object, **kwargs: object) -> object:
        threads.add(threading.get_ident())
        return original(*args, **kwargs)  # type: ignore[arg-type]

    object.__setattr__(store, "query", recorded)

    async def main() -> list[list[str]]:
        await index.ainsert_nodes(nodes)
        retriever = index.as_retriever(similarity_top_k=2)
        ticks = 0

        async def ticking() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(ticking())
        found = await asyncio.gather(*(retriever.aretrieve(title) for title, _ in FILMS[:4]))
        ticker.cancel()
        assert ticks > 0  # the loop ran other tasks while the queries ran
        return [titles(hits) for hits in found]

    found = asyncio.run(main())
    assert all(len(hits) == 2 for hits in found) and "The Godfather" in found[0]
    assert threads and threading.get_ident() not in threads
    with pytest.raises(ValueError, match=r"pass client= .* beside aclient="):
        QdrantVectorStore("films", aclient=qdrant_client.AsyncQdrantClient(location=":memory:"))


def test_what_cannot_mean_the_same_here_is_refused_by_name(embed_model: FairEmbedding) -> None:
    client = qdrant_client.QdrantClient(location=":memory:")
    with pytest.raises(ValueError, match="fastembed_sparse_model"):
        QdrantVectorStore("films", client=client, enable_hybrid=True, fastembed_sparse_model="Qdrant/bm25")
