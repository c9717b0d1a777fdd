"""Pooling token vectors into one per text (`fair_retrieval.embedding.pooling`), for batches padded on either side."""

from __future__ import annotations

import torch

from fair_retrieval.embedding.pooling import pool
from fair_retrieval.engine.hook import pooled_token


def batch() -> dict[str, torch.Tensor]:
    """Two texts of 3 and 2 real tokens: the first right-padded, the second left-padded, one feature per token."""
    tokens = torch.arange(1.0, 9.0).reshape(2, 4, 1)  # [[1, 2, 3, 4], [5, 6, 7, 8]]
    mask = torch.tensor([[1, 1, 1, 0], [0, 0, 1, 1]])
    return {"token_embeddings": tokens, "attention_mask": mask}


def test_cls_and_last_read_the_first_and_last_real_token_whatever_the_padding_side() -> None:
    assert pool("cls", batch())[:, 0].tolist() == [1.0, 7.0]
    assert pool("last", batch())[:, 0].tolist() == [3.0, 8.0]


def test_mean_averages_the_real_tokens_only() -> None:
    assert pool("mean", batch())[:, 0].tolist() == [2.0, 7.5]


def test_a_row_without_real_tokens_still_names_a_position_inside_the_row() -> None:
    padding = torch.tensor([[False, False, False], [False, True, False]])
    assert pooled_token(padding, "cls").tolist() == [2, 1]
    assert pooled_token(padding, "last").tolist() == [0, 1]
