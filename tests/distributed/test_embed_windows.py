"""Boundary windows on Ray: `embed_to_shards` with window_boundaries="text" gives the single-process vectors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from fair_retrieval import FairEmbedder
from fair_retrieval.distributed import EmbedderSpec, ShardFolder, embed_to_shards
from tests.embedding.test_boundaries import article

OPTIONS = {"window_boundaries": "text", "window_tokens": 24, "calibration": None}


def test_ray_gives_the_boundary_windows_of_one_process(ray_local: Any, tiny_bert: str, tmp_path: Path) -> None:
    texts = [article(51, paragraphs=4, words=(3, 6)), "Short.", article(52, paragraphs=2, words=(3, 6))]
    ids = ["a", "b", "c"]
    dataset = ray_local.data.from_arrow(pa.table({"id": ids, "text": texts}))
    spec = EmbedderSpec(tiny_bert, **OPTIONS)
    embed_to_shards(dataset, tmp_path / "shards", spec, workers=1, show_progress_bar=False, multivector=True)
    folder = ShardFolder(tmp_path / "shards")
    expected = FairEmbedder(tiny_bert, **OPTIONS).embed_document_windows(texts)  # type: ignore[arg-type]
    assert len(expected.vectors) > len(texts) + 2  # windowed at the text's boundaries
    rows = [folder.read_windows(path) for path in folder.files()]
    owners = np.concatenate([r[0].to_numpy(zero_copy_only=False) for r in rows])
    order = np.argsort([ids.index(owner) for owner in owners], kind="stable")  # shards may come in any order
    np.testing.assert_allclose(np.concatenate([r[1] for r in rows])[order], expected.vectors, atol=1e-5)
    np.testing.assert_array_equal(np.concatenate([r[2] for r in rows])[order], expected.spans)
