"""Reading a `FairFaissVectorStore`: `get_nodes` and `query` (the base class that holds them), with the restriction
of node ids, document ids and metadata filters that both share.

The store class provides its records (`fair_retrieval.stores.IndexedRecords`: the nodes, the id map and the index);
the search itself, restricted inside faiss, is the records' (`search_hits`), and the filters' translation is
`llama_index.vector_stores.fair.filters`'.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from llama_index.core.schema import BaseNode
from llama_index.core.vector_stores.types import (
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.vector_stores.fair.filters import metadata_predicate
from llama_index.vector_stores.fair.nodes import StoredNode, node_metadata, restored_node, with_best_window

from fair_retrieval.stores import IndexedRecords, id_strings, positive_int

__all__ = ["StoreReading"]


class StoreReading:
    """`get_nodes` and `query` of `FairFaissVectorStore`, its base class."""

    _records: IndexedRecords[StoredNode]

    @property
    def _int_ids(self) -> Mapping[str, int]:
        """The id map: node id → the index's int64 id."""
        return self._records.int_ids

    def get_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None) -> list[BaseNode]:
        """Copies of stored nodes, with their embeddings: those in `node_ids` (in that order; unknown ids are
        skipped) and/or matching `filters`; every node (in insertion order) when both are None.

        Raises:
            ValueError: a filter this store cannot apply.
            TypeError: node_ids given as one string, or filters that are not MetadataFilters.
        """
        selected = self._select(node_ids, None, filters, empty_means_all=False)
        if selected is None:
            int_ids = list(self._records.records)
        elif node_ids is not None:  # the caller's order
            chosen = set(selected)
            int_ids = [
                self._int_ids[node_id] for node_id in dict.fromkeys(node_ids) if self._int_ids.get(node_id) in chosen
            ]
        else:
            chosen = set(selected)
            int_ids = [int_id for int_id in self._records.records if int_id in chosen]
        if not int_ids:
            return []
        vectors = self._records.vectors(int_ids)
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
          They follow `fair_retrieval.stores.filters`: a missing field matches only NE, NIN and IS_EMPTY; values compare
          within a type family (numbers with numbers, strings with strings: "2024" is not 2024); IS_EMPTY matches
          a field that is absent, None, "" or [].

        Args:
            query: the llama-index query; only mode DEFAULT (dense vector search) is supported.
            **kwargs: unused; accepted for LlamaIndex compatibility.

        In multi-vector mode the result holds `similarity_top_k` distinct nodes ranked by the store's aggregate
        of their windows' scores, and each returned node carries its best window under `BEST_WINDOW_KEY` in its
        metadata: {"start", "end"} (the character span in `node.get_content()`) and "window" (its position among
        the node's windows). The key is excluded from the text embed models and LLMs see; stored nodes do not
        change.

        Returns:
            nodes (copies, without embeddings), their ids, and similarities: inner products for metric "ip"
            (larger is better), squared L2 distances for "l2" (smaller is better); in multi-vector mode the
            aggregate of those.

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
        top_k = positive_int(query.similarity_top_k, "similarity_top_k")
        if query.query_embedding is None:
            raise ValueError(
                "The query has no query_embedding: this store searches by vector. Embed the query with the store's "
                "embed model (retrievers do this), or set VectorStoreQuery(query_embedding=...)."
            )
        vector = np.asarray(query.query_embedding, dtype=np.float32)
        selected = self._select(query.node_ids, query.doc_ids, query.filters, empty_means_all=True)
        if vector.ndim != 1:
            raise ValueError(f"query_embedding must be one vector (a list of floats), got shape {vector.shape}.")
        index = self._records.index
        if index is not None and vector.size != index.dim:
            raise ValueError(
                f"query_embedding has {vector.size} dimensions but this store holds {index.dim}-d vectors; "
                "embed the query with the model the store was built with."
            )
        hits = self._records.search_hits(vector[None, :], top_k, selected)
        nodes = []
        for int_id, _, best_window in hits:
            node = self._node(int_id)
            nodes.append(node if best_window is None else with_best_window(node, best_window))
        return VectorStoreQueryResult(
            nodes=nodes,
            similarities=[score for _, score, _ in hits],
            ids=[self._records.records[int_id].key for int_id, _, _ in hits],
        )

    def _node(self, int_id: int) -> BaseNode:
        """A new node object from the stored JSON form, so callers cannot change the store through it."""
        return restored_node(self._records.records[int_id])

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
            wanted = id_strings(node_ids, "node_ids")
            chosen = {self._int_ids[node_id] for node_id in wanted if node_id in self._records}
        if doc_ids is not None and (doc_ids or not empty_means_all):
            wanted = id_strings(doc_ids, "doc_ids")
            in_documents = set().union(*(self._records.group(doc_id) for doc_id in wanted))
            chosen = in_documents if chosen is None else chosen & in_documents
        predicate = metadata_predicate(filters)
        if predicate is not None:
            chosen = set(self._records.matching(lambda record: predicate(node_metadata(record)), chosen))
        return None if chosen is None else sorted(chosen)
