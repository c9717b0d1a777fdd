"""Fixtures of the distributed tests: one local Ray (2 CPUs) per session, a tiny model, faiss on one thread."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.models import build_tiny_model

pytest.importorskip("ray.data")
pytest.importorskip("pyarrow")
pytest.importorskip("faiss")


@pytest.fixture(scope="session")
def ray_local() -> Iterator[Any]:
    """A local Ray with 2 CPUs, started once for the whole session (start-up takes seconds)."""
    import ray

    started = not ray.is_initialized()
    if started:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    if started:
        ray.shutdown()


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A tiny random BERT with CLS pooling (fast to load in every Ray worker)."""
    return build_tiny_model("bert", "cls", Path(tmp_path_factory.mktemp("tiny-bert")))


@pytest.fixture(autouse=True, scope="session")
def one_faiss_thread() -> Iterator[None]:
    """Small indices: OpenMP threads only add contention on a busy 2-core runner."""
    import faiss

    threads = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(1)
    yield
    faiss.omp_set_num_threads(threads)
