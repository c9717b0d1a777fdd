"""Run the coroutine tests of this folder (ours and langchain-tests' standard suites) with pytest-asyncio.

LangChain's standard suites do not mark their async tests; partner packages set asyncio_mode="auto" for the whole
project. Marking them here keeps that setting local to this folder.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest


@pytest.hookimpl(tryfirst=True)
def pytest_pycollect_makeitem(collector: pytest.Collector, name: str, obj: Any) -> None:
    if inspect.iscoroutinefunction(obj) and collector.funcnamefilter(name):  # type: ignore[attr-defined]
        pytest.mark.asyncio(obj)
