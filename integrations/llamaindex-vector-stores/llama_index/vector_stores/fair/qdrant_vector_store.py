"""FairQdrantVectorStore: the default store (best windows + BM25 beside them) in a Qdrant collection, for LlamaIndex.

The store logic is `fair_retrieval.stores.QdrantStore`'s (the stores' door over a Qdrant collection); the node calls
are the FAISS store's own base class (`.node_store`), so both stores answer the same queries with the same arguments.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.vector_stores.types import BasePydanticVectorStore, VectorStoreQueryMode
from llama_index.vector_stores.fair.node_records import StoredNode, head_node, node_head, node_metadata, node_text
from llama_index.vector_stores.fair.node_store import NodeStore, search_mode
from llama_index.vector_stores.fair.persist_files import STORE_FORMAT, settings_embed_model

from fair_retrieval.stores import LexicalSettings, QdrantStore, StoreMetric, StoreWindows, WrappedStore

logger = logging.getLogger(__name__)

__all__ = ["FairQdrantVectorStore"]

NAME = "FairQdrantVectorStore"


class FairQdrantVectorStore(NodeStore, WrappedStore, BasePydanticVectorStore):
    """A LlamaIndex vector store whose nodes live in a Qdrant collection, kept as `FairFaissVectorStore` keeps them.

    Each node is kept as the vectors of its windows (the FAISS store's default windows, from the same code) and its
    BM25 terms; a query returns k distinct nodes, each found by its best window (Qdrant's grouped search), the best
    window under `BEST_WINDOW_KEY` in its metadata; SPARSE, TEXT_SEARCH and HYBRID queries score BM25 inside Qdrant
    and fuse as the FAISS store does; `MetadataFilters`, `node_ids` and `doc_ids` become Qdrant filters evaluated in
    the engine.

    Args:
        collection_name: the collection: opened when it exists (its recorded settings taken, the embed model
            checked against them), else created on the first add. First, as in llama-index's Qdrant store
            (`FairQdrantVectorStore("docs", client=client)`); `(client, "docs")`, this store's earlier order, works too.
        client: a `qdrant_client.QdrantClient`; or None with `url`, `path` or `location` (":memory:").
        embed_model: what embeds the nodes (a `FairEmbedding` gives windows: a multi-vector store); None: the one
            set in `Settings.embed_model` when it gives windows, else a pooled store.
        metric: "cosine" (None, the default), "ip" or "l2"; an existing collection's own when None.
        multivector: keep nodes as their windows (None: multi-vector over a `FairEmbedding`).
        windows: the windows a multi-vector store keeps (`StoreWindows`); None: the FAISS store's default.
        default_query_mode: how a DEFAULT query with text is answered: "hybrid", "default" or "dense" (the vectors
            only: the opt-out) or "sparse"; None: the collection's recorded mode, else hybrid.
        alpha: the dense side's weight in a hybrid fusion.
        fusion: how hybrid fuses: "relative_score", "rrf" or "dist_based_score".
        lexical: how BM25 reads the nodes (`LexicalSettings`; Lucene's variant, whole texts).
        search_params: `qdrant_client.models.SearchParams` for dense searches (HNSW ef, exact, rescoring).
        collection_options: keyword arguments of `create_collection` for a new collection (hnsw_config,
            quantization_config, shard_number, replication_factor, on_disk_payload; on_disk for the vectors).
        allow_embedder_mismatch: open a collection made by another embedder configuration anyway (a WARNING).
        url: a server's URL, where the client is made when `client` is None.
        path: a local-mode folder, instead.
        location: ":memory:" (or a URL), instead.
        api_key: the server's API key.
        batch_size: points per upsert request.
        client_kwargs: more `QdrantClient` keywords (port, prefer_grpc, timeout, ...) where the client is made here.
        enable_hybrid: llama-index's Qdrant store's switch for sparse vectors: taken (True or False; BM25 is built in,
            scored in the engine, and `vector_store_query_mode` picks per query as there), an INFO line says so.
        aclient: llama-index's Qdrant store's async client, taken beside `client` (or `url`, `path`, `location`):
            the async calls run the store's calls in a worker thread, so both must reach the same collection.
        **anchor: llama-index's Qdrant store's text_key, dense_vector_name, sparse_vector_name,
            fastembed_sparse_model, sparse_doc_fn, sparse_query_fn and hybrid_fusion_fn: refused with the
            reason (this store's layout, BM25 and fusion are its own; tune them with lexical= and fusion=).

    Raises:
        TypeError: a client that is no `QdrantClient`, or a multi-vector store's embed model gives no windows.
        ValueError: as `fair_retrieval.stores.QdrantStore`, no collection_name, or `aclient` without a client.
    """

    stores_text: bool = True
    is_embedding_query: bool = True

    _store: QdrantStore[StoredNode] = PrivateAttr()

    def __init__(
        self,
        collection_name: str | None = None,
        client: Any = None,
        *,
        embed_model: Any | None = None,
        metric: StoreMetric | None = None,
        multivector: bool | None = None,
        windows: StoreWindows | None = None,
        default_query_mode: VectorStoreQueryMode | str | None = None,
        alpha: float | None = None,
        fusion: str | None = None,
        lexical: LexicalSettings | None = None,
        search_params: Any = None,
        collection_options: Mapping[str, Any] | None = None,
        allow_embedder_mismatch: bool = False,
        url: str | None = None,
        path: str | None = None,
        location: str | None = None,
        api_key: str | None = None,
        batch_size: int = 256,
        client_kwargs: Mapping[str, Any] | None = None,
        enable_hybrid: bool | None = None,
        aclient: Any = None,
        **anchor: Any,
    ) -> None:
        if isinstance(client, str) and not isinstance(collection_name, str):  # (client, name): this store's earlier
            client, collection_name = collection_name, client  # order, beside llama-index's (name, client)
        _check_anchor_options(anchor)
        if aclient is not None:
            if client is None and url is None and path is None and location is None:
                raise ValueError(
                    f"{NAME} makes its calls through a QdrantClient: pass client= (or url=, path=, location=) beside "
                    "aclient=, as llama-index's Qdrant store takes both."
                )
            logger.info(
                "%s: aclient taken beside the client; the async calls (aquery, async_add, adelete) run the client's "
                "calls in a worker thread, so both must reach the same collection.",
                NAME,
            )
        if enable_hybrid is not None:
            logger.info(
                "%s: enable_hybrid=%s taken; BM25 is built in (scored inside Qdrant), and vector_store_query_mode "
                "picks dense, sparse or hybrid per query.",
                NAME,
                enable_hybrid,
            )
        if collection_name is None:
            raise ValueError("Pass collection_name= (the Qdrant collection the nodes live in).")
        mode = search_mode(default_query_mode)
        if embed_model is None and multivector is not False:
            embed_model = settings_embed_model(say_pooled=multivector is None, store=NAME)
        store: QdrantStore[StoredNode] = QdrantStore.of_records(
            STORE_FORMAT,  # its rules; an earlier release's collection of this format (the node alone) opens too
            node_head,  # a head holds a node as LangChain's store and the command line read a document
            head_node,
            client=client,
            location=location,
            url=url,
            path=path,
            api_key=api_key,
            client_options=client_kwargs,
            batch_size=batch_size,
            collection_name=collection_name,
            search={"mode": mode, "alpha": alpha, "fusion": fusion},
            search_params=search_params,
            collection_options=collection_options,
            allow_embedder_mismatch=allow_embedder_mismatch,
            metadata_of=node_metadata,
            metric=metric,
            multivector=multivector,
            replaced_move_to_end=False,  # a replaced node keeps its place
            group_of=lambda record: record.doc_id,  # delete(ref_doc_id) removes a document's nodes
            name=NAME,
            embedder=embed_model,
            windows=windows,
            text_of=node_text,
            lexical=lexical,
        )
        try:
            store.check_window_source(
                "FairQdrantVectorStore(multivector=True) keeps each node as the vectors of its windows, which it takes "
                "from the embed model's pass: pass embed_model= (the FairEmbedding given to VectorStoreIndex)."
            )
            self._hold(store, stores_text=True)
        except BaseException:
            if client is None:  # made by the store: the caller never gets it (a local folder would stay locked)
                store.collection.client.close()
            raise

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this component under."""
        return NAME

    @property
    def client(self) -> Any:
        """The `QdrantClient`."""
        return self._store.collection.client

    @property
    def collection_name(self) -> str:
        """The collection's name."""
        return self._store.collection.name


_REFUSED = {
    "text_key": "the store keeps a node's text in its own record",
    "dense_vector_name": "the store names its own dense vector (a node's windows)",
    "sparse_vector_name": "the store names its own sparse vector",
    "fastembed_sparse_model": "the store scores BM25 itself, inside Qdrant; set its language, k1 and b with lexical=",
    "sparse_doc_fn": "the store scores BM25 itself, inside Qdrant; set its language, k1 and b with lexical=",
    "sparse_query_fn": "the store scores BM25 itself, inside Qdrant; set its language, k1 and b with lexical=",
    "hybrid_fusion_fn": "the store fuses by fusion= ('relative_score', 'rrf', 'dist_based_score') and alpha=",
}
"""llama-index's Qdrant store's keywords this store does not take, and why."""


def _check_anchor_options(options: Mapping[str, Any]) -> None:
    """Refuse llama-index's Qdrant store's layout keywords with the reason, and any other unknown keyword.

    Raises:
        ValueError: a layout keyword (the message says why and what to pass).
        TypeError: a keyword neither store takes.
    """
    for key in options:
        if key in _REFUSED:
            raise ValueError(f"{NAME} does not take {key}=: {_REFUSED[key]}.")
    if options:
        raise TypeError(f"{NAME}() got unexpected keyword argument(s) {', '.join(map(repr, sorted(options)))}.")
