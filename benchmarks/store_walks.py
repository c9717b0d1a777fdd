"""The walk of one add and one search through each stack's vector store, in hops (docs/guides/layout.md's table).

A hop is a call from one module of our code (`fair_retrieval`, `langchain_fair`, `llama_index.*.fair`) into
another, properties included, counted by running the call under `sys.setprofile`; the layers below the stores
(embedding, engine, index, lexical, inputs, jsonio, validate, text_checks) are not followed: entering one counts
once. The setting: the default model (MiniLM), a multi-vector store of 4 documents, 4 more added, then a query for
k = 3 with a metadata filter (LlamaIndex's also without one). Prints each count with the distinct caller → callee
module pairs in brackets; `--show` prints every hop.

    python benchmarks/store_walks.py [--show]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from types import FrameType
from typing import Any

OURS = ("fair_retrieval", "langchain_fair", "llama_index.vector_stores.fair", "llama_index.embeddings.fair")
BELOW = tuple(
    f"fair_retrieval.{name}"
    for name in ("embedding", "engine", "index", "lexical", "inputs", "jsonio", "validate", "text_checks")
)


def _within(name: str | None, prefixes: tuple[str, ...]) -> bool:
    return name is not None and any(name == prefix or name.startswith(prefix + ".") for prefix in prefixes)


def hops(call: Callable[[], Any], show: bool = False) -> tuple[int, int]:
    """How many hops `call` makes, and how many distinct (caller module, callee module) pairs they are."""
    count = 0
    pairs: set[tuple[str, str]] = set()
    below: list[bool] = []  # per open frame: whether it runs inside a layer below the stores

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        nonlocal count
        if event == "call":
            callee = frame.f_globals.get("__name__")
            caller = frame.f_back.f_globals.get("__name__") if frame.f_back is not None else None
            inside = bool(below) and below[-1]
            if not inside and _within(callee, OURS) and _within(caller, OURS) and callee != caller:
                count += 1
                pairs.add((str(caller), str(callee)))
                if show:
                    print(f"  {caller} -> {callee}.{frame.f_code.co_name}")
            below.append(inside or _within(callee, BELOW))
        elif event == "return" and below:
            below.pop()

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return count, len(pairs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--show", action="store_true", help="print every hop")
    show = parser.parse_args().show
    logging.disable(logging.WARNING)
    from langchain_fair import FairEmbeddings, FaissVectorStore
    from llama_index.core.schema import MetadataMode, TextNode
    from llama_index.core.vector_stores.types import MetadataFilter, MetadataFilters, VectorStoreQuery
    from llama_index.embeddings.fair import FairEmbedding
    from llama_index.vector_stores.fair import FairFaissVectorStore

    from fair_retrieval.evaluation.default_model import bundled_model

    model = bundled_model()
    texts = [f"Document {i} talks about topic {i}. " * (3 + i) for i in range(8)]
    metadatas = [{"n": i, "kind": "even" if i % 2 == 0 else "odd"} for i in range(8)]

    walks: list[tuple[str, Callable[[], Any]]] = []
    embeddings = FairEmbeddings(model=model)  # type: ignore[call-arg]  # pydantic fields
    store = FaissVectorStore(embeddings, gpu=False)
    store.add_texts(texts[:4], metadatas[:4])
    assert store.multivector
    walks.append(("LangChain add_texts", lambda: store.add_texts(texts[4:], metadatas[4:])))
    walks.append(
        (
            "LangChain similarity_search with a filter",
            lambda: store.similarity_search("topic 3", k=3, filter={"kind": "even"}),
        )
    )

    embed_model = FairEmbedding(model)
    vector_store = FairFaissVectorStore(embed_model=embed_model, gpu=False)
    nodes = [
        TextNode(text=text, id_=f"n{i}", metadata=meta)
        for i, (text, meta) in enumerate(zip(texts, metadatas, strict=True))
    ]
    for half in (nodes[:4], nodes[4:]):
        contents = [node.get_content(metadata_mode=MetadataMode.EMBED) for node in half]
        for node, vector in zip(half, embed_model.get_text_embedding_batch(contents), strict=True):
            node.embedding = vector
    vector_store.add(nodes[:4])
    walks.append(("LlamaIndex add of 4 embedded nodes", lambda: vector_store.add(nodes[4:])))
    query_vector = embed_model.get_query_embedding("topic 3")
    even = MetadataFilters(filters=[MetadataFilter(key="kind", value="even")])
    filtered = VectorStoreQuery(query_embedding=query_vector, similarity_top_k=3, filters=even)
    walks.append(("LlamaIndex query with a filter", lambda: vector_store.query(filtered)))
    plain = VectorStoreQuery(query_embedding=query_vector, similarity_top_k=3)
    walks.append(("LlamaIndex query", lambda: vector_store.query(plain)))
    for name, call in walks:
        if show:
            print(f"{name}:")
        count, pairs = hops(call, show)
        print(f"{name}: {count} ({pairs})")


if __name__ == "__main__":
    main()
