"""LangChain integration of fair-retrieval.

- `FairEmbeddings`: calibrated (position-fair) document embeddings, plain query embeddings.
- `FaissVectorStore`: a FAISS vector store on `fair_retrieval.FaissIndex`, saved as JSON + faiss files (no pickle).
- `FairQdrantVectorStore`: the same store (best windows + BM25) in a Qdrant collection (`pip install qdrant-client`).
- `StoreConflictError` (`save_local` over a folder saved since the store was loaded), `DamagedFileError`.
"""

from fair_retrieval.stores import DamagedFileError, StoreConflictError
from langchain_fair.embeddings import FairEmbeddings
from langchain_fair.qdrant import FairQdrantVectorStore
from langchain_fair.vectorstores import FaissVectorStore

__all__ = ["DamagedFileError", "FairEmbeddings", "FairQdrantVectorStore", "FaissVectorStore", "StoreConflictError"]
__version__ = "0.1.0"
