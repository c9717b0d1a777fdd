"""LlamaIndex integration of fair-retrieval.

- `FairEmbedding`: embeds nodes position-fairly (attention calibration) and queries plainly.
- `FairFaissVectorStore`: llama-index's FaissVectorStore on the GPU when faiss has one, still persistable
  (needs the `faiss` extra; imported on first use).
"""

from typing import Any

from llama_index.embeddings.fair.base import FairEmbedding

__all__ = ["FairEmbedding", "FairFaissVectorStore"]
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    if name == "FairFaissVectorStore":  # lazy: llama-index-vector-stores-faiss is optional
        from llama_index.embeddings.fair.vector_store import FairFaissVectorStore

        return FairFaissVectorStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
