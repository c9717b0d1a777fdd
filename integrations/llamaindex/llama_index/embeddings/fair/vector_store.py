"""Deprecated: `FairFaissVectorStore` moved to llama-index-vector-stores-fair, `llama_index.vector_stores.fair`.

Importing this module still works while that distribution is installed: it gives the store's names from
`llama_index.vector_stores.fair.faiss_vector_store` (the same objects) and a DeprecationWarning naming the new import.
Without it, the import raises an ImportError that says what to install (`llama_index.embeddings.fair.moved`).
"""

from llama_index.embeddings.fair.moved import raise_if_store_missing, warn_moved

try:
    from llama_index.vector_stores.fair.faiss_vector_store import (
        BEST_WINDOW_KEY,
        DEFAULT_PERSIST_PATH,
        SUPPORTED_OPERATORS,
        FairFaissVectorStore,
    )
except ModuleNotFoundError as error:
    raise_if_store_missing(error)
    raise

warn_moved(__name__)

__all__ = ["BEST_WINDOW_KEY", "DEFAULT_PERSIST_PATH", "SUPPORTED_OPERATORS", "FairFaissVectorStore"]
