"""LlamaIndex integration of fair-retrieval: embeddings.

- `FairEmbedding`: embeds nodes position-fairly (attention calibration) and queries plainly.

The vector store, `FairFaissVectorStore`, has its own distribution in LlamaIndex's layout:
`pip install llama-index-vector-stores-fair` and `from llama_index.vector_stores.fair import FairFaissVectorStore`.
"""

from llama_index.embeddings.fair.base import FairEmbedding

__all__ = ["FairEmbedding"]
__version__ = "0.1.0"
