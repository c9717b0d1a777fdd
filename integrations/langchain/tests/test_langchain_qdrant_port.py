"""langchain-qdrant's documented workflow, ported: the calls its guide shows (a store over a client, documents added
with UUIDs, deleted, searched with and without Qdrant's own filter, with scores, through an MMR retriever; a store
made by `from_documents` in memory and in a local folder, in dense retrieval mode, reopened by
`from_existing_collection`) run unchanged against `FairQdrantVectorStore` imported under langchain-qdrant's name;
the calls that cannot mean the same here (a collection created by hand, an external sparse model, a filter on
"page_content") are refused naming the fix."""

from __future__ import annotations

import enum
import hashlib
import math
from pathlib import Path
from uuid import uuid4

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings

pytest.importorskip("qdrant_client")
from langchain_fair import FairQdrantVectorStore as QdrantVectorStore
from qdrant_client import QdrantClient, models
from qdrant_client.http.models import Distance, VectorParams


class RetrievalMode(str, enum.Enum):
    """langchain-qdrant's enum, as its users import it (its values are what the store takes)."""

    DENSE = "dense"
    SPARSE = "sparse"
    HYBRID = "hybrid"


class WordEmbeddings(Embeddings):
    """Hashed bags of words: texts sharing words are near (a stand-in for the guide's hosted embeddings)."""

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * 64
        for word in text.lower().replace(".", " ").replace("?", " ").split():
            vector[int.from_bytes(hashlib.blake2b(word.encode(), digest_size=2).digest(), "little") % 64] += 1.0
        norm = math.sqrt(sum(x * x for x in vector)) or 1.0
        return [x / norm for x in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)


NOTES = [
    ("We baked cinnamon rolls and drank coffee before the morning ferry.", "tweet"),
    ("The weather service expects a hot and dry weekend on the coast.", "news"),
    ("Building a retrieval pipeline with a vector store and a splitter is easy.", "tweet"),
    ("The harbour museum reopens on Monday with a new exhibit of old maps.", "news"),
    ("Our team won the five-a-side football match by two goals.", "tweet"),
    ("Robbery at the central bank: two suspects were arrested on Tuesday.", "news"),
    ("A new library of tools makes working with language models easy.", "tweet"),
    ("The best football players of the season, ranked by their goals.", "website"),
    ("Markets fell after the central bank raised rates again.", "news"),
    ("This note will be deleted again.", "tweet"),
]


def test_the_guides_calls_run_unchanged(tmp_path: Path) -> None:
    embeddings = WordEmbeddings()

    # -- a store over a client (the collection is created by the store's first add)
    client = QdrantClient(":memory:")
    vector_store = QdrantVectorStore(client=client, collection_name="demo_collection", embedding=embeddings)
    documents = [Document(page_content=text, metadata={"source": source}) for text, source in NOTES]
    uuids = [str(uuid4()) for _ in range(len(documents))]
    assert vector_store.add_documents(documents=documents, ids=uuids) == uuids
    assert vector_store.delete(ids=[uuids[-1]]) is True

    results = vector_store.similarity_search("a library that makes working with language models easy", k=2)
    assert len(results) == 2 and results[0].page_content == NOTES[6][0] and results[0].metadata == {"source": "tweet"}

    results = vector_store.similarity_search(
        "working with models is easy",
        k=2,
        filter=models.Filter(
            must=[models.FieldCondition(key="metadata.source", match=models.MatchValue(value="tweet"))]
        ),
    )
    assert len(results) == 2 and all(result.metadata["source"] == "tweet" for result in results)

    results = vector_store.similarity_search_with_score(query="Will it be hot this weekend?", k=1)
    ((document, score),) = results
    assert document.page_content == NOTES[1][0] and 0.0 < score <= 1.0

    retriever = vector_store.as_retriever(search_type="mmr", search_kwargs={"k": 1})
    assert [found.page_content for found in retriever.invoke("robbery at the bank")] == [NOTES[5][0]]
    assert [found.page_content for found in vector_store.get_by_ids(uuids[:2])] == [NOTES[0][0], NOTES[1][0]]
    assert vector_store.get_by_ids([uuids[-1]]) == []  # deleted

    # -- from_documents, in memory, dense retrieval mode
    docs = documents[:-1]
    qdrant = QdrantVectorStore.from_documents(
        docs, embeddings, location=":memory:", collection_name="my_documents", retrieval_mode=RetrievalMode.DENSE
    )
    query = "Who are the best football players?"
    found_docs = qdrant.similarity_search(query)
    assert len(found_docs) == 4 and found_docs[0].page_content == NOTES[7][0]
    assert qdrant.retrieval_mode == RetrievalMode.DENSE

    # -- from_documents into a local folder, then from_existing_collection
    folder = str(tmp_path / "local_qdrant")
    qdrant = QdrantVectorStore.from_documents(docs, embeddings, path=folder, collection_name="my_documents")
    expected = [doc.page_content for doc in qdrant.similarity_search(query)]
    qdrant.client.close()
    qdrant = QdrantVectorStore.from_existing_collection(
        embedding=embeddings, collection_name="my_documents", path=folder
    )
    assert [doc.page_content for doc in qdrant.similarity_search(query)] == expected
    found = qdrant.max_marginal_relevance_search(query, k=2, fetch_k=10)
    assert len(found) == 2 and found[0].page_content == NOTES[7][0]
    qdrant.client.close()


def test_what_cannot_mean_the_same_here_is_refused_by_name() -> None:
    embeddings = WordEmbeddings()
    client = QdrantClient(":memory:")
    client.create_collection(
        collection_name="demo_collection", vectors_config=VectorParams(size=64, distance=Distance.COSINE)
    )
    with pytest.raises(ValueError, match=r"not made by a fair-retrieval store.*Give another collection_name"):
        QdrantVectorStore(client=client, collection_name="demo_collection", embedding=embeddings)
    with pytest.raises(ValueError, match="sparse_embedding"):
        QdrantVectorStore.from_texts(
            ["a"], embeddings, location=":memory:", collection_name="s", sparse_embedding=object(),
            retrieval_mode=RetrievalMode.HYBRID,
        )  # fmt: skip
    store = QdrantVectorStore.from_texts([text for text, _ in NOTES], embeddings, location=":memory:")
    text = models.FieldCondition(key="page_content", match=models.MatchValue(value=NOTES[0][0]))
    with pytest.raises(ValueError, match="'page_content' reads a payload key this store's points do not hold"):
        store.similarity_search("coffee", k=1, filter=models.Filter(should=[text]))


@pytest.mark.filterwarnings("ignore:Local mode performs exact")  # qdrant-client's note: local mode is exact anyway
def test_search_params_per_call_as_langchain_qdrant_takes_them(monkeypatch: pytest.MonkeyPatch) -> None:
    """`search_params=` of one call reaches Qdrant for that call's dense searches (every search method and the
    retriever), and only for it; a value that is no `models.SearchParams` is a TypeError before any search."""
    store = QdrantVectorStore.from_texts([text for text, _ in NOTES], WordEmbeddings(), location=":memory:")
    client = store.client
    seen: list[object] = []
    for name in ("query_points", "query_points_groups"):
        original = getattr(client, name)

        def spy(*args: object, _original: object = original, **kwargs: object) -> object:
            seen.append(kwargs.get("search_params"))
            return _original(*args, **kwargs)  # type: ignore[operator]

        monkeypatch.setattr(client, name, spy)
    exact = models.SearchParams(exact=True)
    store.similarity_search("coffee", k=2, search_params=exact, retrieval_mode="dense")
    store.similarity_search_with_score("coffee", k=2, search_params=exact)  # hybrid: its dense side
    store.max_marginal_relevance_search("coffee", k=2, search_params=exact)
    store.as_retriever(search_kwargs={"k": 2, "search_params": exact}).invoke("coffee")
    dense_calls = [params for params in seen if params is not None]
    assert len(dense_calls) >= 4 and all(params == exact for params in dense_calls)
    seen.clear()
    store.similarity_search("coffee", k=2, retrieval_mode="dense")
    assert exact not in seen  # the next call has the store's own again
    with pytest.raises(TypeError, match=r"search_params must be a qdrant_client models\.SearchParams"):
        store.similarity_search("coffee", search_params={"hnsw_ef": 128})
