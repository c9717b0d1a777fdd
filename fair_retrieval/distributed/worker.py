"""EmbedWorker: the callable class Ray Data runs in each worker; it loads the embedder once and embeds batches.

Ray constructs one instance per actor (`map_batches(EmbedWorker, compute=ActorPoolStrategy(...))`), so the model is
loaded once per worker and reused for every batch that worker receives.
"""

from __future__ import annotations

import logging
from typing import Any

from fair_retrieval.distributed.runtime import import_pyarrow
from fair_retrieval.distributed.shards import EMBEDDING_COLUMN, ID_COLUMN, WINDOW_COLUMNS, embeddings_to_arrow
from fair_retrieval.distributed.source import normalise_ids
from fair_retrieval.distributed.spec import EmbedderSpec
from fair_retrieval.stores import StoreWindows

logger = logging.getLogger(__name__)


class EmbedWorker:
    """Embed the documents of a pyarrow batch into (id, embedding) rows, or (multi-vector) one row per window.

    Args:
        spec: how to build the embedder.
        text_column: column holding the texts.
        id_column: column holding the ids.
        cpu_threads: torch threads for this worker (its share of the CPUs, so workers do not oversubscribe them);
            None keeps torch's default.
        windows: keep every window's vector: one row per window, consecutive per document, with its character
            span and weight (`shards.WINDOW_COLUMNS`), instead of one pooled row per document.
        store_windows: with `windows`, the window shape a store keeps (`fair_retrieval.stores.StoreWindows`: one
            `embed_document_windows` pass per size, as the stores call it); None: the embedder's own windows.
    """

    def __init__(
        self,
        spec: EmbedderSpec,
        text_column: str,
        id_column: str,
        cpu_threads: int | None = None,
        windows: bool = False,
        store_windows: StoreWindows | None = None,
    ) -> None:
        import ray
        import torch

        if cpu_threads is not None:
            torch.set_num_threads(max(1, int(cpu_threads)))
        has_gpu = bool(ray.get_gpu_ids())
        self._embedder = spec.build(has_gpu=has_gpu)
        self._text_column = text_column
        self._id_column = id_column
        self._keep_windows = windows
        self._shape = store_windows
        logger.info("Embedding worker ready: %r", self._embedder)

    def __call__(self, batch: Any) -> Any:
        """Embed `batch` (a pyarrow Table with the text and id columns); returns a Table of (id, embedding)."""
        pa = import_pyarrow()
        texts = batch.column(self._text_column).to_pylist()
        ids = normalise_ids(batch.column(self._id_column))
        if not self._keep_windows:
            vectors = self._embedder.embed_documents(texts, show_progress_bar=False)
            return pa.table({ID_COLUMN: ids, EMBEDDING_COLUMN: embeddings_to_arrow(vectors)})
        if self._shape is None:
            windows = self._embedder.embed_document_windows(texts, show_progress_bar=False)
        else:
            windows = self._shape.embed(self._embedder, texts)
        start, end, weight = WINDOW_COLUMNS
        return pa.table(
            {
                ID_COLUMN: ids.take(pa.array(windows.owners)),
                EMBEDDING_COLUMN: embeddings_to_arrow(windows.vectors),
                start: pa.array(windows.spans[:, 0]),
                end: pa.array(windows.spans[:, 1]),
                weight: pa.array(windows.weights),
            }
        )
