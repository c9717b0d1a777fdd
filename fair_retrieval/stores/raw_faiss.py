"""Bare faiss files, the format of folders written by earlier stores, read once for their conversion.

`FaissIndex` loads only its own folders (faiss' binary plus a JSON record); llama-index's FaissVectorStore, and the
first FairFaissVectorStore built on it, wrote a bare faiss index where a store file now stands. These functions
recognise such a file and read its vectors back, so that an adapter can rebuild a store from them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from fair_retrieval.index.gpu import import_faiss
from fair_retrieval.index.inspection import Metric

__all__ = ["is_raw_faiss", "looks_like_raw_faiss", "read_raw_faiss"]


def looks_like_raw_faiss(head: bytes) -> bool:
    """Whether the first bytes of a file are a faiss index type code ('IxFI', 'IxF2', 'IHNf', …), not JSON."""
    return len(head) >= 4 and head[:1] == b"I" and head[:4].isalnum()


def is_raw_faiss(path: Path) -> bool:
    """Whether the file `path` is a bare faiss index (see `looks_like_raw_faiss`)."""
    with path.open("rb") as handle:
        return looks_like_raw_faiss(handle.read(4))


def read_raw_faiss(path: Path) -> tuple[np.ndarray, Metric]:
    """The vectors (row i: the vector at faiss position i) and the metric of a bare faiss index file.

    Raises:
        ValueError: a metric other than inner product and L2, or an index that cannot give its vectors back.
    """
    faiss = import_faiss()
    raw = faiss.read_index(str(path))
    if int(raw.metric_type) not in (int(faiss.METRIC_INNER_PRODUCT), int(faiss.METRIC_L2)):
        raise ValueError(f"{path} uses faiss metric {raw.metric_type}; only inner product and L2 are converted.")
    metric: Metric = "ip" if int(raw.metric_type) == int(faiss.METRIC_INNER_PRODUCT) else "l2"
    try:
        vectors = raw.reconstruct_n(0, int(raw.ntotal)) if raw.ntotal else np.zeros((0, int(raw.d)), np.float32)
    except RuntimeError as error:
        raise ValueError(
            f"{path} ({type(raw).__name__}) cannot give its vectors back ({str(error).splitlines()[0]}); rebuild the "
            "index from your documents."
        ) from None
    return np.ascontiguousarray(vectors, dtype=np.float32).reshape(int(raw.ntotal), int(raw.d)), metric
