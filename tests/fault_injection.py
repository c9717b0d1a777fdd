"""Fault injection for the save/load tests: a child forked from a forkserver stops at the k-th file operation of a
save (os.replace / os.rename / os.fsync / os.unlink, and faiss' write of index.faiss, left half-written) and is
SIGKILLed there. Shared by tests/test_faults.py and the two stores' fault tests."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import faiss
import pytest

# the forkserver is shared by every test module of a session: preload what all fault tests need (missing ones skip)
PRELOAD = [
    "numpy",
    "faiss",
    "fair_retrieval.index",
    "fair_retrieval.cli",
    "langchain_core.embeddings",
    "langchain_fair",
]
CHILD_TIMEOUT_S = 120.0


class Interruption:
    """Counts the file operations of a save and, at the `pause_at`-th, writes `marker` and waits to be killed.

    Operations: os.replace, os.rename, os.fsync and os.unlink (before they run), and faiss.write_index (after it
    ran, with the file then cut in half, as a write stopped in the middle leaves it). With `pause_at=None` it only
    counts (`events`).
    """

    def __init__(self, pause_at: int | None = None, marker: Path | None = None) -> None:
        self.pause_at, self.marker, self.events = pause_at, marker, 0

    def _event(self) -> bool:
        self.events += 1
        return self.events == self.pause_at

    def _pause(self) -> None:
        assert self.marker is not None
        self.marker.write_text(str(self.events))
        time.sleep(CHILD_TIMEOUT_S)  # the parent kills us here
        os._exit(3)  # pragma: no cover - never killed: the parent failed already

    @contextlib.contextmanager
    def installed(self) -> Iterator[Interruption]:
        originals = {name: getattr(os, name) for name in ("replace", "rename", "fsync", "unlink")}
        write_index = faiss.write_index

        def wrap(name: str) -> Callable[..., Any]:
            def operation(*args: Any, **kwargs: Any) -> Any:
                if self._event():
                    self._pause()
                return originals[name](*args, **kwargs)

            return operation

        def partial_write(index: Any, path: Any) -> None:
            write_index(index, path)
            if self._event():
                with open(path, "r+b") as handle:
                    handle.truncate(os.path.getsize(path) // 2)
                self._pause()

        for name in originals:
            setattr(os, name, wrap(name))
        faiss.write_index = partial_write
        try:
            yield self
        finally:
            for name, original in originals.items():
                setattr(os, name, original)
            faiss.write_index = write_index


def forkserver_context() -> multiprocessing.context.BaseContext:
    """A forkserver context with PRELOAD loaded, so each killed child costs well under a second."""
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    return context


def run_child(context: Any, target: Callable[..., None], *args: Any, marker: Path) -> str:
    """Run `target(*args)` in a child; SIGKILL it once it wrote `marker`. Returns "killed" or "finished"."""
    process = context.Process(target=target, args=args)
    process.start()
    deadline = time.monotonic() + CHILD_TIMEOUT_S
    while not marker.exists() and process.is_alive():
        if time.monotonic() > deadline:
            os.kill(process.pid, signal.SIGKILL)
            pytest.fail(f"the child did not reach its interruption point in {CHILD_TIMEOUT_S} s")
        time.sleep(0.005)
    if marker.exists():
        os.kill(process.pid, signal.SIGKILL)
        process.join()
        assert process.exitcode == -signal.SIGKILL
        return "killed"
    process.join()
    assert process.exitcode == 0, f"the child failed (exit code {process.exitcode})"
    return "finished"


def load_while_saving(
    context: Any, save_repeatedly: Callable[[str, str], None], folder: Path, version: Callable[[Path], int]
) -> tuple[int, dict[int, int]]:
    """Load `folder` again and again for 3 s while a child saves versions 1 and 2 into it in turn.

    `save_repeatedly(folder, stop)` runs in the child until the file `stop` appears, then writes its save count into
    it; `version(folder)` loads the folder and says which version it holds (it must never fail). Returns the child's
    save count and how often each version was seen; loading goes on past 3 s (up to 30 s more) until each version was
    seen three times.
    """
    stop = folder.parent / f"{folder.name}.stop"
    writer = context.Process(target=save_repeatedly, args=(str(folder), str(stop)))
    writer.start()
    seen: dict[int, int] = {1: 0, 2: 0}
    try:
        deadline = time.monotonic() + 3.0
        while time.monotonic() < deadline or min(seen.values()) < 3:
            seen[version(folder)] += 1  # every load succeeds, and holds one version whole
            assert time.monotonic() < deadline + 30, seen
    finally:
        stop.write_text("")
        writer.join(timeout=30)
    assert writer.exitcode == 0
    return int(stop.read_text() or 0), seen
