"""FairFaissVectorStore: a LlamaIndex vector store on fair_retrieval's FaissIndex, with delete, upsert and filters.

llama-index-vector-stores-faiss' plain `FaissVectorStore` cannot delete (so `IngestionPipeline` upserts fail) and
refuses metadata filters. This store keeps its vectors in a `fair_retrieval.FaissIndex` (GPU when faiss sees one,
CPU otherwise) under int64 ids it hands out, one per LlamaIndex node id (a node keeps its int id while it is
stored, also when it is replaced and across persist / load), and keeps the nodes themselves. That bookkeeping (the
id map, the nodes by int id, the nodes of each document, upserts, deletes, restricted searches, saving the store
file with its index) is `fair_retrieval.stores`', shared with the LangChain store; this package translates
LlamaIndex's types to it: nodes (`llama_index.vector_stores.fair.nodes`), filters (`.filters`), the persisted files
(`.persistence`, the store's base class) and folders of the earlier store (`.legacy`).

Design choices, and why:

- It stores text (`stores_text=True`): nodes, with their text, metadata and relationships, live in the store as
  LlamaIndex serialises them (`BaseNode.to_dict()`, the docstore's JSON form), without their embedding (that is in
  the index). `VectorStoreIndex` then needs no docstore for text, queries return nodes, and a folder persisted by
  `StorageContext.persist` restores everything with `from_persist_dir`. As with every store that keeps text,
  `VectorStoreIndex` still puts `ImageNode`s and `IndexNode`s into its docstore too.
- A node's document is its `ref_doc_id`, or its own id when it has no source (as `IngestionPipeline` counts them):
  `delete(ref_doc_id)` removes every node of that document, which is what upserts need.
- `add` upserts: a node id already stored is replaced (vector, text and metadata).
- Filters are llama-index `MetadataFilters` on the nodes' metadata, translated to `fair_retrieval.stores.filters` (the
  grammar the LangChain store uses), and the search runs over the matching nodes only (`FaissIndex.search(...,
  ids=...)`), so a filtered query returns `similarity_top_k` nodes whenever that many match. Operators with no
  equivalent there are refused with a ValueError naming them, never answered with a silently empty result.
- Scores are those of the index: inner products for metric "ip" (cosine for FairEmbedding's unit vectors, larger
  is better), squared L2 distances for "l2" (smaller is better, as llama-index's FaissVectorStore returns them).

Multi-vector mode (`multivector=True`, with `embed_model=` a `FairEmbedding`): a node is kept as the vectors of its
windows (the embedder's own windows, calibrated where calibration applies) in a `fair_retrieval.MultiVectorIndex`,
and a query returns `similarity_top_k` *distinct* nodes ranked by `aggregate` ("max": the best window; "max-mean":
best window and pooled vector averaged; "top2": the mean of the two best windows), each returned node carrying its
best window's character span in its own text under `BEST_WINDOW_KEY` in its metadata (a copy; kept out of the text
LLMs and embed models see). LlamaIndex embeds nodes before the store sees them and hands it only the pooled vector,
so `add` takes the windows from that same pass (`FairEmbedding.window_cache`, keyed by the text LlamaIndex embedded,
`node.get_content(metadata_mode=MetadataMode.EMBED)`, and matched against the node's embedding): no text is embedded
twice. Nodes it cannot find there (embeddings made elsewhere, an evicted cache, an `IngestionPipeline` embedding in
worker processes) are embedded once more, and an INFO line counts them. Filters, `node_ids` / `doc_ids`, deletes
(all windows of all nodes of a document), upserts, `get_nodes` (the pooled vectors, recomputed from the windows) and
`clear` work as in the pooled mode; the mode and aggregate are persisted (`store_identity`), and `from_persist_dir`
refuses to read a pooled store as a multi-vector one or the other way round (stores persisted before multi-vector
stores existed are pooled ones and load unchanged).

Persisting writes two things, neither pickled, so loading cannot execute code: at `persist_path` (by default
`./storage/default__vector_store.json`) a JSON file with the id map and the nodes, and next to it a FaissIndex
folder (`default__vector_store.index/`: faiss' own binary format plus JSON). The JSON file is published in the
index folder's own commit (`FaissIndex.save(companions=...)`, `fair_retrieval.jsonio.Publication`), so a persist
killed at any point leaves the previous store or the new one, and a load running meanwhile reads one of them.

Which embed model made the vectors: LlamaIndex never tells a vector store (`VectorStoreIndex` and
`IngestionPipeline` embed the nodes themselves and hand the store finished vectors; `StorageContext.persist` passes
only a path), so the store cannot find it out. Tell it: `embed_model=` in the constructor or `create`, or
`record_embed_model` later; `persist` then writes its identity (`fair_retrieval.embedding.identity`) into the JSON file,
and `from_persist_dir(..., embed_model=...)` refuses another configuration (a ValueError listing what differs) unless
`allow_embedder_mismatch=True`. A store persisted without one (or by an earlier release) loads with an INFO line
saying it cannot be checked. Folders written by the earlier
FairFaissVectorStore (a raw faiss file at that path, the nodes in docstore.json) are recognised and converted with
`FairFaissVectorStore.from_legacy_persist_dir`.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
)
from llama_index.vector_stores.fair.filters import SUPPORTED_OPERATORS
from llama_index.vector_stores.fair.nodes import (
    StoredNode,
    embedded_texts,
    node_embeddings,
    stored_node,
)
from llama_index.vector_stores.fair.persistence import DEFAULT_PERSIST_PATH, StorePersistence
from llama_index.vector_stores.fair.reading import StoreReading
from typing_extensions import Self

from fair_retrieval import DocumentWindows, FaissIndex, MultiVectorIndex
from fair_retrieval.index import DEFAULT_AGGREGATE, KINDS, METRICS, Aggregate, GpuChoice, Metric, gpu_count
from fair_retrieval.stores import (
    BEST_WINDOW_KEY,
    DocumentMode,
    IndexedRecords,
    WindowCache,
    WindowEmbedder,
    gathered_windows,
    preview,
    repeated,
    window_embedder,
    within_content,
)

logger = logging.getLogger(__name__)

__all__ = ["BEST_WINDOW_KEY", "DEFAULT_PERSIST_PATH", "SUPPORTED_OPERATORS", "FairFaissVectorStore"]

MULTIVECTOR = "FairFaissVectorStore(multivector=True)"


class FairFaissVectorStore(StorePersistence, StoreReading, BasePydanticVectorStore):
    """A LlamaIndex vector store on `fair_retrieval.FaissIndex`: delete, upsert, metadata filters, GPU, no pickle.

    Args:
        index: an empty `FaissIndex` to use (any kind or factory string); or leave it out and the store creates
            one from `dim`, `metric`, `kind`, `gpu` and `index_params`.
        dim: vector size (`FairEmbedding(...).embedder.dimension`); None creates the index on the first `add`,
            when the size is known.
        metric: "ip" (inner product; cosine for FairEmbedding's unit vectors) or "l2" (squared Euclidean).
        kind: the FaissIndex kind: "flat" (exact, the default), "hnsw", "ivf" or "ivfpq" (the last two train on
            the first `add`, which must then bring enough vectors; see `fair_retrieval.FaissIndex`).
        gpu: "auto" puts the index on the GPU(s) when faiss sees one; True requires one; False stays on CPU.
        embed_model: the embed model the nodes' vectors come from (e.g. the `FairEmbedding` given to
            `VectorStoreIndex`): `persist` records its identity so that loading checks it (LlamaIndex does not
            tell the store; see the module docstring). None records nothing. Required with `multivector=True`,
            where the store takes each node's window vectors from it.
        multivector: keep each node as the vectors of its windows (a `fair_retrieval.MultiVectorIndex`) and
            return `similarity_top_k` distinct nodes scored by `aggregate`, with the best window's character span
            in the returned node's metadata under `BEST_WINDOW_KEY`. False (the default): one vector per node.
        aggregate: how a multi-vector node's window scores become its score: "max" (its best window),
            "max-mean" (best window and pooled vector averaged) or "top2" (mean of the two best; what None, the
            default, means in multi-vector mode). Multi-vector mode only.
        **index_params: kind parameters for FaissIndex (e.g. nlist=64 for "ivf", M=32 for "hnsw"; in multi-vector
            mode also fetch_factor, see `MultiVectorIndex`).

    Raises:
        TypeError: `index` is not a FaissIndex or MultiVectorIndex (e.g. a raw faiss index, which the earlier
            version took as `faiss_index=`), or `multivector=True` with an embed model that gives no window
            vectors (only fair-retrieval's embedders do).
        ValueError: both `index` and `dim`, a non-empty `index`, an `index` of the other mode, an unknown metric,
            kind or aggregate, an aggregate without `multivector=True`, `multivector=True` without `embed_model`,
            a bad dim, or gpu=True without a GPU.

    Example:
        .. code-block:: python

            store = FairFaissVectorStore.create(dim=embed_model.embedder.dimension)  # GPU if available
            context = StorageContext.from_defaults(vector_store=store)
            index = VectorStoreIndex(nodes, storage_context=context, embed_model=embed_model)
            filters = MetadataFilters(filters=[MetadataFilter(key="year", value=2024, operator=FilterOperator.GTE)])
            hits = index.as_retriever(similarity_top_k=4, filters=filters).retrieve("question")
            index.storage_context.persist("storage")
            store = FairFaissVectorStore.from_persist_dir("storage")

            # multi-vector: nodes found by their best window, k distinct nodes
            store = FairFaissVectorStore.create(dim=embed_model.embedder.dimension, multivector=True,
                                                embed_model=embed_model)
    """

    stores_text: bool = True
    is_embedding_query: bool = True

    _metric: str = PrivateAttr(default="ip")
    _kind: str = PrivateAttr(default="flat")
    _gpu: GpuChoice = PrivateAttr(default="auto")
    _index_params: dict[str, int] = PrivateAttr(default_factory=dict)
    _records: IndexedRecords[StoredNode] = PrivateAttr()  # the nodes, the id map and the index
    _embed_model: Any = PrivateAttr(default=None)  # the embed model whose identity persist records, when known
    _recorded_identity: dict[str, Any] | None = PrivateAttr(default=None)  # read from a persisted store
    _mode: DocumentMode = PrivateAttr(default_factory=DocumentMode)  # pooled, or multi-vector with its aggregate

    def __init__(
        self,
        index: FaissIndex | MultiVectorIndex | None = None,
        *,
        dim: int | None = None,
        metric: Metric = "ip",
        kind: str = "flat",
        gpu: GpuChoice = "auto",
        embed_model: Any | None = None,
        multivector: bool = False,
        aggregate: Aggregate | None = None,
        **index_params: int,
    ) -> None:
        if "faiss_index" in index_params:
            raise TypeError(
                "FairFaissVectorStore no longer wraps a raw faiss index (faiss_index=...): it keeps its vectors in a "
                "fair_retrieval.FaissIndex. Use FairFaissVectorStore.create(dim=..., metric='ip' or 'l2'), or pass "
                "index=FaissIndex(dim, ...)."
            )
        super().__init__(stores_text=True)
        mode = _document_mode(multivector, aggregate)
        if index is not None:
            if not isinstance(index, (FaissIndex, MultiVectorIndex)):
                raise TypeError(
                    f"index must be a fair_retrieval.FaissIndex, got {type(index).__name__}; for a new store use "
                    "FairFaissVectorStore.create(dim=...)."
                )
            if isinstance(index, MultiVectorIndex) != multivector:
                raise ValueError(
                    f"index is a {type(index).__name__} but multivector={multivector}: pass a MultiVectorIndex with "
                    "multivector=True, or a FaissIndex with multivector=False."
                )
            if isinstance(index, MultiVectorIndex):
                mode = DocumentMode(True, index.aggregate)
            if dim is not None:
                raise ValueError("Pass either index or dim, not both: the index already knows its dimension.")
            if len(index):
                raise ValueError(
                    f"index already holds {len(index)} vectors, but this store has no nodes for them. Pass an empty "
                    "FaissIndex (the store adds vectors together with their nodes), or load a persisted store with "
                    "FairFaissVectorStore.from_persist_dir."
                )
            metric, kind = index.metric, index.kind
        if metric not in METRICS:
            raise ValueError(f"metric must be 'ip' (inner product / cosine) or 'l2', got {metric!r}.")
        if index is None and kind not in KINDS:
            raise ValueError(
                f"kind must be one of {KINDS}, got {kind!r}; for a faiss factory string pass index=FaissIndex(dim, "
                "factory=...)."
            )
        gpu_count(gpu)  # refuses gpu=True without a GPU now, not on the first add
        if multivector:
            _require_window_model(embed_model)
        self._metric, self._kind, self._gpu, self._index_params = metric, kind, gpu, dict(index_params)
        self._mode = mode
        self._records = IndexedRecords(
            self._new_index,
            index=self._new_index(dim) if index is None and dim is not None else index,
            replaced_move_to_end=False,  # a replaced node keeps its place
            group_of=lambda record: record.doc_id,  # delete(ref_doc_id) removes a document's nodes
        )
        self._embed_model = embed_model

    @classmethod
    def create(
        cls,
        dim: int,
        metric: Metric = "ip",
        gpu: GpuChoice = "auto",
        kind: str = "flat",
        embed_model: Any | None = None,
        multivector: bool = False,
        aggregate: Aggregate | None = None,
        **index_params: int,
    ) -> FairFaissVectorStore:
        """A store over a new FaissIndex of `dim`-d vectors (exact "flat" search unless `kind` says otherwise).

        Args:
            dim: vector size (`FairEmbedding(...).embedder.dimension`).
            metric: "ip" (inner product = cosine for FairEmbedding's unit vectors) or "l2".
            gpu: "auto" uses the GPU(s) when faiss sees one; True requires one; False stays on CPU.
            kind: "flat", "hnsw", "ivf" or "ivfpq" (see `fair_retrieval.FaissIndex`).
            embed_model: as in the constructor: the embed model whose identity `persist` records (required with
                `multivector=True`).
            multivector: as in the constructor: nodes kept as their window vectors, k distinct nodes per query.
            aggregate: as in the constructor ("max", "max-mean" or "top2"; multi-vector only).
            **index_params: kind parameters for FaissIndex.

        Raises:
            ValueError: bad dim, metric, kind or aggregate, `multivector=True` without `embed_model`, or gpu=True
                without a GPU.
            TypeError: `multivector=True` with an embed model that gives no window vectors.
        """
        return cls(
            None,
            dim=dim,
            metric=metric,
            gpu=gpu,
            kind=kind,
            embed_model=embed_model,
            multivector=multivector,
            aggregate=aggregate,
            **index_params,
        )

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this component under."""
        return "FairFaissVectorStore"

    # ------------------------------------------------------------------------------------------------ properties

    @property
    def client(self) -> FaissIndex | MultiVectorIndex | None:
        """The underlying `fair_retrieval.FaissIndex` (a `MultiVectorIndex` in multi-vector mode; None until the
        first add when no dim was given)."""
        return self._records.index

    @property
    def index(self) -> FaissIndex | MultiVectorIndex | None:
        """The underlying `fair_retrieval.FaissIndex` (or `MultiVectorIndex`), as `client`."""
        return self._records.index

    @property
    def metric(self) -> str:
        """ "ip" or "l2": what the scores of `query` are."""
        return self._metric

    @property
    def multivector(self) -> bool:
        """Whether nodes are kept as their window vectors (multi-vector mode)."""
        return self._mode.multivector

    @property
    def aggregate(self) -> Aggregate | None:
        """How a node's window scores become its score in multi-vector mode; None for a pooled store."""
        return self._mode.aggregate if self._mode.multivector else None

    def record_embed_model(self, embed_model: Any) -> None:
        """Tell the store which embed model its vectors come from, so that `persist` records it (LlamaIndex does not
        pass it to vector stores). Use the one given to `VectorStoreIndex` / `IngestionPipeline`; a multi-vector
        store also takes the nodes' window vectors from it.

        Raises:
            ValueError: None.
            TypeError: in multi-vector mode, an embed model that gives no window vectors.
        """
        if embed_model is None:
            raise ValueError("record_embed_model needs an embed model (e.g. a FairEmbedding), got None.")
        if self._mode.multivector:
            _require_window_model(embed_model)
        self._embed_model = embed_model

    @property
    def node_ids(self) -> list[str]:
        """The ids of the stored nodes, in insertion order (a replaced node keeps its place)."""
        return self._records.keys

    @property
    def _next_int_id(self) -> int:
        return self._records.next_int_id

    # ------------------------------------------------------------------------------------------------ writing

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store nodes with their embeddings; a node id already stored is replaced (upsert).

        In multi-vector mode a node is stored as the vectors of its windows, taken from the embed model's pass that
        made its embedding (`FairEmbedding.window_cache`, keyed by the text LlamaIndex embedded:
        `node.get_content(metadata_mode=MetadataMode.EMBED)`), so no text is embedded twice. Nodes not found there
        (embeddings made elsewhere, or evicted from the cache) are embedded once more, in one call, and an INFO line
        counts them. Window spans are kept in the node's own text (without the metadata lines LlamaIndex embeds).

        Args:
            nodes: nodes whose `embedding` is set (VectorStoreIndex and IngestionPipeline embed them first).
            **add_kwargs: unused; accepted for LlamaIndex compatibility.

        Returns:
            The node ids, in input order.

        Raises:
            TypeError: something that is not a node, or a node whose metadata is not JSON (the store saves nodes
                as JSON, never pickle).
            ValueError: a node without an embedding, embeddings of different or wrong sizes or with NaN, a node id
                repeated within the call, or (multi-vector mode) a store loaded without its embed model. Nothing is
                stored then.
        """
        node_list = list(nodes)
        if not node_list:
            return []
        records = [stored_node(node, position) for position, node in enumerate(node_list)]
        node_ids = [record.key for record in records]
        doubled = repeated(node_ids)
        if doubled:
            raise ValueError(f"node ids repeat within this add: {preview(doubled)}; pass each node once.")
        matrix = node_embeddings(node_list)
        index = self._records.index
        if index is not None and matrix.shape[1] != index.dim:
            raise ValueError(
                f"The nodes have {matrix.shape[1]}-d embeddings but this store holds {index.dim}-d vectors; embed "
                "them with the model the store was built with."
            )
        self._records.upsert(records, self._node_windows(node_list, matrix) if self._mode.multivector else matrix)
        return node_ids

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Remove every node of the document `ref_doc_id` (nodes without a source document count as their own).

        An unknown document is nothing to delete (no error), as `IngestionPipeline` upserts expect.

        Args:
            ref_doc_id: the document id (`node.ref_doc_id`).
            **delete_kwargs: unused; accepted for LlamaIndex compatibility.
        """
        int_ids = self._records.group(ref_doc_id)
        if not int_ids:
            logger.debug("delete(%r): no node of that document is stored.", ref_doc_id)
            return
        self._records.remove(sorted(int_ids))

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Remove the nodes listed in `node_ids` and/or matching `filters` (given both, nodes must satisfy both).

        Unknown node ids are ignored.

        Args:
            node_ids: node ids to remove.
            filters: llama-index metadata filters (see `query`); an empty `MetadataFilters` matches every node.
            **delete_kwargs: unused; accepted for LlamaIndex compatibility.

        Raises:
            ValueError: neither node_ids nor filters (to remove everything, call `clear()`), or a filter this store
                cannot apply.
            TypeError: node_ids given as one string, or filters that are not MetadataFilters.
        """
        if node_ids is None and filters is None:
            raise ValueError(
                "delete_nodes needs node_ids and/or filters (given both, a node must match both); to remove every "
                "node call clear()."
            )
        selected = self._select(node_ids, None, filters, empty_means_all=False)
        self._records.remove(list(self._records.records) if selected is None else selected)

    def clear(self) -> None:
        """Remove every node (the index keeps its dimension, training and device)."""
        self._records.clear()

    # get_nodes and query: StoreReading (llama_index.vector_stores.fair.reading)

    # ------------------------------------------------------------------------------------------------ persistence
    # persist, from_persist_path, from_persist_dir and from_legacy_persist_dir: StorePersistence
    # (llama_index.vector_stores.fair.persistence)

    @classmethod
    def _persisted(
        cls,
        metric: str,
        kind: str,
        gpu: GpuChoice,
        index_params: Mapping[str, int],
        mode: DocumentMode,
    ) -> Self:
        # kind is "custom" for a store made over a FaissIndex of another factory string: kept as recorded
        params: dict[str, Any] = dict(index_params)
        store = cls(metric=metric, kind=kind if kind in KINDS else "flat", gpu=gpu, **params)  # type: ignore[arg-type]
        store._kind = kind
        # a multi-vector store loads without an embed model too (to be queried); add asks for one
        store._mode = mode
        return store

    # ------------------------------------------------------------------------------------------------ internals

    def _new_index(self, dim: int) -> FaissIndex | MultiVectorIndex:
        metric: Any = self._metric  # checked by the constructor
        return self._mode.new_index(dim, metric, self._kind, self._gpu, self._index_params)

    def _node_windows(self, nodes: list[BaseNode], embeddings: np.ndarray) -> DocumentWindows:
        """The nodes' windows, from the embed model's pass where it remembers them, else embedded once more."""
        if self._embed_model is None:
            raise ValueError(
                "This multi-vector store has no embed model to take the nodes' window vectors from (it was loaded "
                "without one): load it with FairFaissVectorStore.from_persist_dir(..., embed_model=...) or call "
                "store.record_embed_model(embed_model) with the FairEmbedding the index uses."
            )
        embedder: WindowEmbedder = window_embedder(self._embed_model, MULTIVECTOR)
        cache = getattr(self._embed_model, "window_cache", None)
        texts, offsets, lengths = embedded_texts(nodes)
        gathered = gathered_windows(texts, embeddings, embedder, cache if isinstance(cache, WindowCache) else None)
        if gathered.misses:
            logger.info(
                "%d of %d nodes were not in the embed model's window cache (embedded elsewhere, or evicted); "
                "embedded their windows once more.",
                gathered.misses,
                len(nodes),
            )
        if gathered.disagreeing:
            logger.warning(
                "%d nodes have embeddings other than the embed model gives for the text LlamaIndex embeds "
                "(node.get_content(metadata_mode=MetadataMode.EMBED), metadata lines included): another model, "
                "configuration or text. The store keeps the embed model's window vectors for them.",
                gathered.disagreeing,
            )
        return within_content(gathered.windows, offsets, lengths)


def _document_mode(multivector: Any, aggregate: Any) -> DocumentMode:
    """The store's document mode (`fair_retrieval.stores.modes`), or a TypeError / ValueError saying what to pass."""
    mode = DocumentMode(multivector, DEFAULT_AGGREGATE if aggregate is None else aggregate)  # checks both
    if not multivector and aggregate is not None:
        raise ValueError(
            f"aggregate={aggregate!r} scores a node by its windows, which only a multi-vector store keeps: pass "
            "multivector=True with it, or leave aggregate out."
        )
    return mode


def _require_window_model(embed_model: Any) -> None:
    """Refuse a multi-vector store whose embed model cannot give window vectors, saying what to pass."""
    if embed_model is None:
        raise ValueError(
            f"{MULTIVECTOR} keeps each node as the vectors of its windows, which it takes from the embed model's "
            "pass: pass embed_model= (the FairEmbedding given to VectorStoreIndex / IngestionPipeline)."
        )
    window_embedder(embed_model, MULTIVECTOR)
