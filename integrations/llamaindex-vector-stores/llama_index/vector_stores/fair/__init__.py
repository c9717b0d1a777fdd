"""LlamaIndex vector store of fair-retrieval: `FairFaissVectorStore`, on `fair_retrieval.FaissIndex`.

- `FairFaissVectorStore`: a vector store on `fair_retrieval.FaissIndex` (GPU when faiss has one) that keeps the
  nodes, deletes and upserts (IngestionPipeline docstore strategies), applies metadata filters inside the search,
  and persists without pickle (needs faiss: the `faiss` or `gpu` extra); with `multivector=True` it keeps each node
  as its window vectors (taken from a `FairEmbedding`, llama-index-embeddings-fair) and returns k distinct nodes by
  their best window.
- `BEST_WINDOW_KEY`: the metadata key under which a multi-vector hit carries its best window's span.
- `SUPPORTED_OPERATORS`: the `FilterOperator`s the store applies.
- `StoreConflictError`: raised by `persist` when another process persisted there after this store was loaded
  (reload and retry); `DamagedFileError`: raised by `from_persist_dir` for a damaged file.

This distribution (llama-index-vector-stores-fair) follows LlamaIndex's layout: embeddings live under
`llama_index.embeddings`, vector stores under `llama_index.vector_stores`. The store used to be importable from
`llama_index.embeddings.fair`, which still forwards to it with a DeprecationWarning.
"""

from llama_index.vector_stores.fair.vector_store import BEST_WINDOW_KEY, SUPPORTED_OPERATORS, FairFaissVectorStore

from fair_retrieval.stores import DamagedFileError, StoreConflictError

__all__ = ["BEST_WINDOW_KEY", "SUPPORTED_OPERATORS", "DamagedFileError", "FairFaissVectorStore", "StoreConflictError"]
__version__ = "0.1.0"
