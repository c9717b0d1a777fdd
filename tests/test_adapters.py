"""fair_retrieval.adapters: the adapters' plumbing, in its own module and out of the package root."""

from __future__ import annotations

import fair_retrieval
import fair_retrieval.adapters as adapters


def test_the_adapter_helpers_have_their_own_module_and_only_it() -> None:
    for name in adapters.__all__:
        assert name not in fair_retrieval.__all__
        assert not hasattr(fair_retrieval, name), name  # no re-export at the root: one import path for each
        assert getattr(adapters, name) is not None
