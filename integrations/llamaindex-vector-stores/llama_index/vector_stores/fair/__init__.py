"""LlamaIndex vector store of fair-retrieval (llama-index-vector-stores-fair).

- `FairFaissVectorStore`: a vector store on `fair_retrieval.FaissIndex` that deletes, upserts, filters inside the
  search, persists without pickle and, with `multivector=True`, returns k distinct nodes by their best window.
- `FairQdrantVectorStore`: the same store (best windows + BM25) in a Qdrant collection (`pip install qdrant-client`).
- `BEST_WINDOW_KEY`: the metadata key of a multi-vector hit's best window; `SUPPORTED_OPERATORS`: the
  `FilterOperator`s the store applies.
- `StoreConflictError` (`persist` over a store persisted since this one was loaded) and `DamagedFileError`.
"""

from llama_index.vector_stores.fair.faiss_vector_store import BEST_WINDOW_KEY, SUPPORTED_OPERATORS, FairFaissVectorStore
from llama_index.vector_stores.fair.qdrant_vector_store import FairQdrantVectorStore

from fair_retrieval.stores import DamagedFileError, StoreConflictError

__all__ = [
    "BEST_WINDOW_KEY",
    "SUPPORTED_OPERATORS",
    "DamagedFileError",
    "FairFaissVectorStore",
    "FairQdrantVectorStore",
    "StoreConflictError",
]
__version__ = "0.1.0"
