"""Shared fixtures: the real MiniLM and tiny random models of several architectures (built once per session)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.models import build_tiny_model, minilm_path

logging.getLogger("transformers").setLevel(logging.ERROR)


@pytest.fixture(scope="session")
def minilm() -> str:
    """Folder of the real all-MiniLM-L6-v2."""
    return minilm_path()


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Folders of tiny random sentence-transformers models, keyed by '<arch>-<pooling>[-left]'."""
    specs = {
        "bert-cls": ("bert", "cls", "right"),
        "xlm-roberta-cls": ("xlm-roberta", "cls", "right"),
        "qwen3-last": ("qwen3", "lasttoken", "right"),
        "qwen3-last-left": ("qwen3", "lasttoken", "left"),
        "modernbert-cls": ("modernbert", "cls", "right"),
        "modernbert-mean": ("modernbert", "mean", "right"),
        "bert-mean": ("bert", "mean", "right"),
    }
    root = tmp_path_factory.mktemp("tiny")
    return {key: build_tiny_model(arch, mode, Path(root / key), side) for key, (arch, mode, side) in specs.items()}
