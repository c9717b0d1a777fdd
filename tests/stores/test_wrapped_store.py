"""WrappedStore: the properties an adapter's store class reads off its DocumentStore."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import pytest

from fair_retrieval.stores import DocumentStore, WrappedStore

pytest.importorskip("faiss")


class Doc(NamedTuple):
    key: str


class Adapter(WrappedStore):
    def __init__(self, store: DocumentStore[Doc]) -> None:
        self._store = store


def test_the_views_read_the_core_store() -> None:
    core: DocumentStore[Doc] = DocumentStore(metric="l2", gpu=False)
    adapter = Adapter(core)
    assert adapter.index is None and adapter.metric == "l2" and not adapter.multivector and adapter.aggregate is None
    core.add([Doc("a"), Doc("b")], np.eye(2, 3, dtype=np.float32))
    assert adapter.index is core.index and adapter.ids == ["a", "b"]
    assert dict(core.records.int_ids) == {"a": 0, "b": 1} and core.records.next_int_id == 2
    assert adapter.embedder_identity is None and adapter.store_identity is None


class Base:
    """A framework's base class: what `_hold` builds before it keeps the store."""

    def __init__(self, *, flag: bool = False) -> None:
        self.flag = flag


class Framed(WrappedStore, Base):
    def __init__(self, **options: object) -> None:
        raise AssertionError("a loaded store is not built by the adapter's constructor")


def test_a_loaded_store_is_held_without_the_adapters_constructor() -> None:
    core: DocumentStore[Doc] = DocumentStore(metric="ip", gpu=False)
    held = Framed.around(core, flag=True)
    assert isinstance(held, Framed) and held._store is core and held.flag is True and held.metric == "ip"
