"""Stress tests of concurrent writers: N processes each run M load → add → save cycles on one folder, retrying a
cycle on `StoreConflictError`, and report every save that returned; optionally one writer is SIGKILLed in the middle
of a save. Shared by tests/test_concurrent_writers.py and the two stores' concurrency tests."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fair_retrieval.stores import StoreConflictError
from tests.fault_injection import CHILD_TIMEOUT_S, Interruption

WRITERS = 3
CYCLES = 10
MAX_ATTEMPTS = 500


def write_cycles(
    cycle: Callable[[str, str], None],
    folder: str,
    writer: int,
    cycles: int,
    report: str,
    pause_at: int | None,
    marker: str,
) -> None:
    """Run `cycle(folder, key)` (load, add `key`, save) `cycles` times, retrying on StoreConflictError; append each
    key to `report` once its save returned. With `pause_at`, the save of the middle cycle stops at that file
    operation (`Interruption`) and waits to be killed."""
    for number in range(cycles):
        key = f"w{writer}-c{number}"
        interrupt = pause_at is not None and number == cycles // 2
        for _ in range(MAX_ATTEMPTS):
            try:
                with Interruption(pause_at, Path(marker)).installed() if interrupt else contextlib.nullcontext():
                    cycle(folder, key)
                break
            except StoreConflictError:
                continue
        else:  # pragma: no cover - the test fails on the missing key
            raise AssertionError(f"{key}: {MAX_ATTEMPTS} conflicts in a row")
        with open(report, "a", encoding="utf-8") as handle:
            handle.write(key + "\n")


def run_writers(
    context: Any,
    cycle: Callable[[str, str], None],
    folder: Path,
    *,
    writers: int = WRITERS,
    cycles: int = CYCLES,
    kill: tuple[int, int] | None = None,
) -> tuple[set[str], set[str]]:
    """Run `writers` processes of `write_cycles` on `folder` and wait for them.

    Args:
        context: a multiprocessing context (`fault_injection.forkserver_context`).
        cycle: the load → add → save of one key (a module-level function, so that it reaches the children).
        folder: the folder they all write.
        writers: how many processes.
        cycles: the cycles of each.
        kill: (writer, k): that writer's middle save is SIGKILLed at its k-th file operation.

    Returns:
        The keys whose saves returned, and the key of the killed save (empty without `kill`).
    """
    reports = [folder.parent / f"{folder.name}.writer{number}" for number in range(writers)]
    marker = folder.parent / f"{folder.name}.killed"
    processes = []
    for number in range(writers):
        pause_at = kill[1] if kill is not None and kill[0] == number else None
        args = (cycle, str(folder), number, cycles, str(reports[number]), pause_at, str(marker))
        processes.append(context.Process(target=write_cycles, args=args))
    for process in processes:
        process.start()
    in_flight: set[str] = set()
    try:
        if kill is not None:
            victim = processes[kill[0]]
            deadline = time.monotonic() + CHILD_TIMEOUT_S
            while not marker.exists() and victim.is_alive() and time.monotonic() < deadline:
                time.sleep(0.005)
            assert marker.exists(), "the writer to kill never reached its interruption point"
            os.kill(victim.pid, signal.SIGKILL)
            in_flight = {f"w{kill[0]}-c{cycles // 2}"}
        for process in processes:
            process.join(timeout=CHILD_TIMEOUT_S)
    finally:
        for process in processes:
            if process.is_alive():
                os.kill(process.pid, signal.SIGKILL)
                process.join()
    for number, process in enumerate(processes):
        expected = -signal.SIGKILL if kill is not None and kill[0] == number else 0
        assert process.exitcode == expected, f"writer {number} exited with {process.exitcode}"
    saved = {line for report in reports if report.exists() for line in report.read_text().split()}
    return saved, in_flight


def expected_keys(writers: int = WRITERS, cycles: int = CYCLES) -> set[str]:
    """Every key `run_writers` saves when nothing is killed."""
    return {f"w{writer}-c{number}" for writer in range(writers) for number in range(cycles)}


def run_threads(workers: list[Callable[[], None]], timeout_s: float = 120.0) -> list[BaseException]:
    """Run each worker in a thread of its own, all released at once (a barrier), and wait for them; returns what
    they raised (none of a thread-safe store). A thread still running after `timeout_s` fails the test."""
    import threading

    errors: list[BaseException] = []
    start = threading.Barrier(len(workers))

    def guarded(work: Callable[[], None]) -> None:
        start.wait()
        try:
            work()
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=guarded, args=(work,), daemon=True) for work in workers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=timeout_s)
    assert not any(thread.is_alive() for thread in threads), "a thread still runs: the store deadlocked"
    return errors
