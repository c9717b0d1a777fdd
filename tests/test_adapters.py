"""fair_retrieval.adapters: the adapters' plumbing, out of the package root's public names, importable from both."""

from __future__ import annotations

import fair_retrieval
import fair_retrieval.adapters as adapters


def test_the_adapter_helpers_have_their_own_module_and_stay_importable_from_the_root() -> None:
    for name in adapters.__all__:
        assert name not in fair_retrieval.__all__
        assert getattr(fair_retrieval, name) is getattr(adapters, name)
