"""`WrappedStore`: what an adapter's store class reads off the `DocumentStore` it wraps, defined once.

Both adapters' store classes derive from it (beside their framework's base class) and keep their `DocumentStore` in
`_store`; the properties here are the same in both stacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fair_retrieval.index import Aggregate
from fair_retrieval.stores.document_store import DocumentStore
from fair_retrieval.stores.indexed_records import StoreIndex

__all__ = ["WrappedStore"]


class WrappedStore:
    """The read-only views of an adapter's store (`_store`, its `DocumentStore`)."""

    _store: DocumentStore[Any]

    @property
    def index(self) -> StoreIndex | None:
        """The `fair_retrieval.FaissIndex` (a `MultiVectorIndex` in multi-vector mode; None before the first add
        when the vector size was not given)."""
        return self._store.index

    @property
    def ids(self) -> list[str]:
        """The ids of the stored documents (nodes), in insertion order."""
        return self._store.records.keys

    @property
    def metric(self) -> str:
        """What the scores are: "cosine" or "ip" (inner products, larger is better), "l2" (squared distances)."""
        return self._store.metric

    @property
    def multivector(self) -> bool:
        """Whether documents are kept as the vectors of their windows (the index is a `MultiVectorIndex`)."""
        return self._store.multivector

    @property
    def aggregate(self) -> Aggregate | None:
        """How a multi-vector document's window scores become its score; None for a pooled store."""
        return self._store.mode.aggregate if self._store.multivector else None

    @property
    def embedder_identity(self) -> dict[str, Any] | None:
        """The identity of what made the vectors (`fair_retrieval.embedding.identity`): the embeddings the store
        was given, else the one a loaded store recorded; None when unknown."""
        return self._store.identity(with_mode=False)

    @property
    def store_identity(self) -> dict[str, Any] | None:
        """The identity a save records and a load checks: `embedder_identity` with a multi-vector store's mode."""
        return self._store.identity()

    @property
    def _int_ids(self) -> Mapping[str, int]:
        """The id map: the framework's id → the index's int64 id."""
        return self._store.records.int_ids

    @property
    def _next_int_id(self) -> int:
        """The int id the next new document takes."""
        return self._store.records.next_int_id
