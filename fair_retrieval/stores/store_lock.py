"""One lock per store, so that threads sharing a store never see it half changed.

Every store here is a `StoreCore` (both stacks' adapters hold one): its records, id map, index and lexical side change
together, and a search reads several of them (the records to filter, the index to search, the lexical side, rebuilt
lazily after a change). A store makes one re-entrant lock (`new_store_lock`) and shares it with its
`IndexedRecords`; every write, every read that walks the records or the index, the lexical rebuild and a save run
under it (`locked`), so a thread sees the store before or after another thread's change, never during it.

What is slow and needs no store state runs outside the lock: a model embedding the texts of an add (embedded first,
then the lock is taken to store the vectors), or a query text. Searches run one at a time under the lock: a faiss
search of one query is short next to the embedding a text search needs first, and one lock keeps every reader
consistent with no reader/writer protocol to get wrong. The lock is re-entrant, so a locked call may call another.
"""

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterator
from typing import Any, ParamSpec, Protocol, TypeVar

__all__ = ["HoldsLock", "both_locked", "locked", "new_store_lock"]

P = ParamSpec("P")
T = TypeVar("T")


class HoldsLock(Protocol):
    """What `locked` methods belong to: an object with its store's lock."""

    @property
    def lock(self) -> Any:
        """The store's re-entrant lock."""
        ...


def new_store_lock() -> Any:
    """A new store lock: re-entrant, so a locked call may call another of the same store."""
    return threading.RLock()


def locked(method: Callable[P, T]) -> Callable[P, T]:
    """`method` run while holding its object's `lock` (the store's), so no other thread changes the store meanwhile."""

    @functools.wraps(method)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with args[0].lock:  # type: ignore[attr-defined]  # the method's self: a HoldsLock
            return method(*args, **kwargs)

    return run


@contextlib.contextmanager
def both_locked(first: HoldsLock, second: HoldsLock) -> Iterator[None]:
    """Hold the locks of two stores (a merge reads one and writes the other), always taken in the same order, so two
    threads merging the stores into each other cannot wait on each other forever."""
    one, two = sorted((first, second), key=id)
    with one.lock, two.lock:
        yield
