"""Bookkeeping benchmark: memory and time of a MultiVectorIndex's window table and FaissIndex's id set, against
another checkout of the library (e.g. the release before the table moved to numpy arrays), in one run.

Synthetic documents of `--per-document` windows each, 8-d vectors (so faiss' own work is small and the bookkeeping
shows), added in batches of `--batch` documents to a flat index; then 20 searches (k=10), a removal of 10% of the
documents in one call, a save, and a load in a fresh process followed by the same searches. Every phase runs in its
own process per implementation, twice: once timed, once under `tracemalloc` (Python and NumPy allocations, not
faiss' C++ ones; its times are not used), so the memory columns are the bookkeeping's own. RSS is the process'
peak resident set (faiss' vectors and ids included, equal for both).

    python benchmarks/window_bookkeeping.py --baseline ../other-checkout --windows 1000000 10000000
    python benchmarks/window_bookkeeping.py --windows 200000              # the current code alone

`--baseline` is the root of another checkout of fair-retrieval, imported instead of this one (PYTHONPATH) in its
processes; the table gives baseline / current ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np

DIM = 8
QUERIES = 20
TABLE_FILES = ("windows.json", "windows.npy", "document_windows.npy")


def batch_windows(start: int, documents: int, per_document: int, seed: int) -> Any:
    """`documents` synthetic documents of `per_document` unit 8-d windows each (spans 100 characters apart)."""
    from fair_retrieval import DocumentWindows

    rng = np.random.default_rng(seed + start)
    count = documents * per_document
    vectors = rng.normal(size=(count, DIM)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    owners = np.repeat(np.arange(documents, dtype=np.int64), per_document)
    starts = np.tile(np.arange(per_document, dtype=np.int64) * 100, documents)
    spans = np.stack([starts, starts + 120], axis=1)
    weights = np.full(count, 100, dtype=np.int64)
    pooled = vectors.reshape(documents, per_document, DIM).mean(axis=1)
    pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
    return DocumentWindows(pooled, vectors, owners, spans, weights)


def queries(seed: int) -> np.ndarray:
    found = np.random.default_rng(seed).normal(size=(QUERIES, DIM)).astype(np.float32)
    return found / np.linalg.norm(found, axis=1, keepdims=True)


class Meter:
    """Times and (under `trace`) the Python/NumPy bytes each phase leaves held and its peak above what was held
    before it (tracing starts once the library is imported)."""

    def __init__(self, trace: bool) -> None:
        self.trace = trace
        self.result: dict[str, Any] = {}
        if trace:
            tracemalloc.start()

    def phase(self, name: str, call: Any) -> Any:
        before = 0
        if self.trace:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
        started = time.perf_counter()
        value = call()
        self.result[f"{name}_s"] = time.perf_counter() - started
        if self.trace:
            held, peak = tracemalloc.get_traced_memory()
            self.result[f"{name}_held_bytes"], self.result[f"{name}_peak_bytes"] = held - before, peak - before
        return value


def build(args: argparse.Namespace, meter: Meter) -> None:
    """Add, search, rank, remove and save (one process), then the id set alone."""
    from fair_retrieval.index.ids import IdSet

    build_index(args, meter)
    ids = np.arange(args.windows, dtype=np.int64)

    def id_set() -> Any:
        stored = IdSet()
        for start in range(0, ids.size, args.batch * args.per_document):
            stored.add(ids[start : start + args.batch * args.per_document])
        return stored

    stored = meter.phase("id_set_add", id_set)
    probe = np.random.default_rng(args.seed).integers(0, 2 * args.windows, size=100_000).astype(np.int64)
    meter.phase("id_set_lookup", lambda: stored.present(probe))


def build_index(args: argparse.Namespace, meter: Meter) -> None:
    """The index phases: add, search, rank, remove, save."""
    from fair_retrieval import MultiVectorIndex

    documents = args.windows // args.per_document
    index = MultiVectorIndex(DIM, gpu=False)

    def add_all() -> None:
        for start in range(0, documents, args.batch):
            size = min(args.batch, documents - start)
            index.add(batch_windows(start, size, args.per_document, args.seed), ids=np.arange(start, start + size))

    meter.phase("add", add_all)
    asked = queries(args.seed)
    meter.phase("search", lambda: [index.search_documents(query, 10) for query in asked])
    found = [index.windows.search(query[None, :], 20 * args.per_document) for query in asked]
    pairs = list(zip(asked, found, strict=True))
    meter.phase("rank", lambda: [index._rank(q, ids[0], scores[0], 10) for q, (scores, ids) in pairs])
    removed = np.random.default_rng(args.seed).choice(documents, size=documents // 10, replace=False)
    meter.phase("remove", lambda: index.remove(removed))
    meter.phase("save", lambda: index.save(args.folder, overwrite=True))
    meter.result["table_disk_bytes"] = sum(
        (Path(args.folder) / name).stat().st_size for name in TABLE_FILES if (Path(args.folder) / name).exists()
    )


def load(args: argparse.Namespace, meter: Meter) -> None:
    """Load the saved folder and search it (a fresh process)."""
    from fair_retrieval import MultiVectorIndex

    index = meter.phase("load", lambda: MultiVectorIndex.load(args.folder, gpu=False))
    asked = queries(args.seed)
    meter.phase("search_loaded", lambda: [index.search_documents(query, 10) for query in asked])


def worker(args: argparse.Namespace) -> None:
    import faiss

    import fair_retrieval  # noqa: F401  (imported before tracing starts)

    faiss.omp_set_num_threads(1)  # the same for both implementations; less noise on shared cores
    args.windows = args.windows[0]
    meter = Meter(args.trace)
    (build if args.worker == "build" else load)(args, meter)
    meter.result["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    print(json.dumps(meter.result))


def run_worker(args: argparse.Namespace, role: str, windows: int, folder: Path, code: Path | None, trace: bool) -> dict:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    command = [sys.executable, __file__, "--worker", role, "--windows", str(windows), "--folder", str(folder)]
    command += ["--per-document", str(args.per_document), "--batch", str(args.batch), "--seed", str(args.seed)]
    command += ["--trace"] if trace else []
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tempfile.gettempdir(), check=False)
    if done.returncode:
        raise RuntimeError(f"{role} ({'baseline' if code else 'current'}, {windows}) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def measured(args: argparse.Namespace, windows: int, code: Path | None) -> dict[str, Any]:
    """Every phase of one implementation at one size: timed and traced runs merged."""
    result: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="bookkeeping-") as temporary:
        folder = Path(temporary) / "index"
        for trace in (False, True):
            for role in ("build", "load"):
                values = run_worker(args, role, windows, folder, code, trace)
                for key, value in values.items():  # times and RSS from the timed run, bytes from the traced one
                    if key == "peak_rss_bytes":
                        if not trace:
                            result[f"{role}_peak_rss_bytes"] = value
                    elif key.endswith("_s") or key == "table_disk_bytes":
                        if not trace:
                            result[key] = value
                    elif trace:
                        result[key] = value
    return result


ROWS = [
    ("add_s", "add, all batches (s)"),
    ("add_held_bytes", "held after add (MiB, faiss' vectors not counted)"),
    ("add_peak_bytes", "peak during add (MiB)"),
    ("search_s", f"{QUERIES} searches, k=10 (s)"),
    ("rank_s", f"ranking {QUERIES} lists of found windows (s)"),
    ("remove_s", "remove 10% of documents (s)"),
    ("save_s", "save (s)"),
    ("save_peak_bytes", "peak during save (MiB)"),
    ("table_disk_bytes", "table on disk (MiB)"),
    ("build_peak_rss_bytes", "peak RSS, add to save (MiB)"),
    ("load_s", "load (s)"),
    ("load_peak_bytes", "peak during load (MiB)"),
    ("load_held_bytes", "held after load (MiB)"),
    ("load_peak_rss_bytes", "peak RSS of the loading process (MiB)"),
    ("search_loaded_s", f"{QUERIES} searches after load (s)"),
    ("id_set_add_held_bytes", "FaissIndex id set: held (MiB)"),
    ("id_set_add_s", "FaissIndex id set: add in batches (s)"),
    ("id_set_lookup_s", "FaissIndex id set: 100k lookups (s)"),
]


def table(results: dict[int, dict[str, dict[str, Any]]]) -> str:
    """A markdown table: per size, baseline, current and baseline / current."""
    sizes = sorted(results)
    baseline = all("baseline" in results[size] for size in sizes)
    header = "| | " + " | ".join(
        f"{size:,} windows: baseline | current | ratio" if baseline else f"{size:,} windows" for size in sizes
    )
    lines = [header + " |", "|---|" + "---|" * (len(sizes) * (3 if baseline else 1))]
    for key, label in ROWS:
        cells = []
        for size in sizes:
            current = results[size]["current"].get(key)
            shown = [_shown(key, current)]
            if baseline:
                before = results[size]["baseline"].get(key)
                ratio = f"{before / current:.1f}×" if before is not None and current else "—"
                shown = [_shown(key, before), shown[0], ratio]
            cells += shown
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _shown(key: str, value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 2**20:,.1f}" if key.endswith("bytes") else f"{value:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument("--per-document", type=int, default=8)
    parser.add_argument("--batch", type=int, default=10_000, help="documents per add")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--baseline", type=Path, help="root of another checkout to compare with")
    parser.add_argument("--json", type=Path, help="write the measurements here")
    parser.add_argument("--worker", choices=["build", "load"], help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    results: dict[int, dict[str, dict[str, Any]]] = {}
    for windows in args.windows:
        results[windows] = {"current": measured(args, windows, None)}
        print(f"{windows} windows, current: {results[windows]['current']}", flush=True)
        if args.baseline is not None:
            results[windows]["baseline"] = measured(args, windows, args.baseline.resolve())
            print(f"{windows} windows, baseline: {results[windows]['baseline']}", flush=True)
    print(table(results))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
