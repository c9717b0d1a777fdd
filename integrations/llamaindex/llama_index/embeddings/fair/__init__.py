"""LlamaIndex integration of fair-retrieval.

- `FairEmbedding`: embeds nodes position-fairly (attention calibration) and queries plainly.
- `FairFaissVectorStore`: a vector store on `fair_retrieval.FaissIndex` (GPU when faiss has one) that keeps the
  nodes, deletes and upserts (IngestionPipeline docstore strategies), applies metadata filters inside the search,
  and persists without pickle (needs faiss: the `faiss` extra; imported on first use); with `multivector=True` it
  keeps each node as its window vectors and returns k distinct nodes by their best window.
- `StoreConflictError`: raised by `persist` when another process persisted there after this store was loaded
  (reload and retry); `DamagedFileError`: raised by `from_persist_dir` for a damaged file.
"""

from typing import Any

from llama_index.embeddings.fair.base import FairEmbedding

from fair_retrieval.stores import DamagedFileError, StoreConflictError

__all__ = ["DamagedFileError", "FairEmbedding", "FairFaissVectorStore", "StoreConflictError"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "FairFaissVectorStore":  # moved to llama-index-vector-stores-fair (llama_index.vector_stores.fair)
        from llama_index.vector_stores.fair import FairFaissVectorStore

        return FairFaissVectorStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
