"""LlamaIndex integration of fair-retrieval: embeddings.

- `FairEmbedding`: embeds nodes position-fairly (attention calibration) and queries plainly.
- `StoreConflictError`, `DamagedFileError`: the errors of fair-retrieval's stores (persisting over a store another
  process persisted after this one was loaded; a damaged store file), also exported by the vector store package.

The vector store, `FairFaissVectorStore`, has its own distribution in LlamaIndex's layout:
`pip install llama-index-vector-stores-fair` and `from llama_index.vector_stores.fair import FairFaissVectorStore`.
`from llama_index.embeddings.fair import FairFaissVectorStore` still gives it, with a DeprecationWarning, while that
distribution is installed (an ImportError saying what to install otherwise).
"""

from typing import Any

from llama_index.embeddings.fair.base import FairEmbedding
from llama_index.embeddings.fair.moved import raise_if_store_missing, warn_moved

from fair_retrieval.stores import DamagedFileError, StoreConflictError

__all__ = ["DamagedFileError", "FairEmbedding", "StoreConflictError"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    """`FairFaissVectorStore`, deprecated here: the store of llama-index-vector-stores-fair, with a warning."""
    if name == "FairFaissVectorStore":
        try:
            from llama_index.vector_stores.fair import FairFaissVectorStore
        except ModuleNotFoundError as error:
            raise_if_store_missing(error)
            raise
        warn_moved(f"{__name__}.FairFaissVectorStore")
        return FairFaissVectorStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
