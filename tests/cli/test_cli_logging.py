"""What the CLI lets its dependencies say: bm25s's DEBUG lines only with -vv, transformers' weight-loading bar only
with -v; and how it words an index kind."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
from transformers.utils import logging as transformers_logging

from fair_retrieval.cli import quiet_dependencies
from fair_retrieval.cli.cmd_index import index_words


@pytest.fixture()
def restored() -> Iterator[None]:
    level = logging.getLogger("bm25s").level
    yield
    logging.getLogger("bm25s").setLevel(level)
    transformers_logging.enable_progress_bar()


@pytest.mark.usefixtures("restored")
def test_bm25s_debug_lines_and_the_loading_bar_follow_the_verbosity() -> None:
    logging.getLogger("bm25s").setLevel(logging.DEBUG)  # what bm25s sets for itself
    quiet_dependencies(0)
    assert not logging.getLogger("bm25s").isEnabledFor(logging.DEBUG)
    assert not transformers_logging.is_progress_bar_enabled()
    quiet_dependencies(1)
    assert not logging.getLogger("bm25s").isEnabledFor(logging.DEBUG)
    assert transformers_logging.is_progress_bar_enabled()
    quiet_dependencies(2)
    assert logging.getLogger("bm25s").isEnabledFor(logging.DEBUG)


def test_an_index_kind_is_said_in_words() -> None:
    assert index_words("flat", SimpleNamespace(factory="Flat")) == "flat index"
    assert index_words("custom", SimpleNamespace(factory="OPQ16,IVF4,PQ16")) == "custom faiss index 'OPQ16,IVF4,PQ16'"
    assert index_words("compressed", None).startswith("compressed index (window codes in memory")


def test_bm25s_stays_quiet_when_it_is_imported_after_the_cli_set_its_level() -> None:
    """bm25s sets its logger to DEBUG on import; a command imports it lazily, after the CLI set the level."""
    import subprocess
    import sys

    script = (
        "import logging; from fair_retrieval.cli import quiet_dependencies; quiet_dependencies(0); import bm25s; "
        "print(logging.getLogger('bm25s').isEnabledFor(logging.DEBUG))"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert run.stdout == "False\n"
