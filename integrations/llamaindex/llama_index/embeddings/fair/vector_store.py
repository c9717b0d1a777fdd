"""FairFaissVectorStore: a LlamaIndex vector store on fair_retrieval's FaissIndex, with delete, upsert and filters.

llama-index-vector-stores-faiss' plain `FaissVectorStore` cannot delete (so `IngestionPipeline` upserts fail) and
refuses metadata filters. This store keeps its vectors in a `fair_retrieval.FaissIndex` (GPU when faiss sees one,
CPU otherwise) under int64 ids it hands out, one per LlamaIndex node id (a node keeps its int id while it is
stored, also when it is replaced and across persist / load), and keeps the nodes themselves.

Design choices, and why:

- It stores text (`stores_text=True`): nodes, with their text, metadata and relationships, live in the store as
  LlamaIndex serialises them (`BaseNode.to_dict()`, the docstore's JSON form), without their embedding (that is in
  the index). `VectorStoreIndex` then needs no docstore for text, queries return nodes, and a folder persisted by
  `StorageContext.persist` restores everything with `from_persist_dir`. As with every store that keeps text,
  `VectorStoreIndex` still puts `ImageNode`s and `IndexNode`s into its docstore too.
- A node's document is its `ref_doc_id`, or its own id when it has no source (as `IngestionPipeline` counts them):
  `delete(ref_doc_id)` removes every node of that document, which is what upserts need.
- `add` upserts: a node id already stored is replaced (vector, text and metadata).
- Filters are llama-index `MetadataFilters` on the nodes' metadata, translated to `fair_retrieval.filters` (the
  grammar the LangChain store uses), and the search runs over the matching nodes only (`FaissIndex.search(...,
  ids=...)`), so a filtered query returns `similarity_top_k` nodes whenever that many match. Operators with no
  equivalent there are refused with a ValueError naming them, never answered with a silently empty result.
- Scores are those of the index: inner products for metric "ip" (cosine for FairEmbedding's unit vectors, larger
  is better), squared L2 distances for "l2" (smaller is better, as llama-index's FaissVectorStore returns them).

Persisting writes two things, neither pickled, so loading cannot execute code: at `persist_path` (by default
`./storage/default__vector_store.json`) a JSON file with the id map and the nodes, and next to it a FaissIndex
folder (`default__vector_store.index/`: faiss' own binary format plus JSON). The JSON file is published in the
index folder's own commit (`FaissIndex.save(companions=...)`, `fair_retrieval.jsonio.Publication`), so a persist
killed at any point leaves the previous store or the new one, and a load running meanwhile reads one of them.

Which embed model made the vectors: LlamaIndex never tells a vector store (`VectorStoreIndex` and
`IngestionPipeline` embed the nodes themselves and hand the store finished vectors; `StorageContext.persist` passes
only a path), so the store cannot find it out. Tell it: `embed_model=` in the constructor or `create`, or
`record_embed_model` later; `persist` then writes its identity (`fair_retrieval.identity`) into the JSON file, and
`from_persist_dir(..., embed_model=...)` refuses another configuration (a ValueError listing what differs) unless
`allow_embedder_mismatch=True`. A store persisted without one (or by an earlier release) loads with an INFO line
saying it cannot be checked. Folders written by the earlier
FairFaissVectorStore (a raw faiss file at that path, the nodes in docstore.json) are recognised and converted with
`FairFaissVectorStore.from_legacy_persist_dir`.
"""

from __future__ import annotations

import copy
import json
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, NamedTuple

import numpy as np
from fsspec.implementations.local import LocalFileSystem
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.constants import DATA_KEY, TYPE_KEY
from llama_index.core.schema import BaseNode
from llama_index.core.storage.docstore.utils import json_to_doc
from llama_index.core.vector_stores.simple import DEFAULT_VECTOR_STORE, NAMESPACE_SEP
from llama_index.core.vector_stores.types import (
    DEFAULT_PERSIST_DIR,
    DEFAULT_PERSIST_FNAME,
    BasePydanticVectorStore,
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)

from fair_retrieval import FaissIndex
from fair_retrieval.filters import Predicate, compile_filter
from fair_retrieval.identity import check_identity, embedder_identity
from fair_retrieval.index import META_FILE as INDEX_RECORD
from fair_retrieval.index.gpu import GpuChoice, gpu_count, import_faiss
from fair_retrieval.jsonio import (
    ChangedWhileReadingError,
    Publication,
    Snapshot,
    companion_name,
    index_record,
    json_bytes,
    parse_versioned_json,
    read_companion,
    retry_while_changing,
    write_atomically,
    write_temporary,
)

logger = logging.getLogger(__name__)

__all__ = ["DEFAULT_PERSIST_PATH", "FairFaissVectorStore"]

Metric = Literal["ip", "l2"]
METRICS: tuple[str, ...] = ("ip", "l2")
KINDS: tuple[str, ...] = ("flat", "hnsw", "ivf", "ivfpq")
DEFAULT_PERSIST_PATH = os.path.join(
    DEFAULT_PERSIST_DIR, f"{DEFAULT_VECTOR_STORE}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}"
)
INDEX_SUFFIX = ".index"  # the FaissIndex folder next to the store file: default__vector_store.index/
FORMAT_NAME = "llama-index-fair-faiss-store"
FORMAT_VERSION = 1
LEGACY_DOCSTORE = "docstore.json"  # what StorageContext.persist writes next to the vector store
LEGACY_INDEX_STORE = "index_store.json"
LEGACY_ID_MAP = "id_map.json"  # written by llama-index's FaissMapVectorStore
MISMATCH_OVERRIDE = "allow_embedder_mismatch=True"
MISMATCH_REMEDY = (
    "Load it with the embed model it was built with (same model and options), or rebuild the index with this one."
)

# llama-index filter operators and their fair_retrieval.filters equivalents (IS_EMPTY is composed in _filter_leaf).
_OPERATORS: dict[FilterOperator, str] = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
_ORDERINGS = (FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT, FilterOperator.LTE)
_EMPTY_VALUES: list[Any] = [None, "", []]  # what IS_EMPTY matches besides an absent field, as in llama-index
SUPPORTED_OPERATORS: tuple[str, ...] = (*(operator.name for operator in _OPERATORS), FilterOperator.IS_EMPTY.name)
"""The `FilterOperator`s this store applies (combined with FilterCondition AND, OR and NOT, nested as wanted)."""


class _Record(NamedTuple):
    """A stored node: its ids and its JSON form (`doc_to_json` without the embedding, which is in the index)."""

    node_id: str
    doc_id: str  # the node's ref_doc_id, or its own id when it has no source document
    node: dict[str, Any]


class FairFaissVectorStore(BasePydanticVectorStore):
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
            tell the store; see the module docstring). None records nothing.
        **index_params: kind parameters for FaissIndex (e.g. nlist=64 for "ivf", M=32 for "hnsw").

    Raises:
        TypeError: `index` is not a FaissIndex (e.g. a raw faiss index, which the earlier version took as
            `faiss_index=`).
        ValueError: both `index` and `dim`, a non-empty `index`, an unknown metric or kind, a bad dim, or gpu=True
            without a GPU.

    Example:
        .. code-block:: python

            store = FairFaissVectorStore.create(dim=embed_model.embedder.dimension)  # GPU if available
            context = StorageContext.from_defaults(vector_store=store)
            index = VectorStoreIndex(nodes, storage_context=context, embed_model=embed_model)
            filters = MetadataFilters(filters=[MetadataFilter(key="year", value=2024, operator=FilterOperator.GTE)])
            hits = index.as_retriever(similarity_top_k=4, filters=filters).retrieve("question")
            index.storage_context.persist("storage")
            store = FairFaissVectorStore.from_persist_dir("storage")
    """

    stores_text: bool = True
    is_embedding_query: bool = True

    _index: FaissIndex | None = PrivateAttr(default=None)
    _metric: str = PrivateAttr(default="ip")
    _kind: str = PrivateAttr(default="flat")
    _gpu: GpuChoice = PrivateAttr(default="auto")
    _index_params: dict[str, int] = PrivateAttr(default_factory=dict)
    _int_ids: dict[str, int] = PrivateAttr(default_factory=dict)  # the id map: node id → the index's int64 id
    _records: dict[int, _Record] = PrivateAttr(default_factory=dict)  # by int id, in insertion order
    _by_document: dict[str, set[int]] = PrivateAttr(default_factory=dict)  # document id → int ids of its nodes
    _next_int_id: int = PrivateAttr(default=0)
    _embed_model: Any = PrivateAttr(default=None)  # the embed model whose identity persist records, when known
    _recorded_identity: dict[str, Any] | None = PrivateAttr(default=None)  # read from a persisted store

    def __init__(
        self,
        index: FaissIndex | None = None,
        *,
        dim: int | None = None,
        metric: Metric = "ip",
        kind: str = "flat",
        gpu: GpuChoice = "auto",
        embed_model: Any | None = None,
        **index_params: int,
    ) -> None:
        if "faiss_index" in index_params:
            raise TypeError(
                "FairFaissVectorStore no longer wraps a raw faiss index (faiss_index=...): it keeps its vectors in a "
                "fair_retrieval.FaissIndex. Use FairFaissVectorStore.create(dim=..., metric='ip' or 'l2'), or pass "
                "index=FaissIndex(dim, ...)."
            )
        super().__init__()
        if index is not None:
            if not isinstance(index, FaissIndex):
                raise TypeError(
                    f"index must be a fair_retrieval.FaissIndex, got {type(index).__name__}; for a new store use "
                    "FairFaissVectorStore.create(dim=...)."
                )
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
        self._metric, self._kind, self._gpu, self._index_params = metric, kind, gpu, dict(index_params)
        self._index = index
        if index is None and dim is not None:
            self._index = self._new_index(dim)
        self._embed_model = embed_model

    @classmethod
    def create(
        cls,
        dim: int,
        metric: Metric = "ip",
        gpu: GpuChoice = "auto",
        kind: str = "flat",
        embed_model: Any | None = None,
        **index_params: int,
    ) -> FairFaissVectorStore:
        """A store over a new FaissIndex of `dim`-d vectors (exact "flat" search unless `kind` says otherwise).

        Args:
            dim: vector size (`FairEmbedding(...).embedder.dimension`).
            metric: "ip" (inner product = cosine for FairEmbedding's unit vectors) or "l2".
            gpu: "auto" uses the GPU(s) when faiss sees one; True requires one; False stays on CPU.
            kind: "flat", "hnsw", "ivf" or "ivfpq" (see `fair_retrieval.FaissIndex`).
            embed_model: as in the constructor: the embed model whose identity `persist` records.
            **index_params: kind parameters for FaissIndex.

        Raises:
            ValueError: bad dim, metric or kind, or gpu=True without a GPU.
        """
        return cls(dim=dim, metric=metric, gpu=gpu, kind=kind, embed_model=embed_model, **index_params)

    @classmethod
    def class_name(cls) -> str:
        """The name LlamaIndex serialises this component under."""
        return "FairFaissVectorStore"

    # ------------------------------------------------------------------------------------------------ properties

    @property
    def client(self) -> FaissIndex | None:
        """The underlying `fair_retrieval.FaissIndex` (None until the first add when no dim was given)."""
        return self._index

    @property
    def index(self) -> FaissIndex | None:
        """The underlying `fair_retrieval.FaissIndex`, as `client`."""
        return self._index

    @property
    def metric(self) -> str:
        """ "ip" or "l2": what the scores of `query` are."""
        return self._metric

    @property
    def embedder_identity(self) -> dict[str, Any] | None:
        """The identity `persist` records for the vectors (`fair_retrieval.identity.embedder_identity`): that of the
        embed model the store was told about, else the one read from the persisted store, else None (unknown)."""
        if self._embed_model is not None:
            return embedder_identity(self._embed_model)
        return copy.deepcopy(self._recorded_identity)

    def record_embed_model(self, embed_model: Any) -> None:
        """Tell the store which embed model its vectors come from, so that `persist` records it (LlamaIndex does not
        pass it to vector stores). Use the one given to `VectorStoreIndex` / `IngestionPipeline`."""
        if embed_model is None:
            raise ValueError("record_embed_model needs an embed model (e.g. a FairEmbedding), got None.")
        self._embed_model = embed_model

    @property
    def node_ids(self) -> list[str]:
        """The ids of the stored nodes, in insertion order (a replaced node keeps its place)."""
        return [record.node_id for record in self._records.values()]

    # ------------------------------------------------------------------------------------------------ writing

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store nodes with their embeddings; a node id already stored is replaced (upsert).

        Args:
            nodes: nodes whose `embedding` is set (VectorStoreIndex and IngestionPipeline embed them first).
            **add_kwargs: unused; accepted for LlamaIndex compatibility.

        Returns:
            The node ids, in input order.

        Raises:
            TypeError: something that is not a node, or a node whose metadata is not JSON (the store saves nodes
                as JSON, never pickle).
            ValueError: a node without an embedding, embeddings of different or wrong sizes or with NaN, or a
                node id repeated within the call. Nothing is stored then.
        """
        node_list = list(nodes)
        if not node_list:
            return []
        records = [_record(node, position) for position, node in enumerate(node_list)]
        node_ids = [record.node_id for record in records]
        if len(set(node_ids)) != len(node_ids):
            repeated = sorted({node_id for node_id in node_ids if node_ids.count(node_id) > 1})
            raise ValueError(f"node ids repeat within this add: {_some(repeated)}; pass each node once.")
        matrix = _embeddings(node_list)
        index = self._index if self._index is not None else self._new_index(matrix.shape[1])
        if matrix.shape[1] != index.dim:
            raise ValueError(
                f"The nodes have {matrix.shape[1]}-d embeddings but this store holds {index.dim}-d vectors; embed "
                "them with the model the store was built with."
            )
        replaced = [self._int_ids[node_id] for node_id in node_ids if node_id in self._int_ids]
        next_int_id = self._next_int_id
        int_ids = []
        for node_id in node_ids:
            int_id = self._int_ids.get(node_id)
            if int_id is None:
                int_id, next_int_id = next_int_id, next_int_id + 1
            int_ids.append(int_id)
        if replaced:
            index.remove(replaced)  # a node keeps its int id: its new vector goes in under the same one
        index.add(matrix, np.asarray(int_ids, dtype=np.int64))
        self._index, self._next_int_id = index, next_int_id
        for int_id, record in zip(int_ids, records, strict=True):
            self._remember(int_id, record)
        logger.debug(
            "Added %d nodes (%d replaced); the store holds %d.", len(records), len(replaced), len(self._records)
        )
        return node_ids

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Remove every node of the document `ref_doc_id` (nodes without a source document count as their own).

        An unknown document is nothing to delete (no error), as `IngestionPipeline` upserts expect.

        Args:
            ref_doc_id: the document id (`node.ref_doc_id`).
            **delete_kwargs: unused; accepted for LlamaIndex compatibility.
        """
        int_ids = self._by_document.get(ref_doc_id)
        if not int_ids:
            logger.debug("delete(%r): no node of that document is stored.", ref_doc_id)
            return
        self._remove(sorted(int_ids))

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
        self._remove(list(self._records) if selected is None else selected)

    def clear(self) -> None:
        """Remove every node (the index keeps its dimension, training and device)."""
        if self._index is not None and len(self._index):
            self._index.remove(self._index.ids)
        self._int_ids, self._records, self._by_document, self._next_int_id = {}, {}, {}, 0

    # ------------------------------------------------------------------------------------------------ reading

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """Copies of stored nodes, with their embeddings: those in `node_ids` (in that order; unknown ids are
        skipped) and/or matching `filters`; every node (in insertion order) when both are None.

        Raises:
            ValueError: a filter this store cannot apply.
            TypeError: node_ids given as one string, or filters that are not MetadataFilters.
        """
        selected = self._select(node_ids, None, filters, empty_means_all=False)
        if selected is None:
            int_ids = list(self._records)
        elif node_ids is not None:  # the caller's order
            chosen = set(selected)
            int_ids = [
                self._int_ids[node_id] for node_id in dict.fromkeys(node_ids) if self._int_ids.get(node_id) in chosen
            ]
        else:
            chosen = set(selected)
            int_ids = [int_id for int_id in self._records if int_id in chosen]
        if not int_ids:
            return []
        assert self._index is not None  # the store holds nodes
        vectors = self._index.get_vectors(int_ids)
        nodes = []
        for int_id, vector in zip(int_ids, vectors, strict=True):
            node = self._node(int_id)
            node.embedding = vector.tolist()
            nodes.append(node)
        return nodes

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The `query.similarity_top_k` stored nodes nearest to `query.query_embedding`, best first.

        Restrictions, all applied inside the search (`FaissIndex.search(..., ids=...)`), so the result holds
        `similarity_top_k` nodes whenever that many satisfy them:

        - `node_ids`: only these nodes; `doc_ids`: only nodes of these documents; with both, nodes in both. An
          empty list restricts nothing: `VectorStoreIndex.as_retriever` passes `node_ids=[]` for stores that keep
          text.
        - `filters`: llama-index `MetadataFilters` on the nodes' metadata, with FilterOperator EQ, NE, GT, GTE, LT,
          LTE, IN, NIN and IS_EMPTY, combined with FilterCondition AND, OR or NOT (none of them), nested as wanted.
          They follow `fair_retrieval.filters`: a missing field matches only NE, NIN and IS_EMPTY; values compare
          within a type family (numbers with numbers, strings with strings: "2024" is not 2024); IS_EMPTY matches
          a field that is absent, None, "" or [].

        Args:
            query: the llama-index query; only mode DEFAULT (dense vector search) is supported.
            **kwargs: unused; accepted for LlamaIndex compatibility.

        Returns:
            nodes (copies, without embeddings), their ids, and similarities: inner products for metric "ip"
            (larger is better), squared L2 distances for "l2" (smaller is better).

        Raises:
            ValueError: another query mode, no query embedding or one of the wrong size, a similarity_top_k that
                is not a positive int, or a filter this store cannot apply (the message names the operator).
            TypeError: filters that are not MetadataFilters.
        """
        mode = VectorStoreQueryMode(query.mode)
        if mode != VectorStoreQueryMode.DEFAULT:
            raise ValueError(
                f"FairFaissVectorStore answers only VectorStoreQueryMode.DEFAULT (dense vector search), got "
                f"{mode.name}; leave vector_store_query_mode at its default."
            )
        top_k = query.similarity_top_k
        if isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1:
            raise ValueError(f"similarity_top_k must be a positive int, got {top_k!r}.")
        if query.query_embedding is None:
            raise ValueError(
                "The query has no query_embedding: this store searches by vector. Embed the query with the store's "
                "embed model (retrievers do this), or set VectorStoreQuery(query_embedding=...)."
            )
        vector = np.asarray(query.query_embedding, dtype=np.float32)
        selected = self._select(query.node_ids, query.doc_ids, query.filters, empty_means_all=True)
        if vector.ndim != 1:
            raise ValueError(f"query_embedding must be one vector (a list of floats), got shape {vector.shape}.")
        if self._index is not None and vector.size != self._index.dim:
            raise ValueError(
                f"query_embedding has {vector.size} dimensions but this store holds {self._index.dim}-d vectors; "
                "embed the query with the model the store was built with."
            )
        count = len(self._records) if selected is None else len(selected)
        if self._index is None or count == 0:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        scores, found = self._index.search(vector[None, :], min(top_k, count), ids=selected)
        hits = [(int(int_id), float(score)) for int_id, score in zip(found[0], scores[0], strict=True) if int_id >= 0]
        return VectorStoreQueryResult(
            nodes=[self._node(int_id) for int_id, _ in hits],
            similarities=[score for _, score in hits],
            ids=[self._records[int_id].node_id for int_id, _ in hits],
        )

    # ------------------------------------------------------------------------------------------------ persistence

    def persist(self, persist_path: str = DEFAULT_PERSIST_PATH, fs: Any | None = None) -> None:
        """Write the store: a JSON file at `persist_path` and the FaissIndex folder next to it (`<name>.index/`).

        `StorageContext.persist(persist_dir)` calls this with `persist_dir/default__vector_store.json`. A GPU
        index is written as a CPU copy (FaissIndex.save); nothing is pickled. The two change together: the JSON
        file is written under a temporary name and published in the commit of the index folder
        (`FaissIndex.save(companions=...)`), so a persist killed at any point (even by SIGKILL) leaves the previous
        store or this one. The JSON file records `embedder_identity` (null when the store was never told its embed
        model).

        Args:
            persist_path: the JSON file to write (its folder is created if needed).
            fs: None or a local fsspec filesystem; faiss writes local files only.

        Raises:
            NotImplementedError: a non-local `fs`.
            ValueError: node metadata that stopped being JSON (e.g. NaN put in after adding).
        """
        _require_local(fs)
        path = Path(persist_path)
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = _index_folder(path)
        state = {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "metric": self._metric,
            "kind": self._kind,
            "index_params": self._index_params,
            "index_folder": folder.name if self._index is not None else None,
            "next_int_id": self._next_int_id,
            "embedder": self.embedder_identity,
            "nodes": [
                {"int_id": int_id, "node_id": record.node_id, "doc_id": record.doc_id, "node": record.node}
                for int_id, record in self._records.items()
            ],
        }
        data = json_bytes(state, indent=None)
        if self._index is not None:
            staged = write_temporary(path, data)
            try:
                self._index.save(folder, companions={companion_name(path): staged})
            finally:
                staged.unlink(missing_ok=True)  # moved by the save; still here only if it failed
        elif (folder / INDEX_RECORD).is_file():  # a store without an index replacing one with an index
            with Publication(folder / INDEX_RECORD, [companion_name(path)]):  # finishes a killed persist first
                write_atomically(path, data)
        else:
            write_atomically(path, data)
        logger.info("Persisted %d nodes to %s (vectors in %s)", len(self._records), path, folder.name)

    @classmethod
    def from_persist_path(
        cls,
        persist_path: str = DEFAULT_PERSIST_PATH,
        fs: Any | None = None,
        gpu: GpuChoice = "auto",
        *,
        embed_model: Any | None = None,
        allow_embedder_mismatch: bool = False,
    ) -> FairFaissVectorStore:
        """Load a store written by `persist` (on a CPU or a GPU machine); `gpu` as in the constructor.

        The index folder's index.json is read first and names the JSON file of the same persist, so a load running
        while the store is persisted again returns the store before or after that persist.

        Args:
            persist_path: the JSON file `persist` wrote.
            fs: None or a local fsspec filesystem.
            gpu: as in the constructor.
            embed_model: the embed model you will query (and add nodes) with; when given, it is checked against the
                identity the store recorded and becomes the one the next `persist` records. None checks nothing
                and keeps the recorded identity.
            allow_embedder_mismatch: load even when `embed_model` differs from the recorded one (a WARNING lists
                the differences).

        Raises:
            FileNotFoundError: no store at `persist_path`, or its index folder is missing.
            ValueError: a folder written by the earlier FairFaissVectorStore / llama-index's FaissVectorStore (a
                raw faiss file; the message says how to convert it with `from_legacy_persist_dir`), files that
                are malformed or disagree with each other, or an `embed_model` other than the one the store was
                persisted with (the message lists the differing fields), unless `allow_embedder_mismatch=True`.
            NotImplementedError: a non-local `fs`.
        """
        _require_local(fs)
        path = Path(persist_path)
        store = retry_while_changing(path, lambda: cls._load_once(path, gpu))
        if embed_model is not None:
            check_identity(
                store._recorded_identity,
                embedder_identity(embed_model),
                source=str(path),
                allow_mismatch=allow_embedder_mismatch,
                override=MISMATCH_OVERRIDE,
                remedy=MISMATCH_REMEDY,
            )
            store._embed_model = embed_model
        elif store._recorded_identity is not None:
            logger.info("%s records its embed model; pass embed_model= to from_persist_dir to check it.", path)
        logger.info("Loaded %d nodes from %s", len(store._records), path)
        return store

    @classmethod
    def _load_once(cls, path: Path, gpu: GpuChoice) -> FairFaissVectorStore:
        """One consistent read of a persisted store; ChangedWhileReadingError when a persist replaced it meanwhile."""
        record = index_record(_index_folder(path) / INDEX_RECORD)
        try:
            store = cls._restore(path, _read_store_file(path, record), gpu)
        except (OSError, ValueError) as error:
            if record is not None and not record.is_current():
                raise ChangedWhileReadingError from error
            raise
        if record is not None and not record.is_current():  # the index may come from a later persist
            raise ChangedWhileReadingError
        return store

    @classmethod
    def _restore(cls, path: Path, raw: bytes, gpu: GpuChoice) -> FairFaissVectorStore:
        """The store persisted in `raw` (the bytes of `path`) with its index folder, checked."""
        state = parse_versioned_json(
            path,
            raw,
            format_name=FORMAT_NAME,
            max_version=FORMAT_VERSION,
            required=("metric", "kind", "next_int_id", "nodes"),
            writer="FairFaissVectorStore.persist()",
            upgrade="llama-index-embeddings-fair",
        )
        kind = state["kind"]  # "custom" for a store made over a FaissIndex of another factory string
        store = cls(
            metric=state["metric"], kind=kind if kind in KINDS else "flat", gpu=gpu, **state.get("index_params", {})
        )
        store._kind = kind
        identity = state.get("embedder")
        if identity is not None and not isinstance(identity, dict):
            raise ValueError(f"{path} records a malformed embedder {identity!r}; persist the store again.")
        store._recorded_identity = identity
        folder_name = state.get("index_folder")
        if folder_name is not None:
            if not isinstance(folder_name, str) or Path(folder_name).name != folder_name or folder_name in ("", ".."):
                raise ValueError(f"{path} names a malformed index folder {folder_name!r}; rebuild the store.")
            folder = path.parent / folder_name
            if not folder.is_dir():
                raise FileNotFoundError(
                    f"{path} keeps its vectors in {folder}, which is missing: copy the whole persist folder."
                )
            store._index = FaissIndex.load(folder, gpu=gpu)
        for entry in state["nodes"]:
            int_id = int(entry["int_id"])
            store._remember(int_id, _Record(str(entry["node_id"]), str(entry["doc_id"]), entry["node"]))
        store._next_int_id = int(state["next_int_id"])
        stored = set(store._index.ids.tolist()) if store._index is not None else set()
        if stored != set(store._records) or len(store._int_ids) != len(store._records):
            raise ValueError(
                f"{path} lists {len(state['nodes'])} nodes but its index folder holds {len(stored)} vectors under "
                "other ids: the folder was modified or written partially. Persist the store again, or rebuild it."
            )
        return store

    @classmethod
    def from_persist_dir(
        cls,
        persist_dir: str = DEFAULT_PERSIST_DIR,
        fs: Any | None = None,
        gpu: GpuChoice = "auto",
        namespace: str = DEFAULT_VECTOR_STORE,
        *,
        embed_model: Any | None = None,
        allow_embedder_mismatch: bool = False,
    ) -> FairFaissVectorStore:
        """Load the store `StorageContext.persist(persist_dir)` wrote (`persist_dir/default__vector_store.json`).

        Args:
            persist_dir: the folder given to `StorageContext.persist`.
            fs: None or a local fsspec filesystem.
            gpu: as in the constructor.
            namespace: the vector store's name in the storage context ("default" unless you named it).
            embed_model: as in `from_persist_path`: checked against the recorded embed model when given.
            allow_embedder_mismatch: as in `from_persist_path`.

        Raises:
            As `from_persist_path`.
        """
        _require_local(fs)
        persist_path = os.path.join(persist_dir, f"{namespace}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}")
        return cls.from_persist_path(
            persist_path, gpu=gpu, embed_model=embed_model, allow_embedder_mismatch=allow_embedder_mismatch
        )

    @classmethod
    def from_legacy_persist_dir(
        cls,
        persist_dir: str = DEFAULT_PERSIST_DIR,
        *,
        gpu: GpuChoice = "auto",
        namespace: str = DEFAULT_VECTOR_STORE,
        kind: str = "flat",
        **index_params: int,
    ) -> FairFaissVectorStore:
        """Convert a folder persisted with the earlier FairFaissVectorStore (or llama-index's FaissVectorStore).

        Such a folder holds a raw faiss index at `default__vector_store.json` (vectors by position) and the nodes
        in `docstore.json`, tied together by the positions in `index_store.json`. The result is a store holding
        those nodes with their vectors; it does not change the folder. Its old index_store restricts retrievers to
        the old node ids, so build a new index over the store and persist that::

            store = FairFaissVectorStore.from_legacy_persist_dir("storage")
            index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
            index.storage_context.persist("storage")  # now in this store's format

        Args:
            persist_dir: the old folder.
            gpu: as in the constructor.
            namespace: the vector store's name in the storage context ("default" unless you named it).
            kind: the FaissIndex kind of the new store ("flat" unless you want another).
            **index_params: its kind parameters.

        Raises:
            FileNotFoundError: the folder lacks the faiss file, docstore.json or index_store.json.
            ValueError: the faiss file's vectors cannot be read back, or the files do not fit together (e.g. a
                folder written by FaissMapVectorStore); then rebuild the index from your documents.
        """
        folder = Path(persist_dir)
        raw_path = folder / f"{namespace}{NAMESPACE_SEP}{DEFAULT_PERSIST_FNAME}"
        if not raw_path.is_file():
            raise FileNotFoundError(
                f"{raw_path} does not exist: is {folder} a folder written by StorageContext.persist?"
            )
        if not _is_raw_faiss(raw_path):
            raise ValueError(
                f"{raw_path} is not a raw faiss index; a folder written by this FairFaissVectorStore loads with "
                "FairFaissVectorStore.from_persist_dir."
            )
        if (folder / LEGACY_ID_MAP).is_file():
            raise ValueError(
                f"{folder} holds {LEGACY_ID_MAP}: it was written by llama-index's FaissMapVectorStore, whose ids this "
                "conversion does not read. Rebuild the index from your documents with FairFaissVectorStore."
            )
        for name in (LEGACY_DOCSTORE, LEGACY_INDEX_STORE):
            if not (folder / name).is_file():
                raise FileNotFoundError(
                    f"{folder} lacks {name}, which holds the nodes of the old store (the faiss file keeps only "
                    "vectors); without it the folder cannot be converted. Rebuild the index from your documents."
                )
        from llama_index.core.data_structs.data_structs import IndexDict
        from llama_index.core.storage.docstore import SimpleDocumentStore
        from llama_index.core.storage.index_store import SimpleIndexStore

        vectors, metric = _read_raw_faiss(raw_path)
        docstore = SimpleDocumentStore.from_persist_dir(str(folder))
        index_store = SimpleIndexStore.from_persist_dir(str(folder))
        positions: dict[int, str] = {}  # every vector index of the storage context shares this vector store
        for struct in index_store.index_structs():
            if not isinstance(struct, IndexDict):
                continue
            for key, node_id in struct.nodes_dict.items():
                try:
                    position = int(key)
                except ValueError:
                    raise ValueError(
                        f"{folder / LEGACY_INDEX_STORE} maps vector id {key!r}, not a faiss position: the folder was "
                        "not written by the plain FaissVectorStore. Rebuild the index from your documents."
                    ) from None
                if not 0 <= position < len(vectors) or positions.setdefault(position, node_id) != node_id:
                    raise ValueError(
                        f"{folder}: {LEGACY_INDEX_STORE} refers to vector {position} ({node_id!r}), which the faiss "
                        f"file ({len(vectors)} vectors) does not hold once. Rebuild the index from your documents."
                    )
        nodes = []
        missing = []
        for position, node_id in sorted(positions.items()):
            node = docstore.get_node(node_id, raise_error=False)
            if node is None:
                missing.append(node_id)
                continue
            node = node.model_copy()
            node.embedding = vectors[position].tolist()
            nodes.append(node)
        if missing:
            raise ValueError(
                f"{folder / LEGACY_DOCSTORE} lacks {len(missing)} node(s) that {LEGACY_INDEX_STORE} lists: "
                f"{_some(missing)}. Rebuild the index from your documents."
            )
        if len(positions) < len(vectors):
            logger.warning(
                "%s holds %d vectors that no index refers to; they are left out.",
                raw_path,
                len(vectors) - len(positions),
            )
        store = cls(metric=metric, kind=kind, gpu=gpu, **index_params)
        store.add(nodes)
        logger.info("Converted %d nodes from the legacy folder %s.", len(nodes), folder)
        return store

    # ------------------------------------------------------------------------------------------------ internals

    def _new_index(self, dim: int) -> FaissIndex:
        return FaissIndex(dim, metric=self._metric, kind=self._kind, gpu=self._gpu, **self._index_params)  # type: ignore[arg-type]

    def _remember(self, int_id: int, record: _Record) -> None:
        """Record a node under `int_id`; one already there is replaced in place (it keeps its insertion order)."""
        previous = self._records.get(int_id)
        if previous is not None:
            self._leave_document(previous.doc_id, int_id)
        self._int_ids[record.node_id] = int_id
        self._records[int_id] = record
        self._by_document.setdefault(record.doc_id, set()).add(int_id)

    def _forget(self, int_id: int) -> None:
        record = self._records.pop(int_id)
        del self._int_ids[record.node_id]
        self._leave_document(record.doc_id, int_id)

    def _leave_document(self, doc_id: str, int_id: int) -> None:
        members = self._by_document[doc_id]
        members.discard(int_id)
        if not members:
            del self._by_document[doc_id]

    def _remove(self, int_ids: list[int]) -> None:
        """Remove stored nodes (vectors and records) by int id."""
        if not int_ids:
            return
        assert self._index is not None  # the store holds nodes
        self._index.remove(int_ids)
        for int_id in int_ids:
            self._forget(int_id)
        logger.debug("Removed %d nodes; the store holds %d.", len(int_ids), len(self._records))

    def _node(self, int_id: int) -> BaseNode:
        """A new node object from the stored JSON form, so callers cannot change the store through it."""
        return json_to_doc(copy.deepcopy(self._records[int_id].node))

    def _select(
        self,
        node_ids: Sequence[str] | None,
        doc_ids: Sequence[str] | None,
        filters: MetadataFilters | None,
        *,
        empty_means_all: bool,
    ) -> list[int] | None:
        """The sorted int ids satisfying every given restriction; None when nothing restricts (every node).

        `empty_means_all`: an empty node_ids / doc_ids list restricts nothing (query) rather than selecting no
        node (get_nodes, delete_nodes).
        """
        chosen: set[int] | None = None
        if node_ids is not None and (node_ids or not empty_means_all):
            wanted = _strings(node_ids, "node_ids")
            chosen = {self._int_ids[node_id] for node_id in wanted if node_id in self._int_ids}
        if doc_ids is not None and (doc_ids or not empty_means_all):
            wanted = _strings(doc_ids, "doc_ids")
            in_documents = set().union(*(self._by_document.get(doc_id, set()) for doc_id in wanted))
            chosen = in_documents if chosen is None else chosen & in_documents
        predicate = _predicate(filters)
        if predicate is not None:
            pool: Iterable[int] = self._records if chosen is None else chosen
            chosen = {int_id for int_id in pool if predicate(self._metadata(int_id))}
            logger.debug("The filters keep %d of %d nodes.", len(chosen), len(self._records))
        return None if chosen is None else sorted(chosen)

    def _metadata(self, int_id: int) -> Mapping[str, Any]:
        return self._records[int_id].node[DATA_KEY].get("metadata") or {}


# ---------------------------------------------------------------------------------------------------- nodes


def _record(node: Any, position: int) -> _Record:
    """A node's record: its JSON form without the embedding, checked to survive JSON (what persist writes)."""
    if not isinstance(node, BaseNode):
        raise TypeError(f"nodes[{position}] is {type(node).__name__}, expected a llama-index node (TextNode, …).")
    data = node.to_dict()
    data["embedding"] = None  # the vector lives in the index
    try:
        payload = json.loads(json.dumps({DATA_KEY: data, TYPE_KEY: node.get_type()}, allow_nan=False))
    except (TypeError, ValueError) as error:
        raise TypeError(
            f"Node {node.node_id!r} cannot be stored as JSON ({error}). FairFaissVectorStore keeps and persists nodes "
            "as JSON, never pickle: make its metadata values str, int, float, bool, None, lists or dicts (a date as "
            ".isoformat(), no NaN)."
        ) from None
    return _Record(node.node_id, node.ref_doc_id or node.node_id, payload)


def _embeddings(nodes: list[BaseNode]) -> np.ndarray:
    """The nodes' embeddings as a float32 (n, dim) matrix, or a ValueError naming the first bad node."""
    vectors = []
    for position, node in enumerate(nodes):
        if node.embedding is None:
            raise ValueError(
                f"nodes[{position}] ({node.node_id!r}) has no embedding. Embed nodes before adding them "
                "(VectorStoreIndex and an IngestionPipeline with an embed model do), or set node.embedding."
            )
        vectors.append(node.embedding)
    sizes = sorted({len(vector) for vector in vectors})
    if len(sizes) > 1 or sizes[0] == 0:
        raise ValueError(f"The nodes' embeddings have sizes {sizes}; embed all nodes with one model.")
    return np.asarray(vectors, dtype=np.float32)


def _strings(values: Any, name: str) -> list[str]:
    if isinstance(values, str) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of ids, got {type(values).__name__} {values!r}; wrap one id: [id].")
    return [str(value) for value in values]


def _some(items: Sequence[str], limit: int = 5) -> str:
    shown = ", ".join(repr(item) for item in items[:limit])
    return shown + (f" … ({len(items) - limit} more)" if len(items) > limit else "")


# ---------------------------------------------------------------------------------------------------- filters


def _predicate(filters: Any) -> Predicate | None:
    """The compiled `filters` (None when they keep every node); checked whole before any search."""
    if filters is None:
        return None
    if not isinstance(filters, MetadataFilters):
        raise TypeError(
            "filters must be llama-index MetadataFilters, e.g. MetadataFilters(filters=[MetadataFilter(key='year', "
            f"value=2024, operator=FilterOperator.GTE)]); got {type(filters).__name__}."
        )
    spec = _filter_spec(filters, "filters")
    if not spec:
        return None
    try:
        return compile_filter(spec)
    except ValueError as error:  # pragma: no cover - _filter_spec checks what compile_filter would refuse
        raise ValueError(f"These MetadataFilters cannot be applied: {error}") from error


def _filter_spec(filters: MetadataFilters, where: str) -> dict[str, Any]:
    """`MetadataFilters` as a `fair_retrieval.filters` dict ({} keeps every node, as an empty list does)."""
    members = []
    for position, item in enumerate(filters.filters):
        here = f"{where}.filters[{position}]"
        if isinstance(item, MetadataFilters):
            members.append(_filter_spec(item, here))
        elif isinstance(item, MetadataFilter):
            members.append(_filter_leaf(item, here))
        else:
            raise TypeError(f"{here} is {type(item).__name__}; expected a MetadataFilter or nested MetadataFilters.")
    if not members:
        return {}
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    if condition == FilterCondition.AND:
        return {"$and": members}
    if condition == FilterCondition.OR:
        return {"$or": members}
    return {"$not": {"$or": members}}  # NOT: none of the filters holds, as in llama-index


def _filter_leaf(leaf: MetadataFilter, where: str) -> dict[str, Any]:
    """One `MetadataFilter` as a field condition."""
    operator, key, value = FilterOperator(leaf.operator), leaf.key, leaf.value
    if key.startswith("$"):
        raise ValueError(f"{where} filters on {key!r}; metadata keys starting with '$' cannot be filtered on here.")
    if operator == FilterOperator.IS_EMPTY:
        return {"$or": [{key: {"$exists": False}}, {key: {"$in": list(_EMPTY_VALUES)}}]}
    if operator not in _OPERATORS:
        raise ValueError(
            f"FairFaissVectorStore cannot filter with FilterOperator.{operator.name} ({where}, key {key!r}). It "
            f"supports {', '.join(SUPPORTED_OPERATORS)}, combined with AND, OR and NOT; rewrite the filter with "
            "those (e.g. IN for one of several values), or filter the retrieved nodes yourself."
        )
    if operator in (FilterOperator.IN, FilterOperator.NIN) and not isinstance(value, list):
        raise ValueError(
            f"{where}: FilterOperator.{operator.name} on {key!r} needs a list value, e.g. value=[{value!r}]; got "
            f"{type(value).__name__} {value!r}."
        )
    if operator in _ORDERINGS and (isinstance(value, bool) or not isinstance(value, int | float | str)):
        raise ValueError(
            f"{where}: FilterOperator.{operator.name} on {key!r} compares with a number or a string (dates as ISO "
            f"strings), got {type(value).__name__} {value!r}."
        )
    return {key: {_OPERATORS[operator]: value}}


# ---------------------------------------------------------------------------------------------------- files


def _require_local(fs: Any | None) -> None:
    if fs is not None and not isinstance(fs, LocalFileSystem):
        raise NotImplementedError(
            f"FairFaissVectorStore persists to local folders only (faiss writes local files), got {type(fs).__name__}."
        )


def _index_folder(path: Path) -> Path:
    """The FaissIndex folder of the store file `path`: default__vector_store.json → default__vector_store.index."""
    return path.with_name(path.stem + INDEX_SUFFIX)


def _read_store_file(path: Path, record: Snapshot | None) -> bytes:
    """The bytes of the store file persisted with the index (`read_companion`), or of `path` when none was.

    Raises:
        ChangedWhileReadingError: when a persist replaced the record meanwhile.
        FileNotFoundError: if there is no store file.
        ValueError: for a raw faiss file of the earlier FairFaissVectorStore (the message says how to convert it).
    """
    raw = read_companion(path, record)
    if raw is not None:
        return raw
    if not path.is_file():
        raise FileNotFoundError(
            f"No FairFaissVectorStore at {path}. Persist one first (index.storage_context.persist(persist_dir) "
            "or store.persist(path)), and pass that folder to from_persist_dir."
        )
    if _is_raw_faiss(path):
        raise ValueError(_legacy_message(path))
    return path.read_bytes()


def _is_raw_faiss(path: Path) -> bool:
    """Whether `path` is a faiss index file (its four-letter type code, 'IxFI', 'IxF2', 'IHNf', …) and not JSON."""
    with path.open("rb") as handle:
        head = handle.read(4)
    return len(head) == 4 and head[:1] == b"I" and head.isalnum()


def _legacy_message(path: Path) -> str:
    folder = str(path.parent)
    return (
        f"{path} is a raw faiss index, written by the earlier FairFaissVectorStore (a subclass of llama-index's "
        "FaissVectorStore) or by FaissVectorStore itself; its nodes are in docstore.json next to it. Convert the "
        f"folder once: store = FairFaissVectorStore.from_legacy_persist_dir({folder!r}); "
        "index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model); "
        f"index.storage_context.persist({folder!r}). Or rebuild the index from your documents."
    )


def _read_raw_faiss(path: Path) -> tuple[np.ndarray, Metric]:
    """The vectors (by position) and metric of a raw faiss file, as llama-index's FaissVectorStore wrote it.

    FaissIndex loads only its own folders, so this one conversion reads faiss directly.
    """
    faiss = import_faiss()
    raw = faiss.read_index(str(path))
    if int(raw.metric_type) not in (int(faiss.METRIC_INNER_PRODUCT), int(faiss.METRIC_L2)):
        raise ValueError(f"{path} uses faiss metric {raw.metric_type}; only inner product and L2 are converted.")
    metric: Metric = "ip" if int(raw.metric_type) == int(faiss.METRIC_INNER_PRODUCT) else "l2"
    try:
        vectors = raw.reconstruct_n(0, int(raw.ntotal)) if raw.ntotal else np.zeros((0, int(raw.d)), np.float32)
    except RuntimeError as error:
        raise ValueError(
            f"{path} ({type(raw).__name__}) cannot give its vectors back ({str(error).splitlines()[0]}); rebuild the "
            "index from your documents."
        ) from None
    return np.ascontiguousarray(vectors, dtype=np.float32).reshape(int(raw.ntotal), int(raw.d)), metric
