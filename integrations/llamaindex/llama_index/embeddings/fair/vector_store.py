"""FairFaissVectorStore: llama-index's FaissVectorStore that uses a GPU when faiss has one, and still persists.

llama-index-vector-stores-faiss writes its faiss index as it is, and faiss cannot write a GPU index. This subclass
writes a CPU copy instead, and moves a loaded index back to the GPU(s) when faiss sees one — the same rule
`fair_retrieval.FaissIndex` follows. On a CPU-only machine (faiss-cpu) it behaves exactly like its parent.

Needs the optional dependency: pip install "llama-index-embeddings-fair[faiss]".
"""

from __future__ import annotations

import logging
from typing import Any, Literal

from fair_retrieval.gpu import GpuChoice, gpu_count, import_faiss, index_to_cpu, index_to_gpus

try:
    from fsspec.implementations.local import LocalFileSystem
    from llama_index.vector_stores.faiss import FaissVectorStore
    from llama_index.vector_stores.faiss.base import DEFAULT_PERSIST_PATH
except ImportError as error:  # pragma: no cover - depends on the environment
    raise ImportError(
        "FairFaissVectorStore needs llama-index-vector-stores-faiss: pip install 'llama-index-embeddings-fair[faiss]'."
    ) from error

logger = logging.getLogger(__name__)


class FairFaissVectorStore(FaissVectorStore):
    """A llama-index `FaissVectorStore` whose index lives on the GPU(s) when faiss sees one.

    Use it wherever `FaissVectorStore` is used (`StorageContext.from_defaults(vector_store=...)`,
    `from_persist_dir`); `persist` writes a CPU copy of a GPU index, and loading moves it back to the GPU.

    Example:
        .. code-block:: python

            store = FairFaissVectorStore.create(dim=embed_model.embedder.dimension)  # GPU if available
            context = StorageContext.from_defaults(vector_store=store)
            index = VectorStoreIndex(nodes, storage_context=context, embed_model=embed_model)
            index.storage_context.persist("storage")
            store = FairFaissVectorStore.from_persist_dir("storage")
    """

    @classmethod
    def create(cls, dim: int, metric: Literal["ip", "l2"] = "ip", gpu: GpuChoice = "auto") -> FairFaissVectorStore:
        """A store over a new exact (flat) faiss index.

        Args:
            dim: vector size (`FairEmbedding(...).embedder.dimension`).
            metric: "ip" (inner product = cosine for FairEmbedding's unit vectors) or "l2".
            gpu: "auto" uses the GPU(s) when faiss sees one; True requires one; False stays on CPU.

        Raises:
            ValueError: bad dim or metric, or gpu=True without a GPU.
        """
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 1:
            raise ValueError(f"dim must be a positive int (the embedding size), got {dim!r}.")
        if metric not in ("ip", "l2"):
            raise ValueError(f"metric must be 'ip' or 'l2', got {metric!r}.")
        faiss = import_faiss()
        index = faiss.IndexFlatIP(dim) if metric == "ip" else faiss.IndexFlatL2(dim)
        return cls(faiss_index=to_gpu(index, gpu))  # type: ignore[call-arg]

    @classmethod
    def from_persist_path(
        cls, persist_path: str, fs: Any | None = None, gpu: GpuChoice = "auto"
    ) -> FairFaissVectorStore:
        """Load a persisted index (written from CPU or GPU) and move it to the GPU(s) when wanted and present."""
        store = super().from_persist_path(persist_path, fs=fs)
        return cls(faiss_index=to_gpu(store.client, gpu))  # type: ignore[call-arg]

    def persist(self, persist_path: str = DEFAULT_PERSIST_PATH, fs: Any | None = None) -> None:
        """Write the index to `persist_path`; a GPU index is copied to CPU first (faiss cannot write GPU indices)."""
        if fs and not isinstance(fs, LocalFileSystem):
            raise NotImplementedError("FAISS only supports local storage for now.")
        live = self._faiss_index
        self._faiss_index = to_cpu(live)
        try:
            super().persist(persist_path, fs=fs)
        finally:
            self._faiss_index = live


def to_gpu(index: Any, gpu: GpuChoice = "auto") -> Any:
    """`index` on all GPUs faiss sees (gpu="auto"/True), or unchanged on CPU (gpu=False, or none with "auto")."""
    count = gpu_count(gpu)
    if count == 0:
        return index
    logger.info("Moving the faiss index to %d GPU(s).", count)
    return index_to_gpus(index, count)[0]  # faiss' all-GPU cloner keeps its GPU resources referenced


def to_cpu(index: Any) -> Any:
    """A CPU copy of a GPU index (faiss can only write CPU indices); a CPU index is returned as it is."""
    return index_to_cpu(index)
