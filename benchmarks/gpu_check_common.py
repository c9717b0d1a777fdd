"""What every check of benchmarks/gpu_check.py shares: its sizes, the report's lines and how one check is run."""

from __future__ import annotations

import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass

DOCS = 16
SPEED_DOCS, SPEED_ROUNDS = 64, 7
MAX_LENGTH = 512
VECTORS, QUERIES, DIM, K = 20_000, 200, 384, 10


@dataclass
class Result:
    """One line of the report."""

    name: str
    status: str  # PASS, FAIL or SKIP
    detail: str
    seconds: float = 0.0


class ToleranceError(Exception):
    """A measured value is outside its tolerance."""


def expect(condition: bool, message: str) -> None:
    """Raise ToleranceError with `message` unless `condition` holds."""
    if not condition:
        raise ToleranceError(message)


def run_check(results: list[Result], name: str, check: Callable[[], str]) -> None:
    """Run one check, recording PASS with its detail, SKIP (a `SKIP: ...` detail) or FAIL (any exception)."""
    start = time.perf_counter()
    try:
        detail = check()
        status = "SKIP" if detail.startswith("SKIP: ") else "PASS"
        detail = detail.removeprefix("SKIP: ")
    except ToleranceError as failure:
        status, detail = "FAIL", str(failure)
    except Exception as error:  # a crash is a failure of this check, not of the whole report
        status, detail = "FAIL", f"{type(error).__name__}: {error}"
        traceback.print_exc(file=sys.stderr)
    results.append(Result(name, status, detail, time.perf_counter() - start))
    print(f"{status:<4}  {name:<42} {detail}", flush=True)


def long_texts(count: int, words: int = 220) -> list[str]:
    """`count` passages of `words` words (220: roughly 250–500 MiniLM tokens, more than one 128-token basket;
    450: over 512 tokens, truncated), from Python's docs."""
    from pydoc_data.topics import topics

    prose = " ".join(" ".join(topics[key].split()) for key in sorted(topics)).split()
    return [" ".join(prose[i * 300 : i * 300 + words]) for i in range(count)]
